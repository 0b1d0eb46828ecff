import { randomUUID } from "node:crypto";
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyServerOptions,
  type RawReplyDefaultExpression,
  type RawRequestDefaultExpression,
  type RawServerDefault,
} from "fastify";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import fastifySwagger from "@fastify/swagger";
import fastifySwaggerUi from "@fastify/swagger-ui";
import { Problem } from "@rudder/api";
import { ApiError } from "../domain/errors.ts";
import { a2aRoutes } from "../gateways/a2a/routes.ts";
import { langGraphRoutes } from "../gateways/langgraph/routes.ts";
import { corsHook } from "./cors.ts";
import { mcpRoutes } from "../gateways/mcp/routes.ts";
import { authPlugin } from "./auth.ts";
import { RequestLogController } from "./logging.ts";
import { sendProblem, toApiError } from "./problem.ts";
import { assistantRoutes } from "./routes/assistants.ts";
import { metricsRoutes } from "./routes/metrics.ts";
import { systemRoutes } from "./routes/system.ts";
import { runRoutes } from "./routes/runs.ts";
import { scheduleRoutes } from "./routes/schedules.ts";
import { storeRoutes } from "./routes/store.ts";
import { threadRoutes } from "./routes/threads.ts";
import type { AppServices } from "./services.ts";
import { beginShutdown, isShuttingDown } from "./shutdown.ts";
import { clientErrorHandler, connectHandler, frameworkErrorHandler, RouteMethods } from "./protocol-errors.ts";
import { queryEncodingProblem } from "./query.ts";
import { addProtocolProblems } from "./responses.ts";
import { buildCachedSerializer, buildStrictValidator, faultError, storableJsonParser, utf8JsonParser } from "./validation.ts";

export interface AppOptions {
  readonly services: AppServices;
  readonly bodyLimitBytes: number;
  /**
   * How long a request may take to arrive, headers and body (a body shorter than its
   * Content-Length would otherwise hold its connection for ever): then 408. The response is not
   * bounded by it (streams and joins last as long as they need).
   */
  readonly requestTimeoutMs: number;
  /** The process's pino logger; request logs carry `request_id`. */
  readonly logger: FastifyBaseLogger;
  readonly version: string;
}

export type App = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

type ValidatorFactory = NonNullable<
  NonNullable<NonNullable<FastifyServerOptions["schemaController"]>["compilersFactory"]>["buildValidator"]
>;

const REQUEST_ID = /^[\w.:-]{1,128}$/;

/**
 * Path parameters may be this long before the router answers 414. Well above every id the API
 * can create (assistant ids: 128 characters), so an id that can be created can be used.
 */
const MAX_PARAM_LENGTH = 2048;

/** Node checks for requests that timed out this often (its default, 30 s, would double a 30 s timeout). */
const checkEveryMs = (requestTimeoutMs: number): number => Math.min(Math.max(Math.floor(requestTimeoutMs / 4), 50), 5_000);

export async function buildApp(options: AppOptions): Promise<App> {
  const app = Fastify({
    loggerInstance: options.logger,
    logController: new RequestLogController(),
    bodyLimit: options.bodyLimitBytes,
    // Node answers a request still arriving after this with 408 (clientErrorHandler shapes it);
    // its headers get the same bound, and it is checked often enough to be near it.
    requestTimeout: options.requestTimeoutMs,
    http: {
      requestTimeout: options.requestTimeoutMs,
      headersTimeout: options.requestTimeoutMs,
      connectionsCheckingInterval: checkEveryMs(options.requestTimeoutMs),
    },
    genReqId: (request) => {
      const incoming = request.headers["x-request-id"];
      return typeof incoming === "string" && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    },
    requestIdHeader: false,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    frameworkErrors: frameworkErrorHandler,
    clientErrorHandler,
    // While closing, our own hook answers new requests with a problem (Fastify's 503 is plain JSON).
    return503OnClosing: false,
    // @fastify/ajv-compiler's types describe the compiler as taking a bare schema; at run time
    // Fastify passes the route part ({ schema, httpPart, ... }), which is what we branch on.
    // Both compile each distinct schema once per process (see validation.ts).
    schemaController: {
      compilersFactory: { buildValidator: buildStrictValidator as unknown as ValidatorFactory, buildSerializer: buildCachedSerializer },
    },
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.addSchema(Problem);
  // The API speaks JSON only: any other body is 415, not a string that then fails the schema.
  app.removeContentTypeParser("text/plain");
  const parseJson = utf8JsonParser(storableJsonParser(app.getDefaultJsonParser("error", "error")));
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "buffer" }, parseJson);
  // Bodies are read as sent, as UTF-8: a compressed one, or one in another charset, is refused,
  // not parsed as garbled JSON.
  app.addHook("preParsing", async (request, _reply, payload) => {
    if (!hasBody(request.headers)) return payload;
    const encoding = request.headers["content-encoding"]?.trim().toLowerCase();
    if (encoding && encoding !== "identity") {
      throw new ApiError("unsupported_media_type", `Content-Encoding "${encoding}" is not accepted: send the body uncompressed`);
    }
    const charset = CHARSET.exec(request.headers["content-type"] ?? "")?.[1]?.toLowerCase();
    if (charset !== undefined && charset !== "utf-8" && charset !== "utf8") {
      throw new ApiError("unsupported_media_type", `charset "${charset}" is not accepted: send the body as UTF-8`);
    }
    return payload;
  });
  // A body over the limit is refused before it is read, and Fastify then closes the connection:
  // a client still sending meets a reset and never reads its 413. Kept open instead, Node reads
  // the rest of the body and drops it (within the request timeout), and the client gets the answer.
  app.addHook("onSend", async (request, reply, payload) => {
    if (reply.statusCode === 413 && !request.raw.complete) reply.removeHeader("connection");
    return payload;
  });
  /** Which methods each route path answers (405 answers, the CONNECT handler, metric labels). */
  const routeMethods = new RouteMethods();
  const { metrics } = options.services;
  // Every request is counted when its connection's response ends, streams and refusals included,
  // by route pattern (never the raw URL: ids would make a series per run).
  app.addHook("onRequest", async (request, reply) => {
    const started = performance.now();
    reply.raw.once("close", () => {
      const labels = {
        method: request.method,
        // A path a route answers with other methods (a 405) is counted under that route.
        route: request.is404
          ? (routeMethods.routeOf(request.url.split("?")[0] ?? "/") ?? "unmatched")
          : (request.routeOptions.url ?? "unmatched"),
        status: String(reply.raw.statusCode),
      };
      metrics.httpRequests.inc(labels);
      metrics.httpDuration.observe(labels, (performance.now() - started) / 1000);
    });
  });
  app.addHook("onRequest", async (request, reply) => {
    reply.header("x-request-id", request.id);
    if (isShuttingDown(app.server)) {
      // A request on a kept-alive connection after shutdown began: another instance can take it.
      reply.header("connection", "close");
      throw new ApiError("unavailable", "this server is shutting down; retry (another instance will answer)", { retryAfterSeconds: 1 });
    }
  });
  // Browsers (agent-chat-ui, useStream) call from other origins; preflights are answered before auth.
  app.addHook("onRequest", corsHook);
  app.addHook("onRequest", async (request) => {
    const problem = queryEncodingProblem(request.raw.url ?? "");
    if (problem) throw new ApiError("invalid_request", problem);
  });
  // A /v1 route that takes no body refuses one with content, as it refuses an unknown query
  // parameter (docs/api.md): `{}` and no body at all are the same request.
  // Likewise an Idempotency-Key where a write does not honour one: ignored, a retried create would
  // make a second schedule that fires beside the first.
  app.addHook("preValidation", async (request) => {
    if (!request.url.startsWith("/v1/")) return;
    const schema = request.routeOptions.schema;
    if (request.body !== undefined && schema?.body === undefined && !isEmptyObject(request.body))
      throw faultError("body", { path: "", problem: "this route takes no body: send none, or {}" });
    if (request.headers["idempotency-key"] !== undefined && request.method !== "GET" && !takesIdempotencyKey(schema?.headers))
      throw faultError("headers", {
        path: "",
        problem: "this route takes no Idempotency-Key (runs and steering do): a retry of it is not made safe by one",
      });
  });
  app.addHook("onRoute", (route) => routeMethods.add(route));
  // Every route's schema lists the problems any request of its shape may get (415, 414, 503 …).
  app.addHook("onRoute", addProtocolProblems);
  app.server.on("connect", connectHandler(routeMethods));
  app.setErrorHandler((error, request, reply) => {
    const { apiError, unexpected } = toApiError(error as Error);
    if (unexpected) request.log.error({ err: error }, "unhandled error");
    else if (apiError.cause !== undefined) request.log.warn({ err: apiError.cause }, `answered ${apiError.status} ${apiError.code}`);
    return sendProblem(reply, request, apiError);
  });
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split("?")[0] ?? "/";
    const allowed = routeMethods.allowed(path);
    if (allowed.length === 0) return sendProblem(reply, request, new ApiError("not_found", `no route ${request.method} ${path}`));
    reply.header("allow", allowed.join(", "));
    return sendProblem(reply, request, new ApiError("method_not_allowed", `${path} answers ${allowed.join(", ")}, not ${request.method}`));
  });

  await app.register(authPlugin, { authenticate: options.services.authenticate });
  await app.register(fastifySwagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "Rudder API",
        version: options.version,
        description:
          "Durable execution server for LangGraph.js agents. Errors are application/problem+json; branch on `code`, and treat a code " +
          "you do not know as an unknown error. Answers that belong to no operation listed here: 404 for a path no route has, " +
          "405 (with Allow) for a method a path does not answer, and 408, 431 or 400 for a request refused before it was routed.",
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
  await app.register(metricsRoutes, { services: options.services });
  await app.register(threadRoutes, { prefix: "/v1", services: options.services });
  await app.register(assistantRoutes, { prefix: "/v1", services: options.services });
  await app.register(runRoutes, { prefix: "/v1", services: options.services });
  await app.register(scheduleRoutes, { prefix: "/v1", services: options.services });
  await app.register(storeRoutes, { prefix: "/v1", services: options.services });
  await app.register(a2aRoutes, { services: options.services });
  await app.register(langGraphRoutes, { services: options.services, version: options.version });
  await app.register(mcpRoutes, { services: options.services, version: options.version });
  // Open SSE streams and joins would hold close(): end them first (clients reconnect elsewhere);
  // from now on, requests on kept-alive connections get a 503 problem.
  app.addHook("preClose", async () => {
    beginShutdown(app.server);
    // Node closes connections idle when the close begins; those that go idle later (a stream's, a
    // join's, a finished request's) would otherwise hold it for the keep-alive timeout (72 s).
    const sweep = setInterval(() => app.server.closeIdleConnections(), 100).unref();
    app.server.once("close", () => clearInterval(sweep));
  });
  return app;
}

/** The charset parameter of a Content-Type, quoted or not. */
const CHARSET = /;\s*charset\s*=\s*"?([^";\s]+)"?/i;

/** Whether a request carries a body (a length above 0, or a chunked one). */
function hasBody(headers: { "content-length"?: string; "transfer-encoding"?: string }): boolean {
  return headers["transfer-encoding"] !== undefined || (headers["content-length"] !== undefined && headers["content-length"] !== "0");
}

const isEmptyObject = (value: unknown): boolean =>
  typeof value === "object" && value !== null && !Array.isArray(value) && Object.keys(value).length === 0;

/** Whether a route's header schema declares `idempotency-key` (IdempotencyHeaders). */
const takesIdempotencyKey = (headers: unknown): boolean =>
  typeof headers === "object" &&
  headers !== null &&
  Object.hasOwn((headers as { properties?: object }).properties ?? {}, "idempotency-key");
