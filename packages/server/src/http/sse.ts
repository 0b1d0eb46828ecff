import type { Writable } from "node:stream";
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
  const frames = (events: RunEvent[]) => {
    let text = "";
    for (const event of events) text += `id: ${event.sequence}\nevent: ${event.kind}\ndata: ${JSON.stringify(event)}\n\n`;
    return text;
  };
  try {
    const updates = services.runService.follow(options.tenantId, runId, {
      after: options.after,
      recheckMs: services.streamHeartbeatMs,
      signal: closed.signal,
    });
    for await (const update of updates) {
      if (update.type === "events") await sendPaced(out, frames(update.events), closed.signal, update.sent);
      else if (update.type === "quiet") await sendPaced(out, ": heartbeat\n\n", closed.signal);
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

/**
 * Writes `text` to a stream's socket and, when its buffer is full, waits until the reader has
 * taken it (or the stream closes or is stopped) before the caller reads on: a slow reader of a
 * long log is paced, not buffered for in memory (a replay of thousands of events to a reader
 * that does not read would otherwise sit in the process whole). `written` runs once the text is
 * handed to the socket, before any wait: a replay gives its tenant's turn back then
 * (`FollowUpdate`), so a reader that does not read holds no turn of anyone else's.
 */
export async function sendPaced(out: Writable, text: string, signal: AbortSignal, written?: () => void): Promise<void> {
  const flowing = out.write(text);
  written?.();
  if (flowing || out.destroyed || signal.aborted) return;
  await new Promise<void>((resolve) => {
    const done = () => {
      out.off("drain", done);
      out.off("close", done);
      signal.removeEventListener("abort", done);
      resolve();
    };
    out.on("drain", done);
    out.on("close", done);
    signal.addEventListener("abort", done);
  });
}
