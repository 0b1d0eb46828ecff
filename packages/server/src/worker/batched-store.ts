import { AsyncBatchedStore, validateNamespace, type BaseStore } from "@langchain/langgraph-checkpoint";
import type { SingleOperationStore } from "../store/langgraph-store.ts";

type Operation = Parameters<BaseStore["batch"]>[0][number];

/**
 * One call a node made: a lone operation (`get`, `put`, `search`, `delete`, `listNamespaces`), or
 * the operations of one `store.batch([...])`.
 */
interface QueuedCall {
  operation?: Operation;
  operations?: Operation[];
  resolve: (result: unknown) => void;
  reject: (error: unknown) => void;
}

/** The fields of LangGraph's AsyncBatchedStore (langgraph-checkpoint 1.x) the replacement loop uses. */
interface BatchedStoreState {
  running: boolean;
  queue: Map<number, QueuedCall>;
  nextKey: number;
  store: BaseStore;
  processingTask: Promise<void> | null;
  /** Added here: resolves the loop's wait for work. */
  wakeUp?: (() => void) | undefined;
}

interface BatchedStoreMethods {
  enqueueOperation(this: BatchedStoreState, operation: Operation): Promise<unknown>;
  processBatchQueue(this: BatchedStoreState): Promise<void>;
  stop(this: BatchedStoreState): Promise<void>;
  batch(this: BatchedStoreState, operations: Operation[]): Promise<unknown[]>;
  put(this: BatchedStoreState, namespace: string[], key: string, value: Record<string, unknown>, index?: false | string[]): Promise<void>;
}

const INSTALLED = Symbol.for("rudder.eventDrivenBatchedStore");

/** Queues one call and wakes the loop. */
function enqueue(state: BatchedStoreState, call: Omit<QueuedCall, "resolve" | "reject">): Promise<unknown> {
  return new Promise((resolve, reject) => {
    state.queue.set(state.nextKey++, { ...call, resolve, reject });
    state.wakeUp?.();
  });
}

/**
 * LangGraph wraps the store it is given (Rudder always gives the run's tenant store) in an
 * `AsyncBatchedStore` for each run. This replaces three things of that class:
 *
 * - Its loop polls its queue with `setTimeout(0)` for as long as the graph runs, used or not:
 *   about a thousand timer wake-ups a second per running run, which at K=200 streaming runs was a
 *   large share of the worker's CPU (docs/benchmarks.md, "Streaming at token rate"). Here the loop
 *   sleeps until a call is queued (or the store stops).
 * - It merged every call queued within one tick into one `batch` of the inner store: for Rudder's
 *   store one transaction, so one invalid `put` failed the valid calls beside it, with an error
 *   naming an index of a batch the node never made. Here each call is its own `batch` (each
 *   `put`, `get`, `search`, `delete`, `listNamespaces` a batch of one, as over HTTP), run one
 *   after another in the order they were made, each settling on its own.
 * - Its `batch` throws (LangGraph left it out of the wrapper), and `listNamespaces` (which
 *   `BaseStore` builds on `batch`) with it. Here `batch([...])` is queued like any call and goes
 *   to the inner store whole (one transaction in Rudder's store). `put` also passes its `index`
 *   argument on, which LangGraph's drops.
 *
 * Installed once, on LangGraph's class; a version whose class does not have the expected methods
 * is left alone (it keeps polling and merging, and its `batch` keeps throwing).
 */
export function installEventDrivenBatchedStore(): void {
  const prototype = AsyncBatchedStore.prototype as unknown as BatchedStoreMethods & { [INSTALLED]?: true };
  if (prototype[INSTALLED]) return;
  const methods = [prototype.enqueueOperation, prototype.processBatchQueue, prototype.stop, prototype.batch, prototype.put];
  if (!methods.every((method) => typeof method === "function")) return;
  prototype.enqueueOperation = function (operation) {
    return enqueue(this, { operation });
  };
  prototype.batch = async function (operations) {
    return (await enqueue(this, { operations: [...operations] })) as unknown[];
  };
  prototype.put = async function (namespace, key, value, index) {
    validateNamespace(namespace); // as LangGraph's put does
    await enqueue(this, { operation: { namespace, key, value, ...(index !== undefined ? { index } : {}) } });
  };
  prototype.processBatchQueue = async function () {
    while (this.running) {
      if (this.queue.size === 0) await new Promise<void>((resolve) => (this.wakeUp = resolve));
      this.wakeUp = undefined;
      if (this.queue.size === 0) continue;
      const calls = [...this.queue.values()];
      this.queue.clear();
      const store = this.store as BaseStore & Partial<SingleOperationStore>;
      for (const call of calls) {
        try {
          if (call.operations) call.resolve(await store.batch(call.operations));
          else if (store.one) call.resolve(await store.one(call.operation!));
          else call.resolve((await store.batch([call.operation!]))[0]);
        } catch (error) {
          call.reject(error);
        }
      }
    }
  };
  prototype.stop = async function () {
    this.running = false;
    this.wakeUp?.();
    if (this.processingTask) await this.processingTask;
  };
  prototype[INSTALLED] = true;
}
