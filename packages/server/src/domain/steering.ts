import type { TaskExecution } from "@rudder/graph";
import { isTerminal, LEASED_STATUSES, type RunStatus } from "./runs.ts";

/** Steering payload plus metadata, serialised, may take at most this many bytes (DESIGN.md). */
export const STEERING_MAX_BYTES = 32 * 1024;

/** The spec's size rule: UTF-8 bytes of JSON(payload) plus JSON(metadata ?? {}). */
export function steeringSize(payload: unknown, metadata: Record<string, unknown> | undefined): number {
  return Buffer.byteLength(JSON.stringify(payload) ?? "null", "utf8") + Buffer.byteLength(JSON.stringify(metadata ?? {}), "utf8");
}

/** What steering admission looks at (spec section 4, "Admission by run state"). */
export interface SteeringAdmissionFacts {
  readonly run_id: string;
  readonly status: RunStatus;
  readonly steering_closed: boolean;
  readonly superseded_by_run_id: string | null;
}

export type SteeringAdmission =
  | { readonly admitted: true }
  | { readonly admitted: false; readonly code: "run_superseded" | "run_terminal" | "run_finalizing"; readonly detail: string };

/**
 * The spec's admission table for a steer with a new key, one row per case, checked in order (a
 * replay of a known key never gets here: spec rule 1). The first matching row decides.
 */
export const STEERING_ADMISSION_TABLE: readonly {
  readonly when: string;
  readonly applies: (run: SteeringAdmissionFacts) => boolean;
  readonly refuse?: { code: "run_superseded" | "run_terminal" | "run_finalizing"; detail: (run: SteeringAdmissionFacts) => string };
}[] = [
  {
    when: "old run that has been resumed (superseded_by_run_id set)",
    applies: (run) => run.superseded_by_run_id !== null,
    refuse: { code: "run_superseded", detail: (run) => `run ${run.run_id} was resumed as run ${run.superseded_by_run_id}; steer that run` },
  },
  {
    when: "succeeded, failed, cancelled, timed_out, dead_letter",
    applies: (run) => isTerminal(run.status),
    refuse: { code: "run_terminal", detail: (run) => `run ${run.run_id} is ${run.status}; nothing was written` },
  },
  {
    when: "running or cancelling with steering_closed true",
    applies: (run) => run.steering_closed && LEASED_STATUSES.includes(run.status),
    refuse: { code: "run_finalizing", detail: (run) => `run ${run.run_id} has finished its graph and is being finalized; steer a new run` },
  },
  // pending: visible once a worker claims the run; running: at the next safe point; cancelling:
  // accepted, but cancel still wins; paused: moved to the new run at resume.
  { when: "pending, running, cancelling, paused", applies: () => true },
];

export function steeringAdmission(run: SteeringAdmissionFacts): SteeringAdmission {
  const row = STEERING_ADMISSION_TABLE.find((candidate) => candidate.applies(run))!;
  return row.refuse ? { admitted: false, code: row.refuse.code, detail: row.refuse.detail(run) } : { admitted: true };
}

/**
 * Which executions of their tasks have drained already, in one attempt: a task's first drain in
 * an execution also gets what the task consumed in an execution that did not complete. The same
 * scratchpad at another node attempt is another execution (retryPolicy ran the node again).
 */
export class DrainedExecutions {
  /** Scratchpad → the node attempt that drained (null: the config did not say). */
  private readonly byScope = new WeakMap<object, number | null>();
  /** Without a scratchpad (a hand-made config), the task id stands for the execution. */
  private readonly byTask = new Set<string>();

  hasDrained(execution: TaskExecution, taskId: string | null): boolean {
    if (execution.scope === null) return this.byTask.has(taskId ?? "");
    if (!this.byScope.has(execution.scope)) return false;
    const drained = this.byScope.get(execution.scope) ?? null;
    // A read that does not name its attempt belongs to the scope's current execution.
    return execution.attempt === null || drained === null || drained === execution.attempt;
  }

  markDrained(execution: TaskExecution, taskId: string | null): void {
    if (execution.scope === null) this.byTask.add(taskId ?? "");
    else this.byScope.set(execution.scope, execution.attempt ?? this.byScope.get(execution.scope) ?? null);
  }
}

/** Channels a task writes when it did not complete (it runs again): its consumption is not settled. */
const UNFINISHED_CHANNELS = new Set(["__interrupt__", "__error__"]);

/** A checkpoint write: one task's writes, or a checkpoint of a namespace at a step. */
export type CheckpointTarget =
  | { readonly kind: "writes"; readonly taskId: string; readonly channels: readonly string[] }
  | { readonly kind: "checkpoint"; readonly checkpointNs: string; readonly step: number | undefined };

/**
 * The tasks of one attempt that hold consumed steering not settled yet, and which of them a
 * checkpoint write settles: a task's own writes when it completed (not an error or an
 * interrupt), or a checkpoint of its namespace at its step or later, which holds its writes
 * applied (with durability `exit` the only write there is).
 */
export class UnsettledTasks {
  private readonly tasks = new Map<string, { ns: string; step: number | null }>();

  add(taskId: string, ns: string, step: number | null): void {
    this.tasks.set(taskId, { ns, step });
  }

  settledBy(target: CheckpointTarget): string[] {
    if (target.kind === "writes") {
      const completed = !target.channels.some((name) => UNFINISHED_CHANNELS.has(name));
      return completed && this.tasks.has(target.taskId) ? [target.taskId] : [];
    }
    const { checkpointNs, step } = target;
    if (step === undefined) return [];
    return [...this.tasks]
      .filter(([, task]) => task.ns === checkpointNs && task.step !== null && task.step <= step)
      .map(([taskId]) => taskId);
  }

  settled(taskIds: readonly string[]): void {
    for (const taskId of taskIds) this.tasks.delete(taskId);
  }
}
