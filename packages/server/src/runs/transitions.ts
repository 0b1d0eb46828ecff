import {
  CANCEL_REASON_OF,
  cancelError,
  cancelledEvent,
  nextStatus,
  rowOnlyMoves,
  type LifecycleEvent,
  type RunTrigger,
  type TransitionRule,
} from "../domain/run-lifecycle.ts";
import { freesThread, type RunStatus } from "../domain/runs.ts";
import type { Notifier } from "../notify/notifier.ts";
import type { Metrics } from "../observability/metrics.ts";
import type { Queryable, Transaction } from "../storage/db.ts";
import { appendEvents } from "../storage/events.ts";
import { moveRunStatus, setThreadStatus, updateRunStatus, type ClaimedRun } from "../storage/runs.ts";

/**
 * A status change outside a worker's attempt (cancel, cancel_previous, redrive, the reaper), as
 * one unit inside the caller's transaction: the row as the lifecycle rule says, the rule's one
 * event, the thread's status, and the `run_changed` / `run_events` notices that commit with it. A
 * path cannot change a status and forget the event or the notice. A run that lets go of its
 * thread releases the thread's next run in the same statement, so the caller holds the thread's
 * row lock (taken before the run's). A status that settles the run is counted in `metrics` once
 * the transaction commits.
 */
export async function applyTransition(
  tx: Transaction,
  notifier: Notifier,
  run: Pick<ClaimedRun, "tenant_id" | "run_id" | "thread_id" | "status" | "error">,
  trigger: RunTrigger,
  rule: TransitionRule,
  metrics?: Metrics,
): Promise<ClaimedRun> {
  const status = nextStatus(rule, run.status);
  const event = eventOf(trigger, rule, run.status);
  const reason = CANCEL_REASON_OF[trigger];
  const { run: changed, releasedNext } = await updateRunStatus(tx, run.tenant_id, run.run_id, {
    status,
    finishes: rule.finishes,
    // A run ending cancelled carries the cancel error; a redriven run starts clean.
    error: status === "cancelled" && reason ? cancelError(reason) : trigger === "redrive" ? null : run.error,
    requeue: trigger === "redrive",
    // A run that lets go of its thread releases the thread's next run (docs/runs.md).
    freesThread: run.thread_id !== null && freesThread(run.status, status),
  });
  if (event) await appendEvents(tx, run.tenant_id, run.run_id, [event]);
  if (rule.thread && run.thread_id !== null) await setThreadStatus(tx, run.tenant_id, run.thread_id, rule.thread);
  await notifier.publishWithin(
    tx,
    { topic: "run_changed", runId: run.run_id, status: changed.status },
    ...(event ? [{ topic: "run_events", runId: run.run_id } as const] : []),
    // Back in the queue, or the thread's next run released: a claim may find it now.
    ...(status === "pending" || releasedNext ? [{ topic: "run_created" } as const] : []),
  );
  // A resume leaves the old run paused (linked to its successor): only a change of status counts.
  if (metrics && changed.status !== run.status) tx.afterCommit(() => metrics.runStatusChanged(changed.status, changed.graph_id));
  return changed;
}

/**
 * `trigger`'s row-only move (`rowOnlyMoves`), when the run's status has one: one autocommit
 * statement, no thread lock, its `run_changed` notice sent once it committed. Undefined, writing
 * nothing, when the run is in no such status (or is not the tenant's): the caller then applies the
 * trigger in a transaction (`applyTransition`), which also answers the refusals. A cancel of a
 * running run costs one round trip this way, not four.
 */
export async function applyRowOnlyMove(
  db: Queryable,
  notifier: Notifier,
  tenantId: string,
  runId: string,
  trigger: RunTrigger,
  metrics?: Metrics,
): Promise<ClaimedRun | undefined> {
  const moved = await moveRunStatus(db, tenantId, runId, rowOnlyMoves(trigger));
  if (!moved) return undefined;
  void notifier.publish({ topic: "run_changed", runId, status: moved.status });
  metrics?.runStatusChanged(moved.status, moved.graph_id);
  return moved;
}

/** The event of a rule applied outside an attempt (the worker builds its own, with the attempt's facts). */
function eventOf(trigger: RunTrigger, rule: TransitionRule, from: RunStatus): LifecycleEvent | undefined {
  if (rule.event === "run_cancelled") return cancelledEvent(CANCEL_REASON_OF[trigger] ?? "cancel_requested", from);
  if (rule.event === "run_redriven") return { kind: "run_redriven", data: { from } };
  if (rule.event !== null) throw new Error(`the ${trigger} transition's ${rule.event} event is written by the worker`);
  return undefined;
}
