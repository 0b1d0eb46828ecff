import { randomUUID } from "node:crypto";
import { STATUS_CODES, type IncomingMessage } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { FastifyError, FastifyReply, FastifyRequest, RouteOptions } from "fastify";
import { ApiError, type ErrorCode } from "../domain/errors.ts";
import { problemFor, sendProblem } from "./problem.ts";

/**
 * The answers Fastify and Node give before any route runs (a malformed or oversized request, an
 * unknown method) as problem+json like every other answer, so clients parse one error shape.
 */

/** Router refusals (Fastify's `frameworkErrors`): an undecodable path (400), a too-long path parameter (414). */
export function frameworkErrorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const code: ErrorCode =
    error.code === "FST_ERR_MAX_PARAM_LENGTH" ? "uri_too_long" : error.code === "FST_ERR_BAD_URL" ? "invalid_request" : "internal";
  const detail =
    code === "uri_too_long"
      ? "a path parameter is longer than this server accepts"
      : code === "invalid_request"
        ? "the request path is not valid percent-encoded UTF-8"
        : "the server failed to route this request";
  reply.header("x-request-id", request.id);
  return sendProblem(reply, request, new ApiError(code, detail));
}

/**
 * Node's HTTP parser refusals (Fastify's `clientErrorHandler`): headers over the size limit
 * (431), a request that did not arrive in time (408), anything else malformed (400). No request
 * object exists yet, so the answer is written to the socket, which is then closed.
 */
export function clientErrorHandler(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === "ECONNRESET" || socket.destroyed) return;
  const [code, detail]: [ErrorCode, string] =
    error.code === "HPE_HEADER_OVERFLOW"
      ? ["header_fields_too_large", "the request line and headers are larger than this server accepts"]
      : error.code === "ERR_HTTP_REQUEST_TIMEOUT"
        ? ["request_timeout", "the request did not arrive in time"]
        : ["invalid_request", "the request is not valid HTTP"];
  writeProblem(socket, new ApiError(code, detail));
  socket.destroy(error);
}

/**
 * A CONNECT request (Node's `connect` event, which no route sees): this server is no proxy, so it
 * is a 405 problem like any other method a path does not answer, not a closed socket.
 */
export function connectHandler(routeMethods: RouteMethods): (request: IncomingMessage, socket: Duplex) => void {
  return (request, socket) => {
    const allowed = routeMethods.allowed((request.url ?? "").split("?")[0] ?? "");
    const detail = `CONNECT ${request.url ?? ""} is not answered: this server is not a proxy`;
    writeProblem(socket, new ApiError("method_not_allowed", detail), allowed.length > 0 ? { Allow: allowed.join(", ") } : {});
    socket.end();
  };
}

/** A problem answer written straight to a socket, where no request object exists to reply through. */
function writeProblem(socket: Duplex, apiError: ApiError, headers: Record<string, string> = {}): void {
  if (!socket.writable) return;
  const requestId = randomUUID();
  const body = JSON.stringify(problemFor(apiError, requestId));
  const extra = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join("");
  socket.write(
    `HTTP/1.1 ${apiError.status} ${STATUS_CODES[apiError.status] ?? "Bad Request"}\r\n` +
      `Content-Type: application/problem+json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `X-Request-Id: ${requestId}\r\n${extra}Connection: close\r\n\r\n${body}`,
  );
}

/**
 * Which methods each route path answers, so a known path asked with another method is a 405 with
 * `Allow`, not a 404. Fed by the `onRoute` hook; path parameters match one segment.
 */
export class RouteMethods {
  private readonly routes: { url: string; pattern: RegExp; methods: Set<string> }[] = [];

  add(route: Pick<RouteOptions, "method" | "url">): void {
    const pattern = new RegExp(`^${route.url.split("/").map(segmentPattern).join("/")}$`);
    const methods = [route.method].flat();
    const existing = this.routes.find((entry) => entry.pattern.source === pattern.source);
    if (existing) for (const method of methods) existing.methods.add(method);
    else this.routes.push({ url: route.url, pattern, methods: new Set(methods) });
  }

  /** The route pattern of a path some route answers (with another method), for labels; undefined for none. */
  routeOf(path: string): string | undefined {
    return this.routes.find((route) => route.pattern.test(path))?.url;
  }

  /** The methods the path answers to, or none when no route has this path. */
  allowed(path: string): string[] {
    const methods = new Set<string>();
    for (const route of this.routes) if (route.pattern.test(path)) for (const method of route.methods) methods.add(method);
    return [...methods].sort();
  }
}

function segmentPattern(segment: string): string {
  if (segment.startsWith(":")) return "[^/]+";
  if (segment === "*") return ".*";
  return segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
