import type { LgAssistantGraph, LgGraphSchemas } from "@rudder/api";
import { graphInputChannels } from "../../graphs/input.ts";
import type { RunnableGraph } from "../../graphs/registry.ts";
import type { GraphSchemas } from "../../graphs/schemas.ts";

/** The parts of a compiled StateGraph that describe its channels (read by shape, as graphs/input.ts does). */
interface Described {
  builder?: { channels?: Record<string, unknown>; _outputDefinition?: unknown };
}

/** A JSON Schema object with one property per channel; values are unconstrained (LangGraph's Annotations carry no JSON types). */
function objectSchema(title: string, channels: readonly string[] | undefined): Record<string, unknown> | null {
  if (!channels) return null;
  return {
    title,
    type: "object",
    properties: Object.fromEntries(channels.filter((name) => !name.startsWith("__")).map((name) => [name, {}])),
  };
}

/**
 * The SDK's `GraphSchema` of a graph: input and output as LangGraph describes them for a zod or
 * StateSchema state (`GraphSchemaCatalog`, shared with the MCP gateway); otherwise, and for the
 * state, its channels as object schemas whose members are `{}` (LangGraph.js's dev server derives
 * full types from the TypeScript source; docs/langgraph-api.md).
 */
export function graphSchemas(graphId: string, graph: RunnableGraph, declared: GraphSchemas | undefined): LgGraphSchemas {
  const builder = (graph as unknown as Described).builder;
  const state = builder?.channels ? Object.keys(builder.channels) : undefined;
  const output = builder?._outputDefinition;
  const outputChannels = output && typeof output === "object" && !Array.isArray(output) ? Object.keys(output) : state;
  return {
    graph_id: graphId,
    input_schema: declared?.input ?? objectSchema(`${graphId} input`, graphInputChannels(graph) ?? state),
    output_schema: declared?.output ?? objectSchema(`${graphId} output`, outputChannels),
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

/**
 * The graph's subgraphs by namespace (node names, nested ones joined by `|`), each with its schemas
 * as `graphSchemas` draws a graph's: those under `namespace` when given, and with `recurse`, theirs.
 */
export async function subgraphSchemas(
  graphId: string,
  graph: RunnableGraph,
  namespace: string | undefined,
  recurse: boolean,
): Promise<Record<string, LgGraphSchemas>> {
  const found: Record<string, LgGraphSchemas> = {};
  for await (const [ns, subgraph] of graph.getSubgraphsAsync(namespace, recurse)) {
    found[ns] = graphSchemas(graphId, subgraph as unknown as RunnableGraph, undefined);
  }
  return found;
}
