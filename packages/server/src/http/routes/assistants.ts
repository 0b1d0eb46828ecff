import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import type { AppServices } from "../app.ts";
import { parseJsonObjectParam } from "../query.ts";
import { JsonObject, Pagination, problems, Timestamp } from "../schemas.ts";

const AssistantIdParam = Type.Object({ assistant_id: Type.String({ minLength: 1, maxLength: 128 }) }, { additionalProperties: false });

const Assistant = Type.Object(
  {
    assistant_id: Type.String(),
    graph_id: Type.String(),
    name: Type.String(),
    description: Type.Union([Type.String(), Type.Null()]),
    config: JsonObject,
    context: JsonObject,
    metadata: JsonObject,
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: "Assistant" },
);

const editable = {
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
  description: Type.Optional(Type.Union([Type.String({ maxLength: 4096 }), Type.Null()])),
  config: Type.Optional(JsonObject),
  context: Type.Optional(JsonObject),
  metadata: Type.Optional(
    Type.Object(
      {
        mcp_expose: Type.Optional(Type.Boolean({ description: "expose this assistant as an MCP tool" })),
        mcp_tool_name: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
        name: Type.Optional(Type.String()),
      },
      { additionalProperties: true },
    ),
  ),
};

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
        body: Type.Object(
          {
            assistant_id: Type.Optional(Type.String({ pattern: "^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$" })),
            graph_id: Type.String({ minLength: 1 }),
            ...editable,
          },
          { additionalProperties: false },
        ),
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
        querystring: Type.Object(
          {
            ...Pagination,
            graph_id: Type.Optional(Type.String({ minLength: 1 })),
            metadata: Type.Optional(Type.String({ description: "JSON object; assistants whose metadata contains it" })),
          },
          { additionalProperties: false },
        ),
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
      schema: { tags, summary: "Get an assistant", params: AssistantIdParam, response: { 200: Type.Ref("Assistant"), ...problems(401, 403, 404, 422) } },
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
        params: AssistantIdParam,
        body: Type.Object({ graph_id: Type.Optional(Type.String({ minLength: 1 })), ...editable }, { additionalProperties: false }),
        response: { 200: Type.Ref("Assistant"), ...problems(400, 401, 403, 404, 409, 413, 422) },
      },
    },
    async (request) => assistants.update(request.principal.tenantId, request.params.assistant_id, request.body),
  );

  app.delete(
    "/assistants/:assistant_id",
    {
      config: { permission: "develop" },
      schema: { tags, summary: "Delete an assistant", params: AssistantIdParam, response: { 204: Type.Null(), ...problems(401, 403, 404, 409, 422) } },
    },
    async (request, reply) => {
      await assistants.delete(request.principal.tenantId, request.params.assistant_id);
      return reply.status(204).send(null);
    },
  );
};
