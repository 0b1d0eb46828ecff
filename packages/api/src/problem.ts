import { Type, type Static } from "typebox";

/**
 * Every error code the API answers with, declared once: its HTTP status, title and whether a
 * client may retry it with backoff. The server raises errors by code; the client reads `code`.
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
  request_timeout: { status: 408, title: "Request timeout", retryable: true },
  payload_too_large: { status: 413, title: "Payload too large", retryable: false },
  uri_too_long: { status: 414, title: "URI too long", retryable: false },
  unsupported_media_type: { status: 415, title: "Unsupported media type", retryable: false },
  validation_error: { status: 422, title: "Validation error", retryable: false },
  quota_exceeded: { status: 429, title: "Quota exceeded", retryable: true },
  rate_limited: { status: 429, title: "Rate limited", retryable: true },
  header_fields_too_large: { status: 431, title: "Request header fields too large", retryable: false },
  internal: { status: 500, title: "Internal server error", retryable: true },
  unavailable: { status: 503, title: "Service unavailable", retryable: true },
} as const satisfies Record<string, { status: number; title: string; retryable: boolean }>;

export type ErrorCode = keyof typeof ERROR_CODES;

// The table's keys are not a tuple type, so the union's static type is stated: exactly ErrorCode.
const ErrorCodeSchema = Type.Unsafe<ErrorCode>(Type.Union(Object.keys(ERROR_CODES).map((code) => Type.Literal(code))));

/** The body of every non-2xx answer: RFC 9457 plus the spec's `code`, `request_id` and `retryable`. */
export const Problem = Type.Object(
  {
    type: Type.Literal("about:blank"),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    code: ErrorCodeSchema,
    request_id: Type.String(),
    retryable: Type.Boolean(),
  },
  { $id: "Problem", additionalProperties: true, description: "application/problem+json; unknown codes must be tolerated" },
);
/** Extensions (`errors` of a 422, `superseded_by_run_id` of a 409 …) ride beside the standard members. */
export type Problem = Static<typeof Problem> & { [extension: string]: unknown };
