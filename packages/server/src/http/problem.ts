import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import type { Problem } from "@rudder/api";
import { ApiError, ERROR_CODES, type ErrorCode } from "../domain/errors.ts";

export function problemFor(error: ApiError, requestId: string): Problem {
  return {
    type: "about:blank",
    title: ERROR_CODES[error.code].title,
    status: error.status,
    detail: error.message,
    code: error.code,
    request_id: requestId,
    retryable: error.retryable,
    ...error.extra.fields,
  };
}

export function sendProblem(reply: FastifyReply, request: FastifyRequest, error: ApiError): FastifyReply {
  if (error.extra.retryAfterSeconds !== undefined) reply.header("retry-after", String(error.extra.retryAfterSeconds));
  return reply.status(error.status).type("application/problem+json").send(problemFor(error, request.id));
}

/** Fastify's own errors that are the client's fault, by Fastify code. */
const FASTIFY_CLIENT_ERRORS: Readonly<Record<string, ErrorCode>> = {
  FST_ERR_CTP_INVALID_JSON_BODY: "invalid_request",
  FST_ERR_CTP_EMPTY_JSON_BODY: "invalid_request",
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: "invalid_request",
  FST_ERR_CTP_BODY_TOO_LARGE: "payload_too_large",
  FST_ERR_CTP_INVALID_MEDIA_TYPE: "unsupported_media_type",
};

/** SQLSTATEs of a transaction PostgreSQL rolled back whole: deadlock detected, serialization failure. */
const ROLLED_BACK_SQLSTATES = new Set(["40P01", "40001"]);

/**
 * Maps whatever a handler threw to a deliberate `ApiError`: our own errors pass through, schema
 * violations become 422, Fastify's parser errors their codes; anything else is an internal error
 * whose detail is hidden from the client (and logged by the caller).
 */
export function toApiError(error: FastifyError | Error): { apiError: ApiError; unexpected: boolean } {
  if (error instanceof ApiError) return { apiError: error, unexpected: false };
  const fastifyError = error as FastifyError;
  if (fastifyError.validation) {
    const errors = fastifyError.validation.map((issue) => ({
      location: fastifyError.validationContext ?? "request",
      path: issue.instancePath || "/",
      message: describeIssue(issue.message, issue.keyword, issue.params),
    }));
    const detail = errors.map((issue) => `${issue.location}${issue.path === "/" ? "" : issue.path} ${issue.message}`).join("; ");
    return { apiError: new ApiError("validation_error", detail, { fields: { errors } }), unexpected: false };
  }
  // PostgreSQL rolled the transaction back (deadlock, serialization failure): nothing of it took
  // effect, so the client may simply send it again.
  if (fastifyError.code !== undefined && ROLLED_BACK_SQLSTATES.has(fastifyError.code)) {
    const apiError = new ApiError("unavailable", "the database rolled this request back to resolve a lock conflict; retry", {
      retryAfterSeconds: 1,
    });
    return { apiError, unexpected: true };
  }
  const mapped = (fastifyError.code ? FASTIFY_CLIENT_ERRORS[fastifyError.code] : undefined) ?? clientErrorByStatus(fastifyError.statusCode);
  if (mapped) return { apiError: new ApiError(mapped, fastifyError.message), unexpected: false };
  return { apiError: new ApiError("internal", "the server failed to handle this request"), unexpected: true };
}

/** Any other 4xx Fastify raises (its own or a plugin's) keeps its meaning, as a problem. */
const CLIENT_ERRORS_BY_STATUS: Readonly<Record<number, ErrorCode>> = {
  401: "unauthorized",
  403: "forbidden",
  404: "not_found",
  405: "method_not_allowed",
  408: "request_timeout",
  409: "conflict",
  413: "payload_too_large",
  414: "uri_too_long",
  415: "unsupported_media_type",
  422: "validation_error",
  429: "rate_limited",
  431: "header_fields_too_large",
};

function clientErrorByStatus(status: number | undefined): ErrorCode | undefined {
  if (status === undefined || status < 400 || status >= 500) return undefined;
  return CLIENT_ERRORS_BY_STATUS[status] ?? "invalid_request";
}

function describeIssue(message: string | undefined, keyword: string, params: Record<string, unknown>): string {
  if (keyword === "additionalProperties") return `has unknown property "${String(params.additionalProperty)}"`;
  if (keyword === "format" && params.format === "uuid")
    return "must be a canonical UUID (lowercase 8-4-4-4-12 hex, as the server writes ids)";
  return message ?? keyword;
}
