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
  /** The row's id under this run. */
  readonly id: string;
  /** Position in the run's steering sequence. */
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

/** Where in the graph a drain happens. */
export interface DrainContext {
  readonly node: string | null;
  readonly namespace: string[];
  readonly taskId: string | null;
}

/** The run's steering channel, provided by the Rudder worker in `config.configurable`. */
export interface SteeringChannel {
  drain(context: DrainContext): Promise<SteeringMessage[]>;
  peek(): Promise<SteeringMessage[]>;
  wait(timeoutMs: number, signal?: AbortSignal): Promise<boolean>;
}
