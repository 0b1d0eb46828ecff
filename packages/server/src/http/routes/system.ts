import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import type { AppServices } from "../app.ts";
import { problems } from "../schemas.ts";

/** Liveness, readiness and the OpenAPI document: served without a token. */
export const systemRoutes: FastifyPluginAsyncTypebox<{ services: AppServices }> = async (app, { services }) => {
  app.get(
    "/health",
    {
      config: { public: true },
      schema: { tags: ["system"], summary: "The process is up", security: [], response: { 200: Type.Object({ ok: Type.Boolean() }) } },
    },
    async () => ({ ok: true }),
  );

  app.get(
    "/ready",
    {
      config: { public: true },
      schema: {
        tags: ["system"],
        summary: "The database answers and the graphs are loaded",
        security: [],
        response: {
          200: Type.Object({ ok: Type.Boolean(), database: Type.String(), graphs: Type.Array(Type.String()) }),
          ...problems(503),
        },
      },
    },
    async () => {
      await services.db.query("select 1");
      return { ok: true, database: services.db.driver, graphs: services.graphs.ids() };
    },
  );

  app.get("/openapi.json", { config: { public: true }, schema: { hide: true } }, async () => app.swagger());
};
