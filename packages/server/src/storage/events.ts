import type { RunEventBody } from "@rudder/api";
import type { Queryable } from "./db.ts";
import { leaseHeld, leaseParams, type Lease } from "./lease.ts";
import { json } from "./rows.ts";

/** An event to append, of a known kind with its one data shape: the log gives it its sequence and time. */
export type PendingEvent = RunEventBody;

/**
 * Appends events in one statement: the run row's counter hands out the next sequences, and its
 * row lock, held to commit, makes concurrent appenders commit in sequence order (a reader that
 * has seen sequence n never later finds a smaller one). With a lease, nothing is written unless
 * the lease is still held: an empty result means the lease is lost.
 */
export async function appendEvents(
  db: Queryable,
  tenantId: string,
  runId: string,
  events: readonly PendingEvent[],
  lease?: Lease,
): Promise<number[]> {
  if (events.length === 0) return [];
  if (lease && (lease.tenantId !== tenantId || lease.runId !== runId)) throw new Error("appendEvents: the lease is another run's");
  // The events are the last parameter: after the lease's four, or after the tenant and run id.
  const batch = lease ? "$5::jsonb" : "$3::jsonb";
  const rows = await db.query<{ sequence: number }>(
    `with allocated as (
       update runs set last_event_sequence = last_event_sequence + jsonb_array_length(${batch})
        where ${lease ? leaseHeld(1) : "tenant_id = $1 and run_id = $2"}
        returning last_event_sequence - jsonb_array_length(${batch}) as base
     )
     insert into run_events (tenant_id, run_id, sequence, kind, data)
     select $1, $2, allocated.base + e.ordinality::int, e.value->>'kind', e.value->'data'
       from allocated, jsonb_array_elements(${batch}) with ordinality as e(value, ordinality)
     returning sequence`,
    lease ? [...leaseParams(lease), json(events)] : [tenantId, runId, json(events)],
  );
  return rows.map((row) => row.sequence);
}
