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

/**
 * `code` on the wire: a string, known or not. New codes can appear (spec §9.2) and a client treats one it does
 * not know as an unknown error (spec §7), so the schema is open and the known codes are its
 * examples, not an enum a validator or a generated client would refuse a new code by. The static
 * type keeps the known codes for completion and accepts any other string.
 */
const KnownOrNewCode = Type.Unsafe<ErrorCode | (string & {})>(
  Type.String({
    minLength: 1,
    description: `Branch on this. Known codes: ${Object.keys(ERROR_CODES).join(", ")}. New codes can appear: treat a code you do not know as an unknown error.`,
    examples: Object.keys(ERROR_CODES),
  }),
);

/** One schema violation of a 422 `validation_error`: where it is, and what is wrong there. */
export const ValidationIssue = Type.Object(
  {
    location: Type.String({ description: "the part of the request: body, querystring, params or headers" }),
    path: Type.String({ description: "JSON Pointer to the value within that part; / for the part itself" }),
    message: Type.String(),
  },
  { additionalProperties: false },
);
export type ValidationIssue = Static<typeof ValidationIssue>;

/** The body of every non-2xx answer: RFC 9457 plus the spec's `code`, `request_id` and `retryable`. */
export const Problem = Type.Object(
  {
    type: Type.Literal("about:blank"),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    code: KnownOrNewCode,
    request_id: Type.String(),
    retryable: Type.Boolean(),
    errors: Type.Optional(
      Type.Array(ValidationIssue, { description: "validation_error only: each schema violation (detail lists them for people)" }),
    ),
    superseded_by_run_id: Type.Optional(
      Type.String({ format: "uuid", description: "run_superseded only: the run that the resume created, to steer or cancel instead" }),
    ),
  },
  {
    $id: "Problem",
    additionalProperties: true,
    description: "application/problem+json (RFC 9457). Unknown codes and unknown members must be tolerated.",
  },
);
/** Further extensions may ride beside the standard and the described members. */
export type Problem = Static<typeof Problem> & { [extension: string]: unknown };
