/** The problem+json body every non-2xx Rudder answer carries (spec section 7). */
export interface ProblemBody {
  readonly type?: string;
  readonly title?: string;
  readonly status?: number;
  readonly detail?: string;
  readonly code?: string;
  readonly request_id?: string;
  readonly retryable?: boolean;
  readonly [extra: string]: unknown;
}

/**
 * A failed call: a problem answer from the server, or a network failure (`code` "network_error",
 * `status` 0). Branch on `code`; codes the client does not know are kept as they are (spec: handle
 * unknown codes safely).
 */
export class RudderError extends Error {
  override readonly name = "RudderError";
  readonly code: string;
  readonly status: number;
  readonly title: string;
  readonly detail: string;
  readonly retryable: boolean;
  readonly requestId: string | undefined;
  /** Seconds from the Retry-After header, when the server sent one. */
  readonly retryAfterSeconds: number | undefined;
  /** The whole problem body, with any extra members (e.g. `superseded_by_run_id`). */
  readonly problem: ProblemBody;

  constructor(
    problem: ProblemBody,
    status: number,
    options: { requestId?: string | undefined; retryAfterSeconds?: number | undefined; cause?: unknown } = {},
  ) {
    const code = typeof problem.code === "string" ? problem.code : status >= 500 ? "internal" : "unknown";
    const detail = typeof problem.detail === "string" ? problem.detail : (problem.title ?? `HTTP ${status}`);
    super(code === "run_finalizing" ? `${detail} (run_finalizing: steer a new run; a replay with the same key is safe)` : detail, {
      cause: options.cause,
    });
    this.code = code;
    this.status = status;
    this.title = typeof problem.title === "string" ? problem.title : code;
    this.detail = detail;
    this.retryable = problem.retryable === true;
    this.requestId = typeof problem.request_id === "string" ? problem.request_id : options.requestId;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.problem = problem;
  }

  /** A request that never got an answer (connection refused or reset, DNS, a dropped stream). */
  static network(cause: unknown): RudderError {
    const message = cause instanceof Error ? cause.message : String(cause);
    return new RudderError({ code: "network_error", title: "Network error", detail: message, retryable: true }, 0, { cause });
  }
}
