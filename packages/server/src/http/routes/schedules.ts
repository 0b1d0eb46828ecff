import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { CreateScheduleBody, ListSchedulesQuery, NoQuery, PatchScheduleBody, Schedule, ScheduleIdParams } from "@rudder/api";
import { problems } from "../responses.ts";
import type { AppServices } from "../services.ts";

/** Schedules: cron definitions that create runs (fired by the executor in `rudder dev` and `rudder worker`). */
export const scheduleRoutes: FastifyPluginAsyncTypebox<{ services: AppServices }> = async (app, { services }) => {
  const { schedules } = services;
  app.addSchema(Schedule);
  const tags = ["schedules"];

  app.post(
    "/schedules",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Create a schedule (422 for a bad cron or time zone, an unknown assistant or thread)",
        body: CreateScheduleBody,
        querystring: NoQuery,
        response: { 201: Type.Ref("Schedule"), ...problems(400, 401, 403, 413, 422) },
      },
    },
    async (request, reply) => reply.status(201).send(await schedules.create(request.principal.tenantId, request.body)),
  );

  app.get(
    "/schedules",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "List schedules, newest first",
        querystring: ListSchedulesQuery,
        response: { 200: Type.Array(Type.Ref("Schedule")), ...problems(401, 403, 422) },
      },
    },
    async (request) => schedules.list(request.principal.tenantId, { limit: request.query.limit ?? 50, offset: request.query.offset ?? 0 }),
  );

  app.get(
    "/schedules/:schedule_id",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "Get a schedule",
        params: ScheduleIdParams,
        querystring: NoQuery,
        response: { 200: Type.Ref("Schedule"), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) => schedules.get(request.principal.tenantId, request.params.schedule_id),
  );

  app.patch(
    "/schedules/:schedule_id",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Update any of cron, timezone, input, enabled, metadata (a new cron, time zone or enabling recomputes next_run_at)",
        params: ScheduleIdParams,
        body: PatchScheduleBody,
        querystring: NoQuery,
        response: { 200: Type.Ref("Schedule"), ...problems(400, 401, 403, 404, 413, 422) },
      },
    },
    async (request) => schedules.update(request.principal.tenantId, request.params.schedule_id, request.body),
  );

  app.delete(
    "/schedules/:schedule_id",
    {
      config: { permission: "operate" },
      schema: {
        tags,
        summary: "Delete a schedule (no further fires)",
        params: ScheduleIdParams,
        querystring: NoQuery,
        response: { 204: Type.Null(), ...problems(401, 403, 404, 422) },
      },
    },
    async (request, reply) => {
      await schedules.delete(request.principal.tenantId, request.params.schedule_id);
      return reply.status(204).send(null);
    },
  );
};
