import fp from "fastify-plugin";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Authenticate, Principal } from "../auth/authenticator.ts";
import { ApiError } from "../domain/errors.ts";
import { grants, type Permission } from "../domain/roles.ts";

declare module "fastify" {
  interface FastifyContextConfig {
    /** What the caller's roles must grant. Every route declares it, or `public: true`. */
    permission?: Permission;
    /** Served without a token (health, readiness, OpenAPI, docs). */
    public?: boolean;
  }
  interface FastifyRequest {
    /** Set by the auth hook on every non-public route. */
    principal: Principal;
  }
}

/**
 * Authenticates every request to a non-public route and checks the route's permission before
 * any handler runs. A route registered with neither `permission` nor `public` is a startup error,
 * so no route can be left unguarded by accident.
 */
export const authPlugin = fp<{ authenticate: Authenticate }>(
  async (app, { authenticate }) => {
    app.decorateRequest("principal", null as unknown as Principal);
    app.addHook("onRoute", (route) => {
      const config = route.config as { permission?: Permission; public?: boolean } | undefined;
      const isDocsRoute = route.url.startsWith("/docs");
      if (isDocsRoute) route.config = { ...config, public: true };
      else if (!config?.permission && !config?.public && route.method !== "HEAD") {
        throw new Error(`route ${String(route.method)} ${route.url} declares neither a permission nor public`);
      }
    });
    app.addHook("onRequest", async (request: FastifyRequest, _reply: FastifyReply) => {
      const config = request.routeOptions.config;
      if (config.public || request.is404) return;
      if (repeatedAuthorization(request.raw.rawHeaders)) {
        throw new ApiError("invalid_request", "send one Authorization header: with several, which one counts is up to whoever reads them");
      }
      request.principal = await authenticate({
        bearer: bearerToken(request.headers.authorization),
        apiKey: headerValue(request.headers["x-api-key"]),
      });
      const permission = config.permission;
      if (permission && !grants(request.principal.roles, permission)) {
        throw new ApiError("forbidden", `this action needs a role that grants "${permission}"`);
      }
    });
  },
  { name: "rudder-auth" },
);

/**
 * Whether the request carries more than one Authorization header. Node keeps the first, and a
 * proxy in front may check another: refused, so that the two cannot disagree about the caller.
 */
function repeatedAuthorization(rawHeaders: readonly string[]): boolean {
  let seen = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.length === 13 && rawHeaders[i]!.toLowerCase() === "authorization" && ++seen > 1) return true;
  }
  return false;
}

function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match?.[1]) throw new ApiError("unauthorized", "the Authorization header must be 'Bearer <token>'");
  return match[1];
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
