import { test } from "node:test";
import assert from "node:assert/strict";
import { Annotation, Command, END, INTERRUPT, START, StateGraph, interrupt } from "@langchain/langgraph";
import { emptyCheckpoint, uuid6, type CheckpointMetadata, type CheckpointTuple } from "@langchain/langgraph-checkpoint";
import type { RunnableConfig } from "@langchain/core/runnables";
import { checkpointWrite, CheckpointWriteBatcher } from "../src/storage/checkpoint-writes.ts";
import { AttemptCheckpoints, LENT_CHECKPOINTER_KEY, RudderCheckpointSaver, TENANT_KEY } from "../src/storage/checkpointer.ts";
import type { Db } from "../src/storage/db.ts";
import { createTestDatabase } from "./support/db.ts";

const State = Annotation.Root({
  steps: Annotation<string[]>({ reducer: (left, right) => left.concat(right), default: () => [] }),
  answer: Annotation<string | undefined>(),
});

/** first → ask (interrupts for an answer) → second. */
function buildGraph(checkpointer: RudderCheckpointSaver) {
  return new StateGraph(State)
    .addNode("first", () => ({ steps: ["first"] }))
    .addNode("ask", () => {
      const answer = interrupt("what now?") as string;
      return { steps: ["ask"], answer };
    })
    .addNode("second", () => ({ steps: ["second"] }))
    .addEdge(START, "first")
    .addEdge("first", "ask")
    .addEdge("ask", "second")
    .addEdge("second", END)
    .compile({ checkpointer });
}

/** Runs `body` against a private database that is dropped afterwards, pass or fail. */
async function withSaver(body: (saver: RudderCheckpointSaver, db: Db) => Promise<void>): Promise<void> {
  const database = await createTestDatabase();
  try {
    await body(new RudderCheckpointSaver(database.db), database.db);
  } finally {
    await database.drop();
  }
}

/** Interrupts at "ask" (run r1), then resumes it (run r2); returns the thread's config. */
async function runToCompletion(saver: RudderCheckpointSaver, threadId = "thread-1"): Promise<RunnableConfig> {
  const graph = buildGraph(saver);
  const config = { configurable: { thread_id: threadId } };
  await graph.invoke({ steps: [] }, { ...config, metadata: { graph_id: "g", run_id: "r1" } });
  await graph.invoke(new Command({ resume: "yes" }), { ...config, metadata: { graph_id: "g", run_id: "r2" } });
  return config;
}

async function collect(iterable: AsyncIterable<CheckpointTuple>): Promise<CheckpointTuple[]> {
  const out: CheckpointTuple[] = [];
  for await (const item of iterable) out.push(item);
  return out;
}

const INPUT: CheckpointMetadata = { source: "input", step: -1, parents: {} };
const LOOP: CheckpointMetadata = { source: "loop", step: 0, parents: {} };

const ids = (tuples: CheckpointTuple[]) => tuples.map((tuple) => tuple.checkpoint.id);

test("a graph interrupts, persists its state, and resumes with Command", async () => {
  await withSaver(async (saver) => {
    const graph = buildGraph(saver);
    const config = { configurable: { thread_id: "t" } };
    await graph.invoke({ steps: [] }, config);

    const paused = await graph.getState(config);
    assert.deepEqual(paused.values, { steps: ["first"] });
    assert.deepEqual(paused.next, ["ask"]);
    assert.equal(paused.tasks[0]?.interrupts[0]?.value, "what now?");
    const stored = await saver.getTuple(config);
    assert.ok(
      stored?.pendingWrites?.some(([, channel]) => channel === INTERRUPT),
      "the interrupt is a pending write",
    );

    const result = await graph.invoke(new Command({ resume: "yes" }), config);
    assert.deepEqual(result, { steps: ["first", "ask", "second"], answer: "yes" });
    const done = await graph.getState(config);
    assert.deepEqual(done.next, []);
    assert.deepEqual(done.values, { steps: ["first", "ask", "second"], answer: "yes" });
  });
});

test("history is newest first and chained by parent configs", async () => {
  await withSaver(async (saver) => {
    const config = await runToCompletion(saver);
    const history = await collect(saver.list(config));
    // input (-1), then one checkpoint after each superstep: start, first, ask (after resume), second.
    assert.deepEqual(
      history.map((tuple) => tuple.metadata?.step),
      [3, 2, 1, 0, -1],
    );
    assert.deepEqual(ids(history), ids(history).toSorted().reverse());
    history.slice(0, -1).forEach((tuple, i) => {
      assert.equal(tuple.parentConfig?.configurable?.checkpoint_id, history[i + 1]?.checkpoint.id);
    });
    assert.equal(history.at(-1)?.parentConfig, undefined);

    const graphHistory = [];
    for await (const snapshot of buildGraph(saver).getStateHistory(config)) graphHistory.push(snapshot);
    assert.equal(graphHistory.length, 5);
    assert.deepEqual(graphHistory[0]?.values, { steps: ["first", "ask", "second"], answer: "yes" });
  });
});

test("put merges the run's config.metadata into the stored checkpoint metadata", async () => {
  await withSaver(async (saver, db) => {
    const config = await runToCompletion(saver);
    const latest: Record<string, unknown> = { ...(await saver.getTuple(config))?.metadata };
    assert.equal(latest.source, "loop");
    assert.deepEqual({ graph_id: latest.graph_id, run_id: latest.run_id }, { graph_id: "g", run_id: "r2" });
    assert.equal(latest.ls_integration, undefined, "LangSmith keys are not checkpoint metadata");

    // Readable in SQL too: that is what Rudder needs it for.
    const rows = await db.query<{ graph_id: string; run_id: string }>(
      `select metadata->>'graph_id' as graph_id, metadata->>'run_id' as run_id from checkpoints
        where thread_id = $1 order by checkpoint_id`,
      ["thread-1"],
    );
    assert.deepEqual(
      rows.map((row) => row.run_id),
      ["r1", "r1", "r1", "r2", "r2"],
    );
    assert.ok(rows.every((row) => row.graph_id === "g"));
  });
});

test("metadata merge keeps the checkpoint's own keys and only plain JSON from the run", async () => {
  await withSaver(async (saver) => {
    const checkpoint = emptyCheckpoint();
    const config = {
      configurable: { thread_id: "m" },
      metadata: {
        source: "from-run",
        nested: { ok: [1, "two", null] },
        nul: "a\u0000b",
        fn: () => 1,
        when: new Date(0),
        big: Number.NaN,
        ls_provider: "x",
        __private: "y",
        thread_id: "other",
        langgraph_step: 3,
      },
    };
    const saved = await saver.put(config, checkpoint, INPUT, {});
    const tuple = await saver.getTuple(saved);
    assert.deepEqual(tuple?.metadata, {
      source: "input",
      step: -1,
      parents: {},
      nested: { ok: [1, "two", null] },
      nul: "ab",
    });
  });
});

test("list filters by metadata and pages with before and limit", async () => {
  await withSaver(async (saver) => {
    const config = await runToCompletion(saver);
    await runToCompletion(saver, "thread-2");
    const all = await collect(saver.list(config));

    const resumed = await collect(saver.list(config, { filter: { run_id: "r2" } }));
    assert.deepEqual(ids(resumed), ids(all.slice(0, 2)));
    const inputs = await collect(saver.list(config, { filter: { source: "input", graph_id: "g" } }));
    assert.deepEqual(ids(inputs), [all.at(-1)?.checkpoint.id]);
    assert.deepEqual(await collect(saver.list(config, { filter: { graph_id: "nope" } })), []);

    assert.deepEqual(ids(await collect(saver.list(config, { limit: 2 }))), ids(all.slice(0, 2)));
    const older = await collect(saver.list(config, { before: all[1]?.config, limit: 2 }));
    assert.deepEqual(ids(older), ids(all.slice(2, 4)));
    assert.deepEqual(await collect(saver.list(config, { before: all.at(-1)?.config })), []);

    const acrossThreads = await collect(saver.list({}, { filter: { source: "input" } }));
    assert.equal(acrossThreads.length, 2);
  });
});

test("putWrites: ordinary writes are kept once, special writes are replaced, order is the sort key", async () => {
  await withSaver(async (saver, db) => {
    const checkpoint = { ...emptyCheckpoint(), id: uuid6(-1) };
    const config = await saver.put({ configurable: { thread_id: "w" } }, checkpoint, LOOP, {});
    await saver.putWrites(
      config,
      [
        ["a", 1],
        ["b", 2],
      ],
      "task-b",
      "~b",
    );
    await saver.putWrites(
      config,
      [
        ["a", 99],
        ["b", 98],
      ],
      "task-b",
      "~b",
    ); // a replayed task: ignored
    await saver.putWrites(config, [[INTERRUPT, "first"]], "task-b", "~b");
    await saver.putWrites(config, [[INTERRUPT, "second"]], "task-b", "~b"); // special: replaced
    await saver.putWrites(config, [["a", 0]], "task-a", "~a");
    await saver.putWrites(config, [["input", "x"]], "task-z"); // no path sorts first
    await saver.putWrites(config, [], "task-empty");

    const tuple = await saver.getTuple(config);
    assert.deepEqual(tuple?.pendingWrites, [
      ["task-z", "input", "x"],
      ["task-a", "a", 0],
      ["task-b", INTERRUPT, "second"],
      ["task-b", "a", 1],
      ["task-b", "b", 2],
    ]);
    const [count] = await db.query<{ n: number }>("select count(*)::int as n from checkpoint_writes");
    assert.equal(count?.n, 5);

    await assert.rejects(saver.putWrites({ configurable: { thread_id: "w" } }, [["a", 1]], "t"), /checkpoint_id/);
    const noThread = { configurable: { checkpoint_id: checkpoint.id } };
    await assert.rejects(saver.putWrites(noThread, [["a", 1]], "t"), /thread_id/);
  });
});

test("put, putWrites and getTuple each take one round trip", async () => {
  await withSaver(async (_saver, db) => {
    let queries = 0;
    const counting: Db = { ...db, query: (sql, params) => (queries++, db.query(sql, params)) };
    const counted = new RudderCheckpointSaver(counting);
    const config = await counted.put({ configurable: { thread_id: "rt" } }, emptyCheckpoint(), INPUT, {});
    assert.equal(queries, 1);
    await counted.putWrites(
      config,
      [
        ["a", 1],
        ["b", 2],
        [INTERRUPT, 3],
      ],
      "task",
    );
    assert.equal(queries, 2);
    assert.equal((await counted.getTuple(config))?.pendingWrites?.length, 3);
    const latest = await counted.getTuple({ configurable: { thread_id: "rt" } });
    assert.equal(latest?.checkpoint.id, config.configurable?.checkpoint_id);
    assert.equal(queries, 4);
    await collect(counted.list({ configurable: { thread_id: "rt" } }));
    assert.equal(queries, 5);
  });
});

test("concurrent writes of many threads share statements (group commit), each intact", async () => {
  await withSaver(async (_saver, db) => {
    let statements = 0;
    const counting: Db = { ...db, query: (sql, params) => (statements++, db.query(sql, params)) };
    const saver = new RudderCheckpointSaver(counting);
    const threads = Array.from({ length: 40 }, (_, index) => `group-${index}`);
    const configs = await Promise.all(
      threads.map((threadId) => saver.put({ configurable: { thread_id: threadId } }, { ...emptyCheckpoint(), id: uuid6(-1) }, LOOP, {})),
    );
    await Promise.all(
      configs.map((config, index) =>
        saver.putWrites(
          config,
          [
            ["a", index],
            [INTERRUPT, `i${index}`],
          ],
          `task-${index}`,
        ),
      ),
    );
    // 80 writes; one at a time would be 80 statements.
    assert.ok(statements <= 10, `${statements} statements for 80 concurrent writes`);
    for (const [index, config] of configs.entries()) {
      const tuple = await saver.getTuple(config);
      assert.equal(tuple?.config.configurable?.thread_id, threads[index]);
      assert.deepEqual(tuple?.pendingWrites, [
        [`task-${index}`, INTERRUPT, `i${index}`],
        [`task-${index}`, "a", index],
      ]);
    }
  });
});

/** A one-node graph over a saver whose statements are recorded. */
function countedOneNodeGraph(db: Db) {
  const statements: string[] = [];
  const counting: Db = { ...db, query: (sql, params) => (statements.push(sql), db.query(sql, params)) };
  const saver = new RudderCheckpointSaver(counting);
  const graph = new StateGraph(State)
    .addNode("only", () => ({ steps: ["only"] }))
    .addEdge(START, "only")
    .addEdge("only", END)
    .compile({ checkpointer: saver });
  return { statements, saver, graph };
}

test("a step's task writes and the step's checkpoint share one statement (durability sync)", async () => {
  await withSaver(async (_saver, db) => {
    const { statements, saver, graph } = countedOneNodeGraph(db);
    const config = { configurable: { thread_id: "one-step" } };
    await graph.invoke({ steps: [] }, { ...config, durability: "sync" });
    const writes = statements.filter((sql) => /insert into checkpoint/.test(sql));
    // Three checkpoints (input, step 0, step 1) and two tasks' writes (__start__, only): the input
    // checkpoint alone, then each step's writes with its checkpoint. One at a time would be five.
    assert.equal(writes.length, 3, writes.join("\n---\n"));
    assert.equal(writes.filter((sql) => sql.includes("checkpoint_writes") && sql.includes("insert into checkpoints")).length, 2);
    const stored = await collect(saver.list(config));
    assert.equal(stored.length, 3);
    assert.deepEqual((await saver.getTuple(config))?.checkpoint.channel_values.steps, ["only"]);
  });
});

test("in a run's attempt the input checkpoint rides the first step's statement; a read or the settle commits it when nothing follows", async () => {
  await withSaver(async (_saver, db) => {
    const { statements, saver, graph } = countedOneNodeGraph(db);
    const attempt = new AttemptCheckpoints("attempt-thread", false, false);
    const config = { configurable: { thread_id: "attempt-thread", [LENT_CHECKPOINTER_KEY]: saver.forRun({ tenantId: "", attempt }) } };
    await graph.invoke({ steps: [] }, { ...config, durability: "sync" });
    const writes = statements.filter((sql) => /insert into checkpoint/.test(sql));
    // The input checkpoint, step 0's writes and checkpoint in one statement; step 1's in the next.
    assert.equal(writes.length, 2, writes.join("\n---\n"));
    assert.equal(attempt.deferred.length, 0, "nothing left held");
    const stored = await collect(saver.list({ configurable: { thread_id: "attempt-thread" } }));
    assert.deepEqual(
      stored.map((tuple) => tuple.metadata?.source),
      ["loop", "loop", "input"],
      "all three checkpoints stored",
    );

    // Held with nothing after it: a read commits it first, and sees it.
    const held = new AttemptCheckpoints("held-thread", false, false);
    const heldSaver = saver.forRun({ tenantId: "", attempt: held });
    const heldConfig = { configurable: { thread_id: "held-thread", checkpoint_ns: "" } };
    await heldSaver.put(heldConfig, { ...emptyCheckpoint(), id: uuid6(-1) }, INPUT, {});
    assert.equal(held.deferred.length, 1, "the input checkpoint waits for the next write");
    assert.equal((await heldSaver.getTuple(heldConfig))?.metadata?.source, "input", "a read commits it first");
    assert.equal(held.deferred.length, 0);
    // A settle commits what is still held (flushDeferred, in the settle's transaction).
    const settled = new AttemptCheckpoints("settled-thread", false, false);
    await saver
      .forRun({ tenantId: "", attempt: settled })
      .put({ configurable: { thread_id: "settled-thread" } }, { ...emptyCheckpoint(), id: uuid6(-1) }, INPUT, {});
    await db.transaction((tx) => saver.flushDeferred(tx, settled));
    assert.equal((await saver.getTuple({ configurable: { thread_id: "settled-thread" } }))?.metadata?.source, "input");
  });
});

test("group commit keeps each caller's outcome: one failing write fails alone; writes of one row keep their order", async () => {
  await withSaver(async (_saver, db) => {
    const batcher = new CheckpointWriteBatcher(db);
    const row = (threadId: string, metadata: string) =>
      checkpointWrite(["", threadId, "", "c1", null, "json", new TextEncoder().encode("{}"), metadata]);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 10 }, (_, index) => batcher.write(row(`iso-${index}`, index === 4 ? "not json" : `{"n":${index}}`))),
    );
    assert.deepEqual(
      outcomes.map((outcome) => outcome.status),
      Array.from({ length: 10 }, (_, index) => (index === 4 ? "rejected" : "fulfilled")),
    );
    const [stored] = await db.query<{ n: number }>("select count(*)::int as n from checkpoints where thread_id like 'iso-%'");
    assert.equal(stored?.n, 9);

    // The same checkpoint row written three times at once: the last content wins, as in sequence.
    await Promise.all([1, 2, 3].map((n) => batcher.write(row("same", `{"n":${n}}`))));
    const [last] = await db.query<{ n: number }>("select (metadata->>'n')::int as n from checkpoints where thread_id = 'same'");
    assert.equal(last?.n, 3);
  });
});

test("deleteThread removes the thread's checkpoints and writes, and nothing else", async () => {
  await withSaver(async (saver, db) => {
    const config = await runToCompletion(saver);
    const other = await runToCompletion(saver, "thread-2");
    const head = await saver.getTuple(config);
    assert.ok(head);
    await saver.putWrites(head.config, [["steps", ["late"]]], "task");

    await saver.deleteThread("thread-1");

    assert.equal(await saver.getTuple(config), undefined);
    assert.deepEqual(await collect(saver.list(config)), []);
    const counts = await db.query<{ thread_id: string; n: number }>(
      `select thread_id, count(*)::int as n from checkpoint_writes group by thread_id`,
    );
    assert.ok(!counts.some((row) => row.thread_id === "thread-1"), "no writes left for the deleted thread");
    assert.ok(
      counts.some((row) => row.thread_id === "thread-2"),
      "the other thread keeps its writes",
    );
    assert.equal((await collect(saver.list(other))).length, 5);
  });
});

test("updateState on an earlier checkpoint forks the thread", async () => {
  await withSaver(async (saver) => {
    const graph = buildGraph(saver);
    const config = await runToCompletion(saver);
    const before = await collect(saver.list(config));
    const afterFirst = before.find((tuple) => tuple.metadata?.step === 1);
    assert.ok(afterFirst);

    const forkConfig = await graph.updateState(afterFirst.config, { steps: ["edited"] });
    const fork = await saver.getTuple(forkConfig);
    assert.equal(fork?.metadata?.source, "update");
    assert.equal(fork?.parentConfig?.configurable?.checkpoint_id, afterFirst.checkpoint.id);

    const head = await graph.getState(config);
    assert.deepEqual(head.values, { steps: ["first", "edited"] }, "the fork is the thread's head now");
    assert.deepEqual(head.next, ["ask"]);
    const oldHead = await graph.getState(before[0]!.config);
    assert.deepEqual(oldHead.values, { steps: ["first", "ask", "second"], answer: "yes" }, "the old branch stays");
    assert.equal((await collect(saver.list(config))).length, before.length + 1);
  });
});

test("getTuple returns undefined for unknown threads, checkpoints and a missing thread_id", async () => {
  await withSaver(async (saver) => {
    await runToCompletion(saver);
    assert.equal(await saver.getTuple({ configurable: { thread_id: "nope" } }), undefined);
    const unknownCheckpoint = { configurable: { thread_id: "thread-1", checkpoint_id: uuid6(-1) } };
    assert.equal(await saver.getTuple(unknownCheckpoint), undefined);
    assert.equal(await saver.getTuple({ configurable: {} }), undefined);
    await assert.rejects(saver.put({ configurable: {} }, emptyCheckpoint(), INPUT, {}), /thread_id/);
  });
});

test("a saver that needs a tenant serves a thread that passes between graphs: LangGraph's ancestor walk follows the configs it returns", async () => {
  const database = await createTestDatabase();
  try {
    const saver = new RudderCheckpointSaver(database.db, { tenantId: null });
    // `steps` is a reducer channel; a graph without it leaves its version in the thread's
    // checkpoints but not its value, so the next graph that has it rebuilds it by walking the
    // checkpoints' parent configs (BaseCheckpointSaver.getDeltaChannelHistory).
    const counting = new StateGraph(State)
      .addNode("count", () => ({ steps: ["counted"] }))
      .addEdge(START, "count")
      .addEdge("count", END)
      .compile({ checkpointer: saver });
    const Other = Annotation.Root({ answer: Annotation<string | undefined>() });
    const answering = new StateGraph(Other)
      .addNode("reply", () => ({ answer: "yes" }))
      .addEdge(START, "reply")
      .addEdge("reply", END)
      .compile({ checkpointer: saver });
    const config = { configurable: { thread_id: "shared", [TENANT_KEY]: "t1" } };

    await counting.invoke({ steps: [] }, config);
    await answering.invoke({ answer: "no" }, config);
    const head = await saver.getTuple(config);
    assert.ok(head && !("steps" in head.checkpoint.channel_values) && head.checkpoint.channel_versions.steps !== undefined);
    assert.equal(head.config.configurable?.[TENANT_KEY], "t1", "the tuple's config names the tenant the read named");
    assert.equal(head.parentConfig?.configurable?.[TENANT_KEY], "t1", "and so does its parent config");

    assert.deepEqual((await counting.getState(config)).values.steps, ["counted"]);
    const history = [];
    for await (const snapshot of counting.getStateHistory(config)) history.push(snapshot.values.steps);
    assert.deepEqual(history[0], ["counted"], "history rebuilds it from each tuple's own config");
    assert.deepEqual((await counting.invoke({ steps: [] }, config)).steps, ["counted", "counted"]);
  } finally {
    await database.drop();
  }
});

test("a value serde cannot write (a BigInt) is refused in a checkpoint, its metadata or a write, and nothing is stored", async () => {
  await withSaver(async (saver) => {
    const config = { configurable: { thread_id: "big", checkpoint_ns: "", [TENANT_KEY]: "t1" } };
    const checkpoint = { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { n: 10n } };
    await assert.rejects(saver.put(config, checkpoint, INPUT, {}), /the checkpoint is not JSON \(a BigInt/);
    await assert.rejects(
      saver.put(config, { ...emptyCheckpoint(), id: uuid6(-1) }, { ...LOOP, big: 10n } as CheckpointMetadata, {}),
      /the checkpoint's metadata is not JSON/,
    );
    assert.equal(await saver.getTuple(config), undefined, "no checkpoint was stored");
    const stored = await saver.put(config, { ...emptyCheckpoint(), id: uuid6(-1) }, INPUT, {});
    await assert.rejects(saver.putWrites(stored, [["n", 10n]], "task-1"), /the write to channel "n" is not JSON/);
    assert.deepEqual((await saver.getTuple(config))?.pendingWrites, [], "no write was stored");
  });
});
