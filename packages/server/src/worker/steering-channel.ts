import type { SteeringChannel, SteeringMessage } from "@rudder/graph";
import { waitForNotice, type Notifier } from "../notify/notifier.ts";
import type { Lease } from "../storage/runs.ts";
import type { SteeringEvent, SteeringRepository } from "../storage/steering.ts";

/**
 * The run's steering channel as graph code reaches it (through @rudder/graph). Every read goes to
 * durable storage; a `steering` notice only wakes a waiting node early, and a lost one costs at
 * most one poll interval.
 */
export function steeringChannel(lease: Lease, steering: SteeringRepository, notifier: Notifier, pollMs: number): SteeringChannel {
  return {
    async drain(context) {
      return (await steering.drain(lease, context)).map(toMessage);
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
