/**
 * Every error code the API answers with, declared once: its HTTP status, title and whether a
 * client may retry it with backoff. The HTTP layer and the worker both raise `ApiError`s by code.
 */
export const ERROR_CODES = {
  invalid_request: { status: 400, title: "Invalid request", retryable: false },
  unauthorized: { status: 401, title: "Unauthorized", retryable: false },
  forbidden: { status: 403, title: "Forbidden", retryable: false },
  not_found: { status: 404, title: "Not found", retryable: false },
  method_not_allowed: { status: 405, title: "Method not allowed", retryable: false },
  join_timeout: { status: 408, title: "Join timed out", retryable: true },
  conflict: { status: 409, title: "Conflict", retryable: false },
  idempotency_conflict: { status: 409, title: "Idempotency key reused with a different request", retryable: false },
  concurrent_run: { status: 409, title: "Thread has an active run", retryable: false },
  run_terminal: { status: 409, title: "Run is terminal", retryable: false },
  run_superseded: { status: 409, title: "Run was resumed", retryable: false },
  run_resume_conflict: { status: 409, title: "Run was already resumed", retryable: false },
  run_finalizing: { status: 409, title: "Run is finalizing", retryable: false },
  payload_too_large: { status: 413, title: "Payload too large", retryable: false },
  unsupported_media_type: { status: 415, title: "Unsupported media type", retryable: false },
  validation_error: { status: 422, title: "Validation error", retryable: false },
  quota_exceeded: { status: 429, title: "Quota exceeded", retryable: true },
  rate_limited: { status: 429, title: "Rate limited", retryable: true },
  internal: { status: 500, title: "Internal server error", retryable: true },
  unavailable: { status: 503, title: "Service unavailable", retryable: true },
} as const satisfies Record<string, { status: number; title: string; retryable: boolean }>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** A deliberate, client-facing error. Anything else that escapes a handler becomes `internal`. */
export class ApiError extends Error {
  override readonly name = "ApiError";
  readonly status: number;
  readonly retryable: boolean;

  constructor(
    readonly code: ErrorCode,
    detail: string,
    readonly extra: { retryAfterSeconds?: number; fields?: Record<string, unknown> } = {},
  ) {
    super(detail);
    this.status = ERROR_CODES[code].status;
    this.retryable = ERROR_CODES[code].retryable;
  }
}

export const notFound = (what: string, id: string): ApiError => new ApiError("not_found", `${what} ${id} not found`);
