/**
 * What Rudder puts into a run's `config.configurable` for graph code to reach (the keys start with
 * `__`, like LangGraph's own internal keys, and are not user configuration).
 */
export const RUDDER_METER_KEY = "__rudder_usage_meter";

/** Usage in the server's wire names. */
export interface UsageReport {
  model_calls?: number;
  tool_calls?: number;
  tokens?: number;
  cost?: number;
}

/** The run's usage meter as graph code sees it: recording may throw when a budget is exceeded. */
export interface UsageRecorder {
  record(usage: UsageReport): void;
}

export const RUDDER_STEERING_KEY = "__rudder_steering";

/** A steering event as graph code receives it. */
export interface SteeringMessage {
  /**
   * The row's id under the run that holds it. An event handed again to a task after a resume
   * keeps the id (and sequence) of the row the earlier run consumed; `sourceEventId` is stable.
   */
  readonly id: string;
  /** Position in that run's steering sequence. */
  readonly sequence: number;
  /** Client-defined kind, passed through unchanged. */
  readonly kind: string;
  /** Client-defined payload, passed through unchanged. */
  readonly payload: unknown;
  readonly metadata: Record<string, unknown>;
  /** The id the client first received (stable across resumes). */
  readonly sourceEventId: string;
  /** When the server first accepted it. */
  readonly createdAt: string;
}

/**
 * Where in the graph a steering read happens, and which execution of its task makes it: a
 * drain's events are reported with the node, namespace and task id, and handed again to a
 * re-execution of the same task (same task id, another execution) until the task's writes are
 * checkpointed.
 */
export interface DrainContext {
  readonly node: string | null;
  /** The subgraph namespace path: the checkpoint namespace of the task's parents. */
  readonly namespace: string[];
  readonly taskId: string | null;
  /** LangGraph's superstep of the task (`langgraph_step`). */
  readonly step: number | null;
  /** The checkpoint the task was prepared from: while it is stored, the task can run again. */
  readonly checkpointId: string | null;
  readonly execution: TaskExecution;
}

/**
 * One execution of a task. `scope` is LangGraph's per-task scratchpad, a new object each time the
 * task is prepared (a new attempt, a resume, a subgraph run again); `attempt` is LangGraph's node
 * attempt under the node's `retryPolicy` (null when the config does not carry it: the scope's
 * current execution).
 */
export interface TaskExecution {
  readonly scope: object | null;
  readonly attempt: number | null;
}

/** The run's steering channel, provided by the Rudder worker in `config.configurable`. */
export interface SteeringChannel {
  /** The events this execution has not received yet, consumed as they are returned. */
  drain(context: DrainContext): Promise<SteeringMessage[]>;
  /** What `drain` would return now, without taking it. */
  peek(context: DrainContext): Promise<SteeringMessage[]>;
  /** Resolves true as soon as `drain` would return something, false after `timeoutMs` or on abort. */
  wait(context: DrainContext, timeoutMs: number, signal?: AbortSignal): Promise<boolean>;
}
