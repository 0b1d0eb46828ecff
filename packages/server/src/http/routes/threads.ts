import { randomUUID } from "node:crypto";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { notFound } from "../../domain/errors.ts";
import { parseJsonObjectParam } from "../query.ts";
import type { AppServices } from "../app.ts";
import { JsonObject, Pagination, problems, Timestamp } from "../schemas.ts";

const ThreadId = Type.Object({ thread_id: Type.String({ format: "uuid" }) }, { additionalProperties: false });

const Thread = Type.Object(
  {
    thread_id: Type.String({ format: "uuid" }),
    metadata: JsonObject,
    status: Type.Union([Type.Literal("idle"), Type.Literal("busy"), Type.Literal("paused"), Type.Literal("error")]),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: "Thread" },
);

const CheckpointRef = Type.Object(
  { thread_id: Type.String(), checkpoint_ns: Type.String(), checkpoint_id: Type.String() },
  { $id: "CheckpointRef" },
);

const ThreadState = Type.Object(
  {
    values: Type.Unknown(),
    next: Type.Array(Type.String()),
    tasks: Type.Array(
      Type.Object({
        id: Type.String(),
        name: Type.String(),
        error: Type.Union([Type.String(), Type.Null()]),
        interrupts: Type.Array(Type.Unknown()),
      }),
    ),
    checkpoint: Type.Union([Type.Ref("CheckpointRef"), Type.Null()]),
    parent_checkpoint: Type.Union([Type.Ref("CheckpointRef"), Type.Null()]),
    metadata: JsonObject,
    created_at: Type.Union([Timestamp, Type.Null()]),
  },
  { $id: "ThreadState" },
);

const MetadataBody = Type.Object({ metadata: Type.Optional(JsonObject) }, { additionalProperties: false });

/** Threads: durable containers of checkpoints, always scoped to the caller's tenant. */
export const threadRoutes: FastifyPluginAsyncTypebox<{ services: AppServices }> = async (app, { services }) => {
  const { threads, threadState } = services;
  app.addSchema(Thread);
  app.addSchema(CheckpointRef);
  app.addSchema(ThreadState);
  const tags = ["threads"];

  /** The thread of the caller's tenant, or 404 exactly as for one that does not exist. */
  async function ownThread(tenantId: string, threadId: string) {
    const thread = await threads.get(tenantId, threadId);
    if (!thread) throw notFound("thread", threadId);
    return thread;
  }

  app.post(
    "/threads",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Create a thread",
        body: MetadataBody,
        response: { 201: Type.Ref("Thread"), ...problems(400, 401, 403, 413, 422) },
      },
    },
    async (request, reply) => {
      const thread = await threads.create(request.principal.tenantId, randomUUID(), request.body.metadata ?? {});
      return reply.status(201).send(thread);
    },
  );

  app.get(
    "/threads",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "List threads, newest first",
        querystring: Type.Object(
          {
            ...Pagination,
            metadata: Type.Optional(Type.String({ description: "JSON object; threads whose metadata contains it" })),
          },
          { additionalProperties: false },
        ),
        response: { 200: Type.Array(Type.Ref("Thread")), ...problems(401, 403, 422) },
      },
    },
    async (request) =>
      threads.list(request.principal.tenantId, {
        limit: request.query.limit ?? 50,
        offset: request.query.offset ?? 0,
        metadata: parseJsonObjectParam("metadata", request.query.metadata),
      }),
  );

  app.get(
    "/threads/:thread_id",
    {
      config: { permission: "read" },
      schema: { tags, summary: "Get a thread", params: ThreadId, response: { 200: Type.Ref("Thread"), ...problems(401, 403, 404, 422) } },
    },
    async (request) => ownThread(request.principal.tenantId, request.params.thread_id),
  );

  app.patch(
    "/threads/:thread_id",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Replace a thread's metadata",
        params: ThreadId,
        body: Type.Object({ metadata: JsonObject }, { additionalProperties: false }),
        response: { 200: Type.Ref("Thread"), ...problems(400, 401, 403, 404, 413, 422) },
      },
    },
    async (request) => {
      const { tenantId } = request.principal;
      const thread = await threads.replaceMetadata(tenantId, request.params.thread_id, request.body.metadata);
      if (!thread) throw notFound("thread", request.params.thread_id);
      return thread;
    },
  );

  app.delete(
    "/threads/:thread_id",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Delete a thread and its checkpoints",
        params: ThreadId,
        response: { 204: Type.Null(), ...problems(401, 403, 404, 409, 422) },
      },
    },
    async (request, reply) => {
      if (!(await threads.delete(request.principal.tenantId, request.params.thread_id))) {
        throw notFound("thread", request.params.thread_id);
      }
      return reply.status(204).send(null);
    },
  );

  app.get(
    "/threads/:thread_id/state",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "The thread's state at its newest checkpoint, or at checkpoint_id",
        params: ThreadId,
        querystring: Type.Object({ checkpoint_id: Type.Optional(Type.String({ minLength: 1 })) }, { additionalProperties: false }),
        response: { 200: Type.Ref("ThreadState"), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) => {
      await ownThread(request.principal.tenantId, request.params.thread_id);
      return threadState.state(request.params.thread_id, request.query.checkpoint_id);
    },
  );

  app.get(
    "/threads/:thread_id/history",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "Checkpoint history, newest first",
        params: ThreadId,
        querystring: Type.Object(
          {
            limit: Pagination.limit,
            before: Type.Optional(Type.String({ minLength: 1, description: "only checkpoints older than this checkpoint_id" })),
          },
          { additionalProperties: false },
        ),
        response: { 200: Type.Array(Type.Ref("ThreadState")), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) => {
      await ownThread(request.principal.tenantId, request.params.thread_id);
      return threadState.history(request.params.thread_id, { limit: request.query.limit ?? 50, before: request.query.before });
    },
  );

  app.post(
    "/threads/:thread_id/fork",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Start a new lineage at a checkpoint, optionally updating the state as a node",
        params: ThreadId,
        body: Type.Object(
          {
            checkpoint_id: Type.Optional(Type.String({ minLength: 1 })),
            values: Type.Optional(JsonObject),
            as_node: Type.Optional(Type.String({ minLength: 1 })),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({ configurable: Type.Ref("CheckpointRef") }),
          ...problems(400, 401, 403, 404, 409, 413, 422),
        },
      },
    },
    async (request) => {
      await ownThread(request.principal.tenantId, request.params.thread_id);
      return threadState.fork(request.params.thread_id, request.body);
    },
  );
};
