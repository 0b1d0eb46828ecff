import { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import type { AttemptCheckpoints } from "../storage/checkpointer.ts";

/** LangGraph's input step: it maps the run's input onto the state and runs no graph code. */
const INPUT_NODE = "__start__";

/**
 * Where durability `sync` waits, for an attempt whose checkpoint writes are held
 * (`AttemptCheckpoints.holdsSteps`): as a task of graph code starts, the writes held so far commit
 * before its code runs. A task is one LangGraph node run; its runnables share the
 * `langgraph_checkpoint_ns` metadata LangGraph gives them, which names the task (and the subgraph
 * path), so the first chain start of a namespace is the task's start and its end is that run's
 * end. LangChain awaits this handler (`raiseError`): a failed commit fails the task before it runs.
 * The first task of graph code in the attempt waits for nothing (see `AttemptCheckpoints`).
 */
export class TaskStartBarrier extends BaseCallbackHandler {
  name = "rudder_task_start_barrier";
  override raiseError = true;
  override awaitHandlers = true;
  /** The root run id of each running task, to its namespace. */
  readonly #taskOfRun = new Map<string, string>();
  // JS private: graph code reaches this handler through its config's callbacks, and the attempt's
  // held writes name their tenant; one planted there would be committed as another tenant's.
  readonly #attempt: AttemptCheckpoints;
  readonly #commitHeld: () => Promise<void>;

  constructor(attempt: AttemptCheckpoints, commitHeld: () => Promise<void>) {
    super({ ignoreLLM: true, ignoreRetriever: true, ignoreAgent: true, ignoreCustomEvent: true });
    this.#attempt = attempt;
    this.#commitHeld = commitHeld;
  }

  override async handleChainStart(
    _chain: unknown,
    _inputs: unknown,
    runId: string,
    _runType?: string,
    _tags?: string[],
    metadata?: Record<string, unknown>,
  ): Promise<void> {
    const task = metadata?.langgraph_checkpoint_ns;
    if (typeof task !== "string" || this.#attempt.runningTasks.has(task) || metadata?.langgraph_node === INPUT_NODE) return;
    this.#attempt.runningTasks.add(task);
    this.#taskOfRun.set(runId, task);
    if (this.#attempt.graphCodeStarted) await this.#commitHeld();
    this.#attempt.graphCodeStarted = true;
  }

  override handleChainEnd(_outputs: unknown, runId: string): void {
    this.#ended(runId);
  }

  override handleChainError(_error: unknown, runId: string): void {
    this.#ended(runId);
  }

  #ended(runId: string): void {
    const task = this.#taskOfRun.get(runId);
    if (task === undefined) return;
    this.#taskOfRun.delete(runId);
    this.#attempt.runningTasks.delete(task);
  }
}
