import { AsyncBatchedStore, type BaseStore } from "@langchain/langgraph-checkpoint";

type Operation = Parameters<BaseStore["batch"]>[0][number];

interface QueuedOperation {
  operation: Operation;
  resolve: (result: unknown) => void;
  reject: (error: unknown) => void;
}

/** The fields of LangGraph's AsyncBatchedStore (langgraph-checkpoint 1.x) the replacement loop uses. */
interface BatchedStoreState {
  running: boolean;
  queue: Map<number, QueuedOperation>;
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
}

const INSTALLED = Symbol.for("rudder.eventDrivenBatchedStore");

/**
 * LangGraph wraps the store it is given (Rudder always gives the run's tenant store) in an
 * `AsyncBatchedStore` for each run, whose loop polls its queue with `setTimeout(0)` for as long as
 * the graph runs, used or not: about a thousand timer wake-ups a second per running run, which at
 * K=200 streaming runs was a large share of the worker's CPU (docs/benchmarks.md, "Streaming at
 * token rate"). This makes the loop sleep until an operation is queued (or the store stops), then
 * batch as before: everything queued within one `setTimeout(0)` goes to the store in one `batch`.
 * Results, order and `stop()` are unchanged. Installed once, on LangGraph's class; a version whose
 * class does not have the expected methods is left alone (it keeps polling, nothing breaks).
 */
export function installEventDrivenBatchedStore(): void {
  const prototype = AsyncBatchedStore.prototype as unknown as BatchedStoreMethods & { [INSTALLED]?: true };
  if (prototype[INSTALLED]) return;
  if (![prototype.enqueueOperation, prototype.processBatchQueue, prototype.stop].every((method) => typeof method === "function")) return;
  prototype.enqueueOperation = function (operation) {
    return new Promise((resolve, reject) => {
      this.queue.set(this.nextKey++, { operation, resolve, reject });
      this.wakeUp?.();
    });
  };
  prototype.processBatchQueue = async function () {
    while (this.running) {
      if (this.queue.size === 0) await new Promise<void>((resolve) => (this.wakeUp = resolve));
      this.wakeUp = undefined;
      // The batching window, as LangGraph's loop has it: operations queued meanwhile join the batch.
      await new Promise((resolve) => setTimeout(resolve, 0));
      if (this.queue.size === 0) continue;
      const batch = [...this.queue.values()];
      this.queue.clear();
      try {
        const results = await this.store.batch(batch.map(({ operation }) => operation));
        batch.forEach(({ resolve }, index) => resolve(results[index]));
      } catch (error) {
        for (const { reject } of batch) reject(error);
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
