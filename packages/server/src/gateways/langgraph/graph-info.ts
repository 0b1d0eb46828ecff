import type { LgAssistantGraph, LgGraphSchemas } from "@rudder/api";
import { graphInputChannels } from "../../graphs/input.ts";
import type { RunnableGraph } from "../../graphs/registry.ts";

/** The parts of a compiled StateGraph that describe its channels (read by shape, as graphs/input.ts does). */
interface Described {
  builder?: { channels?: Record<string, unknown>; _outputDefinition?: unknown };
}

/** A JSON Schema object with one property per channel; values are unconstrained (LangGraph's Annotations carry no JSON types). */
function objectSchema(title: string, channels: readonly string[] | undefined): Record<string, unknown> | null {
  if (!channels) return null;
  return { title, type: "object", properties: Object.fromEntries(channels.filter((name) => !name.startsWith("__")).map((name) => [name, {}])) };
}

/**
 * The SDK's `GraphSchema` of a graph: its input, output and state channels as object schemas.
 * LangGraph.js's dev server derives full types from the TypeScript source; Rudder reads the
 * compiled graph, so each channel's own schema is `{}` (docs/langgraph-api.md).
 */
export function graphSchemas(graphId: string, graph: RunnableGraph): LgGraphSchemas {
  const builder = (graph as unknown as Described).builder;
  const state = builder?.channels ? Object.keys(builder.channels) : undefined;
  const output = builder?._outputDefinition;
  const outputChannels = output && typeof output === "object" && !Array.isArray(output) ? Object.keys(output) : state;
  return {
    graph_id: graphId,
    input_schema: objectSchema(`${graphId} input`, graphInputChannels(graph) ?? state),
    output_schema: objectSchema(`${graphId} output`, outputChannels),
    state_schema: objectSchema(`${graphId} state`, state),
    config_schema: null,
    context_schema: null,
  };
}

/** The graph's drawing, as LangGraph's `Graph.toJSON()` gives it (the dev server answers the same). */
export async function graphDrawing(graph: RunnableGraph, xray: boolean | number | undefined): Promise<LgAssistantGraph> {
  const drawable = await graph.getGraphAsync({ ...(xray ? { xray } : {}) });
  return drawable.toJSON() as LgAssistantGraph;
}
