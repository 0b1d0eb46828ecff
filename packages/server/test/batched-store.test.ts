import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Annotation, END, START, StateGraph, type LangGraphRunnableConfig } from "@langchain/langgraph";
import { AsyncBatchedStore, InMemoryStore, type BaseStore, type Operation } from "@langchain/langgraph-checkpoint";
import { TenantStore } from "../src/store/langgraph-store.ts";
import { StoreService } from "../src/store/service.ts";
import { installEventDrivenBatchedStore } from "../src/worker/batched-store.ts";
import { createTestDatabase, TEST_DRIVER, type TestDatabase } from "./support/db.ts";

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

  test("each call is a batch of one, sent in the order made, with its own result", async () => {
    const inner = new CountingStore();
    const store = new AsyncBatchedStore(inner);
    await store.start();
    await Promise.all([store.put(["a"], "1", { v: 1 }), store.put(["a"], "2", { v: 2 })]);
    const [one, two, missing] = await Promise.all([store.get(["a"], "1"), store.get(["a"], "2"), store.get(["a"], "3")]);
    assert.deepEqual([one?.value, two?.value, missing], [{ v: 1 }, { v: 2 }, null]);
    assert.deepEqual(
      inner.batches.map((batch) => batch.map((operation) => ("key" in operation ? operation.key : "?"))),
      [["1"], ["2"], ["1"], ["2"], ["3"]],
    );
    // A put and a get of the same key made together: the get sees the put (order kept).
    const [, seen] = await Promise.all([store.put(["b"], "k", { v: "new" }), store.get(["b"], "k")]);
    assert.deepEqual(seen?.value, { v: "new" });
    await store.stop();
  });

  test("a call that fails fails alone: the calls made beside it still run and answer", async () => {
    const inner = new CountingStore();
    const store = new AsyncBatchedStore(inner);
    await store.start();
    const original = inner.batch.bind(inner);
    inner.batch = (async (operations: Operation[]) => {
      if (operations.some((operation) => "key" in operation && operation.key === "bad")) throw new Error("bad key");
      return original(operations);
    }) as typeof inner.batch;
    const settled = await Promise.allSettled([
      store.put(["a"], "good", { v: 1 }),
      store.put(["a"], "bad", { v: 2 }),
      store.get(["a"], "good"),
    ]);
    assert.deepEqual(
      settled.map((result) => (result.status === "rejected" ? (result.reason as Error).message : result.value)),
      [undefined, "bad key", settled[2]!.status === "fulfilled" ? settled[2]!.value : "missing"],
    );
    assert.deepEqual((settled[2] as PromiseFulfilledResult<{ value: unknown }>).value.value, { v: 1 });
    await store.stop();
  });

  test("store.batch([...]) reaches the inner store whole; listNamespaces works; put passes its index on", async () => {
    const inner = new CountingStore();
    const store = new AsyncBatchedStore(inner);
    await store.start();
    await store.put(["n", "x"], "0", { v: 0 });
    const results = await store.batch([
      { namespace: ["n", "x"], key: "1", value: { v: 1 } },
      { namespace: ["n", "x"], key: "0" },
    ]);
    assert.deepEqual((results[1] as { value: unknown }).value, { v: 0 });
    assert.equal(inner.batches.at(-1)!.length, 2, "one inner batch");
    assert.deepEqual(await store.listNamespaces({ prefix: ["n"] }), [["n", "x"]]);
    await (store as BaseStore).put(["n", "y"], "2", { v: 2 }, ["v"]); // BaseStore has index; the wrapper type drops it
    assert.deepEqual((inner.batches.at(-1)![0] as { index?: unknown }).index, ["v"]);
    await assert.rejects(store.put(["a.b"], "k", { v: 1 }), /cannot contain periods/, "put still checks the namespace");
    await store.stop();
  });

  test("an idle store sets no timers (LangGraph's own loop polls every ms) and hands the inner store nothing", async () => {
    const inner = new CountingStore();
    const store = new AsyncBatchedStore(inner);
    await store.start();
    assert.equal(await timersWhileIdle(), 0);
    assert.equal(inner.batches.length, 0);
    await store.stop();
    assert.equal(store.isRunning, false);
  });

  test("installing twice changes nothing", () => {
    const { enqueueOperation } = AsyncBatchedStore.prototype as unknown as { enqueueOperation: unknown };
    installEventDrivenBatchedStore();
    assert.equal((AsyncBatchedStore.prototype as unknown as { enqueueOperation: unknown }).enqueueOperation, enqueueOperation);
  });
});

describe(`graph code on Rudder's store, through LangGraph's own wrapper (${TEST_DRIVER})`, () => {
  installEventDrivenBatchedStore();
  let database: TestDatabase;
  let service: StoreService;
  before(async () => {
    database = await createTestDatabase();
    service = new StoreService(database.db, { defaultTtl: null, refreshOnRead: true });
  });
  after(() => database.drop());

  /** Runs `node` as a one-node graph compiled with the tenant's store, as the worker gives it. */
  async function inNode<T>(tenant: string, node: (store: BaseStore) => Promise<T>): Promise<T> {
    let answer: T | undefined;
    const graph = new StateGraph(Annotation.Root({ done: Annotation<boolean> }))
      .addNode("node", async (_state, config: LangGraphRunnableConfig) => {
        assert.equal((config.store as { lg_name?: string }).lg_name, "AsyncBatchedStore", "the node gets LangGraph's wrapper");
        answer = await node(config.store!);
        return { done: true };
      })
      .addEdge(START, "node")
      .addEdge("node", END)
      .compile({ store: new TenantStore(service, tenant) });
    await graph.invoke({ done: false });
    return answer!;
  }

  test("listNamespaces and store.batch work in a node; batch is one transaction", async () => {
    const answer = await inNode("nodes-a", async (store) => {
      const results = await store.batch([
        { namespace: ["g", "one"], key: "k", value: { v: 1 } },
        { namespace: ["g", "two"], key: "k", value: { v: 2 } },
        { namespace: ["g", "one"], key: "k" },
      ]);
      const all = await store.listNamespaces({});
      const under = await store.listNamespaces({ prefix: ["g"], maxDepth: 2 });
      // A batch with a bad operation writes nothing, and says which operation.
      const failed = await store
        .batch([
          { namespace: ["g", "three"], key: "k", value: { v: 3 } },
          { namespace: ["g", "three"], key: "k".repeat(1100), value: { v: 3 } },
        ])
        .then(
          () => "written",
          (error: Error) => error.message,
        );
      return { got: (results[2] as { value: unknown }).value, all, under, failed, three: await store.get(["g", "three"], "k") };
    });
    assert.deepEqual(answer.got, { v: 1 });
    assert.deepEqual(answer.all, [
      ["g", "one"],
      ["g", "two"],
    ]);
    assert.deepEqual(answer.under, answer.all);
    assert.match(answer.failed, /^store\.batch\/1\/key: /);
    assert.equal(answer.three, null);
  });

  test("concurrent calls of one node are independent: an invalid put fails alone, naming itself", async () => {
    const answer = await inNode("nodes-b", async (store) => {
      const settled = await Promise.allSettled([
        store.put(["p", "same"], "valid", { v: 1 }),
        store.put(["p", "same"], "k".repeat(1100), { v: 1 }),
        store.search(["p"], { limit: 5 }),
      ]);
      return { settled, written: await store.get(["p", "same"], "valid") };
    });
    assert.equal(answer.settled[0].status, "fulfilled");
    assert.equal(answer.settled[1].status, "rejected");
    assert.match(
      ((answer.settled[1] as PromiseRejectedResult).reason as Error).message,
      /^store\.put\/key: a key has at most 1024 characters/,
    );
    assert.equal(answer.settled[2].status, "fulfilled");
    assert.deepEqual(answer.written?.value, { v: 1 });
  });
});
