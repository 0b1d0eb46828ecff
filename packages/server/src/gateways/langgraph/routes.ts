import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import { Type } from "typebox";
import {
  LgAssistant,
  LgCancelManyBody,
  LgCancelManyQuery,
  LgCancelQuery,
  LgCheckpoint,
  LgHistoryBody,
  LgHistoryQuery,
  LgInfo,
  LgJoinQuery,
  LgJoinStreamQuery,
  LgListRunsQuery,
  LgPatchStateBody,
  LgOk,
  LgRun,
  LgRunBatchBody,
  LgRunCreateBody,
  LgStateAtCheckpointBody,
  LgStateQuery,
  LgStreamHeaders,
  LgThread,
  LgThreadCheckpointParams,
  LgThreadCreateBody,
  LgThreadPatchBody,
  LgThreadPruneAnswer,
  LgThreadPruneBody,
  LgThreadRunParams,
  LgThreadCountBody,
  LgThreadSearchBody,
  LgThreadState,
  LgUpdateStateAnswer,
  LgUpdateStateBody,
  IdempotencyHeaders,
  RunIdParams,
  ThreadIdParams,
  type LgStreamMode,
  type Run,
  type Thread,
} from "@rudder/api";
import { contains } from "../../domain/containment.ts";
import { ApiError, notFound, undefinedOn } from "../../domain/errors.ts";
import { plainMessages } from "../../domain/langchain-messages.ts";
import { sortedBy } from "../../domain/sorting.ts";
import { grants } from "../../domain/roles.ts";
import { eventStream, problems } from "../../http/responses.ts";
import type { AppServices } from "../../http/services.ts";
import { requestWait } from "../../http/shutdown.ts";
import {
  checkpointIdOf,
  lgCheckpoint,
  lgRun,
  lgRunStatus,
  lgThread,
  lgThreadState,
  replayAfter,
  requestedStreamModes,
  rudderThreadStatus,
  selectFields,
  snakeCaseKeys,
  streamModesOf,
  truthy,
  unservedStreamModes,
  waitBody,
} from "./mapping.ts";
import { cancelRun, cancelRuns, runLocation, startRun, waitForRun } from "./runs.ts";
import { langGraphAssistantRoutes } from "./assistants.ts";
import { langGraphStoreCronRoutes } from "./store-crons.ts";
import { streamLangGraph } from "./stream.ts";
import { sendWaitAnswer } from "./wait.ts";

/** `cancel_on_disconnect` lets a reader cancel the run: only for callers who may cancel. */
function cancelOnDisconnect(request: FastifyRequest, value: string | boolean | undefined): boolean {
  if (!truthy(value)) return false;
  if (!grants(request.principal.roles, "operate"))
    throw new ApiError("forbidden", 'cancel_on_disconnect needs a role that grants "operate"');
  return true;
}

/**
 * The LangGraph Platform API at the root (DESIGN.md "LangGraph Platform API"): the paths and
 * bodies `@langchain/langgraph-sdk`'s `Client` uses, over the same services as `/v1` (runs are
 * Rudder runs with the same ids; streams read the same event log). Auth and roles are `/v1`'s.
 * The store and crons (over `StoreService` and `ScheduleService`) are in `store-crons.ts`.
 */
export const langGraphRoutes: FastifyPluginAsyncTypebox<{ services: AppServices; version: string }> = async (
  app,
  { services, version },
) => {
  const { runService, threads } = services;
  for (const schema of [LgAssistant, LgThread, LgThreadState, LgRun, LgCheckpoint]) app.addSchema(schema);
  const tags = ["langgraph"];
  // LangChain messages in values, state, history and wait bodies go out as LangGraph's plain message dicts.
  app.addHook("preSerialization", async (_request, _reply, payload) => plainMessages(payload));
  await app.register(langGraphAssistantRoutes, { services });
  await app.register(langGraphStoreCronRoutes, { services });

  app.get(
    "/ok",
    { config: { public: true }, schema: { tags, summary: "LangGraph liveness", security: [], response: { 200: LgOk } } },
    async () => ({ ok: true }),
  );

  app.get(
    "/info",
    { config: { public: true }, schema: { tags, summary: "LangGraph server info", security: [], response: { 200: LgInfo } } },
    async () => ({ version, flags: { assistants: true, crons: true, langsmith: false, store: true }, rudder: { api: "/v1" } }),
  );

  // Threads.

  /** The thread with its latest values and pending interrupts, as the SDK's `Thread`. */
  const threadView = async (tenantId: string, threadId: string) => {
    const thread = await threads.get(tenantId, threadId);
    return lgThread(thread, await threads.stateOf(tenantId, threadId, undefined));
  };

  app.post(
    "/threads",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Create a thread",
        body: LgThreadCreateBody,
        response: { 200: Type.Ref("LgThread"), ...problems(400, 401, 403, 409, 422) },
      },
    },
    async (request) => {
      const body = request.body;
      if (body.ttl != null) throw new ApiError("validation_error", "ttl: thread TTLs are not supported");
      const { graph_id: _graphId, ...metadata } = body.metadata ?? {};
      const thread = await threads.create(
        request.principal.tenantId,
        { ...metadata, ...(typeof _graphId === "string" ? { graph_id: _graphId } : {}) },
        { threadId: body.thread_id ?? undefined, ifExists: body.if_exists ?? undefined },
      );
      // With "do_nothing" the thread may be an existing one: it comes with its values and interrupts.
      return body.thread_id != null && body.if_exists === "do_nothing"
        ? threadView(request.principal.tenantId, thread.thread_id)
        : lgThread(thread);
    },
  );

  app.post(
    "/threads/search",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "Search threads (with select: only those fields)",
        body: LgThreadSearchBody,
        response: { 200: Type.Array(Type.Partial(LgThread)), ...problems(401, 403, 422) },
      },
    },
    async (request) => {
      const body = request.body;
      for (const field of ["values", "extract"] as const) {
        if (body[field] != null) throw new ApiError("validation_error", `${field}: searching threads by ${field} is not supported yet`);
      }
      const { tenantId } = request.principal;
      const status = body.status ? rudderThreadStatus(body.status) : undefined;
      const limit = body.limit ?? 10;
      const offset = body.offset ?? 0;
      const sort = body.sort_by ? { by: body.sort_by, order: body.sort_order ?? "desc" } : undefined;
      if (body.ids == null) {
        const found = await threads.list(tenantId, { limit, offset, metadata: body.metadata ?? undefined, status, sort });
        const views = await Promise.all(
          found.map(async (thread) => lgThread(thread, await threads.stateOf(tenantId, thread.thread_id, undefined))),
        );
        return views.map((view) => selectFields(view, body.select));
      }
      // Named threads: each looked up in the tenant (others' ids are simply not found, and left out), filtered, sorted.
      const named = await Promise.all([...new Set(body.ids)].map((id) => threads.get(tenantId, id).catch(undefinedOn("not_found"))));
      const views = await Promise.all(
        named
          .filter((thread): thread is Thread => thread !== undefined)
          .filter(
            (thread) =>
              (status === undefined || thread.status === status) && (body.metadata == null || contains(thread.metadata, body.metadata)),
          )
          .map(async (thread) => lgThread(thread, await threads.stateOf(tenantId, thread.thread_id, undefined))),
      );
      return sortedBy(views, sort ?? { by: "created_at", order: "desc" }, "thread_id")
        .slice(offset, offset + limit)
        .map((view) => selectFields(view, body.select));
    },
  );

  app.post(
    "/threads/count",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "Count threads (metadata, status)",
        body: LgThreadCountBody,
        response: { 200: Type.Integer(), ...problems(401, 403, 422) },
      },
    },
    async (request) => {
      const body = request.body;
      if (body.values != null) throw new ApiError("validation_error", "values: counting threads by values is not supported yet");
      return threads.count(request.principal.tenantId, {
        metadata: body.metadata ?? undefined,
        status: body.status ? rudderThreadStatus(body.status) : undefined,
      });
    },
  );

  app.get(
    "/threads/:thread_id",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "Get a thread",
        params: ThreadIdParams,
        response: { 200: Type.Ref("LgThread"), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) => threadView(request.principal.tenantId, request.params.thread_id),
  );

  app.patch(
    "/threads/:thread_id",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Update a thread's metadata (merged, as LangGraph does)",
        params: ThreadIdParams,
        body: LgThreadPatchBody,
        response: { 200: Type.Ref("LgThread"), ...problems(400, 401, 403, 404, 422) },
      },
    },
    async (request) => {
      const { tenantId } = request.principal;
      if (request.body.ttl != null) throw new ApiError("validation_error", "ttl: thread TTLs are not supported");
      await threads.mergeMetadata(tenantId, request.params.thread_id, request.body.metadata ?? {});
      return threadView(tenantId, request.params.thread_id);
    },
  );

  app.delete(
    "/threads/:thread_id",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Delete a thread and its checkpoints",
        params: ThreadIdParams,
        response: { 204: Type.Null(), ...problems(401, 403, 404, 409, 422) },
      },
    },
    async (request, reply) => {
      await threads.delete(request.principal.tenantId, request.params.thread_id);
      return reply.status(204).send(null);
    },
  );

  app.post(
    "/threads/:thread_id/copy",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Copy a thread: a new thread with its metadata, checkpoints and pending writes",
        params: ThreadIdParams,
        response: { 200: Type.Ref("LgThread"), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) => {
      const { tenantId } = request.principal;
      const copy = await threads.copy(tenantId, request.params.thread_id);
      return threadView(tenantId, copy.thread_id);
    },
  );

  app.post(
    "/threads/prune",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Delete threads, or keep only their latest checkpoints (busy and missing threads are skipped)",
        body: LgThreadPruneBody,
        response: { 200: LgThreadPruneAnswer, ...problems(401, 403, 422) },
      },
    },
    async (request) => ({
      pruned_count: await threads.prune(request.principal.tenantId, request.body.thread_ids, request.body.strategy ?? "delete"),
    }),
  );

  app.get(
    "/threads/:thread_id/state",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "The thread's latest state",
        params: ThreadIdParams,
        querystring: LgStateQuery,
        response: { 200: Type.Ref("LgThreadState"), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) => lgThreadState(await threads.stateOf(request.principal.tenantId, request.params.thread_id, undefined)),
  );

  app.get(
    "/threads/:thread_id/state/:checkpoint_id",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "The thread's state at a checkpoint",
        params: LgThreadCheckpointParams,
        querystring: LgStateQuery,
        response: { 200: Type.Ref("LgThreadState"), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) =>
      lgThreadState(await threads.stateOf(request.principal.tenantId, request.params.thread_id, request.params.checkpoint_id)),
  );

  app.patch(
    "/threads/:thread_id/state",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Add keys to the metadata of the thread's latest state (404 when it has none)",
        params: ThreadIdParams,
        body: LgPatchStateBody,
        response: { 204: Type.Null(), ...problems(400, 401, 403, 404, 422) },
      },
    },
    async (request, reply) => {
      await threads.patchStateMetadata(request.principal.tenantId, request.params.thread_id, request.body.metadata);
      return reply.status(204).send(null);
    },
  );

  app.post(
    "/threads/:thread_id/state/checkpoint",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "The thread's state at a checkpoint given as an object (its checkpoint_id; none: the latest)",
        params: ThreadIdParams,
        body: LgStateAtCheckpointBody,
        response: { 200: Type.Ref("LgThreadState"), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) =>
      lgThreadState(await threads.stateOf(request.principal.tenantId, request.params.thread_id, checkpointIdOf(request.body.checkpoint))),
  );

  app.post(
    "/threads/:thread_id/state",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Update the thread's state (as a node would)",
        params: ThreadIdParams,
        body: LgUpdateStateBody,
        response: { 200: LgUpdateStateAnswer, ...problems(400, 401, 403, 404, 409, 422) },
      },
    },
    async (request) => {
      const body = request.body;
      const checkpointId = body.checkpoint_id ?? checkpointIdOf(body.checkpoint);
      if (body.values !== undefined && body.values !== null && (typeof body.values !== "object" || Array.isArray(body.values))) {
        throw new ApiError("validation_error", "values must be an object of channel values");
      }
      const forked = await threads.updateState(request.principal.tenantId, request.params.thread_id, {
        ...(checkpointId !== undefined ? { checkpoint_id: checkpointId } : {}),
        values: (body.values ?? {}) as Record<string, unknown>,
        ...(body.as_node ? { as_node: body.as_node } : {}),
      });
      const checkpoint = lgCheckpoint(forked.configurable)!;
      return { checkpoint, configurable: checkpoint };
    },
  );

  app.get(
    "/threads/:thread_id/history",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "The thread's checkpoints, newest first (limit, before)",
        params: ThreadIdParams,
        querystring: LgHistoryQuery,
        response: { 200: Type.Array(Type.Ref("LgThreadState")), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) => {
      const { limit = 10, before } = request.query;
      const states = await threads.history(request.principal.tenantId, request.params.thread_id, { limit, before });
      return states.map(lgThreadState);
    },
  );

  app.post(
    "/threads/:thread_id/history",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "The thread's checkpoints, newest first",
        params: ThreadIdParams,
        body: LgHistoryBody,
        response: { 200: Type.Array(Type.Ref("LgThreadState")), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) => {
      const body = request.body;
      const states = await threads.history(request.principal.tenantId, request.params.thread_id, {
        limit: body.limit ?? 10,
        before: checkpointIdOf(body.before),
      });
      const metadata = body.metadata;
      return states
        .filter(
          (state) =>
            !metadata || Object.entries(metadata).every(([key, value]) => JSON.stringify(state.metadata[key]) === JSON.stringify(value)),
        )
        .map(lgThreadState);
    },
  );

  // Runs.

  const createSchema = (summary: string, threadScoped: boolean, response: Record<number, unknown>) => ({
    tags,
    summary,
    ...(threadScoped ? { params: ThreadIdParams } : {}),
    headers: IdempotencyHeaders,
    body: LgRunCreateBody,
    response: { ...response, ...problems(400, 401, 403, 404, 409, 413, 422, 429) },
  });

  /**
   * What a wait or join answers: the run's output, or for a cancelled run of a thread (which has
   * none) the thread's values, as the Platform answers (the last values the run checkpointed).
   */
  const waitAnswer = async (tenantId: string, run: Run): Promise<unknown> => {
    if (run.status !== "cancelled" || run.output !== null || run.thread_id === null) return waitBody(run);
    const state = await threads.stateOf(tenantId, run.thread_id, undefined).catch(() => undefined);
    return state?.values ?? {};
  };

  /**
   * A wait's or join's answer once the run is terminal or paused. When the wait ends first (the
   * client left, or the server is closing), the run is cancelled if the caller asked for that, and
   * the answer is a 503: join the run again.
   */
  const settledAnswer = async (
    tenantId: string,
    runId: string,
    wait: { signal: AbortSignal; release: () => void },
    cancelOnLeave: boolean,
  ): Promise<unknown> => {
    try {
      const settled = await waitForRun(services, tenantId, runId, wait.signal);
      if (settled) return await waitAnswer(tenantId, settled);
      if (cancelOnLeave) await runService.cancel(tenantId, runId).catch(() => undefined);
      throw new ApiError("unavailable", "the wait ended before the run did (the server is closing); join the run again", {
        retryAfterSeconds: 1,
      });
    } finally {
      wait.release();
    }
  };

  const threadParam = (request: FastifyRequest) => (request.params as { thread_id?: string }).thread_id ?? null;
  /** The request's Idempotency-Key (validated by the route's header schema), as `/v1` run creation takes it. */
  const keyOf = (request: FastifyRequest) => (request.headers as IdempotencyHeaders)["idempotency-key"];

  const create = async (request: FastifyRequest<{ Body: LgRunCreateBody }>, reply: FastifyReply) => {
    const { run } = await startRun(services, request.principal.tenantId, threadParam(request), request.body, keyOf(request));
    return reply.header("content-location", runLocation(run)).send(lgRun(run));
  };

  const wait = async (request: FastifyRequest<{ Body: LgRunCreateBody }>, reply: FastifyReply) => {
    const { tenantId } = request.principal;
    const { run } = await startRun(services, tenantId, threadParam(request), request.body, keyOf(request));
    const answer = settledAnswer(tenantId, run.run_id, requestWait(request, reply.raw), request.body.on_disconnect === "cancel");
    return sendWaitAnswer(reply.header("content-location", runLocation(run)), answer);
  };

  const stream = async (request: FastifyRequest<{ Body: LgRunCreateBody }>, reply: FastifyReply) => {
    const { tenantId } = request.principal;
    const { run, modes } = await startRun(services, tenantId, threadParam(request), request.body, keyOf(request));
    const location = runLocation(run);
    await streamLangGraph(request, reply, {
      tenantId,
      run,
      modes,
      after: undefined,
      services,
      headers: { "content-location": location, location: `${location}/stream` },
      cancelOnDisconnect: request.body.on_disconnect === "cancel",
    });
  };

  const runResponse = { 200: Type.Ref("LgRun") };
  const waitResponse = {
    200: Type.Unknown({ description: "the run's last values; __interrupt__ when interrupted; __error__ when it failed" }),
  };
  const streamResponse = { 200: eventStream("the run's events in the requested stream modes") };

  app.post(
    "/threads/:thread_id/runs",
    { config: { permission: "operate" }, schema: createSchema("Create a run on a thread", true, runResponse) },
    create,
  );
  app.post(
    "/threads/:thread_id/runs/wait",
    { config: { permission: "operate" }, schema: createSchema("Create a run on a thread and wait for its values", true, waitResponse) },
    wait,
  );
  app.post(
    "/threads/:thread_id/runs/stream",
    { config: { permission: "operate" }, schema: createSchema("Create a run on a thread and stream it", true, streamResponse) },
    stream,
  );
  app.post("/runs", { config: { permission: "operate" }, schema: createSchema("Create a stateless run", false, runResponse) }, create);
  app.post(
    "/runs/wait",
    { config: { permission: "operate" }, schema: createSchema("Create a stateless run and wait for its values", false, waitResponse) },
    wait,
  );
  app.post(
    "/runs/stream",
    { config: { permission: "operate" }, schema: createSchema("Create a stateless run and stream it", false, streamResponse) },
    stream,
  );

  app.post(
    "/runs/batch",
    {
      config: { permission: "operate" },
      preValidation: async (request) => {
        if (Array.isArray(request.body)) request.body = request.body.map(snakeCaseKeys) as LgRunBatchBody;
      },
      schema: {
        tags,
        summary: "Create stateless runs, in order",
        body: LgRunBatchBody,
        response: { 200: Type.Array(Type.Ref("LgRun")), ...problems(400, 401, 403, 404, 409, 413, 422, 429) },
      },
    },
    async (request) => {
      const created: LgRun[] = [];
      for (const body of request.body) created.push(lgRun((await startRun(services, request.principal.tenantId, null, body)).run));
      return created;
    },
  );

  app.post(
    "/runs/cancel",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Cancel runs: those named, or a thread's (or the tenant's) pending and running runs",
        body: LgCancelManyBody,
        querystring: LgCancelManyQuery,
        response: { 204: Type.Null(), ...problems(401, 403, 404, 422) },
      },
    },
    async (request, reply) => {
      await cancelRuns(services, request.principal.tenantId, request.body, request.query.action);
      return reply.status(204).send(null);
    },
  );

  /** The run, when it belongs to the thread in the path (404 otherwise, as for another tenant's). */
  const runOfThread = async (tenantId: string, threadId: string, runId: string): Promise<Run> => {
    const run = await runService.get(tenantId, runId);
    if (run.thread_id !== threadId) throw notFound("run", runId);
    return run;
  };

  app.get(
    "/threads/:thread_id/runs",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "Runs of a thread, newest first (with select: only those fields)",
        params: ThreadIdParams,
        querystring: LgListRunsQuery,
        response: { 200: Type.Array(Type.Partial(LgRun)), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) => {
      const { tenantId } = request.principal;
      await threads.get(tenantId, request.params.thread_id);
      const runs = await runService.listByThread(tenantId, request.params.thread_id, {
        limit: request.query.limit ?? 10,
        offset: request.query.offset ?? 0,
      });
      const { status, select } = request.query;
      const fields = select === undefined ? undefined : [select].flat();
      return runs
        .filter((run) => status === undefined || lgRunStatus(run.status) === status)
        .map((run) => selectFields(lgRun(run), fields));
    },
  );

  app.get(
    "/threads/:thread_id/runs/:run_id",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "Get a run",
        params: LgThreadRunParams,
        response: { 200: Type.Ref("LgRun"), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) => lgRun(await runOfThread(request.principal.tenantId, request.params.thread_id, request.params.run_id)),
  );

  app.delete(
    "/threads/:thread_id/runs/:run_id",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Delete an ended run with its events (409 while it is pending, running or paused)",
        params: LgThreadRunParams,
        response: { 204: Type.Null(), ...problems(401, 403, 404, 409, 422) },
      },
    },
    async (request, reply) => {
      const { tenantId } = request.principal;
      const run = await runOfThread(tenantId, request.params.thread_id, request.params.run_id);
      await runService.delete(tenantId, run.run_id);
      return reply.status(204).send(null);
    },
  );

  app.get(
    "/threads/:thread_id/runs/:run_id/join",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "Wait for the run; answers its last values",
        params: LgThreadRunParams,
        querystring: LgJoinQuery,
        response: { ...waitResponse, ...problems(401, 403, 404, 422, 503) },
      },
    },
    async (request, reply) => {
      const { tenantId } = request.principal;
      const run = await runOfThread(tenantId, request.params.thread_id, request.params.run_id);
      const cancelOnLeave = cancelOnDisconnect(request, request.query.cancel_on_disconnect);
      return sendWaitAnswer(reply, settledAnswer(tenantId, run.run_id, requestWait(request), cancelOnLeave));
    },
  );

  const joinStream = async (request: FastifyRequest, reply: FastifyReply, run: Run) => {
    const query = request.query as LgJoinStreamQuery;
    const headers = request.headers as LgStreamHeaders;
    const cancelOnLeave = cancelOnDisconnect(request, query.cancel_on_disconnect);
    const modes: LgStreamMode[] = query.stream_mode === undefined ? streamModesOf(run) : requestedStreamModes(query.stream_mode);
    const unserved = unservedStreamModes(modes);
    if (unserved.length) throw new ApiError("validation_error", `stream_mode ${unserved.join(", ")} is not supported yet`);
    await streamLangGraph(request, reply, {
      tenantId: request.principal.tenantId,
      run,
      modes,
      after: replayAfter(headers["last-event-id"] === undefined ? undefined : Number(headers["last-event-id"])),
      services,
      cancelOnDisconnect: cancelOnLeave,
    });
  };

  const joinStreamSchema = <P extends typeof LgThreadRunParams | typeof RunIdParams>(params: P) => ({
    tags,
    summary: "Stream a run's events (Last-Event-ID resumes after an id; -1 or none from the start)",
    params,
    querystring: LgJoinStreamQuery,
    headers: LgStreamHeaders,
    response: { ...streamResponse, ...problems(401, 403, 404, 422) },
  });

  app.get(
    "/threads/:thread_id/runs/:run_id/stream",
    { config: { permission: "read" }, schema: joinStreamSchema(LgThreadRunParams) },
    async (request, reply) =>
      joinStream(request, reply, await runOfThread(request.principal.tenantId, request.params.thread_id, request.params.run_id)),
  );

  app.get("/runs/:run_id/stream", { config: { permission: "read" }, schema: joinStreamSchema(RunIdParams) }, async (request, reply) =>
    joinStream(request, reply, await runService.get(request.principal.tenantId, request.params.run_id)),
  );

  app.post(
    "/threads/:thread_id/runs/:run_id/cancel",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Cancel a run (202; with wait=1, 204 once it stopped)",
        params: LgThreadRunParams,
        querystring: LgCancelQuery,
        response: { 202: Type.Unknown({ description: "accepted: no body" }), 204: Type.Null(), ...problems(401, 403, 404, 409, 422) },
      },
    },
    async (request, reply) => {
      const { tenantId } = request.principal;
      const run = await runOfThread(tenantId, request.params.thread_id, request.params.run_id);
      const outcome = await cancelRun(services, tenantId, run, request.query.action ?? "interrupt");
      if (!truthy(request.query.wait)) return reply.status(202).send("");
      if (outcome !== "stopping") return reply.status(204).send(null);
      const wait = requestWait(request);
      try {
        await waitForRun(services, tenantId, run.run_id, wait.signal);
      } finally {
        wait.release();
      }
      return reply.status(204).send(null);
    },
  );
};
