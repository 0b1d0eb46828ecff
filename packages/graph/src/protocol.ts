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
