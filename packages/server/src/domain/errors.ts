import { ERROR_CODES, type ErrorCode } from "@rudder/api";

// The table of codes is part of the wire contract (@rudder/api): the client reads the same one.
export { ERROR_CODES, type ErrorCode };

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

/**
 * A catch handler for a lookup or an action that may be refused as expected: an `ApiError` with
 * one of these codes becomes undefined; anything else (an outage, another refusal) is thrown on.
 */
export const undefinedOn =
  (...codes: ErrorCode[]) =>
  (error: unknown): undefined => {
    if (error instanceof ApiError && codes.includes(error.code)) return undefined;
    throw error;
  };
