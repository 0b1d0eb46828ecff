import type { SteeringEvent } from "@rudder/api";
import type { SteeringChannel, SteeringMessage } from "@rudder/graph";
import { waitForNotice, type Notifier } from "../notify/notifier.ts";
import type { CheckpointCommitHook } from "../storage/checkpointer.ts";
import type { Lease } from "../storage/lease.ts";
import { commitConsumed, type SteeringRepository } from "../storage/steering.ts";

/** Writes of a task that did not finish: its node runs again, so what it drained is not consumed. */
const UNFINISHED_CHANNELS = new Set(["__interrupt__", "__error__"]);

/**
 * The run's steering channel as graph code reaches it (through @rudder/graph), and the hook that
 * commits what it delivered together with the task's checkpoint write. Every read goes to
 * durable storage; a `steering` notice only wakes a waiting node early, and a lost one costs at
 * most one poll interval.
 */
export function steeringChannel(
  lease: Lease,
  steering: SteeringRepository,
  notifier: Notifier,
  pollMs: number,
): { channel: SteeringChannel; commitHook: CheckpointCommitHook } {
  // Once this attempt has delivered anything, checkpoint writes carry the consumption commit.
  let delivered = false;
  const channel: SteeringChannel = {
    async drain(context) {
      const events = await steering.deliver(lease, context);
      if (events.length > 0) delivered = true;
      return events.map(toMessage);
    },
    async peek() {
      return (await steering.peek(lease.runId)).map(toMessage);
    },
    async wait(timeoutMs, signal) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const wake = waitForNotice(notifier, (n) => n.topic === "steering" && n.runId === lease.runId, Math.min(pollMs, Math.max(0, deadline - Date.now())), signal);
        if ((await steering.peek(lease.runId)).length > 0) {
          wake.cancel();
          return true;
        }
        if (Date.now() >= deadline || signal?.aborted) {
          wake.cancel();
          return false;
        }
        await wake.promise;
      }
    },
  };
  const commitHook: CheckpointCommitHook = {
    pending: () => delivered,
    async onPutWrites(tx, taskId, channels) {
      if (channels.some((name) => UNFINISHED_CHANNELS.has(name))) return;
      await commitConsumed(tx, lease, { taskId });
    },
    async onPut(tx, checkpointNs) {
      await commitConsumed(tx, lease, { checkpointNs });
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
