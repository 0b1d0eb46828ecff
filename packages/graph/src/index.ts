import type { LangGraphRunnableConfig } from "@langchain/langgraph";

/** Identifies the Rudder run executing a graph; read from the config Rudder passes to every node. */
export interface RudderRunInfo {
  readonly runId: string;
  readonly threadId: string | undefined;
  readonly assistantId: string | undefined;
  readonly graphId: string | undefined;
}

/**
 * The Rudder run this node is part of, or `undefined` outside Rudder (a plain `graph.invoke`), so
 * graph code can behave the same in both places.
 */
export function rudderRun(config: LangGraphRunnableConfig | undefined): RudderRunInfo | undefined {
  const metadata = config?.metadata as Record<string, unknown> | undefined;
  const runId = metadata?.rudder_run_id;
  if (typeof runId !== "string") return undefined;
  const text = (value: unknown) => (typeof value === "string" ? value : undefined);
  return {
    runId,
    threadId: text(config?.configurable?.thread_id),
    assistantId: text(metadata?.assistant_id),
    graphId: text(metadata?.graph_id),
  };
}

export {
  RUDDER_METER_KEY,
  RUDDER_STEERING_KEY,
  type DrainContext,
  type SteeringChannel,
  type TaskExecution,
  type SteeringMessage,
  type UsageRecorder,
  type UsageReport,
} from "./protocol.ts";
import {
  RUDDER_METER_KEY,
  RUDDER_STEERING_KEY,
  type DrainContext,
  type SteeringChannel,
  type SteeringMessage,
  type UsageRecorder,
} from "./protocol.ts";

/** Usage custom code reports, for what LangChain callbacks cannot see (a raw HTTP call to a model, a priced API). */
export interface Usage {
  modelCalls?: number;
  toolCalls?: number;
  tokens?: number;
  cost?: number;
}

/**
 * Adds to the run's shared budget counters (max_model_calls, max_tool_calls, max_tokens,
 * max_cost). Throws the run's BudgetExceededError when this crosses a budget: let it propagate,
 * the run ends failed with code budget_exceeded. Outside Rudder it does nothing.
 */
export function recordUsage(config: LangGraphRunnableConfig | undefined, usage: Usage): void {
  const recorder = config?.configurable?.[RUDDER_METER_KEY] as UsageRecorder | undefined;
  if (typeof recorder?.record !== "function") return;
  recorder.record({ model_calls: usage.modelCalls, tool_calls: usage.toolCalls, tokens: usage.tokens, cost: usage.cost });
}

function channelOf(config: LangGraphRunnableConfig | undefined): SteeringChannel | undefined {
  const channel = config?.configurable?.[RUDDER_STEERING_KEY] as SteeringChannel | undefined;
  return typeof channel?.drain === "function" ? channel : undefined;
}

/** LangGraph's per-task scratchpad key (a new object each time a task is prepared). */
const SCRATCHPAD_KEY = "__pregel_scratchpad";

/**
 * Where this node runs, for run.steer.consumed: its name, its subgraph namespace (the checkpoint
 * namespace of its parents, as LangGraph names them: `"node:<task id>"`) and its task id; and
 * which execution of the task this is, so a task LangGraph runs again gets its events again.
 */
export function drainContextOf(config: LangGraphRunnableConfig | undefined): DrainContext {
  const metadata = (config?.metadata ?? {}) as Record<string, unknown>;
  const configurable = (config?.configurable ?? {}) as Record<string, unknown>;
  const checkpointNs = typeof metadata.langgraph_checkpoint_ns === "string" ? metadata.langgraph_checkpoint_ns : "";
  const segments = checkpointNs ? checkpointNs.split("|") : [];
  const taskId = configurable.__pregel_task_id;
  const info = config?.executionInfo;
  const scope = configurable[SCRATCHPAD_KEY];
  return {
    node: typeof metadata.langgraph_node === "string" ? metadata.langgraph_node : null,
    namespace: segments.slice(0, -1),
    taskId: typeof taskId === "string" ? taskId : null,
    step: typeof metadata.langgraph_step === "number" ? metadata.langgraph_step : null,
    checkpointId: typeof info?.checkpointId === "string" ? info.checkpointId : null,
    execution: {
      scope: typeof scope === "object" && scope !== null ? scope : null,
      attempt: typeof info?.nodeAttempt === "number" ? info.nodeAttempt : null,
    },
  };
}

/**
 * Returns the steering events this execution of the node has not received yet, in order, and
 * commits their consumption before it returns: one transaction, fenced by the worker's lease,
 * turns them `consumed` and writes a `run.steer.consumed` for each, so a client sees it while the
 * node still runs. Within one execution each event is returned once; each event goes to exactly
 * one task, also across parallel tasks and subgraphs. If this execution does not complete (its
 * worker dies, the attempt is retried, `retryPolicy` runs the node again, or it interrupts and
 * the run is resumed), the task's next execution gets the same events again from its first
 * drains, before new ones, with no second `run.steer.consumed`; once the task's writes are
 * checkpointed they are never handed out again. After a cancel it returns nothing. Outside
 * Rudder it returns `[]`.
 */
export async function drainSteering(config: LangGraphRunnableConfig | undefined): Promise<SteeringMessage[]> {
  return (await channelOf(config)?.drain(drainContextOf(config))) ?? [];
}

/** What drainSteering would return now, without taking it. Outside Rudder, `[]`. */
export async function peekSteering(config: LangGraphRunnableConfig | undefined): Promise<SteeringMessage[]> {
  return (await channelOf(config)?.peek(drainContextOf(config))) ?? [];
}

/** Whether drainSteering would return something now. Outside Rudder, false. */
export async function hasSteering(config: LangGraphRunnableConfig | undefined): Promise<boolean> {
  return (await peekSteering(config)).length > 0;
}

/**
 * Waits until drainSteering would return something (true) or `timeoutMs` passes (false); stops
 * early when the run is cancelled. What this execution already drained does not count, so a node
 * listening in a loop waits its full timeout when nothing new arrived. It does not consume: call
 * drainSteering next. Outside Rudder, false at once.
 */
export async function waitForSteering(config: LangGraphRunnableConfig | undefined, options: { timeoutMs: number }): Promise<boolean> {
  const channel = channelOf(config);
  if (!channel) return false;
  return channel.wait(drainContextOf(config), options.timeoutMs, config?.signal);
}
