import { randomUUID } from "node:crypto";
import type { SteeringEvent } from "@rudder/api";
import type { DrainContext, SteeringChannel, SteeringMessage } from "@rudder/graph";
import { DrainedExecutions, UnsettledTasks } from "../domain/steering.ts";
import type { Notifier } from "../notify/notifier.ts";
import { wakeups } from "../notify/wakeups.ts";
import type { Metrics } from "../observability/metrics.ts";
import type { CheckpointCommitHook } from "../storage/checkpointer.ts";
import type { Db } from "../storage/db.ts";
import { appendEvents } from "../storage/events.ts";
import type { Lease } from "../storage/lease.ts";
import type { ClaimedRun } from "../storage/runs.ts";
import {
  consumedEvents,
  peekSteering,
  settleConsumed,
  takeSteering,
  type SteeringHolder,
  type SteeringReader,
} from "../storage/steering.ts";

export interface SteeringChannelDeps {
  readonly db: Db;
  readonly notifier: Notifier;
  /** waitForSteering re-reads storage this often when no notice arrives. */
  readonly pollMs: number;
  /** Writes the events the attempt has buffered, so a drain's run.steer.consumed follows them in the log. */
  readonly flushEvents: () => Promise<void>;
  /** Counts consumption and its latency (none: not counted). */
  readonly metrics?: Metrics | undefined;
}

/**
 * The run's steering channel as graph code reaches it (through @rudder/graph), for one attempt,
 * and the checkpoint hook that settles what a task consumed once the task's writes are stored.
 * A drain commits consumption at once (with run.steer.consumed); a task that runs again before
 * its writes were checkpointed gets what it consumed again on its first drain. Every read goes to
 * durable storage; a `steering` notice only wakes a waiting node early, and a lost one costs at
 * most one poll interval.
 */
export function steeringChannel(
  run: ClaimedRun,
  lease: Lease,
  deps: SteeringChannelDeps,
): { channel: SteeringChannel; commitHook: CheckpointCommitHook } {
  const holder: SteeringHolder = {
    tenantId: run.tenant_id,
    runId: run.run_id,
    attempt: lease.attempt,
    owner: lease.owner,
    takerId: randomUUID(),
    checkpointThreadId: run.thread_id ?? run.run_id,
  };
  const executions = new DrainedExecutions();
  const unsettled = new UnsettledTasks();
  const readerOf = (context: DrainContext): SteeringReader => ({
    taskId: context.taskId,
    node: context.node,
    namespace: context.namespace,
    step: context.step,
    checkpointId: context.checkpointId,
    firstOfExecution: !executions.hasDrained(context.execution, context.taskId),
  });
  const peek = async (context: DrainContext) => (await peekSteering(deps.db, holder, readerOf(context))).map(toMessage);

  const drainOnce = async (context: DrainContext): Promise<SteeringMessage[]> => {
    const reader = readerOf(context);
    await deps.flushEvents().catch(() => {}); // a failed flush is a lost lease: the fence below refuses
    const { again, consumed } = await deps.db.transaction(async (tx) => {
      const taken = await takeSteering(tx, holder, reader);
      if (taken.consumed.length > 0) {
        await appendEvents(tx, run.tenant_id, run.run_id, consumedEvents(taken.consumed, reader));
        await deps.notifier.publishWithin(tx, { topic: "run_events", runId: run.run_id });
        const metrics = deps.metrics;
        if (metrics) tx.afterCommit(() => metrics.consumedSteering(taken.consumed.map((row) => row.latencySeconds)));
      }
      return taken;
    });
    executions.markDrained(context.execution, context.taskId);
    const messages = [...again, ...consumed];
    if (messages.length > 0 && context.taskId !== null) unsettled.add(context.taskId, reader.namespace.join("|"), context.step);
    return messages.map(toMessage);
  };
  // One drain at a time (they queue on the run row lock anyway), so two drains of one execution
  // cannot both be its first.
  let draining: Promise<unknown> = Promise.resolve();

  const channel: SteeringChannel = {
    drain(context) {
      const next = draining.then(() => drainOnce(context));
      draining = next.catch(() => {});
      return next;
    },
    peek,
    async wait(context, timeoutMs, signal) {
      // A timer takes whole milliseconds; graph code may pass any positive number.
      const deadline = AbortSignal.timeout(Math.max(0, Math.ceil(timeoutMs)));
      const until = signal ? AbortSignal.any([signal, deadline]) : deadline;
      for await (const _ of wakeups(deps.notifier, (n) => n.topic === "steering" && n.runId === run.run_id, {
        intervalMs: deps.pollMs,
        signal: until,
      })) {
        if ((await peek(context)).length > 0) return true;
      }
      return false;
    },
  };

  const commitHook: CheckpointCommitHook = {
    covers: (commit) => unsettled.settledBy(commit).length > 0,
    async onCommit(tx, commit) {
      const taskIds = unsettled.settledBy(commit);
      await settleConsumed(tx, holder.tenantId, holder.runId, taskIds);
      tx.afterCommit(() => unsettled.settled(taskIds));
    },
  };
  return { channel, commitHook };
}

function toMessage(event: SteeringEvent): SteeringMessage {
  return {
    id: event.id,
    sequence: event.sequence,
    kind: event.kind,
    payload: event.payload,
    metadata: event.metadata,
    sourceEventId: event.source_event_id ?? event.id,
    createdAt: event.created_at,
  };
}
