import { PassThrough } from "node:stream";
import type { FastifyReply } from "fastify";
import { ApiError } from "../../domain/errors.ts";
import { plainMessages } from "../../domain/langchain-messages.ts";

/** A wait or join that has not ended after this long sends a newline, and another each time this passes again. */
export const WAIT_HEARTBEAT_MS = 1000;

/**
 * Sends a wait's or join's answer (LangGraph's `runs.wait` and `runs.join`). An answer ready
 * within `WAIT_HEARTBEAT_MS` goes as any response (a refusal as a problem). A longer wait commits
 * to 200 and sends a newline every `WAIT_HEARTBEAT_MS` until the answer, as the Platform does, so
 * a proxy's idle timeout does not cut it: JSON allows the leading whitespace, which the SDK's
 * parse skips. Past that point a failure (the server closing, an outage) can no longer be a
 * status, so it is the body, in the shape of a failed run's answer: `{__error__: {error, message}}`.
 */
export async function sendWaitAnswer(reply: FastifyReply, answer: Promise<unknown>): Promise<FastifyReply> {
  // A plain timer, cleared: aborting a timers/promises delay instead built an AbortError (a
  // DOMException with its stack) for every wait answered in time, which is nearly all of them.
  let timer: NodeJS.Timeout | undefined;
  const early = await Promise.race([
    answer.then((value) => ({ value })),
    new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), WAIT_HEARTBEAT_MS))),
  ]).finally(() => clearTimeout(timer));
  if (early) return reply.send(early.value);

  const body = new PassThrough();
  // A client that left destroys the body under Fastify; the answer's own wait ends with it.
  body.on("error", () => {});
  const beat = () => {
    if (!body.destroyed) body.write("\n");
  };
  beat();
  const heartbeat = setInterval(beat, WAIT_HEARTBEAT_MS);
  reply.type("application/json; charset=utf-8").send(body);
  const end = (json: string) => {
    if (!body.destroyed) body.end(json);
  };
  try {
    end(JSON.stringify(plainMessages(await answer) ?? null));
  } catch (error) {
    if (!(error instanceof ApiError)) reply.log.error({ err: error }, "a LangGraph wait failed after its heartbeats began");
    const failure =
      error instanceof ApiError
        ? { error: error.code, message: error.message }
        : { error: "internal", message: "the wait failed; join the run again" };
    end(JSON.stringify({ __error__: failure }));
  } finally {
    clearInterval(heartbeat);
  }
  return reply;
}
