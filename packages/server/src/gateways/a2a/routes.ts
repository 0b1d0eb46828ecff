import { A2A_PROTOCOL_VERSION, AgentCard, SSE_HEADERS, formatSSEErrorEvent, formatSSEEvent } from "@a2a-js/sdk";
import { A2A_LEGACY_PROTOCOL_VERSION } from "@a2a-js/sdk/compat/v0_3";
import { LegacyJsonRpcTransportHandler } from "@a2a-js/sdk/compat/v0_3/server";
import { RequestMalformedError } from "@a2a-js/sdk/errors";
import { JsonRpcTransportHandler, ServerCallContext, validateVersion } from "@a2a-js/sdk/server";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import { Type } from "typebox";
import { grants } from "../../domain/roles.ts";
import { jsonRpcAnswer, problems } from "../../http/responses.ts";
import type { AppServices } from "../../http/services.ts";
import { requestWait } from "../../http/shutdown.ts";
import { sendPaced } from "../../http/sse.ts";
import { utf8Text } from "../../http/validation.ts";
import { agentCard, legacyAgentCard } from "./card.ts";
import { pushNotSupported, RudderA2AHandler, type A2ACall } from "./handler.ts";
import { isMethodOf, isPushNotificationMethod, paramsProblem, protocolVersionOf, withProtocolDefaults } from "./request-rules.ts";

/** One JSON-RPC 2.0 response, as both SDK transport handlers produce it. */
interface JsonRpcResponse {
  jsonrpc: string;
  id: string | number | null;
  result?: unknown;
  error?: unknown;
}

const PARSE_ERROR = -32700;
const INVALID_REQUEST = -32600;
const METHOD_NOT_FOUND = -32601;
const CONTENT_TYPE_NOT_SUPPORTED = -32005;

const AssistantParam = Type.Object({ assistant_id: Type.String({ minLength: 1 }) }, { additionalProperties: false });

/**
 * The A2A gateway (DESIGN.md "A2A gateway"): every assistant the tenant can see is an agent, with
 * its card at `/a2a/{assistant_id}/.well-known/agent-card.json` and JSON-RPC at
 * `/a2a/{assistant_id}`. `A2A-Version: 1.0` selects A2A 1.0; without it (or with `0.3`) the 0.3
 * names and shapes are served. The SDK's transport handlers parse and shape JSON-RPC;
 * `RudderA2AHandler` answers from Rudder's runs. Auth is the API's: a token is required (401/403
 * problem+json before any JSON-RPC is read), viewers read, operators send and cancel.
 */
export const a2aRoutes: FastifyPluginAsyncTypebox<{ services: AppServices }> = async (app, { services }) => {
  const tasks = services.a2aTasks;
  const tags = ["a2a"];
  // JSON-RPC reports a malformed body itself (-32700), so bodies reach the handler as bytes.
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("*", { parseAs: "buffer" }, (_request, body, done) => done(null, body));

  /** The assistant (404 for one the tenant cannot see), its card and where text input goes. */
  const describe = async (request: FastifyRequest, assistantId: string) => {
    const assistant = await services.assistants.get(request.principal.tenantId, assistantId);
    const target = await tasks.inputShapeOf(assistant);
    const endpoint = `${publicOrigin(request)}/a2a/${encodeURIComponent(assistant.assistant_id)}`;
    return { assistant, target, card: agentCard(assistant, { endpoint, inputChannels: target.channels, target }) };
  };

  app.get(
    "/a2a/:assistant_id/.well-known/agent-card.json",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "The assistant's A2A agent card (1.0 with `A2A-Version: 1.0`, else 0.3)",
        params: AssistantParam,
        response: { 200: Type.Unknown({ description: "an A2A AgentCard" }), ...problems(401, 403, 404) },
      },
    },
    async (request, reply) => {
      const { card } = await describe(request, request.params.assistant_id);
      const body = isVersion1(request) ? AgentCard.toJSON(card) : await legacyAgentCard(card);
      return reply.header("vary", "A2A-Version").type("application/json").send(JSON.stringify(body));
    },
  );

  app.post(
    "/a2a/:assistant_id",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary:
          "A2A JSON-RPC 2.0: SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask (1.0) or their 0.3 names",
        params: AssistantParam,
        response: {
          200: jsonRpcAnswer("a JSON-RPC response, or text/event-stream of them for streaming methods"),
          ...problems(401, 403, 404, 413),
        },
      },
    },
    async (request, reply) => {
      const { assistant, card, target } = await describe(request, request.params.assistant_id);
      // An empty header is no header, as in the SDK's own server.
      const requestedVersion = protocolVersionOf(headerValue(request.headers["a2a-version"])) || A2A_LEGACY_PROTOCOL_VERSION;
      const legacy = requestedVersion === A2A_LEGACY_PROTOCOL_VERSION;
      const mapError = legacy ? LegacyJsonRpcTransportHandler.mapToLegacyJSONRPCError : JsonRpcTransportHandler.mapToJSONRPCError;
      const parsed = parseJsonRpc(request);
      if (!parsed.ok) return reply.send(parsed.response);
      try {
        validateVersion(requestedVersion, card, "JSONRPC");
      } catch (error) {
        return reply.send({ jsonrpc: "2.0", id: parsed.id, error: mapError(error) });
      }
      // Checked before the SDK sees the request: it checks params before it looks the method up.
      const method = parsed.request.method as string;
      if (!isMethodOf(method, legacy)) {
        const error = { code: METHOD_NOT_FOUND, message: `${method} is not a method of A2A ${requestedVersion}` };
        return reply.send({ jsonrpc: "2.0", id: parsed.id, error });
      }
      // Push notifications are refused whatever the params (the 0.3 SDK reads them first and fails on a missing one).
      if (isPushNotificationMethod(method)) return reply.send({ jsonrpc: "2.0", id: parsed.id, error: mapError(pushNotSupported()) });
      const params = withProtocolDefaults(method, parsed.request.params, legacy);
      const problem = paramsProblem(params);
      // As the SDK shapes -32602 for the version (1.0 adds its ErrorInfo).
      if (problem) return reply.send({ jsonrpc: "2.0", id: parsed.id, error: mapError(new RequestMalformedError(problem)) });
      // A client that left, or a closing server, ends the call's wait (clients resubscribe elsewhere).
      const { signal, release } = requestWait(request, reply.raw);
      try {
        const call: A2ACall = {
          tenantId: request.principal.tenantId,
          canOperate: grants(request.principal.roles, "operate"),
          assistant,
          card,
          target,
          legacy,
          signal,
          log: request.log,
        };
        const handler = new RudderA2AHandler(tasks, call);
        const transport = legacy ? new LegacyJsonRpcTransportHandler(handler) : new JsonRpcTransportHandler(handler);
        const rpc = params === parsed.request.params ? parsed.request : { ...parsed.request, params };
        const answer = await transport.handle(rpc, new ServerCallContext({ requestedVersion }));
        if (!isStream(answer)) return reply.send(answer);
        return await streamAnswer(request, reply, answer, { legacy, heartbeatMs: services.streamHeartbeatMs, mapError, id: parsed.id });
      } finally {
        release();
      }
    },
  );
};

const isVersion1 = (request: FastifyRequest) => protocolVersionOf(headerValue(request.headers["a2a-version"])) === A2A_PROTOCOL_VERSION;

/**
 * The body as a JSON-RPC request, or the JSON-RPC error that answers it: -32700 unparsable, -32600
 * not a request. A notification (no `id`) is refused too, before anything runs: A2A defines no
 * notifications, every method answers, and a send whose answer nobody reads would start a task
 * its sender cannot find.
 */
function parseJsonRpc(
  request: FastifyRequest,
): { ok: true; request: Record<string, unknown>; id: string | number | null } | { ok: false; response: JsonRpcResponse } {
  const failure = (code: number, message: string, id: string | number | null = null) => ({
    ok: false as const,
    response: { jsonrpc: "2.0", id, error: { code, message } },
  });
  const mediaType = request.headers["content-type"]?.split(";")[0]?.trim().toLowerCase();
  if (mediaType !== undefined && mediaType !== "application/json")
    return failure(CONTENT_TYPE_NOT_SUPPORTED, `unsupported Content-Type "${mediaType}"; send application/json`);
  // JSON is UTF-8 text (RFC 8259): other bytes would be decoded to U+FFFD, changing what was sent.
  const text = utf8Text(request.body ?? "");
  if (text === undefined) return failure(PARSE_ERROR, "the body is not valid UTF-8");
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return failure(PARSE_ERROR, "the body is not valid JSON");
  }
  if (typeof body !== "object" || body === null || Array.isArray(body))
    return failure(INVALID_REQUEST, "the body must be one JSON-RPC request object (batches are not supported)");
  const candidate = body as Record<string, unknown>;
  const id = typeof candidate.id === "string" || (typeof candidate.id === "number" && Number.isInteger(candidate.id)) ? candidate.id : null;
  if (
    candidate.jsonrpc !== "2.0" ||
    typeof candidate.method !== "string" ||
    !candidate.method ||
    ("id" in candidate && candidate.id !== null && id === null)
  ) {
    return failure(INVALID_REQUEST, 'a JSON-RPC request needs jsonrpc "2.0", a method name and a string, integer or null id', id);
  }
  if (!("id" in candidate))
    return failure(INVALID_REQUEST, "notifications (requests without an id) are not supported: every A2A method answers, so send an id");
  return { ok: true, request: candidate, id };
}

/**
 * Writes a streaming answer as SSE: one `data:` frame per JSON-RPC response, a `: heartbeat`
 * comment whenever the stream is quiet for a heartbeat interval (so proxies keep it open). An
 * error before the first event (a refused or invalid send) is a plain JSON-RPC error response;
 * one after it is an `event: error` frame.
 */
async function streamAnswer(
  request: FastifyRequest,
  reply: FastifyReply,
  stream: AsyncGenerator<JsonRpcResponse, void, undefined>,
  options: { legacy: boolean; heartbeatMs: number; mapError: (error: unknown) => unknown; id: string | number | null },
): Promise<FastifyReply> {
  const iterator = stream[Symbol.asyncIterator]();
  let first: IteratorResult<JsonRpcResponse, void>;
  try {
    first = await iterator.next();
  } catch (error) {
    return reply.send({ jsonrpc: "2.0", id: options.id, error: options.mapError(error) });
  }
  reply.hijack();
  const out = reply.raw;
  out.writeHead(200, { ...SSE_HEADERS, "x-request-id": request.id });
  out.flushHeaders();
  const closed = new AbortController();
  out.on("close", () => closed.abort());
  const write = (response: JsonRpcResponse) =>
    sendPaced(out, formatSSEEvent(options.legacy ? withInterruptFinal(response) : response), closed.signal);
  try {
    for (let next = first; !next.done; next = await nextWithHeartbeats(iterator, options.heartbeatMs, () => out.write(": heartbeat\n\n"))) {
      await write(next.value);
    }
  } catch (error) {
    request.log.warn({ err: error }, "A2A stream failed");
    out.write(formatSSEErrorEvent({ jsonrpc: "2.0", id: options.id, error: options.mapError(error) }));
  } finally {
    out.end();
  }
  return reply;
}

/** The iterator's next result; `beat` runs each time a heartbeat interval passes while it is awaited. */
async function nextWithHeartbeats<T>(
  iterator: AsyncIterator<T, void>,
  intervalMs: number,
  beat: () => void,
): Promise<IteratorResult<T, void>> {
  const next = iterator.next();
  for (;;) {
    let timer: NodeJS.Timeout | undefined;
    const quiet = new Promise<"quiet">((resolve) => {
      timer = setTimeout(resolve, intervalMs, "quiet");
    });
    const winner = await Promise.race([next, quiet]).finally(() => clearTimeout(timer));
    if (winner !== "quiet") return winner;
    beat();
  }
}

/**
 * In 0.3, `final: true` marks the update after which the server ends the stream. The SDK sets it
 * for terminal states; Rudder's stream also ends when a task needs input, so that update is final too.
 */
function withInterruptFinal(response: JsonRpcResponse): JsonRpcResponse {
  const result = response.result as { kind?: unknown; status?: { state?: unknown }; final?: boolean } | undefined;
  if (result?.kind === "status-update" && result.status?.state === "input-required")
    return { ...response, result: { ...result, final: true } };
  return response;
}

function isStream(
  answer: JsonRpcResponse | AsyncGenerator<JsonRpcResponse, void, undefined>,
): answer is AsyncGenerator<JsonRpcResponse, void, undefined> {
  return typeof (answer as AsyncGenerator<JsonRpcResponse>)[Symbol.asyncIterator] === "function";
}

/**
 * Where clients reach this server, for the card's endpoint URL: the forwarded origin when a proxy
 * says so, else the request's own, else the address the request came in on. Each part is used only
 * when it makes a valid http(s) origin, so a card never names another scheme, a path or no host.
 */
function publicOrigin(request: FastifyRequest): string {
  const forwardedProtocol = headerValue(request.headers["x-forwarded-proto"])?.split(",")[0]?.trim().toLowerCase();
  const protocol = forwardedProtocol === "http" || forwardedProtocol === "https" ? forwardedProtocol : request.protocol;
  const forwardedHost = headerValue(request.headers["x-forwarded-host"])?.split(",")[0]?.trim();
  const local = request.socket.localFamily === "IPv6" ? `[${request.socket.localAddress}]` : request.socket.localAddress;
  const host = [forwardedHost, request.host, `${local}:${request.socket.localPort}`].find((candidate) => isOrigin(protocol, candidate));
  return `${protocol}://${host}`;
}

/** Whether `protocol://host` is an origin and nothing more: a host (and port), no user, path, query or fragment. */
function isOrigin(protocol: string, host: string | undefined): host is string {
  if (!host || /[\s/?#@\\]/.test(host)) return false;
  try {
    return new URL(`${protocol}://${host}`).hostname !== "";
  } catch {
    return false;
  }
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
