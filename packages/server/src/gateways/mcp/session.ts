import { createHash, createHmac, randomUUID, timingSafeEqual } from "node:crypto";
import { isObject } from "../a2a/parts.ts";

/**
 * MCP sessions without server state. A session id is given at `initialize` and carries what the
 * server must remember about the client (whether it answers elicitation requests) in itself, so
 * any `rudder serve` process behind a load balancer serves any request of the session, and
 * nothing is stored. Its random part names the session's runs: a tool call's run id is derived
 * from the tenant, the session and the JSON-RPC request id, so `notifications/cancelled` (which
 * names only the request id) finds the run on whichever process receives it.
 *
 * It grants nothing (every request is authenticated by its own token), and it is bound to the
 * principal that opened it, as the MCP transport's security guidance asks: the id ends in a MAC
 * over its tenant, subject, random part and capability, so another principal presenting it
 * (another subject of the tenant, who can read it in a run's `metadata.mcp`; whoever saw it in a
 * log or a proxy) is told the session does not exist, rather than having its requests, or its
 * answers to another's questions, accepted under it.
 */

const SESSION = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(\.elicit)?\.([0-9a-f]{32})$/;

export interface McpSession {
  readonly id: string;
  /** The client declared it answers form elicitation requests. */
  readonly elicitation: boolean;
}

/** Whom a session belongs to: the tenant and subject of the token (or API key) that opened it. */
export interface SessionOwner {
  readonly tenantId: string;
  readonly subject: string;
}

/**
 * Opens sessions and tells whether an `Mcp-Session-Id` is one this deployment gave its presenter.
 * The MAC's key is derived from the JWT secret, which every API process of a deployment shares
 * (`rudder dev` keeps its own in the data dir), so a caller cannot make an id this server did not
 * give. Without one (a deployment on JWKS or API keys alone) the key is fixed: ids stay bound to
 * their owner, but an owner could compute one for itself, which gets it nothing `initialize`
 * would not. Rotating the secret ends every session; clients open new ones, as MCP has them do.
 */
export class McpSessions {
  readonly #key: Buffer;

  constructor(secret: string | undefined) {
    this.#key = createHash("sha256")
      .update("rudder mcp session ids\0")
      .update(secret ?? "")
      .digest();
  }

  /** A new session of `owner`, for a client that declared `capabilities` at initialize. */
  open(owner: SessionOwner, capabilities: unknown): McpSession {
    const elicitation = answersElicitation(capabilities);
    const nonce = randomUUID();
    return { id: `${nonce}${elicitation ? ".elicit" : ""}.${this.#mac(owner, nonce, elicitation)}`, elicitation };
  }

  /**
   * The session an `Mcp-Session-Id` header names: undefined when none is sent (a client may keep
   * none); "unknown" for an id this server did not give `owner` (another principal's, a forged or
   * malformed one, one from before sessions were bound, or under a rotated secret).
   */
  find(owner: SessionOwner, header: string | undefined): McpSession | "unknown" | undefined {
    if (header === undefined) return undefined;
    const match = SESSION.exec(header);
    if (!match) return "unknown";
    const elicitation = match[2] !== undefined;
    const expected = Buffer.from(this.#mac(owner, match[1]!, elicitation), "hex");
    return timingSafeEqual(expected, Buffer.from(match[3]!, "hex")) ? { id: header, elicitation } : "unknown";
  }

  #mac(owner: SessionOwner, nonce: string, elicitation: boolean): string {
    return createHmac("sha256", this.#key)
      .update(JSON.stringify([owner.tenantId, owner.subject, nonce, elicitation]))
      .digest("hex")
      .slice(0, 32);
  }
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
