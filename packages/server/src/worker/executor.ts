import type { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import { ensureConfig, pickRunnableConfigKeys } from "@langchain/core/runnables";
import { AsyncLocalStorageProviderSingleton } from "@langchain/core/singletons";
import { Command, type BaseStore, type LangGraphRunnableConfig } from "@langchain/langgraph";
import { RUDDER_METER_KEY, RUDDER_STEERING_KEY, type SteeringChannel, type UsageRecorder } from "@rudder/graph";
import { UsageMeter } from "../domain/budget.ts";
import { recursionLimitOf } from "../domain/runs.ts";
import { BudgetCallbackHandler, type ModelPrice } from "./budget-callbacks.ts";
import type { GraphRegistry, RunnableGraph } from "../graphs/registry.ts";
import { AttemptCheckpoints, LENT_CHECKPOINTER_KEY, TENANT_KEY, type RunCheckpointSaver } from "../storage/checkpointer.ts";
import type { PendingEvent } from "../storage/events.ts";
import type { ClaimedRun } from "../storage/runs.ts";
import { storableText } from "../domain/storable-json.ts";
import {
  breakpointsOf,
  recordsCheckpoints,
  recordsLangChainEvents,
  recordsTaskPayloads,
  recordsToolEvents,
  streamsSubgraphs,
} from "../domain/langgraph-kwargs.ts";
import { assertStorable } from "./storable-output.ts";
import { TaskStartBarrier } from "./task-start-barrier.ts";
import { awaitLangChainCallbacks, runContextHandlers } from "./langchain-callbacks.ts";
import { installEventDrivenBatchedStore } from "./batched-store.ts";
import { installPooledRandomValues } from "./pooled-random.ts";
import { installLinearCallbackCopy } from "./linear-callback-copy.ts";

// Every run's graph gets the tenant's store: LangGraph's per-run batching wrapper must not poll.
installEventDrivenBatchedStore();
// A run's streamed tokens reach its stream before its graph goes on (see `awaitLangChainCallbacks`).
awaitLangChainCallbacks();
// LangChain's and LangGraph's per-runnable UUIDs draw from a pool (see `pooledRandomValues`).
installPooledRandomValues();
// LangChain's callback managers are copied per runnable: with their metadata in one pass (see `linearCopy`).
installLinearCallbackCopy();

/** A run's budget limits, as the meter takes them. */
export function budgetOf(run: ClaimedRun) {
  return { model_calls: run.max_model_calls, tool_calls: run.max_tool_calls, tokens: run.max_tokens, cost: run.max_cost };
}

/** How one attempt of a run ended, as far as the graph is concerned. */
import type { AttemptResult } from "../domain/run-lifecycle.ts";
export type { AttemptResult };

/** The stream modes every run records (its events). */
export const STREAM_MODES = ["values", "updates", "custom", "messages", "tasks"] as const;
/** Recorded only for runs that asked (LangGraph's `checkpoints` and `debug` stream modes): a payload per step. */
const CHECKPOINT_MODE = "checkpoints";
/** Recorded only for runs that asked (LangGraph's `tools` stream mode). */
const TOOLS_MODE = "tools";
type StreamMode = (typeof STREAM_MODES)[number] | typeof CHECKPOINT_MODE | typeof TOOLS_MODE;
type StreamPart = [StreamMode, unknown] | [string[], StreamMode, unknown];
/** A LangChain `streamEvents` v2 event, as far as the worker reads it. */
interface StreamEvent {
  event: string;
  run_id: string;
  parent_ids?: string[];
  tags?: string[];
  data: unknown;
}

/**
 * Runs a claimed run's graph once, streaming LangGraph's output as run events through `emit`.
 * A retried attempt passes the same `run_id` in the metadata, so LangGraph continues from the
 * run's last checkpoint instead of starting over. A stateless run checkpoints under its own id.
 */
export async function executeAttempt(
  run: ClaimedRun,
  deps: {
    graphs: GraphRegistry;
    /** The run's tenant's store, handed to the graph as LangGraph's store (`config.store`, `getStore()`). */
    store: BaseStore;
    /** `dataJson`: the event's data as JSON, as checked for storage (the writer stores it as is). */
    emit: (event: PendingEvent, dataJson?: string) => void;
    signal: AbortSignal;
    meter: UsageMeter;
    prices: Readonly<Record<string, ModelPrice>>;
    channel: SteeringChannel;
    /** The run's own checkpointer (`RudderCheckpointSaver.forRun`): its tenant, its commit hook, `checkpoints`. */
    checkpointer: RunCheckpointSaver;
    checkpoints: AttemptCheckpoints;
    /** Commits what `checkpoints` holds (`RudderCheckpointSaver.commitHeld`): where durability `sync` waits. */
    commitHeld: () => Promise<void>;
  },
): Promise<AttemptResult> {
  const base = runConfig(run, deps.signal, deps.meter, deps.prices);
  const barrier = deps.checkpoints.holdsSteps ? [new TaskStartBarrier(deps.checkpoints, deps.commitHeld)] : [];
  // One steering channel and one checkpointer for the run: subgraphs inherit `configurable`, so
  // they share them. The checkpointer is lent rather than left to the graph's own (the shared
  // saver, which trusts the config it is called with), since graph code can call it.
  const config = {
    ...base,
    callbacks: [...((base.callbacks as BaseCallbackHandler[] | undefined) ?? []), ...barrier, ...runContextHandlers()],
    store: deps.store,
    configurable: {
      ...base.configurable,
      [RUDDER_STEERING_KEY]: deps.channel,
      [LENT_CHECKPOINTER_KEY]: deps.checkpointer,
    },
  };
  let lastValues: Record<string, unknown> = {};
  const interrupts = new Map<unknown, unknown>();
  // A static breakpoint (interrupt_before / interrupt_after) stops the graph with an empty `__interrupt__`.
  let atBreakpoint = false;
  try {
    const graph = await deps.graphs.get(run.graph_id, config);
    if (!graph) throw new Error(`graph ${run.graph_id} is not loaded on this worker`);
    const input = run.command
      ? new Command({ ...run.command, update: run.command.update ?? undefined, goto: run.command.goto ?? undefined })
      : run.input;
    const taskPayloads = recordsTaskPayloads(run.config);
    const streamMode: StreamMode[] = [
      ...STREAM_MODES,
      ...(recordsCheckpoints(run.config) ? ([CHECKPOINT_MODE] as const) : []),
      ...(recordsToolEvents(run.config) ? ([TOOLS_MODE] as const) : []),
    ];
    const subgraphs = streamsSubgraphs(run.config);
    const options = { ...config, streamMode, subgraphs, durability: run.durability, ...breakpointsOf(run.config) };
    const parts = recordsLangChainEvents(run.config)
      ? withLangChainEvents(graph, input, options, (event) => {
          const recorded: PendingEvent = { kind: "langchain_event", data: { event: plainJson(event) as Record<string, unknown> } };
          deps.emit(recorded, assertStorable(recorded));
        })
      : streamParts(graph, input, options);
    for await (const part of parts) {
      // With subgraphs, LangGraph prefixes each chunk with its namespace ([] for the graph itself).
      const [namespace, mode, chunk] = part.length === 3 ? part : [[], ...part];
      if (namespace.length === 0) {
        // The run's own state, breakpoints and interrupts are the root graph's (a subgraph's interrupt reaches it too).
        if (mode === "values") lastValues = valuesWithout(chunk, lastValues);
        if (mode === "updates" && Array.isArray((chunk as { __interrupt__?: unknown } | null)?.__interrupt__)) atBreakpoint = true;
        for (const found of interruptsIn(chunk)) interrupts.set((found as { id?: unknown }).id ?? found, found);
      }
      // Checked before it is buffered: an event the database refuses fails this attempt here, once.
      const event = inNamespace(toEvent(mode, chunk, taskPayloads), namespace);
      deps.emit(event, assertStorable(event));
    }
  } catch (error) {
    return { kind: "threw", error };
  }
  if (interrupts.size > 0) {
    const found = [...interrupts.values()];
    return { kind: "paused", output: { ...lastValues, __interrupt__: found }, interrupts: found };
  }
  // Stopped at a breakpoint: paused with nothing to answer; a new run (or a command) continues it.
  if (atBreakpoint) return { kind: "paused", output: lastValues, interrupts: [] };
  return { kind: "succeeded", output: lastValues };
}

/**
 * The LangGraph config of a run: its thread, context, merged config and identifying metadata;
 * with a meter, the budget callbacks and the recorder `recordUsage` finds.
 */
export function runConfig(
  run: ClaimedRun,
  signal?: AbortSignal,
  meter?: UsageMeter,
  prices: Readonly<Record<string, ModelPrice>> = {},
): LangGraphRunnableConfig {
  const configurable = (run.config.configurable as Record<string, unknown> | undefined) ?? {};
  const recorder: UsageRecorder | undefined = meter && { record: (usage) => meter.record(usage) };
  const recursionLimit = recursionLimitOf(run.config);
  return {
    ...run.config,
    ...(recursionLimit !== undefined ? { recursionLimit } : {}),
    // The tenant comes last: a run's own config cannot name another tenant's checkpoints.
    configurable: {
      ...configurable,
      thread_id: checkpointThreadId(run),
      [TENANT_KEY]: run.tenant_id,
      ...(recorder ? { [RUDDER_METER_KEY]: recorder } : {}),
    },
    ...(meter ? { callbacks: [new BudgetCallbackHandler(meter, prices)] } : {}),
    context: run.context,
    metadata: {
      ...run.metadata,
      graph_id: run.graph_id,
      assistant_id: run.assistant_id,
      run_id: run.run_id,
      thread_id: run.thread_id,
      rudder_run_id: run.run_id,
    },
    ...(signal ? { signal } : {}),
  };
}

/** A stateless run keeps its checkpoints under its own id, deleted when it ends. */
export const checkpointThreadId = (run: Pick<ClaimedRun, "thread_id" | "run_id">): string => run.thread_id ?? run.run_id;

/**
 * An attempt's checkpoint shortcuts: with durability "exit" its writes commit with the settle,
 * with "sync" they wait for the next task of graph code, the gate or the settle;
 * a stateless run's first attempt knows its own thread is empty (a redriven run's checkpoints
 * were dropped when it ended), unless it resumes a paused run, whose checkpoints it was given.
 */
export function attemptCheckpoints(run: ClaimedRun): AttemptCheckpoints {
  return new AttemptCheckpoints(
    checkpointThreadId(run),
    run.durability === "exit",
    run.thread_id === null && run.attempt === 1 && run.command === null,
    run.durability === "sync",
  );
}

/** At an interrupt LangGraph emits a values chunk holding only `__interrupt__`: keep the state before it. */
function valuesWithout(chunk: unknown, previous: Record<string, unknown>): Record<string, unknown> {
  const { __interrupt__: interrupt, ...values } = chunk as Record<string, unknown>;
  return interrupt !== undefined && Object.keys(values).length === 0 ? previous : values;
}

function interruptsIn(update: unknown): unknown[] {
  const found = (update as { __interrupt__?: unknown } | null)?.__interrupt__;
  return Array.isArray(found) ? found : [];
}

/**
 * The graph's stream parts, read from its own generator (`_streamIterator`, what `graph.stream()`
 * wraps). `stream()` hands each part through two more web streams and, per part, re-enters
 * LangChain's async context (a new callback manager built from the config) and races the abort
 * signal: at token rate that was most of the worker's cost per event (docs/benchmarks.md,
 * "Streaming at token rate"). Here the graph starts inside the run's context, as `stream()` starts
 * it (its loop and nodes keep that context), and each part is taken as the generator yields it.
 * An abort still ends the stream at once: LangGraph's runner races every task with the signal.
 * Reading stopped early (the consumer threw) aborts the graph's loop, as `stream()`'s cancel does.
 */
function streamParts(graph: RunnableGraph, input: unknown, options: Record<string, unknown>): AsyncIterable<StreamPart> {
  const stopped = new AbortController();
  const outer = options.signal as AbortSignal | undefined;
  const config = ensureConfig({
    recursionLimit: graph.config?.recursionLimit,
    ...options,
    signal: outer ? AbortSignal.any([outer, stopped.signal]) : stopped.signal,
  });
  const parts = graph._streamIterator(input as Parameters<RunnableGraph["_streamIterator"]>[0], config) as AsyncGenerator<StreamPart>;
  let started = false;
  // The generator itself, not another generator around it: one less promise hop per part.
  const iterator: AsyncIterator<StreamPart> = {
    next: () => {
      if (started) return parts.next();
      started = true;
      return AsyncLocalStorageProviderSingleton.runWithConfig(pickRunnableConfigKeys(config), () => parts.next(), true);
    },
    return: async () => {
      stopped.abort();
      return parts.return(undefined);
    },
  };
  return { [Symbol.asyncIterator]: () => iterator };
}

/** The tag LangGraph gives its own runnables (`__start__`, channel writers): not streamed as events. */
const HIDDEN_TAG = "langsmith:hidden";

/**
 * Runs the graph under LangChain's `streamEvents` (v2), as the LangGraph Platform does for the
 * `events` stream mode: the root run's `on_chain_stream` events are the graph's stream parts
 * (yielded); every other callback event goes to `onEvent`, in order, but those of runnables
 * LangGraph tags `langsmith:hidden` (its `__start__` nodes and channel writers), which the
 * Platform does not stream either.
 */
async function* withLangChainEvents(
  graph: RunnableGraph,
  input: unknown,
  options: Record<string, unknown>,
  onEvent: (event: StreamEvent) => void,
): AsyncGenerator<StreamPart> {
  let rootRunId: string | undefined;
  const events = (
    graph as unknown as { streamEvents: (input: unknown, options: Record<string, unknown>) => AsyncIterable<StreamEvent> }
  ).streamEvents(input, { ...options, version: "v2" });
  for await (const event of events) {
    if (rootRunId === undefined && event.event === "on_chain_start" && !event.parent_ids?.length) rootRunId = event.run_id;
    if (event.event === "on_chain_stream" && event.run_id === rootRunId) yield (event.data as { chunk: StreamPart }).chunk;
    else if (!event.tags?.includes(HIDDEN_TAG)) onEvent(event);
  }
}

/**
 * A LangChain callback event as plain JSON: messages as `{type, content, ...}` (as the `messages`
 * events carry them), dates as ISO strings, errors as `{name, message}`, functions dropped, a
 * value met again inside itself (a cycle) as null.
 */
function plainJson(value: unknown, seen = new WeakSet<object>()): unknown {
  if (value === null || typeof value !== "object") {
    if (typeof value === "bigint") return value.toString();
    return typeof value === "function" || typeof value === "symbol" ? undefined : value;
  }
  if (seen.has(value)) return null;
  seen.add(value);
  try {
    if (value instanceof Date) return value.toISOString();
    if (value instanceof Error) return { name: value.name, message: value.message };
    if (typeof (value as { toDict?: unknown }).toDict === "function") return plainJson(messageAsJson(value), seen);
    if (Array.isArray(value)) return value.map((item) => plainJson(item, seen) ?? null);
    if (typeof (value as { toJSON?: unknown }).toJSON === "function") return plainJson((value as { toJSON: () => unknown }).toJSON(), seen);
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      const plain = plainJson(item, seen);
      if (plain !== undefined) out[key] = plain;
    }
    return out;
  } finally {
    seen.delete(value);
  }
}

/** A subgraph's event carries its namespace; the root graph's carry none. */
function inNamespace(event: PendingEvent, namespace: string[]): PendingEvent {
  return namespace.length === 0 ? event : ({ ...event, data: { ...event.data, namespace } } as PendingEvent);
}

/** LangGraph's stream chunks as Rudder event kinds (DESIGN.md "Run events"). */
function toEvent(mode: StreamMode, chunk: unknown, taskPayloads: boolean): PendingEvent {
  switch (mode) {
    case "checkpoints": {
      const checkpoint = chunk as {
        config?: PyConfig;
        parentConfig?: PyConfig;
        values?: unknown;
        metadata?: Record<string, unknown>;
        next?: string[];
        tasks?: unknown[];
      };
      return {
        kind: "checkpoint",
        data: {
          config: addressOf(checkpoint.config)!,
          parent_config: addressOf(checkpoint.parentConfig),
          values: checkpoint.values ?? {},
          metadata: checkpoint.metadata ?? {},
          next: checkpoint.next ?? [],
          tasks: checkpoint.tasks ?? [],
        },
      };
    }
    case "tools":
      return { kind: "tools", data: { data: plainJson(chunk) } };
    case "values":
      return { kind: "values", data: { values: chunk } };
    case "updates":
      return { kind: "updates", data: { updates: chunk } };
    case "custom":
      return { kind: "custom", data: { data: chunk } };
    case "messages": {
      const [message, metadata] = chunk as [unknown, Record<string, unknown>];
      const node = metadata?.langgraph_node;
      return { kind: "messages", data: { message: messageAsJson(message), node: typeof node === "string" ? node : null, metadata } };
    }
    case "tasks": {
      const task = chunk as {
        id: string;
        name: string;
        input?: unknown;
        result?: unknown;
        error?: unknown;
        interrupts?: unknown[];
        triggers?: string[];
      };
      if ("result" in task || "error" in task) {
        return {
          kind: "node_completed",
          data: {
            node: task.name,
            task_id: task.id,
            error: task.error ? storableText(String((task.error as Error).message ?? task.error)) : null,
            interrupts: task.interrupts ?? [],
            ...(taskPayloads && "result" in task ? { result: task.result } : {}),
          },
        };
      }
      return {
        kind: "node_started",
        data: { node: task.name, task_id: task.id, triggers: task.triggers ?? [], ...(taskPayloads ? { input: task.input } : {}) },
      };
    }
  }
}

/** A checkpoint's config as LangGraph streams it ("Python" keys). */
interface PyConfig {
  configurable?: Record<string, unknown>;
}

/** Only a checkpoint's address: the live config also holds the attempt's own objects (steering channel, hooks). */
function addressOf(config: PyConfig | undefined): Record<string, unknown> | null {
  const configurable = config?.configurable;
  if (!configurable) return null;
  const { thread_id, checkpoint_ns, checkpoint_id } = configurable;
  return { configurable: { thread_id, checkpoint_ns: checkpoint_ns ?? "", checkpoint_id } };
}

/** LangChain messages serialise to a plain `{type, content, ...}` dict, as LangGraph Platform sends them. */
function messageAsJson(message: unknown): unknown {
  const candidate = message as { toDict?: () => { type: string; data: Record<string, unknown> } };
  if (typeof candidate?.toDict === "function") {
    const { type, data } = candidate.toDict();
    return { ...data, type };
  }
  return message;
}
