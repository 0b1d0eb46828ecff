// How the worker sets up LangChain's callback machinery for the graphs it runs: callbacks are
// awaited where they fire, and while LangSmith tracing is off no LangSmith run tree is built per
// runnable.
import { BaseCallbackHandler } from "@langchain/core/callbacks/base";

/**
 * LangChain's switch for background callbacks: unless it is `"false"`, a handler that does not
 * ask to be awaited (LangGraph's `messages` stream handler among them) runs later, from one queue
 * shared by every graph in the process. A run's graph could then end before its queued tokens
 * reached its stream: `messages` events came late, or not at all. In one process, two graphs
 * streaming a chat model's tokens at once, with no awaited handler, lost every token; in the
 * worker, once runnables stopped building run trees (below), a run's last tokens arrived after its
 * message had ended and were streamed as another message. Awaited, a token is on the run's stream
 * before the model yields the next one. Each handler reads the variable when it is made, so the
 * worker sets it before any graph runs, whatever it was.
 */
export const CALLBACKS_BACKGROUND_VARIABLE = "LANGCHAIN_CALLBACKS_BACKGROUND";

/** Makes LangChain await every callback where it fires, for this process (see `CALLBACKS_BACKGROUND_VARIABLE`). */
export function awaitLangChainCallbacks(env: NodeJS.ProcessEnv = process.env): void {
  env[CALLBACKS_BACKGROUND_VARIABLE] = "false";
}

/** The environment variables by which LangChain turns LangSmith tracing on (its `isTracingEnabled`). */
const TRACING_VARIABLES = ["LANGSMITH_TRACING_V2", "LANGCHAIN_TRACING_V2", "LANGSMITH_TRACING", "LANGCHAIN_TRACING"] as const;

/** Whether LangSmith tracing is on for this process, as LangChain decides it. */
export function langSmithTracingEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return TRACING_VARIABLES.some((name) => env[name] === "true");
}

/**
 * Stands in for LangSmith's tracer while tracing is off, so that LangChain does not build a
 * LangSmith `RunTree` for every runnable a graph invokes.
 *
 * Why: each LangGraph node, edge and channel writer runs inside
 * `AsyncLocalStorageProviderSingleton.runWithConfig`, which puts the runnable's config in async
 * local storage (where `getConfig()`, `interrupt()`, `getStore()` and `config.writer` find it) on a
 * carrier object. Without a tracer that carrier is a new, disabled `RunTree` (a v7 UUID from the
 * system's random source, timestamps, LangSmith's environment read again): about 9 % of a trivial
 * run's CPU in Rudder's worker (docs/benchmarks.md, "Issue 22, eleventh pass"). When a handler
 * named `langchain_tracer` is among the callbacks and a parent run exists, `runWithConfig` asks it
 * for the carrier instead (`getRunTreeWithTracingConfig`); this one answers with a plain object,
 * on which LangChain sets the same fields (the config, context variables).
 *
 * It listens to no callback (every `ignore*` is set), so the callback manager never calls it, and
 * it is added only while tracing is off (`langSmithTracingEnabled`): with tracing on, LangChain's
 * real tracer must be the one found, and Rudder leaves the callbacks as they were.
 */
export class UntracedRunContext extends BaseCallbackHandler {
  /** The name `runWithConfig` and the callback manager look a tracer up by. */
  override name = "langchain_tracer";

  constructor() {
    super({ ignoreLLM: true, ignoreChain: true, ignoreAgent: true, ignoreRetriever: true, ignoreCustomEvent: true });
  }

  /** The carrier of a runnable's config in async local storage: a plain object, not a `RunTree`. */
  getRunTreeWithTracingConfig(): Record<string, unknown> {
    return {};
  }

  /** LangChain copies a tracer to give it more metadata or tags; this one records nothing, so it is its own copy. */
  copyWithTracingConfig(): this {
    return this;
  }
}

/** It holds no state: every attempt shares one. */
const UNTRACED = new UntracedRunContext();

/** The handlers an attempt adds for its async-local context: the stand-in while tracing is off, none otherwise. */
export function runContextHandlers(env: NodeJS.ProcessEnv = process.env): BaseCallbackHandler[] {
  return langSmithTracingEnabled(env) ? [] : [UNTRACED];
}
