import type { FastifyReply, FastifyRequest } from "fastify";
import type { RunEvent } from "@rudder/api";
import type { AppServices } from "./services.ts";
import { endOnShutdown } from "./shutdown.ts";
import { requestFields } from "./logging.ts";

/**
 * Writes the run's events after `after` as SSE, as `RunService.follow` reads them from the durable
 * log (events are committed before they can be read), with a `: heartbeat` comment whenever a
 * heartbeat interval passes quietly. The stream ends once the run is terminal or paused and every
 * event has been sent.
 */
export async function streamRunEvents(
  request: FastifyRequest,
  reply: FastifyReply,
  options: { tenantId: string; runId: string; after: number; services: AppServices },
): Promise<void> {
  const { runId, services } = options;
  const closed = new AbortController();
  const release = endOnShutdown(request, closed);
  services.metrics.sseStreams.inc();
  request.raw.on("close", () => closed.abort());
  reply.hijack();
  const out = reply.raw;
  out.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache, no-transform",
    connection: "keep-alive",
    "x-accel-buffering": "no",
    "x-request-id": request.id,
  });
  out.flushHeaders(); // the client sees the stream open now, not at the first event or heartbeat
  // Every event ready at one wake-up goes out in one socket write (at token rate a write per
  // event was a large share of the stream's cost).
  const write = (events: RunEvent[]) => {
    let frames = "";
    for (const event of events) frames += `id: ${event.sequence}\nevent: ${event.kind}\ndata: ${JSON.stringify(event)}\n\n`;
    out.write(frames);
  };
  try {
    const updates = services.runService.follow(options.tenantId, runId, {
      after: options.after,
      recheckMs: services.streamHeartbeatMs,
      signal: closed.signal,
    });
    for await (const update of updates) {
      if (update.type === "events") write(update.events);
      else if (update.type === "quiet") out.write(": heartbeat\n\n");
    }
  } catch (error) {
    request.log.warn({ err: error, run_id: runId }, "run stream failed");
  } finally {
    services.metrics.sseStreams.dec();
    release();
    out.end();
    request.log.info(requestFields(request, 200, reply.elapsedTime), "stream ended");
  }
}
