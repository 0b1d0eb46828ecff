import { STATUS_CODES } from "node:http";
import type { FastifyInstance, RouteOptions } from "fastify";
import { Type, type TSchema } from "typebox";

/** The media type of every non-2xx answer (sendProblem), and so of every problem the document lists. */
export const PROBLEM_MEDIA_TYPE = "application/problem+json";
export const EVENT_STREAM_MEDIA_TYPE = "text/event-stream";

/**
 * A response of a route schema with its media type named: the OpenAPI document lists the body
 * under that type, and Fastify serialises with the schema only a reply of that type.
 */
export interface MediaResponse {
  readonly description: string;
  readonly content: Readonly<Record<string, { readonly schema: TSchema }>>;
}

/** What a status means on every route that lists it; a route's own problems say more in docs/api.md. */
const PROBLEM_DESCRIPTIONS: Readonly<Record<number, string>> = {
  400: "invalid_request: malformed JSON, a body that is not UTF-8, a path or query string that is not valid percent-encoded UTF-8",
  413: "payload_too_large: the body is over the request body limit",
  414: "uri_too_long: a path parameter is longer than the server accepts",
  415: "unsupported_media_type: a body that is not application/json in UTF-8, or is compressed",
  500: "internal: a bug; the detail is hidden and the error is logged with the request id",
  503: "unavailable: the database is unreachable, or this instance is shutting down; Retry-After; retryable",
};

/** The problem answers a route may give, for the OpenAPI document (the body is the `Problem` schema of @rudder/api). */
export function problems(...statuses: number[]): Record<number, MediaResponse> {
  return Object.fromEntries(
    statuses.map((status) => [
      status,
      {
        description: PROBLEM_DESCRIPTIONS[status] ?? STATUS_CODES[status] ?? "a problem",
        content: { [PROBLEM_MEDIA_TYPE]: { schema: Type.Ref("Problem") } },
      },
    ]),
  );
}

/** A Server-Sent Events answer (written to the socket, never serialised): `text/event-stream`. */
export function eventStream(description: string): MediaResponse {
  return { description, content: { [EVENT_STREAM_MEDIA_TYPE]: { schema: Type.String({ description: "Server-Sent Events" }) } } };
}

/**
 * The answer of a JSON-RPC gateway (A2A, MCP): one JSON-RPC message, or for a streaming method
 * Server-Sent Events of them.
 */
export function jsonRpcAnswer(description: string): MediaResponse {
  return {
    description,
    content: {
      "application/json": { schema: Type.Unknown({ description: "a JSON-RPC 2.0 message" }) },
      [EVENT_STREAM_MEDIA_TYPE]: { schema: Type.String({ description: "Server-Sent Events of JSON-RPC 2.0 messages" }) },
    },
  };
}

/** A JSON-RPC error answered with an HTTP error status (MCP's Streamable HTTP transport does so). */
export function jsonRpcErrors(...statuses: number[]): Record<number, MediaResponse> {
  const schema = Type.Object({
    jsonrpc: Type.Literal("2.0"),
    id: Type.Null(),
    error: Type.Object({ code: Type.Integer(), message: Type.String() }),
  });
  return Object.fromEntries(
    statuses.map((status) => [
      status,
      { description: `${STATUS_CODES[status]}: a JSON-RPC error`, content: { "application/json": { schema } } },
    ]),
  );
}

/** Methods whose requests Fastify parses a body of (a route without a body schema included). */
const BODY_METHODS = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/**
 * The problems a route answers because of how it is asked, not what it does, added to every
 * documented route's responses (an `onRoute` hook), so no route has to list them:
 * - 400, 500, 503 on every route: an undecodable query string is refused before routing reaches
 *   a handler; a bug is a 500 anywhere; a shutting-down instance refuses every request, and every
 *   route but /health reaches the database.
 * - 413 and 415 on every route of a method with a body: the body limit and the JSON-only parser
 *   apply before the route's own schema (which may declare no body). A scope without the JSON
 *   parser takes any body as bytes (the JSON-RPC gateways, which report a malformed one
 *   themselves): no 415 there (Fastify cannot be asked about its catch-all parser itself).
 * - 414 on every route with a path parameter (the router's limit on one).
 * Answers that belong to no documented operation are not listed: 404 of a path no route has, 405
 * of a method a path does not answer, 408, 431 and 400 of a request Node refused before routing.
 */
export function addProtocolProblems(this: Pick<FastifyInstance, "hasContentTypeParser">, route: RouteOptions): void {
  const schema = route.schema as { hide?: boolean; response?: Record<string, unknown> } | undefined;
  if (schema?.response === undefined || schema.hide === true) return;
  const statuses = [400, 500, 503];
  if ([route.method].flat().some((method) => BODY_METHODS.has(method))) {
    statuses.push(413);
    if (this.hasContentTypeParser("application/json")) statuses.push(415);
  }
  if (route.url.includes(":")) statuses.push(414);
  // New objects throughout: route files share response objects between routes.
  const response: Record<string, unknown> = { ...schema.response };
  for (const [status, problem] of Object.entries(problems(...statuses))) {
    const listed = response[status] as Partial<MediaResponse> | undefined;
    // A status the route answers otherwise too (a JSON-RPC error) gets the problem beside it.
    if (listed === undefined) response[status] = problem;
    else if (listed.content !== undefined && listed.content[PROBLEM_MEDIA_TYPE] === undefined)
      response[status] = { ...listed, content: { ...listed.content, ...problem.content } };
  }
  route.schema = { ...schema, response };
}
