import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Logger } from "pino";
import { randomUUID } from "node:crypto";
import { ApiError, ERROR_CODES } from "../domain/errors.ts";
import type { Metrics } from "./metrics.ts";

/** A process without the HTTP API (`rudder worker`) serves its metrics on a small listener of its own. */
export interface MetricsListener {
  readonly url: string;
  close(): Promise<void>;
}

export interface MetricsListenerOptions {
  readonly host: string;
  /** 0 picks a free port. */
  readonly port: number;
  readonly metrics: Metrics;
  /** Throws an `ApiError` (401/403) when the caller may not read metrics. */
  readonly authorize: (credentials: { authorization: string | undefined; apiKey: string | undefined }) => Promise<void>;
  /** Whether the process can serve: the database answers (throws otherwise). */
  readonly ready: () => Promise<void>;
  readonly log: Logger;
}

/**
 * `GET /metrics` (same protection as the API's), `GET /health` and `GET /ready`, nothing else:
 * answers are problem+json like the API's.
 */
export async function startMetricsListener(options: MetricsListenerOptions): Promise<MetricsListener> {
  const server = createServer((request, response) => {
    void answer(options, request, response).catch((error: unknown) => {
      const apiError = error instanceof ApiError ? error : new ApiError("internal", "the metrics could not be collected");
      if (!(error instanceof ApiError)) options.log.error({ err: error }, "metrics listener failed");
      problem(response, apiError);
    });
  });
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : options.port;
  return {
    url: `http://${options.host.includes(":") ? `[${options.host}]` : options.host}:${port}`,
    close: () => close(server),
  };
}

async function answer(options: MetricsListenerOptions, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const path = (request.url ?? "/").split("?")[0];
  if (path !== "/metrics" && path !== "/health" && path !== "/ready") throw new ApiError("not_found", `no route ${request.method} ${path}`);
  if (request.method !== "GET" && request.method !== "HEAD") {
    response.setHeader("allow", "GET, HEAD");
    throw new ApiError("method_not_allowed", `${path} answers GET, not ${request.method}`);
  }
  if (path === "/health") return json(response, { ok: true });
  if (path === "/ready") {
    await options.ready();
    return json(response, { ok: true });
  }
  const apiKey = request.headers["x-api-key"];
  await options.authorize({ authorization: request.headers.authorization, apiKey: Array.isArray(apiKey) ? apiKey[0] : apiKey });
  const { contentType, body } = await options.metrics.scrape();
  response.writeHead(200, { "content-type": contentType });
  response.end(body);
}

function json(response: ServerResponse, body: unknown): void {
  response.writeHead(200, { "content-type": "application/json; charset=utf-8" });
  response.end(JSON.stringify(body));
}

function problem(response: ServerResponse, error: ApiError): void {
  if (response.headersSent) return void response.destroy();
  const headers: Record<string, string> = { "content-type": "application/problem+json" };
  if (error.extra.retryAfterSeconds !== undefined) headers["retry-after"] = String(error.extra.retryAfterSeconds);
  response.writeHead(error.status, headers);
  response.end(
    JSON.stringify({
      type: "about:blank",
      title: ERROR_CODES[error.code].title,
      status: error.status,
      detail: error.message,
      code: error.code,
      request_id: randomUUID(),
      retryable: error.retryable,
    }),
  );
}

function close(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
  });
}
