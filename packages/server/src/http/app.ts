import { randomUUID } from "node:crypto";
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifySchemaCompiler,
  type FastifyServerOptions,
  type RawReplyDefaultExpression,
  type RawRequestDefaultExpression,
  type RawServerDefault,
} from "fastify";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import fastifySwagger from "@fastify/swagger";
import fastifySwaggerUi from "@fastify/swagger-ui";
import { Ajv, type AnySchema, type Options as AjvOptions } from "ajv";
import addFormats from "ajv-formats";
import { Problem } from "@rudder/api";
import { ApiError } from "../domain/errors.ts";
import { a2aRoutes } from "../gateways/a2a/routes.ts";
import { authPlugin } from "./auth.ts";
import { sendProblem, toApiError } from "./problem.ts";
import { assistantRoutes } from "./routes/assistants.ts";
import { systemRoutes } from "./routes/system.ts";
import { runRoutes } from "./routes/runs.ts";
import { threadRoutes } from "./routes/threads.ts";
import type { AppServices } from "./services.ts";
import { openStreams } from "./sse.ts";

export interface AppOptions {
  readonly services: AppServices;
  readonly bodyLimitBytes: number;
  readonly logger: FastifyServerOptions["logger"];
  readonly version: string;
}

export type App = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

type ValidatorFactory = NonNullable<NonNullable<NonNullable<FastifyServerOptions["schemaController"]>["compilersFactory"]>["buildValidator"]>;

const REQUEST_ID = /^[\w.:-]{1,128}$/;

export async function buildApp(options: AppOptions): Promise<App> {
  const app = Fastify({
    logger: options.logger,
    bodyLimit: options.bodyLimitBytes,
    genReqId: (request) => {
      const incoming = request.headers["x-request-id"];
      return typeof incoming === "string" && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    },
    requestIdHeader: false,
    // @fastify/ajv-compiler's types describe the compiler as taking a bare schema; at run time
    // Fastify passes the route part ({ schema, httpPart, ... }), which is what we branch on.
    schemaController: { compilersFactory: { buildValidator: buildStrictValidator as unknown as ValidatorFactory } },
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.addSchema(Problem);
  // The API speaks JSON only: any other body is 415, not a string that then fails the schema.
  app.removeContentTypeParser("text/plain");
  app.addHook("onRequest", async (request, reply) => {
    reply.header("x-request-id", request.id);
  });
  app.setErrorHandler((error, request, reply) => {
    const { apiError, unexpected } = toApiError(error as Error);
    if (unexpected) request.log.error({ err: error }, "unhandled error");
    return sendProblem(reply, request, apiError);
  });
  app.setNotFoundHandler((request, reply) =>
    sendProblem(reply, request, new ApiError("not_found", `no route ${request.method} ${request.url.split("?")[0]}`)),
  );

  await app.register(authPlugin, { authenticate: options.services.authenticate });
  await app.register(fastifySwagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "Rudder API",
        version: options.version,
        description: "Durable execution server for LangGraph.js agents. Errors are application/problem+json.",
      },
      components: {
        securitySchemes: { bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT or API key" } },
      },
      security: [{ bearer: [] }],
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, index) => String(json.$id ?? `def-${index}`) },
  });
  await app.register(fastifySwaggerUi, { routePrefix: "/docs", uiConfig: { docExpansion: "list" } });

  await app.register(systemRoutes, { services: options.services });
  await app.register(threadRoutes, { prefix: "/v1", services: options.services });
  await app.register(assistantRoutes, { prefix: "/v1", services: options.services });
  await app.register(runRoutes, { prefix: "/v1", services: options.services });
  await app.register(a2aRoutes, { services: options.services });
  // Open SSE streams would hold close() forever: end them first (clients reconnect elsewhere).
  app.addHook("preClose", async () => {
    for (const stream of openStreams) stream.abort();
  });
  return app;
}

/**
 * Bodies are validated exactly as sent: no type coercion, no silent removal of unknown fields
 * (schemas say `additionalProperties: false`, so an unknown field is a 422). Query strings and
 * path parameters arrive as text, so they are coerced to the schema's types.
 */
function buildStrictValidator(externalSchemas: unknown): FastifySchemaCompiler<AnySchema> {
  const base: AjvOptions = { allErrors: false, useDefaults: true, removeAdditional: false, strict: false };
  const bodyAjv = addFormats.default(new Ajv({ ...base, coerceTypes: false }));
  const textAjv = addFormats.default(new Ajv({ ...base, coerceTypes: "array" }));
  for (const schema of Object.values(externalSchemas as Record<string, AnySchema>)) {
    bodyAjv.addSchema(schema);
    textAjv.addSchema(schema);
  }
  return ({ schema, httpPart }) => (httpPart === "body" ? bodyAjv.compile(schema) : textAjv.compile(schema));
}
