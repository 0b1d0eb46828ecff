import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import {
  LgCron,
  LgCronCountBody,
  LgCronCreateBody,
  LgCronIdParams,
  LgCronSearchBody,
  LgCronUpdateBody,
  LgListNamespacesAnswer,
  LgListNamespacesBody,
  LgStoreDeleteBody,
  LgStoreItemQuery,
  LgStorePutBody,
  LgStoreSearchAnswer,
  LgStoreSearchBody,
  StoreItem,
  ThreadIdParams,
  type StoreSearchHit,
} from "@rudder/api";
import { ApiError } from "../../domain/errors.ts";
import { problems } from "../../http/responses.ts";
import type { AppServices } from "../../http/services.ts";
import { cronRefusal, cronSortColumn, lgCron, lgNamespaceOf, selectCronFields } from "./mapping.ts";

/**
 * The store and crons of the LangGraph Platform API (the SDK's `client.store` and `client.crons`):
 * the tenant's store through `StoreService`, as `/v1/store` uses it (viewers read, operators
 * write), and crons as Rudder's schedules through `ScheduleService` (`/v1/schedules`).
 */
export const langGraphStoreCronRoutes: FastifyPluginAsyncTypebox<{ services: AppServices }> = async (app, { services }) => {
  const { store, schedules, assistants, threads } = services;
  app.addSchema(LgCron);

  // Store.

  const storeTags = ["langgraph"];

  app.put(
    "/store/items",
    {
      config: { permission: "operate" },
      schema: {
        tags: storeTags,
        summary: "Put a store item (replaces the item at namespace and key)",
        body: LgStorePutBody,
        response: { 204: Type.Null(), ...problems(400, 401, 403, 413, 422, 503) },
      },
    },
    async (request, reply) => {
      const { namespace, key, value, index, ttl } = request.body;
      await store.batch(
        request.principal.tenantId,
        [{ kind: "put", namespace, key, value, ...(index != null ? { index } : {}), ...(ttl !== undefined ? { ttl } : {}) }],
        "body",
      );
      return reply.status(204).send(null);
    },
  );

  app.get(
    "/store/items",
    {
      config: { permission: "read" },
      schema: {
        tags: storeTags,
        summary: "Get a store item (200 null when there is none)",
        querystring: LgStoreItemQuery,
        response: { 200: Type.Union([StoreItem, Type.Null()]), ...problems(401, 403, 422) },
      },
    },
    async (request, reply) => {
      const { namespace, key, refresh_ttl } = request.query;
      const segments = lgNamespaceOf(namespace);
      if (segments.some((segment) => segment === "")) throw new ApiError("validation_error", "querystring/namespace: an empty segment");
      const [item] = await store.batch(
        request.principal.tenantId,
        [{ kind: "get", namespace: segments, key, ...(refresh_ttl !== undefined ? { refresh_ttl } : {}) }],
        "querystring",
      );
      // Sent as JSON text: a bare null is a body of "null", as the SDK reads it.
      return reply
        .type("application/json; charset=utf-8")
        .serializer((payload) => JSON.stringify(payload))
        .send((item as StoreItem | null) ?? null);
    },
  );

  app.delete(
    "/store/items",
    {
      config: { permission: "operate" },
      schema: {
        tags: storeTags,
        summary: "Delete a store item (204 whether or not it existed)",
        body: LgStoreDeleteBody,
        response: { 204: Type.Null(), ...problems(400, 401, 403, 422) },
      },
    },
    async (request, reply) => {
      await store.batch(request.principal.tenantId, [{ kind: "delete", namespace: request.body.namespace, key: request.body.key }], "body");
      return reply.status(204).send(null);
    },
  );

  app.post(
    "/store/items/search",
    {
      config: { permission: "read" },
      schema: {
        tags: storeTags,
        summary: "Search store items under a namespace prefix (filter, query, limit, offset)",
        body: LgStoreSearchBody,
        response: { 200: LgStoreSearchAnswer, ...problems(400, 401, 403, 422, 503) },
      },
    },
    async (request) => {
      const body = request.body;
      const [hits] = await store.batch(
        request.principal.tenantId,
        [
          {
            kind: "search",
            namespace: body.namespace_prefix ?? [],
            ...(body.query != null ? { query: body.query } : {}),
            ...(body.filter != null ? { filter: body.filter } : {}),
            ...(body.limit !== undefined ? { limit: body.limit } : {}),
            ...(body.offset !== undefined ? { offset: body.offset } : {}),
            ...(body.refresh_ttl != null ? { refresh_ttl: body.refresh_ttl } : {}),
          },
        ],
        "body",
      );
      return { items: hits as StoreSearchHit[] };
    },
  );

  app.post(
    "/store/namespaces",
    {
      config: { permission: "read" },
      schema: {
        tags: storeTags,
        summary: "List namespaces (prefix, suffix with * wildcards, max_depth, limit, offset)",
        body: LgListNamespacesBody,
        response: { 200: LgListNamespacesAnswer, ...problems(400, 401, 403, 422) },
      },
    },
    async (request) => {
      const body = request.body;
      const [namespaces] = await store.batch(
        request.principal.tenantId,
        [
          {
            kind: "list_namespaces",
            ...(body.prefix != null ? { prefix: body.prefix } : {}),
            ...(body.suffix != null ? { suffix: body.suffix } : {}),
            ...(body.max_depth != null ? { max_depth: body.max_depth } : {}),
            ...(body.limit !== undefined ? { limit: body.limit } : {}),
            ...(body.offset !== undefined ? { offset: body.offset } : {}),
          },
        ],
        "body",
      );
      return { namespaces: namespaces as string[][] };
    },
  );

  // Crons.

  const cronTags = ["langgraph"];

  const create = async (tenantId: string, body: LgCronCreateBody, threadId: string | null) => {
    const refusal = cronRefusal(body, threadId === null);
    if (refusal) throw new ApiError("validation_error", refusal);
    // Unknown ids are 404 here, as for runs on this surface (the /v1 schedule answers 422).
    if (threadId !== null) await threads.get(tenantId, threadId);
    await assistants.get(tenantId, body.assistant_id);
    const schedule = await schedules.create(tenantId, {
      assistant_id: body.assistant_id,
      cron: body.schedule,
      ...(body.timezone != null ? { timezone: body.timezone } : {}),
      ...(body.input != null ? { input: body.input } : {}),
      ...(body.metadata != null ? { metadata: body.metadata } : {}),
      ...(body.enabled != null ? { enabled: body.enabled } : {}),
      thread_id: threadId,
    });
    return lgCron(schedule);
  };

  const createSchema = (summary: string, threadScoped: boolean) => ({
    tags: cronTags,
    summary,
    ...(threadScoped ? { params: ThreadIdParams } : {}),
    body: LgCronCreateBody,
    response: { 200: Type.Ref("LgCron"), ...problems(400, 401, 403, 404, 413, 422) },
  });

  app.post(
    "/runs/crons",
    { config: { permission: "operate" }, schema: createSchema("Create a cron: a schedule of stateless runs", false) },
    async (request) => create(request.principal.tenantId, request.body as LgCronCreateBody, null),
  );

  app.post(
    "/threads/:thread_id/runs/crons",
    { config: { permission: "operate" }, schema: createSchema("Create a cron whose runs go to the thread (enqueued)", true) },
    async (request) => create(request.principal.tenantId, request.body as LgCronCreateBody, (request.params as ThreadIdParams).thread_id),
  );

  app.patch(
    "/runs/crons/:cron_id",
    {
      config: { permission: "operate" },
      schema: {
        tags: cronTags,
        summary: "Update a cron (schedule, timezone, input, metadata, enabled); a new schedule or enabling recomputes next_run_date",
        params: LgCronIdParams,
        body: LgCronUpdateBody,
        response: { 200: Type.Ref("LgCron"), ...problems(400, 401, 403, 404, 413, 422) },
      },
    },
    async (request) => {
      const { tenantId } = request.principal;
      const body = request.body;
      const current = await schedules.get(tenantId, request.params.cron_id);
      const refusal = cronRefusal(body, current.thread_id === null);
      if (refusal) throw new ApiError("validation_error", refusal);
      const schedule = await schedules.update(tenantId, current.schedule_id, {
        ...(body.schedule != null ? { cron: body.schedule } : {}),
        ...(body.timezone != null ? { timezone: body.timezone } : {}),
        ...(body.input != null ? { input: body.input } : {}),
        ...(body.metadata != null ? { metadata: body.metadata } : {}),
        ...(body.enabled != null ? { enabled: body.enabled } : {}),
      });
      return lgCron(schedule);
    },
  );

  app.delete(
    "/runs/crons/:cron_id",
    {
      config: { permission: "operate" },
      schema: {
        tags: cronTags,
        summary: "Delete a cron (no further fires)",
        params: LgCronIdParams,
        response: { 204: Type.Null(), ...problems(401, 403, 404, 422) },
      },
    },
    async (request, reply) => {
      await schedules.delete(request.principal.tenantId, request.params.cron_id);
      return reply.status(204).send(null);
    },
  );

  app.post(
    "/runs/crons/search",
    {
      config: { permission: "read" },
      schema: {
        tags: cronTags,
        summary: "Search crons (assistant_id, thread_id, enabled, metadata; sort_by, sort_order, select)",
        body: LgCronSearchBody,
        response: { 200: Type.Array(Type.Record(Type.String(), Type.Unknown())), ...problems(401, 403, 422) },
      },
    },
    async (request) => {
      const body = request.body;
      const found = await schedules.list(
        request.principal.tenantId,
        { limit: body.limit ?? 10, offset: body.offset ?? 0 },
        {
          assistantId: body.assistant_id ?? undefined,
          threadId: body.thread_id ?? undefined,
          enabled: body.enabled ?? undefined,
          metadata: body.metadata ?? undefined,
        },
        { column: cronSortColumn(body.sort_by ?? "created_at"), order: body.sort_order ?? "desc" },
      );
      const now = new Date();
      return found.map((schedule) => selectCronFields(lgCron(schedule), body.select, now));
    },
  );

  app.post(
    "/runs/crons/count",
    {
      config: { permission: "read" },
      schema: {
        tags: cronTags,
        summary: "Count crons (assistant_id, thread_id, metadata)",
        body: LgCronCountBody,
        response: { 200: Type.Integer(), ...problems(401, 403, 422) },
      },
    },
    async (request) =>
      schedules.count(request.principal.tenantId, {
        assistantId: request.body.assistant_id ?? undefined,
        threadId: request.body.thread_id ?? undefined,
        metadata: request.body.metadata ?? undefined,
      }),
  );
};
