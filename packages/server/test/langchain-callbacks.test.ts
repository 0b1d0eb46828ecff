import { test } from "node:test";
import assert from "node:assert/strict";
import { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import { getContextVariable, setContextVariable } from "@langchain/core/context";
import { AsyncLocalStorageProviderSingleton } from "@langchain/core/singletons";
import {
  Annotation,
  Command,
  END,
  getConfig,
  InMemoryStore,
  interrupt,
  MemorySaver,
  START,
  StateGraph,
  type LangGraphRunnableConfig,
} from "@langchain/langgraph";
import { RunTree } from "langsmith";
import { traceable } from "langsmith/traceable";
import {
  awaitLangChainCallbacks,
  CALLBACKS_BACKGROUND_VARIABLE,
  langSmithTracingEnabled,
  runContextHandlers,
  UntracedRunContext,
} from "../src/worker/langchain-callbacks.ts";
import { chatMessages } from "./fixtures/graphs/testing.ts";

// The stand-in for LangSmith's tracer (worker/langchain-callbacks.ts): with it, graph code still
// finds its config, store, writer and context variables in async local storage, interrupts still
// pause and resume, and the carrier LangChain keeps them on is no longer a RunTree.

const State = Annotation.Root({ seen: Annotation<string[]>({ reducer: (left, right) => left.concat(right), default: () => [] }) });

/** What graph code sees of its async-local context, from a node and from a subgraph's node. */
interface Seen {
  carrierIsRunTree: boolean;
  threadId: unknown;
  marker: unknown;
  storeFound: boolean;
  contextVariable: unknown;
}

function carrierIsRunTree(): boolean {
  return AsyncLocalStorageProviderSingleton.getInstance().getStore() instanceof RunTree;
}

function seenHere(): Seen {
  const config = getConfig() as LangGraphRunnableConfig;
  return {
    carrierIsRunTree: carrierIsRunTree(),
    threadId: config.configurable?.thread_id,
    marker: config.configurable?.marker,
    storeFound: config.store !== undefined,
    contextVariable: getContextVariable("rudder_test"),
  };
}

function graphRecording(into: Seen[]) {
  const inner = new StateGraph(State)
    .addNode("inner", () => {
      into.push(seenHere());
      return { seen: ["inner"] };
    })
    .addEdge(START, "inner")
    .addEdge("inner", END)
    .compile();
  return new StateGraph(State)
    .addNode("outer", () => {
      into.push(seenHere());
      return { seen: ["outer"] };
    })
    .addNode("sub", inner)
    .addEdge(START, "outer")
    .addEdge("outer", "sub")
    .addEdge("sub", END)
    .compile({ store: new InMemoryStore() });
}

async function runRecording(callbacks: BaseCallbackHandler[]): Promise<Seen[]> {
  const seen: Seen[] = [];
  // Set outside the graph: LangChain carries context variables into every runnable's context.
  setContextVariable("rudder_test", "set before the run");
  const parts = await graphRecording(seen).stream(
    {},
    { callbacks, configurable: { thread_id: "t-1", marker: "mine" }, streamMode: ["values", "updates", "messages", "tasks"] },
  );
  for await (const part of parts) void part;
  return seen;
}

test("tracing is on exactly when one of LangChain's variables says true", () => {
  assert.equal(langSmithTracingEnabled({}), false);
  assert.equal(langSmithTracingEnabled({ LANGSMITH_TRACING: "false" }), false);
  for (const name of ["LANGSMITH_TRACING_V2", "LANGCHAIN_TRACING_V2", "LANGSMITH_TRACING", "LANGCHAIN_TRACING"])
    assert.equal(langSmithTracingEnabled({ [name]: "true" }), true, name);
  assert.deepEqual(runContextHandlers({ LANGSMITH_TRACING: "true" }), []);
  const handlers = runContextHandlers({});
  assert.equal(handlers.length, 1);
  assert.ok(handlers[0] instanceof UntracedRunContext);
});

test("without the stand-in a node's context rides a RunTree; with it, a plain object that carries the same", async () => {
  const other = new (class extends BaseCallbackHandler {
    name = "other";
  })();
  const without = await runRecording([other]);
  assert.equal(without.length, 2);
  assert.ok(
    without.every((seen) => seen.carrierIsRunTree),
    "LangChain no longer builds a RunTree per runnable: the stand-in may be unnecessary",
  );

  const withStandIn = await runRecording([other, ...runContextHandlers({})]);
  assert.deepEqual(
    withStandIn.map(({ carrierIsRunTree, ...rest }) => ({ carrierIsRunTree, ...rest })),
    [
      { carrierIsRunTree: false, threadId: "t-1", marker: "mine", storeFound: true, contextVariable: "set before the run" },
      { carrierIsRunTree: false, threadId: "t-1", marker: "mine", storeFound: true, contextVariable: "set before the run" },
    ],
  );
  // What graph code reads is the same either way, apart from the carrier.
  assert.deepEqual(
    withStandIn.map(({ carrierIsRunTree: _, ...rest }) => rest),
    without.map(({ carrierIsRunTree: _, ...rest }) => rest),
  );
});

test("with the stand-in, interrupt() pauses a run and a resume gives the node its answer", async () => {
  const answers: unknown[] = [];
  const graph = new StateGraph(State)
    .addNode("ask", () => {
      answers.push(interrupt("question"));
      return { seen: ["asked"] };
    })
    .addEdge(START, "ask")
    .addEdge("ask", END)
    .compile({ checkpointer: new MemorySaver() });
  const config = { callbacks: runContextHandlers({}), configurable: { thread_id: "t-interrupt" } };
  const paused = await graph.invoke({}, config);
  assert.deepEqual(
    (paused as { __interrupt__?: { value: unknown }[] }).__interrupt__?.map((found) => found.value),
    ["question"],
  );
  const resumed = await graph.invoke(new Command({ resume: "answer" }), config);
  assert.deepEqual(answers, ["answer"]);
  assert.deepEqual(resumed.seen, ["asked"]);
});

test("with the stand-in, graph code may still call LangSmith's traceable functions", async () => {
  const shout = traceable(async (text: string) => text.toUpperCase(), { name: "shout" });
  const graph = new StateGraph(State)
    .addNode("loud", async () => ({ seen: [await shout("quiet")] }))
    .addEdge(START, "loud")
    .addEdge("loud", END)
    .compile();
  const result = await graph.invoke({}, { callbacks: runContextHandlers({}) });
  assert.deepEqual(result.seen, ["QUIET"]);
});

test("with tracing on, the stand-in is not added and LangChain's own tracer would be the one found", () => {
  const previous = process.env.LANGSMITH_TRACING;
  process.env.LANGSMITH_TRACING = "true";
  try {
    assert.deepEqual(runContextHandlers(), []);
  } finally {
    if (previous === undefined) delete process.env.LANGSMITH_TRACING;
    else process.env.LANGSMITH_TRACING = previous;
  }
});

/** How many `messages` parts each of `count` concurrent streams of a chat graph got (its reply is 21 tokens). */
async function tokensPerStream(count: number): Promise<number[]> {
  return Promise.all(
    Array.from({ length: count }, async (_, index) => {
      const parts = await chatMessages.stream(
        { messages: [{ role: "user", content: `m${index}` }] },
        { callbacks: runContextHandlers({}), streamMode: ["messages", "values"] },
      );
      let tokens = 0;
      for await (const [mode] of parts) if (mode === "messages") tokens++;
      return tokens;
    }),
  );
}

test("with callbacks awaited, graphs streaming at once each get every token", async (t) => {
  const previous = process.env[CALLBACKS_BACKGROUND_VARIABLE];
  try {
    delete process.env[CALLBACKS_BACKGROUND_VARIABLE];
    // LangChain's default, for the record: background callbacks from one shared queue.
    t.diagnostic(`background callbacks: tokens per stream ${JSON.stringify(await tokensPerStream(4))} (each reply is 21)`);
    awaitLangChainCallbacks();
    assert.equal(process.env[CALLBACKS_BACKGROUND_VARIABLE], "false");
    const expected = "You said: m0 (turn 1)".length;
    assert.deepEqual(await tokensPerStream(4), [expected, expected, expected, expected]);
  } finally {
    if (previous === undefined) delete process.env[CALLBACKS_BACKGROUND_VARIABLE];
    else process.env[CALLBACKS_BACKGROUND_VARIABLE] = previous;
  }
});
