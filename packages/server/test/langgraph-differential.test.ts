import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { Client } from "@langchain/langgraph-sdk";
import { TEST_DRIVER } from "./support/db.ts";
import { startLangGraphDev, type LangGraphDev } from "./support/langgraph-dev.ts";
import { startRudderDev, type RudderDev } from "./support/rudder-dev.ts";

const CONFIG = fileURLToPath(new URL("./fixtures/clients.rudder.json", import.meta.url));
const GRAPHS = fileURLToPath(new URL("./fixtures/graphs/clients.ts", import.meta.url));

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
/** One step of the script: what it did and what the server answered, ids and times left out. */
type Transcript = Record<string, Json>;

/** Keys whose values are ids or times: they differ between any two servers and runs. */
const VOLATILE = new Set([
  "id",
  "run_id",
  "thread_id",
  "checkpoint_id",
  "parent_checkpoint_id",
  "checkpoint_ns",
  "created_at",
  "updated_at",
  "state_updated_at",
  "assistant_id",
]);

/** `value` without ids and times, as JSON. */
function stable(value: unknown): Json {
  const json = JSON.parse(JSON.stringify(value ?? null)) as Json;
  const strip = (item: Json): Json => {
    if (Array.isArray(item)) return item.map(strip);
    if (item !== null && typeof item === "object")
      return Object.fromEntries(
        Object.entries(item)
          .filter(([key]) => !VOLATILE.has(key))
          .map(([key, inner]) => [key, strip(inner)]),
      );
    return item;
  };
  return strip(json);
}

interface Part {
  event: string;
  data: unknown;
}

async function parts(stream: AsyncIterable<Part>): Promise<Part[]> {
  const out: Part[] = [];
  for await (const part of stream) out.push({ event: part.event, data: part.data });
  return out;
}

/** What a stream showed: its event names in order, runs of `messages` tokens counted, and the data of the other events. */
function streamShape(events: Part[]): Json {
  const names: string[] = [];
  for (const { event } of events) {
    const last = names.at(-1);
    const runOf = last?.match(/^messages x(\d+)$/);
    if (event === "messages" && (last === "messages" || runOf)) names[names.length - 1] = `messages x${runOf ? Number(runOf[1]) + 1 : 2}`;
    else names.push(event);
  }
  const tokens = events
    .filter((part) => part.event === "messages")
    .map((part) => {
      const [chunk, metadata] = part.data as [{ type: string; content: string }, { langgraph_node?: string }];
      return { type: chunk.type, content: chunk.content, node: metadata.langgraph_node ?? null };
    });
  return {
    events: names,
    data: events
      .filter((part) => part.event !== "metadata" && part.event !== "messages")
      .map((part) => stable({ [part.event]: part.data })),
    tokens: stable(tokens),
  };
}

/**
 * The script run against both servers: the flows Rudder and the LangGraph.js dev server both
 * support, through `@langchain/langgraph-sdk`'s Client only.
 */
async function script(client: Client): Promise<Transcript> {
  const out: Transcript = {};
  const thread = await client.threads.create({ metadata: { suite: "differential" } });
  out.created = stable({ status: thread.status, metadata: thread.metadata, values: thread.values });

  out.wait = stable(await client.runs.wait(thread.thread_id, "echo", { input: { message: "one" } }));
  out.afterWait = stable({ status: (await client.threads.get(thread.thread_id)).status });

  out.streamEcho = streamShape(
    await parts(client.runs.stream(thread.thread_id, "echo", { input: { message: "two" }, streamMode: ["values", "updates"] })),
  );

  const chat = await client.threads.create();
  out.streamChat = streamShape(
    await parts(
      client.runs.stream(chat.thread_id, "chat", {
        input: { messages: [{ type: "human", content: "hi" }] },
        streamMode: ["values", "updates", "messages-tuple", "custom"],
      }),
    ),
  );
  out.chatThread = stable(await client.threads.get(chat.thread_id));

  out.interrupt = streamShape(
    await parts(
      client.runs.stream(chat.thread_id, "chat", {
        input: { messages: [{ type: "human", content: "ask me" }] },
        streamMode: ["values", "updates"],
      }),
    ),
  );
  const paused = await client.threads.get(chat.thread_id);
  out.paused = stable({ status: paused.status, interrupts: Object.values(paused.interrupts ?? {}) });
  const pausedState = await client.threads.getState(chat.thread_id);
  out.pausedState = stable({ next: pausedState.next, interrupts: pausedState.tasks.map((task) => task.interrupts) });
  out.resume = streamShape(
    await parts(client.runs.stream(chat.thread_id, "chat", { command: { resume: "yes" }, streamMode: ["values", "updates"] })),
  );
  const state = await client.threads.getState(chat.thread_id);
  out.state = stable({ values: state.values, next: state.next, tasks: state.tasks, metadataStep: state.metadata?.step ?? null });
  out.history = (await client.threads.getHistory(chat.thread_id, { limit: 100 })).length;
  out.chatRuns = (await client.runs.list(chat.thread_id)).map((run) => run.status);
  out.afterResume = stable({ status: (await client.threads.get(chat.thread_id)).status });

  const failing = await client.threads.create();
  out.failStream = streamShape(
    await parts(client.runs.stream(failing.thread_id, "failing", { input: { message: "x" }, streamMode: ["values", "custom"] })),
  );
  out.failWait = await client.runs.wait(failing.thread_id, "failing", { input: { message: "y" } }).then(
    (values) => stable({ resolved: values }),
    (error: Error) => stable({ rejected: error.message }),
  );
  out.failRuns = (await client.runs.list(failing.thread_id)).map((run) => run.status);
  out.failThread = stable({ status: (await client.threads.get(failing.thread_id)).status });
  out.echoRuns = (await client.runs.list(thread.thread_id)).map((run) => run.status);
  return out;
}

type Side = "rudder" | "langgraph";

/**
 * The differences this test knows and pins, each documented in docs/langgraph-api.md ("What
 * differs"): each checks what each server sent, then removes the difference from both transcripts.
 * When a server changes, its check fails here rather than the comparison going quiet.
 */
const KNOWN_DIFFERENCES: { what: string; settle(transcript: Transcript, side: Side): void }[] = [
  {
    what: "a new thread's values: {} on Rudder, absent on the dev server",
    settle(transcript, side) {
      const created = transcript.created as { values?: Json };
      assert.deepEqual(created.values, side === "rudder" ? {} : undefined, `${side}: created.values`);
      delete created.values;
    },
  },
  {
    what: "threads.get: the dev server returns the thread's config (the request's user-agent in it); Rudder threads have none",
    settle(transcript, side) {
      const thread = transcript.chatThread as { config?: Json };
      if (side === "langgraph") assert.equal(typeof thread.config, "object", "langgraph: chatThread.config");
      else assert.equal(thread.config, undefined, "rudder: chatThread.config");
      delete thread.config;
    },
  },
  {
    what: "an error event's `error`: Rudder's run error code (run_failed), the dev server's exception class (Error)",
    settle(transcript, side) {
      const error = ((transcript.failStream as { data: Json[] }).data.at(-1) as { error: { error: Json; message: Json } }).error;
      assert.deepEqual(error, { error: side === "rudder" ? "run_failed" : "Error", message: "boom" }, `${side}: failStream error`);
      error.error = "<error>";
    },
  },
  {
    what: 'runs.wait of a failed run rejects on both; the message differs (Rudder: \'run_failed: boom\'; dev server: \'Error: {"error":"Error","message":"boom"}\')',
    settle(transcript, side) {
      const failed = transcript.failWait as { rejected?: Json };
      const expected = side === "rudder" ? "run_failed: boom" : 'Error: {"error":"Error","message":"boom"}';
      assert.equal(failed.rejected, expected, `${side}: failWait`);
      failed.rejected = "<rejected>";
    },
  },
];

describe(`the same SDK script against Rudder (rudder dev on ${TEST_DRIVER}) and the LangGraph.js dev server (@langchain/langgraph-cli 1.5.1)`, () => {
  let rudder: RudderDev;
  let reference: LangGraphDev;
  before(async () => {
    rudder = await startRudderDev(CONFIG);
    // No skip: if the dev server cannot start, this fails with what it printed.
    reference = await startLangGraphDev(GRAPHS, { chat: "chat", echo: "echo", failing: "failing" });
  });
  after(async () => {
    await rudder?.stop();
    await reference?.stop();
  });

  test("same statuses, event names and values (ids and times aside), but for the pinned differences", async () => {
    const options = { callerOptions: { maxRetries: 0 } };
    const ours = await script(new Client({ apiUrl: rudder.url, defaultHeaders: { authorization: `Bearer ${rudder.token}` }, ...options }));
    const theirs = await script(new Client({ apiUrl: reference.url, ...options }));
    for (const difference of KNOWN_DIFFERENCES) {
      difference.settle(ours, "rudder");
      difference.settle(theirs, "langgraph");
    }
    assert.deepEqual(ours, theirs);
    // The comparison covers what it should: the flows ran and produced something to compare.
    const chat = ours.streamChat as { events: string[] };
    assert.deepEqual(chat.events, ["metadata", "values", "custom", "messages x21", "updates", "values"]);
    assert.deepEqual(ours.chatRuns, ["success", "success", "success"]);
    assert.deepEqual(ours.failRuns, ["error", "error"]);
    assert.equal((ours.paused as { status: string }).status, "interrupted");
  });
});
