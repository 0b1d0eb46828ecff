import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { AsyncBatchedStore, InMemoryStore, type Operation } from "@langchain/langgraph-checkpoint";
import { installEventDrivenBatchedStore } from "../src/worker/batched-store.ts";

/** An in-memory store that counts the batches it is given. */
class CountingStore extends InMemoryStore {
  batches: Operation[][] = [];
  override async batch<Op extends readonly Operation[]>(operations: Op) {
    this.batches.push([...operations]);
    return super.batch(operations);
  }
}

/** How many timers the code under test sets while the process idles ~20 ms. */
async function timersWhileIdle(): Promise<number> {
  const original = globalThis.setTimeout;
  let calls = 0;
  globalThis.setTimeout = ((...args: Parameters<typeof setTimeout>) => {
    calls++;
    return original(...args);
  }) as typeof setTimeout;
  try {
    await new Promise((resolve) => original(resolve, 20));
  } finally {
    globalThis.setTimeout = original;
  }
  return calls;
}

describe("LangGraph's AsyncBatchedStore, event-driven (worker/batched-store.ts)", () => {
  installEventDrivenBatchedStore();

  test("operations queued together go to the store in one batch, in order, with their own results", async () => {
    const inner = new CountingStore();
    const store = new AsyncBatchedStore(inner);
    await store.start();
    await Promise.all([store.put(["a"], "1", { v: 1 }), store.put(["a"], "2", { v: 2 })]);
    const [one, two, missing] = await Promise.all([store.get(["a"], "1"), store.get(["a"], "2"), store.get(["a"], "3")]);
    assert.deepEqual([one?.value, two?.value, missing], [{ v: 1 }, { v: 2 }, null]);
    assert.deepEqual(
      inner.batches.map((batch) => batch.length),
      [2, 3],
    );
    await store.stop();
  });

  test("an idle store sets no timers (LangGraph's own loop polls every ms) and hands the inner store nothing; a store error reaches every caller of the batch", async () => {
    const inner = new CountingStore();
    const store = new AsyncBatchedStore(inner);
    await store.start();
    assert.equal(await timersWhileIdle(), 0);
    assert.equal(inner.batches.length, 0);
    inner.batch = async () => {
      throw new Error("store down");
    };
    const results = await Promise.allSettled([store.get(["a"], "1"), store.search(["a"])]);
    assert.deepEqual(
      results.map((result) => (result.status === "rejected" ? (result.reason as Error).message : "fulfilled")),
      ["store down", "store down"],
    );
    await store.stop();
    assert.equal(store.isRunning, false);
  });

  test("installing twice changes nothing", () => {
    const { enqueueOperation } = AsyncBatchedStore.prototype as unknown as { enqueueOperation: unknown };
    installEventDrivenBatchedStore();
    assert.equal((AsyncBatchedStore.prototype as unknown as { enqueueOperation: unknown }).enqueueOperation, enqueueOperation);
  });
});
