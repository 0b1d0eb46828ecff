/**
 * What a run created through the LangGraph facade asked for, recorded in its
 * `config.configurable` under one key (docs/architecture.md): the facade reads its stream modes
 * and strategy back; the worker reads whether to record checkpoints in the run's log (LangGraph's
 * `checkpoints` and `debug` modes cost a payload per step, so only runs that asked get them) and
 * the run's static breakpoints.
 */
export const LANGGRAPH_KWARGS_KEY = "__langgraph_kwargs";

type Json = Record<string, unknown>;

const asObject = (value: unknown): Json | undefined =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : undefined;

/** The recorded kwargs of a run's config (empty for runs not created through the facade). */
export function langGraphKwargs(config: Json): Json {
  return asObject(asObject(asObject(config.configurable)?.[LANGGRAPH_KWARGS_KEY])) ?? {};
}

const asksFor = (config: Json, ...wanted: string[]): boolean => {
  const modes = langGraphKwargs(config).stream_mode;
  return Array.isArray(modes) && wanted.some((mode) => modes.includes(mode));
};

/** Whether the run asked for a mode that needs checkpoints in its log. */
export const recordsCheckpoints = (config: Json): boolean => asksFor(config, "checkpoints", "debug");

/** Whether the run asked for a mode that shows each task's input and result (a state per task: only when asked). */
export const recordsTaskPayloads = (config: Json): boolean => asksFor(config, "tasks", "debug");

/** LangGraph's static breakpoints: node names, or "*" for every node. */
export type Breakpoints = "*" | string[];

/**
 * The static breakpoints a run asked for (`interrupt_before` / `interrupt_after`), as LangGraph's
 * stream options take them; absent when none.
 */
export function breakpointsOf(config: Json): { interruptBefore?: Breakpoints; interruptAfter?: Breakpoints } {
  const kwargs = langGraphKwargs(config);
  const before = asBreakpoints(kwargs.interrupt_before);
  const after = asBreakpoints(kwargs.interrupt_after);
  return { ...(before ? { interruptBefore: before } : {}), ...(after ? { interruptAfter: after } : {}) };
}

function asBreakpoints(value: unknown): Breakpoints | undefined {
  if (value === "*") return "*";
  if (Array.isArray(value) && value.length > 0 && value.every((node) => typeof node === "string")) return value as string[];
  return undefined;
}

/** Whether the run asked for its subgraphs' events (`stream_subgraphs`): only then are they streamed and recorded. */
export const streamsSubgraphs = (config: Json): boolean => langGraphKwargs(config).stream_subgraphs === true;

/** Whether the run asked for LangChain's callback events (`events` mode): the graph then runs under `streamEvents`. */
export const recordsLangChainEvents = (config: Json): boolean => asksFor(config, "events");

/** Whether the run asked for LangGraph's `tools` mode (tool starts, events, ends and errors). */
export const recordsToolEvents = (config: Json): boolean => asksFor(config, "tools");
