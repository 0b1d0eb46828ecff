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
