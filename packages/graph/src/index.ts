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

export { RUDDER_METER_KEY, type UsageRecorder, type UsageReport } from "./protocol.ts";
import { RUDDER_METER_KEY, type UsageRecorder } from "./protocol.ts";

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
