import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import {
  CallToolRequestSchema,
  ErrorCode,
  InitializeRequestSchema,
  JSONRPCMessageSchema,
  ListToolsRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import { Type } from "typebox";
import { ApiError } from "../../domain/errors.ts";
import { grants } from "../../domain/roles.ts";
import { jsonRpcAnswer, jsonRpcErrors, problems } from "../../http/responses.ts";
import type { AppServices } from "../../http/services.ts";
import { endOnShutdown } from "../../http/shutdown.ts";
import { isObject } from "../a2a/parts.ts";
import { answerProblem, elicitationFor, formProblem, parseElicitationId, resumeValueOf } from "./elicitation.ts";
import { cancelChain, MCP_PROTOCOL_VERSIONS, mcpServer, type McpCall } from "./handler.ts";
import { callRunId, type McpSession } from "./session.ts";
import { utf8Text } from "../../http/validation.ts";
import { PROTOTYPE_MEMBERS } from "../../domain/storable-json.ts";

const PARSE_ERROR = -32700;
const INVALID_REQUEST = -32600;
const INVALID_PARAMS = -32602;
const SERVER_ERROR = -32000;
/** The code the SDK's own transport answers an unknown session with. */
const SESSION_NOT_FOUND = -32001;

/**
 * The MCP endpoint (DESIGN.md "MCP endpoint", docs/mcp.md): Streamable HTTP at `POST /mcp`, with
 * the official SDK's transport and server, one pair per HTTP request (stateless: any process
 * serves any request). Auth is the API's: a token is required (401 problem+json before any MCP),
 * viewers initialize and list tools, a tool call (or an answer to one) needs `operate` (403
 * problem+json otherwise). Answers to elicitation requests and `notifications/cancelled` act on
 * the call's run through the database, wherever the call itself is being served.
 */
export const mcpRoutes: FastifyPluginAsyncTypebox<{ services: AppServices; version: string }> = async (app, options) => {
  const { services, version } = options;
  const tags = ["mcp"];
  // JSON-RPC reports a malformed body itself (-32700): bodies reach the handler as bytes. Valid
  // JSON is parsed as it is (prototype members included), then refused as a message (-32600/-32602).
  const parseJson = app.getDefaultJsonParser("ignore", "ignore");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("*", { parseAs: "buffer" }, (_request, body, done) => done(null, body));
  // A body the HTTP layer refuses for its media type (no Content-Type, a charset other than UTF-8,
  // an encoding) gets the transport's JSON-RPC error body, as one whose Content-Type is not JSON
  // does; every other refusal goes on to the API's handler (problem+json).
  app.setErrorHandler((error: Error, _request, reply) => {
    const unsupported =
      (error instanceof ApiError && error.code === "unsupported_media_type") ||
      (error as { code?: unknown }).code === "FST_ERR_CTP_INVALID_MEDIA_TYPE";
    if (!unsupported) throw error;
    return rpcError(reply, 415, SERVER_ERROR, `Unsupported Media Type: ${error.message}`);
  });

  app.post(
    "/mcp",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "MCP over Streamable HTTP (protocol 2025-11-25 and 2025-06-18): exposed assistants are tools",
        response: {
          200: jsonRpcAnswer("a JSON-RPC response, or text/event-stream of JSON-RPC messages"),
          202: Type.Unknown({ description: "notifications and responses accepted: no body" }),
          ...problems(401, 403, 413),
          ...jsonRpcErrors(400, 404, 415),
        },
      },
    },
    async (request, reply) => {
      const mediaType = request.headers["content-type"]?.split(";")[0]?.trim().toLowerCase();
      if (mediaType !== "application/json")
        return rpcError(reply, 415, SERVER_ERROR, "Unsupported Media Type: Content-Type must be application/json");
      const parsed = await parse(parseJson, request);
      if (!parsed.ok) return rpcError(reply, 400, PARSE_ERROR, "Parse error: Invalid JSON");
      const protocolVersion = headerValue(request.headers["mcp-protocol-version"]);
      if (protocolVersion !== undefined && !(MCP_PROTOCOL_VERSIONS as readonly string[]).includes(protocolVersion)) {
        return rpcError(
          reply,
          400,
          SERVER_ERROR,
          `Bad Request: Unsupported protocol version: ${protocolVersion} (supported versions: ${MCP_PROTOCOL_VERSIONS.join(", ")})`,
        );
      }
      // One message a body: MCP (2025-06-18 on) has no JSON-RPC batches. Refused before anything runs.
      if (Array.isArray(parsed.value))
        return rpcError(reply, 400, INVALID_REQUEST, "Invalid Request: the body must be one JSON-RPC message (MCP has no batches)");
      const notMessage = envelopeProblem(parsed.value);
      if (notMessage) return rpcError(reply, 400, INVALID_REQUEST, `Invalid Request: ${notMessage}`);
      // A prototype member would reach objects the SDK builds from the message (its parser copies members by assignment).
      const prototypeMember = prototypeMemberOf(parsed.value);
      if (prototypeMember) {
        const problem = `${prototypeMember.path} has ${PROTOTYPE_MEMBERS}: these are refused (rename the key)`;
        const request = parsed.value as Record<string, unknown>;
        if (prototypeMember.inParams && typeof request.method === "string" && "id" in request) {
          const error = { code: INVALID_PARAMS, message: `Invalid params for ${request.method}: ${problem}` };
          return reply.type("application/json").send(JSON.stringify({ jsonrpc: "2.0", id: request.id, error }));
        }
        return rpcError(reply, 400, INVALID_REQUEST, `Invalid Request: ${problem}`);
      }
      const message = withoutTask(parsed.value as Record<string, unknown>);
      const tenantId = request.principal.tenantId;
      const canOperate = grants(request.principal.roles, "operate");
      if (!canOperate && (message.method === "tools/call" || isResponse(message))) {
        throw new ApiError("forbidden", 'calling tools (and answering their questions) needs a role that grants "operate"');
      }
      // Params the method's schema refuses are the protocol's invalid-params error (the SDK would call it internal).
      const invalid = invalidParams(message);
      if (invalid) return reply.type("application/json").send(JSON.stringify(invalid));
      // The rest of what the SDK's transport would refuse (members JSON-RPC does not define, params not an object).
      if (!JSONRPCMessageSchema.safeParse(message).success)
        return rpcError(reply, 400, INVALID_REQUEST, "Invalid Request: not a JSON-RPC request, notification or response");
      const initialize = message.method === "initialize" ? message : undefined;
      const session = initialize
        ? services.mcpSessions.open(request.principal, isObject(initialize.params) ? initialize.params.capabilities : undefined)
        : services.mcpSessions.find(request.principal, headerValue(request.headers["mcp-session-id"]));
      // As the transport answers a session it does not have (another principal's included, so the
      // answer says nothing of whose it is): the client starts a new session.
      if (session === "unknown")
        return rpcError(reply, 404, SESSION_NOT_FOUND, "Session not found: initialize a new session (no Mcp-Session-Id)");

      // Answers to elicitation requests and cancellations act on runs here; the rest goes to the SDK.
      // A cancellation is a notification: sent with an id it is a request of an unknown method, which the SDK answers (-32601).
      const cancellation = message.method === "notifications/cancelled" && !("id" in message);
      const elicited = isResponse(message) ? parseElicitationId(message.id) : undefined;
      if (elicited) {
        const refused = await answerElicitation(services, tenantId, session, elicited, message.result);
        if (refused) return rpcError(reply, 400, INVALID_PARAMS, refused);
      } else if (cancellation) {
        await cancelCall(services, tenantId, session, canOperate, message.params);
      }
      // Accepted, with no body (as the transport answers notifications and responses).
      if (isResponse(message) || cancellation) return reply.code(202).send("");

      const disconnected = new AbortController();
      const shutdown = new AbortController();
      const release = endOnShutdown(request, shutdown);
      const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      const call: McpCall = {
        tenantId,
        canOperate,
        session,
        disconnected: disconnected.signal,
        shutdown: shutdown.signal,
        sendToClient: (message, relatedRequestId) => transport.send(message, { relatedRequestId }),
        version,
        log: request.log,
      };
      const server = mcpServer({ assistants: services.assistants, schemas: services.graphSchemas, runService: services.runService }, call);
      // The request's own close event fires once its body is read: the response's tells a client that left.
      reply.raw.on("close", () => {
        disconnected.abort();
        release();
        void server.close().catch(() => undefined);
      });
      await server.connect(transport);
      const response = await transport.handleRequest(webRequest(request), { parsedBody: message });
      if (initialize && session && response.ok) response.headers.set("mcp-session-id", session.id);
      return reply.send(response);
    },
  );

  // Stateless: no server-to-client stream outside a call, no session to end (the transport's 405s).
  for (const method of ["GET", "DELETE"] as const) {
    app.route({
      method,
      url: "/mcp",
      config: { permission: "read" },
      // Not an operation (it never succeeds): left out of the OpenAPI document.
      schema: { hide: true, response: problems(401, 405) },
      handler: async (_request, reply) => {
        reply.header("allow", "POST");
        throw new ApiError("method_not_allowed", `MCP here is stateless: ${method} /mcp is not offered; send JSON-RPC with POST /mcp`);
      },
    });
  }
};

/**
 * The user's answer (or refusal) to a paused run's question: an accepted answer resumes the run,
 * anything else cancels it. An accepted answer that breaks the storage rules every input follows
 * (U+0000, a lone surrogate, too deep), or does not fill in the form the question asked for
 * (a required field missing, a field of the wrong type), cannot resume it: the run is cancelled too (the client has
 * answered its request, and will not answer again; the call would wait for nothing), so the call
 * ends `run_cancelled`, and the refusal's message says why (the route answers it with a 400).
 */
async function answerElicitation(
  services: AppServices,
  tenantId: string,
  session: McpSession | undefined,
  elicited: NonNullable<ReturnType<typeof parseElicitationId>>,
  result: unknown,
): Promise<string | undefined> {
  const answer = resumeValueOf(elicited.mode, result);
  const run = await services.runService.get(tenantId, elicited.runId).catch(() => undefined);
  // Only the session that was asked answers: another run, or another tenant's, is left alone.
  const tag = run && isObject(run.metadata.mcp) ? run.metadata.mcp : undefined;
  const asking = run && session && tag?.session === session.id && run.status === "paused" && !run.superseded_by_run_id;
  const asked = asking && elicited.mode === "content" ? elicitationFor(run) : undefined;
  const problem = answer && (answerProblem(elicited.mode, answer.value) ?? (asked && formProblem(asked, answer.value)));
  const refusal = problem && `Invalid params: the answer cannot resume the run, so the question is closed: ${problem}`;
  if (!asking) return refusal;
  try {
    if (answer && !problem) await services.runService.resume(tenantId, run.run_id, { resume: answer.value });
    else await services.runService.cancel(tenantId, run.run_id);
  } catch (error) {
    // Answered twice, or cancelled meanwhile: the first decision stands.
    if (!(error instanceof ApiError && error.status === 409)) throw error;
  }
  return refusal;
}

/** `notifications/cancelled`: the call's run (or the one resuming it) is cancelled, cooperatively. */
async function cancelCall(
  services: AppServices,
  tenantId: string,
  session: McpSession | undefined,
  canOperate: boolean,
  params: unknown,
): Promise<void> {
  const requestId = isObject(params) ? params.requestId : undefined;
  if (!session || !canOperate || (typeof requestId !== "string" && typeof requestId !== "number")) return;
  await cancelChain(services.runService, tenantId, callRunId(tenantId, session, requestId));
}

/** The methods whose params are checked before the SDK sees them. */
const REQUEST_SCHEMAS: Record<
  string,
  { safeParse(value: unknown): { success: boolean; error?: { issues: readonly { path: readonly PropertyKey[]; message: string }[] } } }
> = {
  initialize: InitializeRequestSchema,
  "tools/list": ListToolsRequestSchema,
  "tools/call": CallToolRequestSchema,
};

/** The JSON-RPC error for a request of a known method whose params its schema refuses; undefined otherwise. */
function invalidParams(message: Record<string, unknown>): Record<string, unknown> | undefined {
  const schema = typeof message.method === "string" && "id" in message ? REQUEST_SCHEMAS[message.method] : undefined;
  const checked = schema?.safeParse(message);
  if (!checked || checked.success) return undefined;
  const issues = (checked.error?.issues ?? []).slice(0, 5).map(({ path, message: problem }) => `${path.map(String).join(".")}: ${problem}`);
  return {
    jsonrpc: "2.0",
    id: message.id,
    error: {
      code: ErrorCode.InvalidParams,
      message: `Invalid params for ${String(message.method)}${issues.length ? `: ${issues.join("; ")}` : ""}`,
    },
  };
}

/**
 * Why a parsed body is not a JSON-RPC message (JSON-RPC 2.0 and MCP's rules for its members), or
 * undefined. Only the envelope: a request's params are its method's business (-32602).
 */
function envelopeProblem(value: unknown): string | undefined {
  if (!isObject(value)) return "the body must be a JSON-RPC message (an object)";
  if (value.jsonrpc !== "2.0") return 'a JSON-RPC message has "jsonrpc": "2.0"';
  if ("id" in value && typeof value.id !== "string" && !Number.isSafeInteger(value.id)) return '"id" must be a string or an integer';
  if ("method" in value) return typeof value.method === "string" ? undefined : '"method" must be a string';
  if (!("result" in value) && !("error" in value))
    return "a message needs a method (a request or notification), or a result or error (a response)";
  if (!("id" in value) && "result" in value) return 'a response needs the "id" of the request it answers';
  return undefined;
}

/**
 * A request without its `task` augmentation (MCP 2025-11-25): this server declares no `tasks`
 * capability, so, as the specification asks, a task-augmented request is processed normally.
 */
function withoutTask(message: Record<string, unknown>): Record<string, unknown> {
  if (typeof message.method !== "string" || !("id" in message) || !isObject(message.params) || !("task" in message.params)) return message;
  const { task: _ignored, ...params } = message.params;
  return { ...message, params };
}

/**
 * The first prototype member (`PROTOTYPE_MEMBERS`) in a parsed message: where (a dotted path
 * from the message, as invalid-params messages name fields) and whether it is inside `params`.
 * The walk is iterative: a deeply nested body cannot overflow the stack.
 */
function prototypeMemberOf(message: unknown): { path: string; inParams: boolean } | undefined {
  interface Walked {
    readonly value: unknown;
    readonly parent: Walked | undefined;
    readonly key: string | undefined;
  }
  const stack: Walked[] = [{ value: message, parent: undefined, key: undefined }];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    if (typeof item.value !== "object" || item.value === null) continue;
    const array = Array.isArray(item.value);
    for (const [key, member] of Object.entries(item.value)) {
      if (!array && isPrototypeMember(key, member)) {
        const keys: string[] = [];
        for (let at: Walked | undefined = item; at?.key !== undefined; at = at.parent) keys.push(at.key);
        keys.reverse();
        const where = keys.length ? keys.join(".") : "the message";
        return { path: where.length > 120 ? `${where.slice(0, 120)}…` : where, inParams: keys[0] === "params" };
      }
      stack.push({ value: member, parent: item, key });
    }
  }
  return undefined;
}

const isPrototypeMember = (key: string, value: unknown): boolean =>
  key === "__proto__" || (key === "constructor" && typeof value === "object" && value !== null && Object.hasOwn(value, "prototype"));

function isResponse(message: Record<string, unknown>): boolean {
  return message.method === undefined && ("result" in message || "error" in message);
}

/**
 * Parses the body with Fastify's JSON parser, without its prototype-poisoning checks (valid JSON
 * is not a parse error: the route refuses prototype members as a message); bytes that are not
 * UTF-8 are not JSON (RFC 8259), and decoding them would change what was sent.
 */
function parse(
  parseJson: ReturnType<FastifyRequest["server"]["getDefaultJsonParser"]>,
  request: FastifyRequest,
): Promise<{ ok: true; value: unknown } | { ok: false }> {
  const text = utf8Text(request.body ?? "");
  if (text === undefined) return Promise.resolve({ ok: false });
  return new Promise((resolve) => {
    parseJson(request, text, (error: Error | null, value?: unknown) => resolve(error ? { ok: false } : { ok: true, value }));
  });
}

/** The request as the SDK's web-standard transport reads it (headers; the body is passed parsed). */
function webRequest(request: FastifyRequest): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item);
  }
  return new Request(`http://${request.host || "localhost"}${request.url}`, { method: "POST", headers });
}

/** A transport-level refusal, as the MCP transport gives it: a JSON-RPC error without an id. */
function rpcError(reply: FastifyReply, status: number, code: number, message: string): FastifyReply {
  return reply
    .code(status)
    .type("application/json")
    .send(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code, message } }));
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
