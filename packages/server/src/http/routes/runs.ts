import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import {
  CreateRunBody,
  IdempotencyHeaders,
  JOIN_DEFAULT_TIMEOUT_SECONDS,
  JoinQuery,
  ListRunsQuery,
  ListThreadRunsQuery,
  NoQuery,
  ResumeBody,
  Run,
  RunEvent,
  RunEventsQuery,
  RunIdParams,
  RunStreamHeaders,
  SteerAccepted,
  SteerBody,
  ThreadIdParams,
} from "@rudder/api";
import { parseJsonObjectParam } from "../query.ts";
import { eventStream, problems } from "../responses.ts";
import type { AppServices } from "../services.ts";
import { streamRunEvents } from "../sse.ts";
import { requestWait } from "../shutdown.ts";

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
      schema: {
        tags,
        summary: "Create a run on a thread (202, pending)",
        params: ThreadIdParams,
        headers: IdempotencyHeaders,
        body: CreateRunBody,
        querystring: NoQuery,
        response: createResponses,
      },
    },
    async (request, reply) => {
      const { run } = await runService.create(request.principal.tenantId, request.params.thread_id, request.body, {
        idempotencyKey: request.headers["idempotency-key"],
      });
      return reply.status(202).send(run);
    },
  );

  app.post(
    "/runs",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Create a stateless run (202, pending)",
        headers: IdempotencyHeaders,
        body: CreateRunBody,
        querystring: NoQuery,
        response: createResponses,
      },
    },
    async (request, reply) => {
      const { run } = await runService.create(request.principal.tenantId, null, request.body, {
        idempotencyKey: request.headers["idempotency-key"],
      });
      return reply.status(202).send(run);
    },
  );

  app.get(
    "/runs",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "The tenant's runs, newest first, filtered by status, assistant_id, thread_id and metadata containment",
        querystring: ListRunsQuery,
        response: { 200: Type.Array(Type.Ref("Run")), ...problems(401, 403, 422) },
      },
    },
    async (request) =>
      runService.list(
        request.principal.tenantId,
        {
          status: request.query.status,
          assistantId: request.query.assistant_id,
          threadId: request.query.thread_id,
          metadata: parseJsonObjectParam("metadata", request.query.metadata),
        },
        { limit: request.query.limit ?? 50, offset: request.query.offset ?? 0 },
      ),
  );

  app.get(
    "/runs/:run_id",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "Get a run",
        params: RunIdParams,
        querystring: NoQuery,
        response: { 200: Type.Ref("Run"), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) => runService.get(request.principal.tenantId, request.params.run_id),
  );

  app.get(
    "/threads/:thread_id/runs",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "Runs of a thread, newest first",
        params: ThreadIdParams,
        querystring: ListThreadRunsQuery,
        response: { 200: Type.Array(Type.Ref("Run")), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) => {
      const { tenantId } = request.principal;
      await threads.get(tenantId, request.params.thread_id);
      return runService.listByThread(tenantId, request.params.thread_id, {
        limit: request.query.limit ?? 50,
        offset: request.query.offset ?? 0,
      });
    },
  );

  app.get(
    "/runs/:run_id/join",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "Wait until the run is terminal or paused (408 join_timeout otherwise)",
        params: RunIdParams,
        querystring: JoinQuery,
        response: { 200: Type.Ref("Run"), ...problems(401, 403, 404, 408, 422) },
      },
    },
    async (request) => {
      // Shutdown ends the wait (408: the client joins again, on another instance).
      const wait = requestWait(request);
      try {
        return await runService.join(
          request.principal.tenantId,
          request.params.run_id,
          request.query.timeout ?? JOIN_DEFAULT_TIMEOUT_SECONDS,
          wait.signal,
        );
      } finally {
        wait.release();
      }
    },
  );

  app.post(
    "/runs/:run_id/cancel",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Cancel a run (pending and paused at once; running cooperatively)",
        params: RunIdParams,
        querystring: NoQuery,
        response: { 200: Type.Ref("Run"), ...problems(401, 403, 404, 409, 422) },
      },
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
        params: RunIdParams,
        body: ResumeBody,
        querystring: NoQuery,
        response: { 202: Type.Ref("Run"), ...problems(400, 401, 403, 404, 409, 413, 422) },
      },
    },
    async (request, reply) =>
      reply.status(202).send(await runService.resume(request.principal.tenantId, request.params.run_id, request.body)),
  );

  app.post(
    "/runs/:run_id/redrive",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Re-queue a failed or dead_letter run as it was (same id, input, config)",
        params: RunIdParams,
        querystring: NoQuery,
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
        params: RunIdParams,
        headers: IdempotencyHeaders,
        body: SteerBody,
        querystring: NoQuery,
        response: { 202: SteerAccepted, ...problems(400, 401, 403, 404, 409, 413, 422) },
      },
    },
    async (request, reply) =>
      reply
        .status(202)
        .send(
          await services.steeringService.steer(
            request.principal.tenantId,
            request.params.run_id,
            request.body,
            request.headers["idempotency-key"],
          ),
        ),
  );

  app.get(
    "/runs/:run_id/events",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "The run's event log, in sequence order",
        params: RunIdParams,
        querystring: RunEventsQuery,
        response: { 200: Type.Array(Type.Ref("RunEvent")), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) =>
      runService.events(request.principal.tenantId, request.params.run_id, {
        after: request.query.after ?? 0,
        limit: request.query.limit ?? 50,
        offset: request.query.offset ?? 0,
      }),
  );

  app.get(
    "/runs/:run_id/stream",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "Server-Sent Events: the run's events from Last-Event-ID on; closes when the run is terminal or paused",
        params: RunIdParams,
        headers: RunStreamHeaders,
        querystring: NoQuery,
        response: { 200: eventStream("the run's events, from Last-Event-ID on"), ...problems(401, 403, 404, 422) },
      },
    },
    async (request, reply) => {
      await runService.assertOwn(request.principal.tenantId, request.params.run_id);
      const after = Number(request.headers["last-event-id"] ?? 0);
      return streamRunEvents(request, reply, { tenantId: request.principal.tenantId, runId: request.params.run_id, after, services });
    },
  );
};
