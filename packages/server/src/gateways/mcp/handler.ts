import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  CancelledNotificationSchema,
  ErrorCode,
  InitializeRequestSchema,
  ListToolsRequestSchema,
  type CallToolResult,
  type InitializeResult,
  type JSONRPCRequest,
  type RequestId,
  type ListToolsResult,
  type ServerNotification,
  type ServerRequest,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { Assistant, Run } from "@rudder/api";
import type { FastifyBaseLogger } from "fastify";
import { Ajv, type ValidateFunction } from "ajv";
import { ApiError, undefinedOn } from "../../domain/errors.ts";
import { isSettled } from "../../domain/runs.ts";
import { findJsonFault, textProblem } from "../../domain/storable-json.ts";
import type { AssistantCatalog } from "../../graphs/assistants.ts";
import type { GraphSchemaCatalog, JsonSchema } from "../../graphs/schemas.ts";
import type { RunService } from "../../runs/service.ts";
import { elicitationFor } from "./elicitation.ts";
import { failure, resultOfRun, toolOutputSchema } from "./results.ts";
import { callIdempotencyKey, callRunId, type McpSession } from "./session.ts";
import { decodeCursor, encodeCursor, isExposed, toolNamesOf } from "./tools.ts";

/** The MCP protocol versions Rudder speaks; a client asking for another gets the latest. */
export const MCP_PROTOCOL_VERSIONS = ["2025-11-25", "2025-06-18"] as const;
export const TOOLS_PAGE_SIZE = 50;
/** Assistants read per statement while listing a tenant's tools. */
const CATALOG_PAGE = 1000;
/** A cancelled call's run ends cooperatively; the cancel follows at most this many resumes to the current run. */
const MAX_RESUME_HOPS = 100;

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/**
 * A JSON-RPC error a handler answers with. Not the SDK's `McpError`, whose message is prefixed
 * "MCP error <code>: " for local use: the SDK sends a thrown error's `message` as is, and the
 * client's `McpError` adds the prefix again.
 */
export class RpcError extends Error {
  override readonly name = "RpcError";
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

/** What a tool-call needs from the backend. */
export interface McpServices {
  readonly assistants: AssistantCatalog;
  readonly schemas: GraphSchemaCatalog;
  readonly runService: RunService;
}

/** Who is calling, for one HTTP request. */
export interface McpCall {
  readonly tenantId: string;
  /** The caller's roles grant `operate` (tools/call, cancellation); the route refuses others before MCP runs. */
  readonly canOperate: boolean;
  /** The session the request names (absent: a client that keeps none). */
  readonly session: McpSession | undefined;
  /** Aborts when the client's connection closes before the answer: the call's run is cancelled. */
  readonly disconnected: AbortSignal;
  /** Aborts when the server starts closing: the call answers at once, its run goes on. */
  readonly shutdown: AbortSignal;
  /** Sends a request to the client on this call's response stream (elicitation). */
  readonly sendToClient: (message: JSONRPCRequest, relatedRequestId: RequestId) => Promise<void>;
  readonly version: string;
  readonly log: FastifyBaseLogger;
}

interface ToolEntry {
  readonly name: string;
  readonly assistant: Assistant;
  readonly tool: Tool;
  readonly input: JsonSchema;
}

const ajv = new Ajv({ strict: false, allErrors: true });
const validators = new WeakMap<JsonSchema, ValidateFunction>();

/**
 * One MCP server for one HTTP request (the transport is stateless): the SDK parses and answers
 * JSON-RPC; these handlers answer from Rudder's assistants and runs. Nothing is kept between
 * requests, so any process serves any request of a session.
 */
export function mcpServer(services: McpServices, call: McpCall): Server {
  const capabilities = { tools: { listChanged: false } };
  const server = new Server({ name: "rudder", version: call.version }, { capabilities });
  server.setRequestHandler(InitializeRequestSchema, async (request): Promise<InitializeResult> => {
    const asked = request.params.protocolVersion;
    return {
      protocolVersion: (MCP_PROTOCOL_VERSIONS as readonly string[]).includes(asked) ? asked : MCP_PROTOCOL_VERSIONS[0],
      capabilities,
      serverInfo: { name: "rudder", version: call.version },
      instructions: "Each tool runs a Rudder assistant (a LangGraph graph) and answers with the run's result.",
    };
  });
  server.setRequestHandler(ListToolsRequestSchema, (request) => guard(call, () => listTools(services, call, request.params?.cursor)));
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => guard(call, () => callTool(services, call, request.params, extra)));
  server.setNotificationHandler(CancelledNotificationSchema, async (notification) => {
    const requestId = notification.params.requestId;
    if (requestId === undefined || !call.session || !call.canOperate) return;
    await cancelChain(services.runService, call.tenantId, callRunId(call.tenantId, call.session, requestId)).catch((error: unknown) =>
      call.log.warn({ err: error }, "MCP cancellation failed"),
    );
  });
  server.onerror = (error) => call.log.debug({ err: error }, "MCP transport");
  return server;
}

/** Rudder's refusals keep their message; anything unexpected is logged and hidden behind an internal error. */
async function guard<T>(call: McpCall, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof RpcError) throw error;
    if (error instanceof ApiError)
      throw new RpcError(ErrorCode.InternalError, `${error.code}: ${error.message}`, { code: error.code, retryable: error.retryable });
    call.log.error({ err: error }, "MCP request failed");
    throw new RpcError(ErrorCode.InternalError, "the server failed to handle this request");
  }
}

/**
 * Every exposed assistant of the tenant as a tool (config-declared first, in config order; then
 * the tenant's own, oldest first), named so that a name never passes to another assistant while
 * its holder is a tool under it (`toolNamesOf`).
 */
async function allTools(services: McpServices, tenantId: string): Promise<ToolEntry[]> {
  const exposed: Assistant[] = [];
  for (let offset = 0; ; offset += CATALOG_PAGE) {
    const page = await services.assistants.list(tenantId, { limit: CATALOG_PAGE, offset, metadata: { mcp_expose: true } });
    exposed.push(...page.filter(isExposed));
    if (page.length < CATALOG_PAGE) break;
  }
  const declared = exposed.filter((assistant) => services.assistants.isDeclared(assistant.assistant_id));
  const stored = exposed.filter((assistant) => !services.assistants.isDeclared(assistant.assistant_id));
  const entries: ToolEntry[] = [];
  for (const { name, assistant } of toolNamesOf(declared, stored)) {
    const schemas = await services.schemas.schemasOf(assistant.graph_id);
    const input = schemas?.input ?? { type: "object" };
    const outputSchema = toolOutputSchema(schemas?.output);
    const tool: Tool = {
      name,
      title: assistant.name,
      description:
        assistant.description ||
        `Runs the assistant "${assistant.name}" (${assistant.assistant_id}, graph ${assistant.graph_id}) and answers with its result.`,
      inputSchema: input as Tool["inputSchema"],
      ...(outputSchema ? { outputSchema: outputSchema as Tool["outputSchema"] } : {}),
    };
    entries.push({ name, assistant, tool, input });
  }
  return entries;
}

async function listTools(services: McpServices, call: McpCall, cursor: string | undefined): Promise<ListToolsResult> {
  const offset = decodeCursor(cursor);
  if (offset === undefined)
    throw new RpcError(ErrorCode.InvalidParams, "the cursor is not one this server gave; list again without a cursor");
  const tools = await allTools(services, call.tenantId);
  const page = tools.slice(offset, offset + TOOLS_PAGE_SIZE);
  const next = offset + page.length;
  return { tools: page.map((entry) => entry.tool), ...(next < tools.length ? { nextCursor: encodeCursor(next) } : {}) };
}

/**
 * A tool call: the arguments are checked against the tool's input schema, a stateless run of the
 * assistant is created with them as input, and the answer waits until the run is terminal or
 * paused. A paused run is asked of the user through elicitation when the client answers it.
 */
async function callTool(
  services: McpServices,
  call: McpCall,
  params: { name: string; arguments?: Record<string, unknown> },
  extra: Extra,
): Promise<CallToolResult> {
  const entry = (await allTools(services, call.tenantId)).find((candidate) => candidate.name === params.name);
  if (!entry) throw new RpcError(ErrorCode.InvalidParams, `Unknown tool: ${params.name}`);
  const args = params.arguments ?? {};
  const problem = argumentProblem(entry.input, args);
  if (problem) return failure({ code: "validation_error", message: problem, retryable: false });
  const session = call.session;
  const metadata = { mcp: { tool: entry.name, ...requestIdMetadata(extra.requestId), ...(session ? { session: session.id } : {}) } };
  let run: Run;
  try {
    ({ run } = await services.runService.create(
      call.tenantId,
      null,
      { assistant_id: entry.assistant.assistant_id, input: args, metadata },
      session
        ? {
            idempotencyKey: callIdempotencyKey(call.tenantId, session, extra.requestId),
            runId: callRunId(call.tenantId, session, extra.requestId),
          }
        : {},
    ));
  } catch (error) {
    if (error instanceof ApiError && error.code !== "internal") return failure(error);
    throw error;
  }
  return awaitResult(services, call, run, extra);
}

/**
 * The request id as the run's metadata keeps it. Any string is a valid JSON-RPC id, but one with
 * U+0000 or a lone surrogate cannot be stored (docs/mcp.md "Calling a tool"): such an id is kept
 * as its JSON text (`JSON.stringify` writes those characters as `\u` escapes) in
 * `request_id_json`, and the call goes on. The run id and idempotency key are digests of the
 * id's JSON text, so they need no such care.
 */
export function requestIdMetadata(requestId: RequestId): { request_id: RequestId } | { request_id_json: string } {
  return typeof requestId === "string" && textProblem(requestId)
    ? { request_id_json: JSON.stringify(requestId) }
    : { request_id: requestId };
}

/** The JSON Schema and storage rules' verdict on tool arguments: undefined when they are fine. */
function argumentProblem(schema: JsonSchema, args: Record<string, unknown>): string | undefined {
  const fault = findJsonFault(args);
  if (fault) return `arguments${fault.path} ${fault.problem}`;
  let validate = validators.get(schema);
  if (!validate) {
    validate = ajv.compile(schema);
    validators.set(schema, validate);
  }
  if (validate(args)) return undefined;
  const problems = (validate.errors ?? []).map((error) => {
    const unknown = typeof error.params.additionalProperty === "string" ? ` (${JSON.stringify(error.params.additionalProperty)})` : "";
    return `arguments${error.instancePath} ${error.message ?? "is invalid"}${unknown}`;
  });
  return `the arguments do not match the tool's input schema: ${problems.join("; ")}`;
}

/**
 * Follows the call's run to its end: one progress notification per completed node (when the
 * client asked for progress), then the run's result. When the run pauses and the client answers
 * elicitation requests, the question goes to the user and the answer resumes the run; the call
 * follows the new run. The client leaving cancels the run; a closing server answers at once and
 * leaves the run to go on.
 */
async function awaitResult(services: McpServices, call: McpCall, first: Run, extra: Extra): Promise<CallToolResult> {
  const progressToken = extra._meta?.progressToken;
  const signal = AbortSignal.any([call.disconnected, call.shutdown, extra.signal]);
  let progress = 0;
  let current = first;
  for (;;) {
    let settled: Run | undefined;
    for await (const update of services.runService.follow(call.tenantId, current.run_id, { events: progressToken !== undefined, signal })) {
      if (update.type === "settled") settled = update.run;
      else if (update.type === "events" && progressToken !== undefined) {
        for (const event of update.events) {
          if (event.kind !== "node_completed") continue;
          progress += 1;
          await extra.sendNotification({
            method: "notifications/progress",
            params: { progressToken, progress, message: String(event.data.node) },
          });
        }
      }
    }
    if (!settled) return interrupted(services, call, current);
    const elicitation = settled.status === "paused" && call.session?.elicitation ? elicitationFor(settled) : undefined;
    if (!elicitation) return resultOfRun(settled);
    try {
      await call.sendToClient(
        { jsonrpc: "2.0", id: elicitation.id, method: "elicitation/create", params: elicitation.params },
        extra.requestId,
      );
    } catch {
      // The call's stream is gone: the client left.
      return interrupted(services, call, settled);
    }
    // The answer arrives in another request (to any process), which resumes or cancels the run.
    const answered = await services.runService.waitWhilePaused(call.tenantId, settled.run_id, signal);
    if (!answered) return interrupted(services, call, settled);
    current = answered.superseded_by_run_id ? await services.runService.get(call.tenantId, answered.superseded_by_run_id) : answered;
  }
}

/** The call's wait ended before its run did: the server is closing (the run goes on), or the client left (the run is cancelled). */
async function interrupted(services: McpServices, call: McpCall, run: Run): Promise<CallToolResult> {
  if (call.shutdown.aborted) {
    const message = `this server is shutting down; run ${run.run_id} goes on: read it with GET /v1/runs/${run.run_id}`;
    // The run as it is now (the call saw it as it was when created or resumed); as last seen if the database does not answer.
    const now = await services.runService.get(call.tenantId, run.run_id).catch(() => run);
    if (isSettled(now.status) && !now.superseded_by_run_id) return resultOfRun(now);
    return failure({ code: "unavailable", message, retryable: true }, now);
  }
  await cancelChain(services.runService, call.tenantId, run.run_id).catch((error: unknown) =>
    call.log.warn({ err: error }, "MCP: cancelling an abandoned call's run failed"),
  );
  return failure({ code: "run_cancelled", message: "the call was cancelled", retryable: false }, run);
}

/**
 * Cancels a call's run, or the run that carries it on when it was resumed; nothing when it has
 * ended or is unknown (the call was never made, or is another tenant's).
 */
export async function cancelChain(runService: RunService, tenantId: string, runId: string): Promise<void> {
  let id = runId;
  for (let hop = 0; hop < MAX_RESUME_HOPS; hop++) {
    const run = await runService.get(tenantId, id).catch(undefinedOn("not_found"));
    if (!run) return;
    if (run.superseded_by_run_id) {
      id = run.superseded_by_run_id;
      continue;
    }
    if (!["pending", "running", "paused"].includes(run.status)) return;
    await runService.cancel(tenantId, id).catch((error: unknown) => {
      // It ended, or was resumed, meanwhile: look again.
      if (error instanceof ApiError && (error.code === "conflict" || error.code === "run_superseded")) return;
      throw error;
    });
    const after = await runService.get(tenantId, id);
    if (!after.superseded_by_run_id) return;
    id = after.superseded_by_run_id;
  }
}
