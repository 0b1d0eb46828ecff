import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { MetricsText } from "@rudder/api";
import { problems } from "../responses.ts";
import type { AppServices } from "../services.ts";

/**
 * GET /metrics: this process's metrics in Prometheus' text format, for the viewer role or the
 * scrape token (`RUDDER_METRICS_TOKEN`). Public to the auth hook, which knows no scrape token; the
 * handler checks both.
 */
export const metricsRoutes: FastifyPluginAsyncTypebox<{ services: AppServices }> = async (app, { services }) => {
  app.get(
    "/metrics",
    {
      config: { public: true },
      schema: {
        tags: ["system"],
        summary: "Prometheus metrics of this process (viewer role or the scrape token)",
        description: "Text exposition format 0.0.4. docs/observability.md lists every metric.",
        response: {
          200: {
            description: "Prometheus text exposition format 0.0.4",
            content: { "text/plain; version=0.0.4": { schema: MetricsText } },
          },
          ...problems(401, 403),
        },
      },
    },
    async (request, reply) => {
      const apiKey = request.headers["x-api-key"];
      await services.authorizeScrape({ authorization: request.headers.authorization, apiKey: Array.isArray(apiKey) ? apiKey[0] : apiKey });
      const { contentType, body } = await services.metrics.scrape();
      return reply.type(contentType).send(body);
    },
  );
};
