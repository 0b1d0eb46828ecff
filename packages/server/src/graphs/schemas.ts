import { getInputTypeSchema, getOutputTypeSchema } from "@langchain/langgraph/zod/schema";
import { graphInputChannels } from "./input.ts";
import type { GraphRegistry, RunnableGraph } from "./registry.ts";

/** A JSON Schema, as a plain object. */
export type JsonSchema = Record<string, unknown>;

/** What a graph says about its input and output, as JSON Schemas. */
export interface GraphSchemas {
  /** Always an object schema: the graph's own (zod or StateSchema state), else its input channels, else any object. */
  readonly input: JsonSchema;
  /** The graph's output schema when it declares one (zod or StateSchema state); undefined otherwise. */
  readonly output: JsonSchema | undefined;
}

const MESSAGES_DESCRIPTION = 'Chat messages, e.g. [{"role": "user", "content": "Hello"}]';

/**
 * The JSON Schemas of the configured graphs' input and output, as LangGraph produces them for a
 * graph whose state is a zod object or a StateSchema. A graph built on `Annotation` carries no
 * types at run time: its input schema lists its input channels (any value each, no others), and
 * its output schema is unknown. Built once per graph (a factory graph is built once for it).
 */
export class GraphSchemaCatalog {
  private readonly cache = new Map<string, Promise<GraphSchemas | undefined>>();

  constructor(private readonly graphs: GraphRegistry) {}

  /** The schemas of a loaded graph; undefined for a graph id that is not loaded. */
  schemasOf(graphId: string): Promise<GraphSchemas | undefined> {
    let schemas = this.cache.get(graphId);
    if (!schemas) {
      schemas = this.graphs.get(graphId).then((graph) => (graph ? describe(graph) : undefined));
      this.cache.set(graphId, schemas);
      // A failure is not kept: the next caller tries again.
      schemas.catch(() => this.cache.delete(graphId));
    }
    return schemas;
  }
}

function describe(graph: RunnableGraph): GraphSchemas {
  const typed = graph as unknown as Parameters<typeof getInputTypeSchema>[0];
  const declaredInput = asObjectSchema(safely(() => getInputTypeSchema(typed)));
  const output = asObjectSchema(safely(() => getOutputTypeSchema(typed)));
  return { input: declaredInput ?? channelSchema(graphInputChannels(graph)), output };
}

/** The input of a graph without types: its channels, any value each; a graph without channels takes any object. */
function channelSchema(channels: string[] | undefined): JsonSchema {
  if (!channels || channels.length === 0) return { type: "object" };
  const properties = Object.fromEntries(
    channels.map((channel) => [channel, channel === "messages" ? { type: "array", description: MESSAGES_DESCRIPTION } : {}]),
  );
  return { type: "object", properties, additionalProperties: false };
}

/** A schema LangGraph produced, without its `$schema` (validators differ on drafts), when it is an object schema. */
function asObjectSchema(schema: unknown): JsonSchema | undefined {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return undefined;
  const { $schema: _draft, ...rest } = schema as JsonSchema;
  return rest.type === "object" ? rest : undefined;
}

function safely<T>(read: () => T): T | undefined {
  try {
    return read();
  } catch {
    return undefined;
  }
}
