import type { EventEmitter } from "node:events";
import type { Server } from "node:http";
import type { FastifyRequest } from "fastify";

/**
 * Shutdown of one API server, shared by its routes. Long waits (SSE streams, joins) end when the
 * server starts closing, so `close()` need not wait for them and their clients reconnect to
 * another instance. Keyed by the Node server, which every plugin scope of one app shares.
 *
 * The waits are a plain set, not listeners on one shared AbortSignal: a server holds thousands of
 * open streams and joins at once, an EventTarget warns (MaxListenersExceededWarning) past ten
 * listeners, and each wait leaves the set when it ends on its own, so nothing accumulates.
 */
interface Shutdown {
  closing: boolean;
  readonly waits: Set<AbortController>;
}

const shutdowns = new WeakMap<Server, Shutdown>();

function shutdownOf(server: Server): Shutdown {
  let shutdown = shutdowns.get(server);
  if (!shutdown) {
    shutdown = { closing: false, waits: new Set() };
    shutdowns.set(server, shutdown);
  }
  return shutdown;
}

/** The server starts closing: every wait registered with `endOnShutdown` ends now, and later ones at once. */
export function beginShutdown(server: Server): void {
  const shutdown = shutdownOf(server);
  shutdown.closing = true;
  const waits = [...shutdown.waits];
  shutdown.waits.clear();
  for (const wait of waits) wait.abort();
}

export function isShuttingDown(server: Server): boolean {
  return shutdownOf(server).closing;
}

/** Waits registered with `endOnShutdown` on this server that have not ended yet. */
export function openWaits(server: Server): number {
  return shutdownOf(server).waits.size;
}

/**
 * Aborts `wait` when the request's server starts closing, or at once if it already has (a
 * request that passed its hooks before the close began and reaches its handler after). Returns
 * the function that unregisters it, for when the wait ends on its own.
 */
export function endOnShutdown(request: FastifyRequest, wait: AbortController): () => void {
  const shutdown = shutdownOf(request.server.server);
  if (shutdown.closing) {
    wait.abort();
    return () => {};
  }
  shutdown.waits.add(wait);
  return () => shutdown.waits.delete(wait);
}

/**
 * The signal of a request that waits for a run (join, LangGraph's wait routes, an A2A call):
 * aborted when the client goes away or the server starts closing. Call `release` once the wait is
 * over: it also drops the close listener, so an answered request does not build and dispatch an
 * AbortError nobody hears when its connection closes (measurable per trivial run).
 *
 * `closes` is what tells that the client left: the request itself for a request without a body;
 * for one with a body (a POST), the response (`reply.raw`), since the request's own close event
 * fires as soon as its body has been read.
 */
export function requestWait(
  request: FastifyRequest,
  closes: Pick<EventEmitter, "on" | "off"> = request.raw,
): { signal: AbortSignal; release: () => void } {
  const wait = new AbortController();
  const onClose = () => wait.abort();
  closes.on("close", onClose);
  const unregister = endOnShutdown(request, wait);
  return {
    signal: wait.signal,
    release() {
      closes.off("close", onClose);
      unregister();
    },
  };
}
