import type { BaseCheckpointSaver, CheckpointTuple, StateSnapshot } from "@langchain/langgraph";
import type { CheckpointRef, ForkAnswer, ForkBody, ThreadState } from "@rudder/api";
import { ApiError, notFound } from "../domain/errors.ts";
import { TENANT_KEY } from "../storage/checkpointer.ts";
import type { GraphRegistry, RunnableGraph } from "./registry.ts";

/**
 * Reads and forks thread state through LangGraph. The graph is the one that wrote the thread's
 * newest checkpoint (its `graph_id` metadata, which Rudder's runs set); a thread whose graph is
 * unknown is read straight from the checkpointer, without graph-derived `next` and `tasks`.
 * Callers check the thread's tenant first; every read and write names it to the checkpointer.
 */
/** A page of a thread's history: newest first, `offset` skipped, below `before` when given. */
export interface HistoryPage {
  readonly limit: number;
  readonly offset?: number;
  readonly before?: string | undefined;
}

export class ThreadStateReader {
  constructor(
    private readonly graphs: GraphRegistry,
    private readonly checkpointer: BaseCheckpointSaver,
  ) {}

  async state(tenantId: string, threadId: string, checkpointId?: string): Promise<ThreadState> {
    const config = configFor(tenantId, threadId, checkpointId);
    const tuple = await this.checkpointer.getTuple(config);
    if (!tuple) {
      if (checkpointId !== undefined) throw notFound("checkpoint", checkpointId);
      return emptyState();
    }
    const graph = await this.graphOf(tuple);
    return graph ? fromSnapshot(await graph.getState(withTenant(tenantId, tuple.config))) : fromTuple(tuple);
  }

  /** Newest first, skipping `offset`, at most `limit`, starting below `before` (a checkpoint id) when given. */
  async history(tenantId: string, threadId: string, options: HistoryPage): Promise<ThreadState[]> {
    const config = configFor(tenantId, threadId);
    const offset = options.offset ?? 0;
    const listOptions = {
      // The saver lists from the newest: the skipped ones are read and dropped.
      limit: options.limit + offset,
      before: options.before === undefined ? undefined : configFor(tenantId, threadId, options.before),
    };
    const newest = await this.checkpointer.getTuple(config);
    const graph = newest && (await this.graphOf(newest));
    const states: ThreadState[] = [];
    if (graph) {
      for await (const snapshot of graph.getStateHistory(config, listOptions)) states.push(fromSnapshot(snapshot));
    } else {
      for await (const tuple of this.checkpointer.list(config, listOptions)) states.push(fromTuple(tuple));
    }
    return states.slice(offset);
  }

  /**
   * Starts a new lineage at a checkpoint (default: the newest). With `values` or `as_node` the
   * update is written as a new checkpoint through the graph, as `graph.updateState` does;
   * without, the lineage starts at the checkpoint itself and nothing is written.
   */
  async fork(tenantId: string, threadId: string, request: ForkBody): Promise<ForkAnswer> {
    const tuple = await this.checkpointer.getTuple(configFor(tenantId, threadId, request.checkpoint_id));
    if (!tuple) {
      throw request.checkpoint_id === undefined
        ? new ApiError("conflict", `thread ${threadId} has no checkpoint to fork from`)
        : notFound("checkpoint", request.checkpoint_id);
    }
    if (request.values === undefined && request.as_node === undefined) return { configurable: checkpointRefOf(tuple.config)! };
    const graphId = graphIdOf(tuple);
    const graph = graphId === undefined ? undefined : await this.graphs.get(graphId);
    if (!graph) throw new ApiError("conflict", `the graph that wrote thread ${threadId} is not loaded; it cannot be updated`);
    try {
      // The graph id rides along in the metadata, so the new checkpoint records who wrote it too.
      const next = await graph.updateState(
        { ...withTenant(tenantId, tuple.config), metadata: { graph_id: graphId } },
        request.values ?? null,
        request.as_node,
      );
      return { configurable: checkpointRefOf(next)! };
    } catch (error) {
      if (isNamed(error, "InvalidUpdateError")) throw new ApiError("validation_error", (error as Error).message);
      throw error;
    }
  }

  private async graphOf(tuple: CheckpointTuple): Promise<RunnableGraph | undefined> {
    const graphId = graphIdOf(tuple);
    return graphId === undefined ? undefined : this.graphs.get(graphId);
  }
}

/** The graph that wrote a checkpoint, as Rudder records it in the checkpoint's metadata. */
function graphIdOf(tuple: CheckpointTuple): string | undefined {
  const graphId = (tuple.metadata as Record<string, unknown> | undefined)?.graph_id;
  return typeof graphId === "string" ? graphId : undefined;
}

function configFor(tenantId: string, threadId: string, checkpointId?: string) {
  return {
    configurable: {
      thread_id: threadId,
      checkpoint_ns: "",
      ...(checkpointId ? { checkpoint_id: checkpointId } : {}),
      [TENANT_KEY]: tenantId,
    },
  };
}

/** A config the checkpointer handed back, naming the tenant again (Rudder's saver echoes it; another saver need not). */
function withTenant<T extends { configurable?: Record<string, unknown> }>(tenantId: string, config: T): T {
  return { ...config, configurable: { ...config.configurable, [TENANT_KEY]: tenantId } };
}

/** The checkpoint a LangGraph config names (null when it names none). */
export function checkpointRefOf(config: { configurable?: Record<string, unknown> } | null | undefined): CheckpointRef | null {
  const configurable = config?.configurable;
  if (!configurable || typeof configurable.checkpoint_id !== "string") return null;
  return {
    thread_id: String(configurable.thread_id),
    checkpoint_ns: typeof configurable.checkpoint_ns === "string" ? configurable.checkpoint_ns : "",
    checkpoint_id: configurable.checkpoint_id,
  };
}

function fromSnapshot(snapshot: StateSnapshot): ThreadState {
  return {
    values: snapshot.values,
    next: [...snapshot.next],
    tasks: snapshot.tasks.map((task) => ({
      id: task.id,
      name: task.name,
      error: task.error === undefined || task.error === null ? null : String((task.error as Error).message ?? task.error),
      interrupts: [...(task.interrupts ?? [])],
      ...(task.result === undefined ? {} : { result: task.result }),
    })),
    checkpoint: checkpointRefOf(snapshot.config),
    parent_checkpoint: checkpointRefOf(snapshot.parentConfig),
    metadata: { ...(snapshot.metadata ?? {}) },
    created_at: snapshot.createdAt ?? null,
  };
}

function fromTuple(tuple: CheckpointTuple): ThreadState {
  const values = Object.fromEntries(Object.entries(tuple.checkpoint.channel_values).filter(([channel]) => !channel.startsWith("__")));
  return {
    values,
    next: [],
    tasks: [],
    checkpoint: checkpointRefOf(tuple.config),
    parent_checkpoint: checkpointRefOf(tuple.parentConfig),
    metadata: { ...(tuple.metadata ?? {}) },
    created_at: tuple.checkpoint.ts,
  };
}

function emptyState(): ThreadState {
  return { values: {}, next: [], tasks: [], checkpoint: null, parent_checkpoint: null, metadata: {}, created_at: null };
}

// By name, not instanceof: the graph may have been built with another copy of @langchain/langgraph.
function isNamed(error: unknown, name: string): boolean {
  return error instanceof Error && error.name === name;
}
