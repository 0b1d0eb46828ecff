import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyRequest } from "fastify";
import { Type } from "typebox";
import {
  AssistantIdParams,
  LgAssistant,
  LgAssistantCountBody,
  LgAssistantCreateBody,
  LgAssistantDeleteQuery,
  LgAssistantGraph,
  LgAssistantLatestBody,
  LgAssistantPatchBody,
  LgAssistantSearchBody,
  LgAssistantVersion,
  LgAssistantVersionsBody,
  LgGraphQuery,
  LgGraphSchemas,
  LgSubgraphParams,
  LgSubgraphQuery,
  type Assistant,
  type JsonObject,
} from "@rudder/api";
import { contains } from "../../domain/containment.ts";
import { ApiError } from "../../domain/errors.ts";
import { sortedBy } from "../../domain/sorting.ts";
import { problems } from "../../http/responses.ts";
import type { AppServices } from "../../http/services.ts";
import { graphDrawing, graphSchemas, subgraphSchemas } from "./graph-info.ts";
import { LG_ASSISTANT_VERSION, lgAssistant, lgAssistantVersion, selectFields, truthy } from "./mapping.ts";

/** As on the Platform, an assistant's name matches a search's `name` as a part, in any case. */
const nameMatches = (assistant: Assistant, name: string) => assistant.name.toLowerCase().includes(name.toLowerCase());

/** Assistants are counted, named and sorted a catalog page of this many at a time (the catalog does neither). */
const CATALOG_PAGE = 1000;

/** An assistant's threads are deleted (`delete_threads`) a page of this many at a time. */
const THREAD_PAGE = 100;

/** Optional fields the SDK sends as null mean "not given". */
function given<T extends object>(fields: T): { [K in keyof T]: Exclude<T[K], null> } {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== null && value !== undefined)) as {
    [K in keyof T]: Exclude<T[K], null>;
  };
}

/**
 * Assistants on the LangGraph Platform API (the SDK's `client.assistants`), over the same catalog
 * as `/v1/assistants`: developers create, update and delete the tenant's own; the graphs' default
 * assistants and the config file's are read-only (409). Rudder keeps one version of an assistant
 * (`version` 1, which an update replaces), so `getVersions` lists that one.
 */
export const langGraphAssistantRoutes: FastifyPluginAsyncTypebox<{ services: AppServices }> = async (app, { services }) => {
  const { assistants } = services;
  const tags = ["langgraph"];

  app.post(
    "/assistants",
    {
      config: { permission: "develop" },
      schema: {
        tags,
        summary: "Create an assistant (if_exists: raise, the default, or do_nothing)",
        body: LgAssistantCreateBody,
        response: { 200: Type.Ref("LgAssistant"), ...problems(400, 401, 403, 409, 422) },
      },
    },
    async (request) => {
      const { if_exists: ifExists, ...fields } = given(request.body);
      const { tenantId } = request.principal;
      try {
        return lgAssistant(await assistants.create(tenantId, { ...fields, name: fields.name ?? "Untitled" }));
      } catch (error) {
        if (!(ifExists === "do_nothing" && fields.assistant_id !== undefined && error instanceof ApiError && error.code === "conflict"))
          throw error;
        return lgAssistant(await assistants.get(tenantId, fields.assistant_id));
      }
    },
  );

  app.post(
    "/assistants/search",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "Search assistants (with select: only those fields)",
        body: LgAssistantSearchBody,
        response: { 200: Type.Array(Type.Partial(LgAssistant)), ...problems(401, 403, 422) },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const limit = body.limit ?? 10;
      const offset = body.offset ?? 0;
      const filter = { graphId: body.graph_id ?? undefined, metadata: body.metadata ?? undefined };
      const tenantId = request.principal.tenantId;
      // One more than the page says whether another follows: X-Pagination-Next, which the SDK's
      // `search({includePagination: true})` returns as `next`.
      const page = (found: Assistant[]) => {
        if (found.length > limit) reply.header("x-pagination-next", String(offset + limit));
        return found.slice(0, limit).map((assistant) => selectFields(lgAssistant(assistant), body.select));
      };
      if (body.name == null && body.sort_by == null) return page(await assistants.list(tenantId, { ...filter, limit: limit + 1, offset }));
      // The catalog neither filters by name nor sorts: read every match, then sort and paginate.
      let matched = await allAssistants(tenantId, filter, body.name ?? undefined);
      if (body.sort_by != null) matched = sortedBy(matched, { by: body.sort_by, order: body.sort_order ?? "desc" }, "assistant_id");
      return page(matched.slice(offset, offset + limit + 1));
    },
  );

  app.post(
    "/assistants/count",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "Count assistants (graph_id, name, metadata)",
        body: LgAssistantCountBody,
        response: { 200: Type.Integer(), ...problems(401, 403, 422) },
      },
    },
    async (request) => {
      const { graph_id, name, metadata } = request.body;
      const filter = { graphId: graph_id ?? undefined, metadata: metadata ?? undefined };
      return (await allAssistants(request.principal.tenantId, filter, name ?? undefined)).length;
    },
  );

  /** Every assistant of the tenant that matches, read a catalog page at a time. */
  const allAssistants = async (
    tenantId: string,
    filter: { graphId: string | undefined; metadata: JsonObject | undefined },
    name: string | undefined,
  ): Promise<Assistant[]> => {
    const matched: Assistant[] = [];
    for (let offset = 0; ; offset += CATALOG_PAGE) {
      const page = await assistants.list(tenantId, { ...filter, limit: CATALOG_PAGE, offset });
      matched.push(...(name === undefined ? page : page.filter((assistant) => nameMatches(assistant, name))));
      if (page.length < CATALOG_PAGE) return matched;
    }
  };

  /** The threads that record the assistant as their latest run's (`metadata.assistant_id`), a page at a time; busy ones stay. */
  const deleteThreadsOf = async (tenantId: string, assistantId: string) => {
    for (let kept = 0; ;) {
      const page = await services.threads.list(tenantId, { metadata: { assistant_id: assistantId }, limit: THREAD_PAGE, offset: kept });
      if (page.length === 0) return;
      kept +=
        page.length -
        (await services.threads.prune(
          tenantId,
          page.map((thread) => thread.thread_id),
          "delete",
        ));
    }
  };

  const assistantGraph = async (request: FastifyRequest, assistantId: string) => {
    const assistant = await assistants.get(request.principal.tenantId, assistantId);
    const graph = await services.graphs.get(assistant.graph_id);
    if (!graph) throw new ApiError("conflict", `the graph ${assistant.graph_id} is not loaded`);
    return { assistant, graph };
  };

  app.get(
    "/assistants/:assistant_id",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "Get an assistant (a graph id works too)",
        params: AssistantIdParams,
        response: { 200: Type.Ref("LgAssistant"), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) => lgAssistant(await assistants.get(request.principal.tenantId, request.params.assistant_id)),
  );

  app.patch(
    "/assistants/:assistant_id",
    {
      config: { permission: "develop" },
      schema: {
        tags,
        summary: "Update an assistant: the fields given replace the stored ones; metadata is merged in",
        params: AssistantIdParams,
        body: LgAssistantPatchBody,
        response: { 200: Type.Ref("LgAssistant"), ...problems(400, 401, 403, 404, 409, 422) },
      },
    },
    async (request) => {
      const { tenantId } = request.principal;
      const { assistant_id: assistantId } = request.params;
      const { metadata, ...fields } = given(request.body);
      // As on the Platform, metadata keys are added to the stored ones (read here: the catalog replaces).
      const merged: JsonObject | undefined =
        metadata === undefined || assistants.isDeclared(assistantId)
          ? metadata
          : { ...(await assistants.get(tenantId, assistantId)).metadata, ...metadata };
      return lgAssistant(await assistants.update(tenantId, assistantId, { ...fields, ...(merged ? { metadata: merged } : {}) }));
    },
  );

  app.delete(
    "/assistants/:assistant_id",
    {
      config: { permission: "develop" },
      schema: {
        tags,
        summary: "Delete an assistant; with delete_threads, the threads whose latest run was its (busy ones stay)",
        params: AssistantIdParams,
        querystring: LgAssistantDeleteQuery,
        response: { 204: Type.Null(), ...problems(401, 403, 404, 409, 422) },
      },
    },
    async (request, reply) => {
      const { tenantId } = request.principal;
      const { assistant_id: assistantId } = request.params;
      await assistants.delete(tenantId, assistantId);
      if (truthy(request.query.delete_threads)) await deleteThreadsOf(tenantId, assistantId);
      return reply.status(204).send(null);
    },
  );

  app.post(
    "/assistants/:assistant_id/versions",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "The assistant's versions (Rudder keeps the current one only)",
        params: AssistantIdParams,
        body: LgAssistantVersionsBody,
        response: { 200: Type.Array(LgAssistantVersion), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) => {
      const assistant = await assistants.get(request.principal.tenantId, request.params.assistant_id);
      const { metadata, offset = 0 } = request.body;
      const versions = metadata == null || contains(assistant.metadata, metadata) ? [lgAssistantVersion(assistant)] : [];
      return versions.slice(offset, offset + (request.body.limit ?? 10));
    },
  );

  app.post(
    "/assistants/:assistant_id/latest",
    {
      config: { permission: "develop" },
      schema: {
        tags,
        summary: "Make a version the assistant's current one (the current version is the only one kept)",
        params: AssistantIdParams,
        body: LgAssistantLatestBody,
        response: { 200: Type.Ref("LgAssistant"), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) => {
      const assistant = await assistants.get(request.principal.tenantId, request.params.assistant_id);
      if (request.body.version !== LG_ASSISTANT_VERSION) {
        throw new ApiError("not_found", `assistant ${assistant.assistant_id} has no version ${request.body.version}: Rudder keeps one`);
      }
      return lgAssistant(assistant);
    },
  );

  app.get(
    "/assistants/:assistant_id/graph",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "The assistant's graph: nodes and edges",
        params: AssistantIdParams,
        querystring: LgGraphQuery,
        response: { 200: LgAssistantGraph, ...problems(401, 403, 404, 422) },
      },
    },
    async (request) => graphDrawing((await assistantGraph(request, request.params.assistant_id)).graph, request.query.xray),
  );

  for (const path of ["/assistants/:assistant_id/subgraphs", "/assistants/:assistant_id/subgraphs/:namespace"]) {
    app.get(
      path,
      {
        config: { permission: "read" },
        schema: {
          tags,
          summary: "The assistant's subgraphs and their schemas, by namespace (under a namespace when given; recurse: theirs too)",
          params: LgSubgraphParams,
          querystring: LgSubgraphQuery,
          response: { 200: Type.Record(Type.String(), LgGraphSchemas), ...problems(401, 403, 404, 422) },
        },
      },
      async (request) => {
        const { assistant, graph } = await assistantGraph(request, request.params.assistant_id);
        const { recurse } = request.query;
        return subgraphSchemas(assistant.graph_id, graph, request.params.namespace, truthy(recurse));
      },
    );
  }

  app.get(
    "/assistants/:assistant_id/schemas",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "The assistant's graph schemas",
        params: AssistantIdParams,
        response: { 200: LgGraphSchemas, ...problems(401, 403, 404, 422) },
      },
    },
    async (request) => {
      const { assistant, graph } = await assistantGraph(request, request.params.assistant_id);
      return graphSchemas(assistant.graph_id, graph, await services.graphSchemas.schemasOf(assistant.graph_id));
    },
  );
};
