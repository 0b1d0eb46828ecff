import { test } from "node:test";
import assert from "node:assert/strict";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { AttemptCheckpoints, LENT_CHECKPOINTER_KEY, RudderCheckpointSaver } from "../src/storage/checkpointer.ts";
import type { Db } from "../src/storage/db.ts";
import { TaskStartBarrier } from "../src/worker/task-start-barrier.ts";
import { createTestDatabase } from "./support/db.ts";

// Durability `sync` in a run's attempt: writes are held until graph code needs them durable (the
// next task of graph code to start), so the last step's checkpoint can ride the gate's commit.

const State = Annotation.Root({ steps: Annotation<string[]>({ reducer: (left, right) => left.concat(right), default: () => [] }) });

/** The latest stored checkpoint's step of a thread, read past the attempt (what a crash would leave). */
async function durableStep(db: Db, threadId: string): Promise<number | null> {
  const rows = await db.query<{ step: number }>(
    `select (metadata->>'step')::int as step from checkpoints where thread_id = $1 and checkpoint_ns = '' order by checkpoint_id desc limit 1`,
    [threadId],
  );
  return rows[0]?.step ?? null;
}

async function withDb(body: (db: Db) => Promise<void>): Promise<void> {
  const database = await createTestDatabase();
  try {
    await body(database.db);
  } finally {
    await database.drop();
  }
}

/** An attempt holding its writes (`holdsSteps`), its barrier, and the config a run passes LangGraph. */
function heldAttempt(saver: RudderCheckpointSaver, threadId: string) {
  const attempt = new AttemptCheckpoints(threadId, false, false, true);
  const barrier = new TaskStartBarrier(attempt, () => saver.commitHeld(attempt));
  const config = {
    configurable: { thread_id: threadId, [LENT_CHECKPOINTER_KEY]: saver.forRun({ tenantId: "", attempt }) },
    callbacks: [barrier],
    durability: "sync" as const,
  };
  return { attempt, config };
}

test("sync: each step's checkpoint is durable when the next step's graph code starts; the last waits for the gate", async () => {
  await withDb(async (db) => {
    const statements: string[] = [];
    const saver = new RudderCheckpointSaver({ ...db, query: (sql, params) => (statements.push(sql), db.query(sql, params)) });
    const seen: Record<string, number | null> = {};
    const node = (name: string) => async () => {
      seen[name] = await durableStep(db, "t");
      return { steps: [name] };
    };
    const graph = new StateGraph(State)
      .addNode("first", node("first"))
      .addNode("second", node("second"))
      .addNode("third", node("third"))
      .addEdge(START, "first")
      .addEdge("first", "second")
      .addEdge("second", "third")
      .addEdge("third", END)
      .compile({ checkpointer: saver });
    const { attempt, config } = heldAttempt(saver, "t");
    const result = await graph.invoke({ steps: [] }, config);
    assert.deepEqual(result.steps, ["first", "second", "third"]);
    // The first task of graph code waits for nothing: the input and `__start__` ran no graph code.
    // Each later one finds the step before it durable: step 1 (first's) at second, step 2 at third.
    assert.deepEqual(seen, { first: null, second: 1, third: 2 });
    const writes = statements.filter((sql) => /insert into checkpoint/.test(sql));
    assert.equal(writes.length, 2, "one statement before second (input, steps 0 and 1), one before third (step 2)");
    // The last step's checkpoint (step 3) is still held: the worker commits it with the steering gate.
    assert.equal(await durableStep(db, "t"), 2);
    assert.equal(attempt.deferred.length, 2, "third's task writes and step 3's checkpoint");
    await db.transaction((tx) => saver.flushDeferred(tx, attempt));
    assert.equal(await durableStep(db, "t"), 3);
    assert.deepEqual((await saver.getTuple({ configurable: { thread_id: "t" } }))?.checkpoint.channel_values.steps, [
      "first",
      "second",
      "third",
    ]);
  });
});

test("sync: a task's writes go at once while another task of its step still runs", async () => {
  await withDb(async (db) => {
    const saver = new RudderCheckpointSaver(db);
    let fastWritesDurable = false;
    const graph = new StateGraph(State)
      .addNode("fast", () => ({ steps: ["fast"] }))
      .addNode("slow", async () => {
        // Waits until fast's task writes are stored: held until the step's end, they never would be.
        for (let tries = 0; tries < 500 && !fastWritesDurable; tries += 1) {
          const rows = await db.query<{ n: number }>(
            `select count(*)::int as n from checkpoint_writes where thread_id = 'fan' and channel = 'steps'`,
          );
          fastWritesDurable = (rows[0]?.n ?? 0) > 0;
          if (!fastWritesDurable) await new Promise((resolve) => setTimeout(resolve, 10));
        }
        return { steps: ["slow"] };
      })
      .addEdge(START, "fast")
      .addEdge(START, "slow")
      .addEdge("fast", END)
      .addEdge("slow", END)
      .compile({ checkpointer: saver });
    const { config } = heldAttempt(saver, "fan");
    const result = await graph.invoke({ steps: [] }, config);
    assert.deepEqual([...result.steps].sort(), ["fast", "slow"]);
    assert.equal(fastWritesDurable, true, "fast's writes were stored while slow still ran");
  });
});

test("sync: a subgraph's tasks wait for what the parent holds", async () => {
  await withDb(async (db) => {
    const saver = new RudderCheckpointSaver(db);
    let seenInside: number | null | undefined;
    const inner = new StateGraph(State)
      .addNode("inner", async () => {
        seenInside = await durableStep(db, "sub");
        return { steps: ["inner"] };
      })
      .addEdge(START, "inner")
      .addEdge("inner", END)
      .compile();
    const graph = new StateGraph(State)
      .addNode("before", () => ({ steps: ["before"] }))
      .addNode("child", inner)
      .addEdge(START, "before")
      .addEdge("before", "child")
      .addEdge("child", END)
      .compile({ checkpointer: saver });
    const { config } = heldAttempt(saver, "sub");
    const result = await graph.invoke({ steps: [] }, config);
    assert.equal(result.steps.at(-1), "inner");
    assert.equal(seenInside, 1, "the parent's step 1 (before's) was durable when the subgraph's node ran");
  });
});
