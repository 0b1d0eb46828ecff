import type { FastifyReply, FastifyRequest } from "fastify";
import type { LgStreamMode, Run } from "@rudder/api";
import type { AppServices } from "../../http/services.ts";
import { requestFields } from "../../http/logging.ts";
import { endOnShutdown } from "../../http/shutdown.ts";
import { sendPaced } from "../../http/sse.ts";
import { formatSse, LgEventMapper, metadataEvent } from "./mapping.ts";

/**
 * Writes a run's log as LangGraph SSE (DESIGN.md): `metadata` first (when replaying from the
 * start), then the events of the modes asked, each with its log sequence as `id`, read through
 * `RunService.follow` (durable before sent), and a `: heartbeat` comment when quiet. The stream
 * closes once the run is terminal or paused; there is no `end` event. With `cancelOnDisconnect`,
 * a client that leaves before the end cancels the run.
 */
export async function streamLangGraph(
  request: FastifyRequest,
  reply: FastifyReply,
  options: {
    tenantId: string;
    run: Run;
    modes: readonly LgStreamMode[];
    /** Replay after this sequence; undefined: from the start, metadata event included. */
    after: number | undefined;
    services: AppServices;
    headers?: Record<string, string>;
    cancelOnDisconnect?: boolean;
  },
): Promise<void> {
  const { run, services } = options;
  const closed = new AbortController();
  const release = endOnShutdown(request, closed);
  services.metrics.sseStreams.inc();
  let settled = false;
  let clientLeft = false;
  reply.raw.on("close", () => {
    if (!reply.raw.writableFinished) clientLeft = true;
    closed.abort();
  });
  reply.hijack();
  const out = reply.raw;
  const inherited = Object.fromEntries(Object.entries(reply.getHeaders()).map(([name, value]) => [name, String(value)]));
  out.writeHead(200, {
    ...inherited,
    ...options.headers,
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache, no-transform",
    connection: "keep-alive",
    "x-accel-buffering": "no",
    "x-request-id": request.id,
  });
  out.flushHeaders();
  const mapper = new LgEventMapper(options.modes);
  try {
    if (options.after === undefined) out.write(formatSse(metadataEvent(run)));
    const updates = services.runService.follow(options.tenantId, run.run_id, {
      after: options.after ?? 0,
      recheckMs: services.streamHeartbeatMs,
      signal: closed.signal,
    });
    for await (const update of updates) {
      if (update.type === "events") {
        let frames = "";
        for (const event of update.events) for (const sse of mapper.map(event)) frames += formatSse(sse);
        await sendPaced(out, frames, closed.signal, update.sent);
      } else if (update.type === "quiet") await sendPaced(out, ": heartbeat\n\n", closed.signal);
      else settled = true;
    }
  } catch (error) {
    request.log.warn({ err: error, run_id: run.run_id }, "LangGraph run stream failed");
  } finally {
    services.metrics.sseStreams.dec();
    release();
    out.end();
    request.log.info(requestFields(request, 200, reply.elapsedTime), "stream ended");
    if (options.cancelOnDisconnect && clientLeft && !settled) {
      await services.runService.cancel(options.tenantId, run.run_id).catch((error: unknown) => {
        request.log.warn({ err: error, run_id: run.run_id }, "cancel on disconnect failed");
      });
    }
  }
}
