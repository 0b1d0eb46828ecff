import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { Assistant, AssistantIdParams, CreateAssistantBody, ListAssistantsQuery, NoQuery, PatchAssistantBody } from "@rudder/api";
import { parseJsonObjectParam } from "../query.ts";
import { problems } from "../responses.ts";
import type { AppServices } from "../services.ts";

/** Assistants: a graph plus default config, context and metadata. Writes need the developer role. */
export const assistantRoutes: FastifyPluginAsyncTypebox<{ services: AppServices }> = async (app, { services }) => {
  const { assistants } = services;
  app.addSchema(Assistant);
  const tags = ["assistants"];

  app.post(
    "/assistants",
    {
      config: { permission: "develop" },
      schema: {
        tags,
        summary: "Create an assistant",
        body: CreateAssistantBody,
        querystring: NoQuery,
        response: { 201: Type.Ref("Assistant"), ...problems(400, 401, 403, 409, 413, 422) },
      },
    },
    async (request, reply) => reply.status(201).send(await assistants.create(request.principal.tenantId, request.body)),
  );

  app.get(
    "/assistants",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "List assistants: the config file's first, then the tenant's, newest first",
        querystring: ListAssistantsQuery,
        response: { 200: Type.Array(Type.Ref("Assistant")), ...problems(401, 403, 422) },
      },
    },
    async (request) =>
      assistants.list(request.principal.tenantId, {
        limit: request.query.limit ?? 50,
        offset: request.query.offset ?? 0,
        graphId: request.query.graph_id,
        metadata: parseJsonObjectParam("metadata", request.query.metadata),
      }),
  );

  app.get(
    "/assistants/:assistant_id",
    {
      config: { permission: "read" },
      schema: {
        tags,
        summary: "Get an assistant",
        params: AssistantIdParams,
        querystring: NoQuery,
        response: { 200: Type.Ref("Assistant"), ...problems(401, 403, 404, 422) },
      },
    },
    async (request) => assistants.get(request.principal.tenantId, request.params.assistant_id),
  );

  app.patch(
    "/assistants/:assistant_id",
    {
      config: { permission: "develop" },
      schema: {
        tags,
        summary: "Update an assistant's fields (those given replace the stored ones)",
        params: AssistantIdParams,
        body: PatchAssistantBody,
        querystring: NoQuery,
        response: { 200: Type.Ref("Assistant"), ...problems(400, 401, 403, 404, 409, 413, 422) },
      },
    },
    async (request) => assistants.update(request.principal.tenantId, request.params.assistant_id, request.body),
  );

  app.delete(
    "/assistants/:assistant_id",
    {
      config: { permission: "develop" },
      schema: {
        tags,
        summary: "Delete an assistant",
        params: AssistantIdParams,
        querystring: NoQuery,
        response: { 204: Type.Null(), ...problems(401, 403, 404, 409, 422) },
      },
    },
    async (request, reply) => {
      await assistants.delete(request.principal.tenantId, request.params.assistant_id);
      return reply.status(204).send(null);
    },
  );
};
