import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import type { Client } from "@langchain/langgraph-sdk";
import { collect, lgClient, rejectsWith, type Part } from "./support/langgraph.ts";
import { startTestServer, type TestServer } from "./support/server.ts";

const CONFIG = fileURLToPath(new URL("./fixtures/langgraph-streams.rudder.json", import.meta.url));

/** The worker's poll interval here: long, so a delayed run is claimed by its due-time wake-up, not by a poll. */
const POLL_MS = 60_000;

/**
 * The LangGraph API's delayed runs, breakpoints, task payloads, subgraph namespaces and the
 * `events` / `tools` / `lifecycle` stream modes, through `@langchain/langgraph-sdk` only.
 */
describe("LangGraph API through the SDK: after_seconds, breakpoints, stream modes, subgraphs", () => {
  let server: TestServer;
  let client: Client;
  before(async () => {
    server = await startTestServer({ configFile: CONFIG, worker: { pollMs: POLL_MS } });
    client = await lgClient(server);
  });
  after(() => server.close());

  test("after_seconds: the run is created pending, is not started before its time, and starts when it comes due", async () => {
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, "echo", { input: { message: "later" }, afterSeconds: 1.5 });
    assert.equal(run.status, "pending");
    await new Promise((resolve) => setTimeout(resolve, 700));
    assert.equal((await client.runs.get(thread.thread_id, run.run_id)).status, "pending");
    assert.equal((await client.threads.get(thread.thread_id)).status, "idle");
    const values = await client.runs.join(thread.thread_id, run.run_id);
    assert.deepEqual(values, { message: "later", reply: "later" });
    const done = await server.request("GET", `/v1/runs/${run.run_id}`);
    const waited = Date.parse(done.body.started_at) - Date.parse(done.body.created_at);
    assert.ok(waited >= 1400, `started ${waited} ms after creation`);
    // Claimed by the worker's wake-up at the due time: its poll would come only after POLL_MS.
    assert.ok(waited < POLL_MS / 2, `started ${waited} ms after creation`);

    // Stateless, through wait: the call holds until the delayed run has run.
    const stateless = await client.runs.wait(null, "echo", { input: { message: "soon" }, afterSeconds: 0.5 });
    assert.deepEqual(stateless, { message: "soon", reply: "soon" });
  });

  test("after_seconds: a delayed run can be cancelled before it starts; bad values are 422", async () => {
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, "echo", { input: { message: "never" }, afterSeconds: 60 });
    await client.runs.cancel(thread.thread_id, run.run_id, true);
    assert.equal((await client.runs.get(thread.thread_id, run.run_id)).status, "interrupted");
    await rejectsWith(client.runs.create(thread.thread_id, "echo", { input: { message: "x" }, afterSeconds: -1 }), 422);
    await rejectsWith(client.runs.create(thread.thread_id, "echo", { input: { message: "x" }, afterSeconds: 400 * 24 * 3600 }), 422);
  });

  test("interrupt_before: the run pauses before the node, the thread is interrupted, and a new run continues it", async () => {
    const thread = await client.threads.create();
    const paused = await client.runs.wait(thread.thread_id, "pipeline", { input: { topic: "t" }, interruptBefore: ["act"] });
    assert.deepEqual(paused, { topic: "t", trail: ["plan"] });
    assert.equal((await client.threads.get(thread.thread_id)).status, "interrupted");
    assert.deepEqual((await client.threads.getState(thread.thread_id)).next, ["act"]);
    const [first] = await client.runs.list(thread.thread_id);
    assert.equal(first!.status, "success");
    assert.deepEqual((first as unknown as { kwargs: { interrupt_before: unknown } }).kwargs.interrupt_before, ["act"]);

    // A run without input continues from the breakpoint, as LangGraph does.
    const done = await client.runs.wait(thread.thread_id, "pipeline", { input: null });
    assert.deepEqual(done, { topic: "t", trail: ["plan", "act", "report"] });
    assert.equal((await client.threads.get(thread.thread_id)).status, "idle");
  });

  test("interrupt_after: '*' pauses after every node; a command resumes with its own breakpoints, not the paused run's", async () => {
    const thread = await client.threads.create();
    const parts = await collect(
      client.runs.stream(thread.thread_id, "pipeline", { input: { topic: "t" }, interruptAfter: "*", streamMode: ["updates", "values"] }),
    );
    assert.deepEqual(
      parts.filter((part) => part.event === "updates").map((part) => part.data),
      [{ plan: { trail: ["plan"] } }, { __interrupt__: [] }],
    );
    assert.equal((await client.threads.get(thread.thread_id)).status, "interrupted");

    const second = await client.runs.wait(thread.thread_id, "pipeline", { command: { resume: true }, interruptAfter: ["act"] });
    assert.deepEqual(second, { topic: "t", trail: ["plan", "act"] });
    assert.deepEqual((await client.threads.getState(thread.thread_id)).next, ["report"]);
    // This resume asks for no breakpoint: the run goes to the end (the first run's "*" is not inherited).
    const last = await client.runs.wait(thread.thread_id, "pipeline", { command: { resume: true } });
    assert.deepEqual(last, { topic: "t", trail: ["plan", "act", "report"] });
    assert.equal((await client.threads.get(thread.thread_id)).status, "idle");
  });

  test("breakpoints naming no node of the graph are 422", async () => {
    const thread = await client.threads.create();
    await rejectsWith(client.runs.create(thread.thread_id, "pipeline", { input: { topic: "t" }, interruptBefore: ["nope"] }), 422);
    await rejectsWith(client.runs.create(thread.thread_id, "pipeline", { input: { topic: "t" }, interruptAfter: ["plan", "gone"] }), 422);
  });

  test("tasks: each task's input when it starts and its result when it ends, as LangGraph's tasks mode gives them", async () => {
    const thread = await client.threads.create();
    const parts = await collect(client.runs.stream(thread.thread_id, "pipeline", { input: { topic: "t" }, streamMode: "tasks" }));
    const tasks = parts.filter((part) => part.event === "tasks").map((part) => part.data as Record<string, unknown>);
    assert.deepEqual(
      tasks.map((task) => [task.name, "input" in task ? "start" : "end"]),
      [
        ["plan", "start"],
        ["plan", "end"],
        ["act", "start"],
        ["act", "end"],
        ["report", "start"],
        ["report", "end"],
      ],
    );
    const [start, end] = tasks;
    assert.deepEqual(
      { ...start, id: "-", triggers: "-" },
      { id: "-", name: "plan", input: { topic: "t", trail: [] }, triggers: "-", interrupts: [] },
    );
    assert.equal(end!.id, start!.id);
    assert.deepEqual(end, { id: start!.id, name: "plan", result: { trail: ["plan"] }, error: null, interrupts: [] });
    assert.deepEqual(tasks[4]!.input, { topic: "t", trail: ["plan", "act"] });

    // debug carries the same payloads.
    const debug = await collect(client.runs.stream(thread.thread_id, "pipeline", { input: { topic: "u" }, streamMode: "debug" }));
    const task = debug.find((part) => (part.data as { type?: string }).type === "task")!.data as { payload: { input: unknown } };
    assert.deepEqual(task.payload.input, { topic: "u", trail: ["plan", "act", "report"] });

    // A run that did not ask for tasks records none of this: a later join asking for tasks gets them without.
    const plain = await client.runs.create(thread.thread_id, "pipeline", { input: { topic: "v" } });
    await client.runs.join(thread.thread_id, plain.run_id);
    const joined = await collect(client.runs.joinStream(thread.thread_id, plain.run_id, { streamMode: "tasks" }));
    const bare = joined.filter((part) => part.event === "tasks").map((part) => part.data as Record<string, unknown>);
    assert.equal(bare.length, 6);
    assert.ok(
      bare.every((entry) => !("input" in entry) && !("result" in entry)),
      JSON.stringify(bare),
    );
  });

  test("stream_subgraphs: a subgraph's events come as <mode>|child:<task id>; without it, none are recorded", async () => {
    const thread = await client.threads.create();
    const parts = await collect(
      client.runs.stream(thread.thread_id, "parent", {
        input: { topic: "tides" },
        streamMode: ["updates", "values", "tasks", "messages-tuple"],
        streamSubgraphs: true,
      }) as AsyncIterable<Part>,
    );
    const childTask = parts.find((part) => part.event === "tasks" && (part.data as { name: string }).name === "child")!;
    const namespace = `child:${(childTask.data as { id: string }).id}`;
    const updates = parts.filter((part) => part.event.startsWith("updates")).map((part) => [part.event, Object.keys(part.data as object)]);
    assert.deepEqual(updates, [
      ["updates", ["prepare"]],
      [`updates|${namespace}`, ["research"]],
      [`updates|${namespace}`, ["write"]],
      ["updates", ["child"]],
      ["updates", ["publish"]],
    ]);
    assert.deepEqual(parts.filter((part) => part.event === `values|${namespace}`).at(-1)!.data, {
      topic: "tides",
      notes: ["research", "write"],
      answer: "notes on tides",
    });
    assert.deepEqual(parts.filter((part) => part.event === "values").at(-1)!.data, {
      topic: "tides",
      trail: ["prepare", "publish"],
      answer: "notes on tides",
    });
    const subTasks = parts.filter((part) => part.event === `tasks|${namespace}`).map((part) => (part.data as { name: string }).name);
    assert.deepEqual(subTasks, ["research", "research", "write", "write"]);
    const tokens = parts
      .filter((part) => part.event === `messages|${namespace}`)
      .map((part) => (part.data as [{ content: string }])[0].content);
    assert.ok(tokens.length > 1);
    assert.equal(tokens.join(""), "notes on tides");

    // A join replays the same namespaced events from the log.
    const runId = (parts[0]!.data as { run_id: string }).run_id;
    const replayed = await collect(client.runs.joinStream(thread.thread_id, runId, { streamMode: ["updates"] }));
    assert.deepEqual(
      replayed.filter((part) => part.event.startsWith("updates")).map((part) => part.event),
      updates.map(([event]) => event),
    );

    // Without stream_subgraphs the run records only its own graph's events.
    const plain = await collect(
      client.runs.stream(thread.thread_id, "parent", { input: { topic: "x" }, streamMode: ["updates", "tasks"] }),
    );
    assert.ok(
      plain.every((part) => !part.event.includes("|")),
      JSON.stringify(plain.map((part) => part.event)),
    );
    const plainId = (plain[0]!.data as { run_id: string }).run_id;
    const rejoined = await collect(client.runs.joinStream(thread.thread_id, plainId, { streamMode: ["updates", "values", "tasks"] }));
    assert.ok(rejoined.every((part) => !part.event.includes("|")));
  });

  test("events: LangChain's streamEvents v2 events, as the Platform sends them; tools: a tool's start and end", async () => {
    const thread = await client.threads.create();
    const parts = await collect(
      client.runs.stream(thread.thread_id, "agent", { input: { city: "Oslo" }, streamMode: ["events", "tools", "values"] }),
    );
    const events = parts.filter((part) => part.event === "events").map((part) => part.data as Record<string, unknown>);
    const kinds = events.map((event) => `${String(event.event)}:${String(event.name)}`);
    for (const expected of [
      "on_chain_start:respond",
      "on_tool_start:lookup_weather",
      "on_tool_end:lookup_weather",
      "on_chat_model_start:FakeListChatModel",
      "on_chat_model_stream:FakeListChatModel",
      "on_chat_model_end:FakeListChatModel",
      "on_chain_end:respond",
    ])
      assert.ok(kinds.includes(expected), `${expected} in ${kinds.join(", ")}`);
    for (const event of events) {
      assert.equal(typeof event.run_id, "string");
      assert.ok(Array.isArray(event.tags), JSON.stringify(event));
      assert.equal(typeof event.metadata, "object");
    }
    const tokens = events
      .filter((event) => event.event === "on_chat_model_stream")
      .map((event) => (event.data as { chunk: { content: string } }).chunk.content);
    assert.equal(tokens.join(""), "it is sunny");
    const toolEnd = events.find((event) => event.event === "on_tool_end")!;
    assert.match(JSON.stringify(toolEnd.data), /sunny in Oslo/);
    // The graph's own stream is not repeated as events, and LangGraph's hidden runnables are not streamed.
    assert.ok(!events.some((event) => event.event === "on_chain_stream" && event.name === "LangGraph"));
    assert.ok(!kinds.includes("on_chain_start:__start__"), kinds.join(", "));
    assert.ok(!events.some((event) => (event.tags as string[]).includes("langsmith:hidden")));
    assert.deepEqual(parts.filter((part) => part.event === "values").at(-1)!.data, {
      city: "Oslo",
      forecast: "sunny in Oslo",
      answer: "it is sunny",
    });

    const tools = parts
      .filter((part) => part.event === "tools")
      .map((part) => part.data as { event: string; name: string; input?: unknown; output?: unknown });
    assert.deepEqual(
      tools.map((tool) => [tool.event, tool.name]),
      [
        ["on_tool_start", "lookup_weather"],
        ["on_tool_end", "lookup_weather"],
      ],
    );
    // The tool's input as LangGraph's tools mode gives it (the serialised arguments).
    assert.match(JSON.stringify(tools[0]!.input), /Oslo/);
    assert.match(JSON.stringify(tools[1]!.output), /sunny in Oslo/);

    // Recorded only for runs that ask: another run's join asking for events and tools gets none.
    const plain = await client.runs.create(thread.thread_id, "agent", { input: { city: "Rome" } });
    await client.runs.join(thread.thread_id, plain.run_id);
    const joined = await collect(client.runs.joinStream(thread.thread_id, plain.run_id, { streamMode: ["events", "tools", "values"] }));
    assert.ok(joined.some((part) => part.event === "values"));
    assert.ok(!joined.some((part) => part.event === "events" || part.event === "tools"));
    const logged = await server.request("GET", `/v1/runs/${plain.run_id}/events`);
    assert.ok(
      logged.body.length > 0 && !logged.body.some((event: { kind: string }) => event.kind === "langchain_event" || event.kind === "tools"),
    );
  });

  test("on_completion: 'delete' (what a stateless run does) is accepted, 'keep' is 422; assistants.search pages with X-Pagination-Next", async () => {
    // The SDK's types leave on_completion out of stateless calls; it sends what it is given.
    const asSent = (payload: object) => payload as never;
    assert.deepEqual(await client.runs.wait(null, "echo", asSent({ input: { message: "m" }, onCompletion: "delete" })), {
      message: "m",
      reply: "m",
    });
    await rejectsWith(client.runs.wait(null, "echo", asSent({ input: { message: "m" }, onCompletion: "keep" })), 422);
    // On a thread, on_completion does not apply (the thread is the caller's), as on the Platform.
    const thread = await client.threads.create();
    assert.deepEqual(await client.runs.wait(thread.thread_id, "echo", asSent({ input: { message: "k" }, onCompletion: "keep" })), {
      message: "k",
      reply: "k",
    });

    // Four graphs, four default assistants: pages of three.
    const first = await client.assistants.search({ limit: 3, includePagination: true });
    assert.equal(first.assistants.length, 3);
    assert.equal(first.next, "3");
    const second = await client.assistants.search({ limit: 3, offset: 3, includePagination: true });
    assert.equal(second.assistants.length, 1);
    assert.equal(second.next, null);
    const ids = [...first.assistants, ...second.assistants].map((assistant) => assistant.assistant_id).sort();
    assert.deepEqual(ids, ["agent", "echo", "parent", "pipeline"]);
  });
});
