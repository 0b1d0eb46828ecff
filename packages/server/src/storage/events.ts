import type { RunEventBody } from "@rudder/api";
import type { Queryable } from "./db.ts";
import type { Lease } from "./lease.ts";
import { json } from "./rows.ts";

/** An event to append, of a known kind with its one data shape: the log gives it its sequence and time. */
export type PendingEvent = RunEventBody;

/**
 * Appends events in one statement: the run row's counter hands out the next sequences, and its
 * row lock, held to commit, makes concurrent appenders commit in sequence order (a reader that
 * has seen sequence n never later finds a smaller one). With a lease, nothing is written unless
 * the lease is still held: an empty result means the lease is lost.
 */
export async function appendEvents(db: Queryable, runId: string, events: readonly PendingEvent[], lease?: Lease): Promise<number[]> {
  if (events.length === 0) return [];
  const rows = await db.query<{ sequence: number }>(
    `with allocated as (
       update runs set last_event_sequence = last_event_sequence + jsonb_array_length($2::jsonb)
        where run_id = $1 ${lease ? "and attempt = $3 and lease_owner = $4" : ""}
        returning last_event_sequence - jsonb_array_length($2::jsonb) as base
     )
     insert into run_events (run_id, sequence, kind, data)
     select $1, allocated.base + e.ordinality::int, e.value->>'kind', e.value->'data'
       from allocated, jsonb_array_elements($2::jsonb) with ordinality as e(value, ordinality)
     returning sequence`,
    lease ? [runId, json(events), lease.attempt, lease.owner] : [runId, json(events)],
  );
  return rows.map((row) => row.sequence);
}

