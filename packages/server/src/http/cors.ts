import type { FastifyReply, FastifyRequest } from "fastify";

/**
 * Response headers a browser client may read: the LangGraph SDK reads `Content-Location`
 * (onRunCreated) and the pagination headers; an MCP client reads `Mcp-Session-Id` at initialize
 * and sends it back (without it, cancellation, elicitation and idempotent retries are lost).
 */
const EXPOSED = "content-location, location, x-pagination-total, x-pagination-next, x-request-id, retry-after, mcp-session-id";
const ALLOWED_METHODS = "GET, POST, PUT, PATCH, DELETE, OPTIONS";
const DEFAULT_ALLOWED_HEADERS =
  "authorization, content-type, x-api-key, last-event-id, idempotency-key, x-request-id, mcp-session-id, mcp-protocol-version";

/**
 * CORS for browser UIs (agent-chat-ui, `useStream`, Studio): any origin may call, with a token
 * (no cookies are used, so credentials are not allowed). A preflight is answered here, before
 * authentication, since browsers send it without the Authorization header.
 */
export async function corsHook(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const origin = request.headers.origin;
  if (origin === undefined) return;
  reply.header("access-control-allow-origin", origin);
  reply.header("vary", "Origin");
  reply.header("access-control-expose-headers", EXPOSED);
  const preflight = request.method === "OPTIONS" && request.headers["access-control-request-method"] !== undefined;
  if (!preflight) return;
  const asked = request.headers["access-control-request-headers"];
  reply.header("access-control-allow-methods", ALLOWED_METHODS);
  reply.header(
    "access-control-allow-headers",
    typeof asked === "string" && /^[\w\-, ]{1,1000}$/.test(asked) ? asked : DEFAULT_ALLOWED_HEADERS,
  );
  reply.header("access-control-max-age", "600");
  await reply.status(204).send();
}
