import { createHash, randomUUID } from "node:crypto";
import { isObject } from "../a2a/parts.ts";

/**
 * MCP sessions without server state. A session id is given at `initialize` and carries what the
 * server must remember about the client (whether it answers elicitation requests) in itself, so
 * any `rudder serve` process behind a load balancer serves any request of the session, and
 * nothing is stored. It grants nothing: every request is authenticated by its own token. Its
 * random part names the session's runs: a tool call's run id is derived from the tenant, the
 * session and the JSON-RPC request id, so `notifications/cancelled` (which names only the request
 * id) finds the run on whichever process receives it.
 */

const SESSION = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(\.elicit)?$/;

export interface McpSession {
  readonly id: string;
  /** The client declared it answers form elicitation requests. */
  readonly elicitation: boolean;
}

/** A new session for a client that declared `capabilities` at initialize. */
export function newSession(capabilities: unknown): McpSession {
  const elicitation = answersElicitation(capabilities);
  return { id: `${randomUUID()}${elicitation ? ".elicit" : ""}`, elicitation };
}

/** The session an `Mcp-Session-Id` header names; undefined for none, or for an id this server does not give. */
export function sessionOf(header: string | undefined): McpSession | undefined {
  const match = header === undefined ? null : SESSION.exec(header);
  return match ? { id: header!, elicitation: match[2] !== undefined } : undefined;
}

/** Form elicitation: `elicitation: {}` (2025-06-18) or `elicitation: {form: {...}}` (2025-11-25). */
function answersElicitation(capabilities: unknown): boolean {
  const elicitation = isObject(capabilities) ? capabilities.elicitation : undefined;
  if (!isObject(elicitation)) return false;
  return elicitation.form !== undefined || elicitation.url === undefined;
}

/** The run of one tool call: the same (tenant, session, request id) always names the same run. */
export function callRunId(tenantId: string, session: McpSession, requestId: string | number): string {
  const hex = digest(tenantId, session.id, requestId);
  // A version-8 (custom) UUID: the digest's bits, with the version and variant set.
  const variant = ((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/** The Idempotency-Key of a call's run: a client that sends the same request again gets the same run. */
export function callIdempotencyKey(tenantId: string, session: McpSession, requestId: string | number): string {
  return `mcp:${digest(tenantId, session.id, requestId)}`;
}

function digest(tenantId: string, sessionId: string, requestId: string | number): string {
  return createHash("sha256")
    .update(JSON.stringify([tenantId, sessionId, requestId]))
    .digest("hex");
}
