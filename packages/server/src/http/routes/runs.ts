import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { DURABILITIES, MULTITASK_STRATEGIES, RUN_STATUSES } from "../../domain/runs.ts";
import { notFound } from "../../domain/errors.ts";
import type { AppServices } from "../app.ts";
import { JsonObject, Pagination, problems, Timestamp } from "../schemas.ts";
import { streamRunEvents } from "../sse.ts";

const literals = <T extends readonly string[]>(values: T) => Type.Union(values.map((value) => Type.Literal(value)));
const PositiveOrNull = (description: string) => Type.Optional(Type.Union([Type.Number({ exclusiveMinimum: 0 }), Type.Null()], { description }));

/** The spec's "Run creation request fields". */
export const CreateRunBody = Type.Object(
  {
    assistant_id: Type.String({ minLength: 1, description: "assistant to execute" }),
    input: Type.Optional(Type.Unknown({ description: "must satisfy the graph's input schema" })),
    context: Type.Optional(JsonObject),
    config: Type.Optional(JsonObject),
    resume: Type.Optional(Type.Unknown({ description: "value for the pending interrupt (a LangGraph Command)" })),
    update: Type.Optional(Type.Union([JsonObject, Type.Null()])),
    goto: Type.Optional(Type.Union([Type.String({ minLength: 1 }), Type.Null()])),
    durability: Type.Optional(literals(DURABILITIES)),
    multitask_strategy: Type.Optional(literals(MULTITASK_STRATEGIES)),
    run_timeout: PositiveOrNull("seconds for the whole run"),
    max_model_calls: PositiveOrNull("shared budget"),
    max_tool_calls: PositiveOrNull("shared budget"),
    max_tokens: PositiveOrNull("shared budget"),
    max_cost: PositiveOrNull("shared budget"),
    metadata: Type.Optional(JsonObject),
  },
  { additionalProperties: false },
);

const RunError = Type.Object({ code: Type.String(), message: Type.String(), retryable: Type.Boolean() });
const NumberOrNull = Type.Union([Type.Number(), Type.Null()]);

const Run = Type.Object(
  {
    run_id: Type.String({ format: "uuid" }),
    thread_id: Type.Union([Type.String({ format: "uuid" }), Type.Null()]),
    assistant_id: Type.String(),
    status: literals(RUN_STATUSES),
    input: Type.Unknown(),
    context: JsonObject,
    config: JsonObject,
    metadata: JsonObject,
    output: Type.Unknown(),
    error: Type.Union([RunError, Type.Null()]),
    attempt: Type.Integer(),
    multitask_strategy: literals(MULTITASK_STRATEGIES),
    durability: literals(DURABILITIES),
    run_timeout: NumberOrNull,
    max_model_calls: NumberOrNull,
    max_tool_calls: NumberOrNull,
    max_tokens: NumberOrNull,
    max_cost: NumberOrNull,
    usage: Type.Object({ model_calls: Type.Number(), tool_calls: Type.Number(), tokens: Type.Number(), cost: Type.Number() }),
    superseded_by_run_id: Type.Union([Type.String({ format: "uuid" }), Type.Null()], { description: "set when a resume created the run that continues this one" }),
    steering_closed: Type.Boolean({ description: "steering admission closed before the final flush; reset on each claim" }),
    created_at: Timestamp,
    started_at: Type.Union([Timestamp, Type.Null()]),
    finished_at: Type.Union([Timestamp, Type.Null()]),
    updated_at: Timestamp,
  },
  { $id: "Run" },
);

const RunEvent = Type.Object(
  {
    id: Type.String(),
    run_id: Type.String(),
    sequence: Type.Integer({ minimum: 1 }),
    kind: Type.String(),
    data: JsonObject,
    created_at: Timestamp,
  },
  { $id: "RunEvent" },
);

const RunIdParam = Type.Object({ run_id: Type.String({ format: "uuid" }) }, { additionalProperties: false });
const ThreadIdParam = Type.Object({ thread_id: Type.String({ format: "uuid" }) }, { additionalProperties: false });
const IdempotencyHeaders = Type.Object({
  "idempotency-key": Type.Optional(Type.String({ minLength: 1, maxLength: 255, description: "tenant-scoped; replays return the original run" })),
});

/** Runs: created pending, executed by workers, observed by get, join, events and the SSE stream. */
export const runRoutes: FastifyPluginAsyncTypebox<{ services: AppServices }> = async (app, { services }) => {
  const { runService, threads } = services;
  app.addSchema(Run);
  app.addSchema(RunEvent);
  const tags = ["runs"];
  const createResponses = { 202: Type.Ref("Run"), ...problems(400, 401, 403, 404, 409, 413, 422, 429) };

  app.post(
    "/threads/:thread_id/runs",
    {
      config: { permission: "operate" },
      schema: { tags, summary: "Create a run on a thread (202, pending)", params: ThreadIdParam, headers: IdempotencyHeaders, body: CreateRunBody, response: createResponses },
    },
    async (request, reply) => {
      const { run } = await runService.create(request.principal.tenantId, request.params.thread_id, request.body, request.headers["idempotency-key"]);
      return reply.status(202).send(run);
    },
  );

  app.post(
    "/runs",
    {
      config: { permission: "operate" },
      schema: { tags, summary: "Create a stateless run (202, pending)", headers: IdempotencyHeaders, body: CreateRunBody, response: createResponses },
    },
    async (request, reply) => {
      const { run } = await runService.create(request.principal.tenantId, null, request.body, request.headers["idempotency-key"]);
      return reply.status(202).send(run);
    },
  );

  app.get(
    "/runs/:run_id",
    { config: { permission: "read" }, schema: { tags, summary: "Get a run", params: RunIdParam, response: { 200: Type.Ref("Run"), ...problems(401, 403, 404, 422) } } },
    async (request) => runService.get(request.principal.tenantId, request.params.run_id),
  );

  app.get(
    "/threads/:thread_id/runs",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "Runs of a thread, newest first",
        params: ThreadIdParam,
        querystring: Type.Object({ ...Pagination }, { additionalProperties: false }),
        response: { 200: Type.Array(Type.Ref("Run")), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) => {
      const { tenantId } = request.principal;
      if (!(await threads.get(tenantId, request.params.thread_id))) throw notFound("thread", request.params.thread_id);
      return runService.listByThread(tenantId, request.params.thread_id, { limit: request.query.limit ?? 50, offset: request.query.offset ?? 0 });
    },
  );

  app.get(
    "/runs/:run_id/join",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "Wait until the run is terminal or paused (408 join_timeout otherwise)",
        params: RunIdParam,
        querystring: Type.Object({ timeout: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 300, default: 30, description: "seconds" })) }, { additionalProperties: false }),
        response: { 200: Type.Ref("Run"), ...problems(401, 403, 404, 408, 422) },
      },
    },
    async (request) => {
      const closed = new AbortController();
      request.raw.on("close", () => closed.abort());
      return runService.join(request.principal.tenantId, request.params.run_id, request.query.timeout ?? 30, closed.signal);
    },
  );

  app.post(
    "/runs/:run_id/cancel",
    {
      config: { permission: "operate" },
      schema: { tags, summary: "Cancel a run (pending and paused at once; running cooperatively)", params: RunIdParam, response: { 200: Type.Ref("Run"), ...problems(401, 403, 404, 409, 422) } },
    },
    async (request) => runService.cancel(request.principal.tenantId, request.params.run_id),
  );

  app.post(
    "/runs/:run_id/resume",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Resume a paused run: a new run continues it (409 run_resume_conflict if already resumed)",
        params: RunIdParam,
        body: Type.Object(
          {
            resume: Type.Optional(Type.Unknown({ description: "the value interrupt() returns" })),
            update: Type.Optional(Type.Union([JsonObject, Type.Null()])),
            goto: Type.Optional(Type.Union([Type.String({ minLength: 1 }), Type.Null()])),
          },
          { additionalProperties: false },
        ),
        response: { 202: Type.Ref("Run"), ...problems(400, 401, 403, 404, 409, 413, 422) },
      },
    },
    async (request, reply) => reply.status(202).send(await runService.resume(request.principal.tenantId, request.params.run_id, request.body)),
  );

  app.post(
    "/runs/:run_id/redrive",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Re-queue a failed or dead_letter run as it was (same id, input, config)",
        params: RunIdParam,
        response: { 202: Type.Ref("Run"), ...problems(401, 403, 404, 409, 422) },
      },
    },
    async (request, reply) => reply.status(202).send(await runService.redrive(request.principal.tenantId, request.params.run_id)),
  );

  app.post(
    "/runs/:run_id/steer",
    {
      config: { permission: "operate" },
      schema: {
        tags: ["steering"],
        summary: "Inject structured input into a live run (202 once durably stored)",
        params: RunIdParam,
        headers: IdempotencyHeaders,
        body: Type.Object(
          {
            kind: Type.String({ minLength: 1, maxLength: 256, description: "client-defined, passed through" }),
            payload: Type.Unknown({ description: "any JSON; delivered to graph code unchanged" }),
            metadata: Type.Optional(JsonObject),
            idempotency_key: Type.Optional(Type.String({ minLength: 1, maxLength: 255, description: "the Idempotency-Key header wins" })),
          },
          { additionalProperties: false, required: ["kind", "payload"] },
        ),
        response: {
          202: Type.Object({
            id: Type.String({ format: "uuid" }),
            run_id: Type.String({ format: "uuid" }),
            sequence: Type.Integer({ minimum: 1 }),
            kind: Type.String(),
            status: Type.Union([Type.Literal("pending"), Type.Literal("delivered"), Type.Literal("consumed"), Type.Literal("superseded")]),
            created_at: Timestamp,
          }),
          ...problems(400, 401, 403, 404, 409, 413, 422),
        },
      },
    },
    async (request, reply) =>
      reply.status(202).send(await services.steeringService.steer(request.principal.tenantId, request.params.run_id, request.body, request.headers["idempotency-key"])),
  );

  app.get(
    "/runs/:run_id/events",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "The run's event log, in sequence order",
        params: RunIdParam,
        querystring: Type.Object(
          { after: Type.Optional(Type.Integer({ minimum: 0, default: 0 })), limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })) },
          { additionalProperties: false },
        ),
        response: { 200: Type.Array(Type.Ref("RunEvent")), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) => runService.events(request.principal.tenantId, request.params.run_id, request.query.after ?? 0, request.query.limit ?? 100),
  );

  app.get(
    "/runs/:run_id/stream",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "Server-Sent Events: the run's events from Last-Event-ID on; closes when the run is terminal or paused",
        params: RunIdParam,
        headers: Type.Object({ "last-event-id": Type.Optional(Type.String({ pattern: "^\\d{1,10}$" })) }),
        response: { 200: Type.String({ description: "text/event-stream" }), ...problems(401, 403, 404, 422) },
      },
    },
    async (request, reply) => {
      await runService.get(request.principal.tenantId, request.params.run_id);
      const after = Number(request.headers["last-event-id"] ?? 0);
      return streamRunEvents(request, reply, { tenantId: request.principal.tenantId, runId: request.params.run_id, after, services });
    },
  );
};
