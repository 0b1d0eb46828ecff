import { LogController, type FastifyReply, type FastifyRequest } from "fastify";

/**
 * Fastify's request log lines, Rudder's way: `request_id` on every line a request logs; one
 * `request completed` line at info per request, with what an operator filters on (method, path
 * without the query string, route pattern, status, time); the `incoming request` line at debug.
 */
export class RequestLogController extends LogController {
  constructor() {
    super({ requestIdLogLabel: "request_id" });
  }

  override incomingRequest(request: FastifyRequest): void {
    request.log.debug({ method: request.method, path: pathOf(request), remote_address: request.ip }, "incoming request");
  }

  override routeNotFound(request: FastifyRequest): void {
    request.log.info({ method: request.method, path: pathOf(request) }, "no route matches");
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const fields = requestFields(request, reply.statusCode, reply.elapsedTime);
    if (error) reply.log.error({ ...fields, err: error }, "request errored");
    else reply.log.info(fields, "request completed");
  }
}

/** What the completion line of a request says; SSE streams (which Fastify does not see end) log the same. */
export function requestFields(request: FastifyRequest, status: number, elapsedMs: number) {
  return {
    method: request.method,
    path: pathOf(request),
    route: request.routeOptions.url ?? null,
    status,
    response_time_ms: Math.round(elapsedMs * 10) / 10,
  };
}

/** The URL without its query string: a query may carry what does not belong in logs. */
const pathOf = (request: FastifyRequest): string => request.url.split("?")[0] ?? "/";
