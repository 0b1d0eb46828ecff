import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { NoQuery, StoreBatchAnswer, StoreBatchBody, StoreSearchHit, StoreSearchQuery } from "@rudder/api";
import { ApiError } from "../../domain/errors.ts";
import { grants } from "../../domain/roles.ts";
import { parseNamespaceParam } from "../../domain/store.ts";
import { parseJsonObjectParam } from "../query.ts";
import { problems } from "../responses.ts";
import type { AppServices } from "../services.ts";

/**
 * The long-term store, always the caller's tenant's: a batch of operations in one transaction,
 * and search as a GET. `viewer` may get, search and list; a batch with a put or delete needs
 * `operator` (checked before anything runs).
 */
export const storeRoutes: FastifyPluginAsyncTypebox<{ services: AppServices }> = async (app, { services }) => {
  const { store } = services;
  const tags = ["store"];

  app.post(
    "/store/batch",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "Run store operations in order, in one transaction (all or nothing)",
        description:
          "Each operation's `kind` picks its shape: put, get, delete, search, list_namespaces. A later operation sees an earlier one's writes. " +
          "One result per operation, in order. A batch with put or delete needs the operator role.",
        body: StoreBatchBody,
        querystring: NoQuery,
        response: { 200: StoreBatchAnswer, ...problems(400, 401, 403, 413, 422, 503) },
      },
    },
    async (request) => {
      const { operations } = request.body;
      const writes = operations.findIndex((operation) => operation.kind === "put" || operation.kind === "delete");
      if (writes >= 0 && !grants(request.principal.roles, "operate")) {
        throw new ApiError(
          "forbidden",
          `operation ${writes} (${operations[writes]!.kind}) writes to the store: it needs a role that grants "operate"`,
        );
      }
      return { results: await store.batch(request.principal.tenantId, operations) };
    },
  );

  app.get(
    "/store/search",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "Search the store under a namespace prefix",
        description:
          "`namespace` is the prefix, segments joined by `/` (absent: the whole store). Without `query`: newest first. " +
          "With `query`: full-text ranking, or semantic ranking when an embedder is configured. `filter` is a JSON object.",
        querystring: StoreSearchQuery,
        response: { 200: Type.Array(StoreSearchHit), ...problems(401, 403, 422, 503) },
      },
    },
    async (request) => {
      const { query } = request;
      const filter = parseJsonObjectParam("filter", query.filter);
      return store.search(request.principal.tenantId, {
        namespace: parseNamespaceParam(query.namespace),
        ...(query.query !== undefined ? { query: query.query } : {}),
        ...(filter !== undefined ? { filter } : {}),
        ...(query.limit !== undefined ? { limit: query.limit } : {}),
        ...(query.offset !== undefined ? { offset: query.offset } : {}),
        ...(query.refresh_ttl !== undefined ? { refresh_ttl: query.refresh_ttl } : {}),
      });
    },
  );
};
