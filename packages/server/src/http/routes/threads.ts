import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import {
  CheckpointRef,
  CreateThreadBody,
  ForkAnswer,
  ForkBody,
  ListThreadsQuery,
  NoQuery,
  PatchThreadBody,
  Thread,
  ThreadHistoryQuery,
  ThreadIdParams,
  ThreadState,
  ThreadStateQuery,
} from "@rudder/api";
import { parseJsonObjectParam } from "../query.ts";
import { problems } from "../responses.ts";
import type { AppServices } from "../services.ts";

/** Threads: durable containers of checkpoints, always scoped to the caller's tenant. */
export const threadRoutes: FastifyPluginAsyncTypebox<{ services: AppServices }> = async (app, { services }) => {
  const { threads } = services;
  app.addSchema(Thread);
  app.addSchema(CheckpointRef);
  app.addSchema(ThreadState);
  const tags = ["threads"];

  app.post(
    "/threads",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Create a thread",
        body: CreateThreadBody,
        querystring: NoQuery,
        response: { 201: Type.Ref("Thread"), ...problems(400, 401, 403, 413, 422) },
      },
    },
    async (request, reply) => reply.status(201).send(await threads.create(request.principal.tenantId, request.body.metadata ?? {})),
  );

  app.get(
    "/threads",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "List threads, newest first",
        querystring: ListThreadsQuery,
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
      schema: {
        tags,
        summary: "Get a thread",
        params: ThreadIdParams,
        querystring: NoQuery,
        response: { 200: Type.Ref("Thread"), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) => threads.get(request.principal.tenantId, request.params.thread_id),
  );

  app.patch(
    "/threads/:thread_id",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Replace a thread's metadata",
        params: ThreadIdParams,
        body: PatchThreadBody,
        querystring: NoQuery,
        response: { 200: Type.Ref("Thread"), ...problems(400, 401, 403, 404, 413, 422) },
      },
    },
    async (request) => threads.replaceMetadata(request.principal.tenantId, request.params.thread_id, request.body.metadata),
  );

  app.delete(
    "/threads/:thread_id",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Delete a thread and its checkpoints",
        params: ThreadIdParams,
        querystring: NoQuery,
        response: { 204: Type.Null(), ...problems(401, 403, 404, 409, 422) },
      },
    },
    async (request, reply) => {
      await threads.delete(request.principal.tenantId, request.params.thread_id);
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
        params: ThreadIdParams,
        querystring: ThreadStateQuery,
        response: { 200: Type.Ref("ThreadState"), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) => threads.stateOf(request.principal.tenantId, request.params.thread_id, request.query.checkpoint_id),
  );

  app.get(
    "/threads/:thread_id/history",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "Checkpoint history, newest first",
        params: ThreadIdParams,
        querystring: ThreadHistoryQuery,
        response: { 200: Type.Array(Type.Ref("ThreadState")), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) =>
      threads.history(request.principal.tenantId, request.params.thread_id, {
        limit: request.query.limit ?? 50,
        offset: request.query.offset ?? 0,
        before: request.query.before,
      }),
  );

  app.post(
    "/threads/:thread_id/fork",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Start a new lineage at a checkpoint, optionally updating the state as a node",
        params: ThreadIdParams,
        body: ForkBody,
        querystring: NoQuery,
        response: {
          200: ForkAnswer,
          ...problems(400, 401, 403, 404, 409, 413, 422),
        },
      },
    },
    async (request) => threads.fork(request.principal.tenantId, request.params.thread_id, request.body),
  );
};
