import type { FastifyReply, FastifyRequest } from "fastify";
import { isSettled } from "../domain/runs.ts";
import { waitForNotice } from "../notify/notifier.ts";
import type { RunEvent } from "../storage/runs.ts";
import type { AppServices } from "./app.ts";

const PAGE = 500;

/** Streams open on this process, ended by the server's preClose so shutdown does not wait on them. */
export const openStreams = new Set<AbortController>();

/**
 * Writes the run's events after `after` as SSE, reading the durable log (events are committed
 * before they can be read) and waiting on run_events notices in between, with a `: heartbeat`
 * comment whenever a heartbeat interval passes quietly. The stream ends once the run is terminal
 * or paused and every event has been sent; the final status and events commit together, so a
 * read after seeing the status finds the last events.
 */
export async function streamRunEvents(
  request: FastifyRequest,
  reply: FastifyReply,
  options: { runId: string; after: number; services: AppServices },
): Promise<void> {
  const { runId, services } = options;
  const closed = new AbortController();
  openStreams.add(closed);
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
  let cursor = options.after;
  const write = (events: RunEvent[]) => {
    for (const event of events) {
      out.write(`id: ${event.sequence}\nevent: ${event.kind}\ndata: ${JSON.stringify(event)}\n\n`);
      cursor = event.sequence;
    }
  };
  try {
    while (!closed.signal.aborted) {
      const wake = waitForNotice(services.notifier, (n) => n.topic === "run_events" && n.runId === runId, services.streamHeartbeatMs, closed.signal);
      const events = await services.runs.readEvents(runId, cursor, PAGE);
      write(events);
      if (events.length === PAGE) {
        wake.cancel();
        continue;
      }
      // Caught up with the log (this read may have held the run's last events): is the run over?
      const status = await services.runs.status(runId);
      if (status === undefined || isSettled(status)) {
        wake.cancel();
        for (let rest = await services.runs.readEvents(runId, cursor, PAGE); rest.length; rest = await services.runs.readEvents(runId, cursor, PAGE)) {
          write(rest);
        }
        break;
      }
      if (!(await wake.promise) && !closed.signal.aborted) out.write(": heartbeat\n\n");
    }
  } catch (error) {
    request.log.warn({ err: error, runId }, "run stream failed");
  } finally {
    openStreams.delete(closed);
    out.end();
  }
}
