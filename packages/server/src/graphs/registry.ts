import { existsSync } from "node:fs";
import { pathToFileURL } from "node:url";
import type { BaseCheckpointSaver, CompiledGraph, LangGraphRunnableConfig } from "@langchain/langgraph";
import type { GraphSpec } from "../config/config.ts";

/** A graph ready to run: compiled, with Rudder's checkpointer attached. */
export type RunnableGraph = CompiledGraph<string>;

/** What a graph module may export: a compiled graph, an uncompiled StateGraph, or a factory of either. */
type GraphFactory = (config: LangGraphRunnableConfig) => unknown;

/** Startup stops on this error; its message names the graph and the file. */
export class GraphLoadError extends Error {
  override readonly name = "GraphLoadError";
}

interface LoadedGraph {
  readonly spec: GraphSpec;
  /** Set for a graph exported compiled or uncompiled; a factory is called per use. */
  readonly graph?: RunnableGraph;
  readonly factory?: GraphFactory;
}

/** The graphs named in the config file, loaded once at startup. */
export class GraphRegistry {
  private constructor(
    private readonly graphs: ReadonlyMap<string, LoadedGraph>,
    private readonly checkpointer: BaseCheckpointSaver,
  ) {}

  /**
   * Imports every graph module and checks that each export is (or builds) a graph. A factory is
   * called once here with an empty config, so a broken factory fails at startup, not at first use.
   */
  static async load(specs: readonly GraphSpec[], checkpointer: BaseCheckpointSaver): Promise<GraphRegistry> {
    const graphs = new Map<string, LoadedGraph>();
    for (const spec of specs) {
      const exported = await importExport(spec);
      if (typeof exported === "function" && !isGraphLike(exported)) {
        const factory = exported as GraphFactory;
        await toRunnable(spec, await callFactory(spec, factory, {}), checkpointer);
        graphs.set(spec.graphId, { spec, factory });
      } else {
        graphs.set(spec.graphId, { spec, graph: await toRunnable(spec, exported, checkpointer) });
      }
    }
    return new GraphRegistry(graphs, checkpointer);
  }

  ids(): string[] {
    return [...this.graphs.keys()];
  }

  has(graphId: string): boolean {
    return this.graphs.has(graphId);
  }

  /** The runnable graph, built by its factory with `config` when the module exports one. */
  async get(graphId: string, config: LangGraphRunnableConfig = {}): Promise<RunnableGraph | undefined> {
    const loaded = this.graphs.get(graphId);
    if (!loaded) return undefined;
    if (loaded.graph) return loaded.graph;
    return toRunnable(loaded.spec, await callFactory(loaded.spec, loaded.factory!, config), this.checkpointer);
  }
}

async function importExport(spec: GraphSpec): Promise<unknown> {
  if (!existsSync(spec.file)) throw new GraphLoadError(`graph "${spec.graphId}": file ${spec.file} does not exist`);
  let module: Record<string, unknown>;
  try {
    module = (await import(pathToFileURL(spec.file).href)) as Record<string, unknown>;
  } catch (error) {
    throw new GraphLoadError(`graph "${spec.graphId}": importing ${spec.file} failed: ${(error as Error).message}`);
  }
  // A module Node loaded as CommonJS may show its exports only on `default` (module.exports).
  const fallback = module.default;
  if (!(spec.exportName in module) && typeof fallback === "object" && fallback !== null && spec.exportName in fallback) {
    return (fallback as Record<string, unknown>)[spec.exportName];
  }
  if (!(spec.exportName in module)) {
    const available = Object.keys(module).join(", ") || "none";
    throw new GraphLoadError(`graph "${spec.graphId}": ${spec.file} has no export "${spec.exportName}" (its exports: ${available})`);
  }
  return module[spec.exportName];
}

async function callFactory(spec: GraphSpec, factory: GraphFactory, config: LangGraphRunnableConfig): Promise<unknown> {
  try {
    return await factory(config);
  } catch (error) {
    throw new GraphLoadError(`graph "${spec.graphId}" in ${spec.file}: its factory threw: ${(error as Error).message}`);
  }
}

/** Compiles an uncompiled graph, and attaches Rudder's checkpointer so state lives in our database. */
async function toRunnable(spec: GraphSpec, value: unknown, checkpointer: BaseCheckpointSaver): Promise<RunnableGraph> {
  if (isCompiled(value)) {
    // A copy, not the module's object: another registry in the same process (a second server, a
    // test) may load the same module with its own checkpointer.
    const copy = value.withConfig({}) as RunnableGraph;
    copy.checkpointer = checkpointer;
    return copy;
  }
  if (isUncompiled(value)) {
    try {
      return value.compile({ checkpointer });
    } catch (error) {
      throw new GraphLoadError(`graph "${spec.graphId}" in ${spec.file} failed to compile: ${(error as Error).message}`);
    }
  }
  throw new GraphLoadError(
    `graph "${spec.graphId}": export "${spec.exportName}" of ${spec.file} is not a graph ` +
      "(expected a compiled graph, a StateGraph, or a function returning one)",
  );
}

// Told apart by shape, not instanceof: a graph module may load its own copy of @langchain/langgraph.
function isCompiled(value: unknown): value is RunnableGraph {
  return isGraphLike(value) && typeof (value as { getState?: unknown }).getState === "function";
}

function isUncompiled(value: unknown): value is { compile(options: { checkpointer: BaseCheckpointSaver }): RunnableGraph } {
  return isGraphLike(value) && typeof (value as { compile?: unknown }).compile === "function";
}

function isGraphLike(value: unknown): boolean {
  return (
    (typeof value === "object" || typeof value === "function") &&
    value !== null &&
    (typeof (value as { invoke?: unknown }).invoke === "function" || typeof (value as { compile?: unknown }).compile === "function")
  );
}
