import type { Server } from "node:http";
import type { FastifyRequest } from "fastify";

/**
 * Shutdown of one API server, shared by its routes. Long waits (SSE streams, joins) end when the
 * server starts closing, so `close()` need not wait for them and their clients reconnect to
 * another instance. Keyed by the Node server, which every plugin scope of one app shares.
 */
const shutdowns = new WeakMap<Server, AbortController>();

function shutdownOf(server: Server): AbortController {
  let controller = shutdowns.get(server);
  if (!controller) {
    controller = new AbortController();
    shutdowns.set(server, controller);
  }
  return controller;
}

/** The server starts closing: every wait registered with `endOnShutdown` ends now, and later ones at once. */
export function beginShutdown(server: Server): void {
  shutdownOf(server).abort();
}

export function isShuttingDown(server: Server): boolean {
  return shutdownOf(server).signal.aborted;
}

/**
 * Aborts `wait` when the request's server starts closing, or at once if it already has (a
 * request that passed its hooks before the close began and reaches its handler after). Returns
 * the function that unregisters it, for when the wait ends on its own.
 */
export function endOnShutdown(request: FastifyRequest, wait: AbortController): () => void {
  const { signal } = shutdownOf(request.server.server);
  if (signal.aborted) {
    wait.abort();
    return () => {};
  }
  const onShutdown = () => wait.abort();
  signal.addEventListener("abort", onShutdown, { once: true });
  return () => signal.removeEventListener("abort", onShutdown);
}
