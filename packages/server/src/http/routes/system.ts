import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Health, Readiness } from "@rudder/api";
import { problems } from "../responses.ts";
import type { AppServices } from "../services.ts";

/** Liveness, readiness and the OpenAPI document: served without a token. */
export const systemRoutes: FastifyPluginAsyncTypebox<{ services: AppServices }> = async (app, { services }) => {
  app.get(
    "/health",
    {
      config: { public: true },
      schema: { tags: ["system"], summary: "The process is up", security: [], response: { 200: Health } },
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
        response: { 200: Readiness, ...problems(503) },
      },
    },
    async () => ({ ok: true, ...(await services.readiness()) }),
  );

  app.get("/openapi.json", { config: { public: true }, schema: { hide: true } }, async () => app.swagger());
};
