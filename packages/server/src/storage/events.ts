import type { RunEvent, RunEventBody } from "@rudder/api";
import type { Queryable } from "./db.ts";
import { byLeaseRunId, HELD_LEASES, HELD_RUNS, leaseHeld, leaseParams, type Lease } from "./lease.ts";
import { iso, json } from "./rows.ts";

/** An event to append, of a known kind with its one data shape: the log gives it its sequence and time. */
export type PendingEvent = RunEventBody;

/**
 * `appendEvents`' statement: the run's row gives the sequences. The events are the last parameter,
 * after the lease's four (`fenced`) or after the tenant and run id.
 */
function appendEventsStatement(fenced: boolean): string {
  const batch = fenced ? "$5::jsonb" : "$3::jsonb";
  return `with allocated as (
       update runs set last_event_sequence = last_event_sequence + jsonb_array_length(${batch})
        where ${fenced ? leaseHeld(1) : "tenant_id = $1 and run_id = $2"}
        returning last_event_sequence - jsonb_array_length(${batch}) as base
     )
     insert into run_events (tenant_id, run_id, sequence, kind, data)
     select $1, $2, allocated.base + e.ordinality::int, e.value->>'kind', e.value->'data'
       from allocated, jsonb_array_elements(${batch}) with ordinality as e(value, ordinality)
     returning sequence`;
}

// Built once: a text built per call is hashed and compared again wherever it is looked up (statement names).
const APPEND_EVENTS = appendEventsStatement(false);
const APPEND_EVENTS_FENCED = appendEventsStatement(true);

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
  const rows = await db.query<{ sequence: number }>(
    lease ? APPEND_EVENTS_FENCED : APPEND_EVENTS,
    lease ? [...leaseParams(lease), json(events)] : [tenantId, runId, json(events)],
  );
  return rows.map((row) => row.sequence);
}

/** One run's share of a batched append: its fencing lease and its events, in order. */
export interface EventBatch {
  readonly lease: Lease;
  readonly events: readonly PendingEvent[];
  /**
   * Each event's `data` as JSON, when the caller serialised it already (`assertStorable`): sent
   * as is, not serialised again. An entry left undefined is serialised here.
   */
  readonly dataJson?: readonly (string | undefined)[];
}

/** What the batched append returns per run whose lease held: its events got `base + 1` … `base + count`. */
export interface AppendedRun {
  run_id: string;
  base: number;
  count: number;
  /** The time the log gives the run's events (only when asked for): one for every run of an append, its transaction's. */
  created_at?: Date | string;
}

export interface BatchAppendOptions {
  /** Return the time the log gives the events (for in-process hand-off to streams). */
  readonly withTime?: boolean;
}

/** `appendEventBatches`' statement, returning the log's time of the events too with `withTime`. */
function appendEventBatchesStatement(withTime: boolean): string {
  return `with batch as (
       select b.tenant_id, b.run_id, b.attempt, b.owner, b.events
         from jsonb_to_recordset($1::jsonb) as b(tenant_id text, run_id uuid, attempt int, owner text, events jsonb)
     ), ${HELD_LEASES}, allocated as (
       update runs r set last_event_sequence = r.last_event_sequence + jsonb_array_length(b.events)
         from ${HELD_RUNS}
       returning r.tenant_id, r.run_id, r.last_event_sequence - jsonb_array_length(b.events) as base,
                 jsonb_array_length(b.events) as count, b.events
     ), appended as (
       insert into run_events (tenant_id, run_id, sequence, kind, data)
       select a.tenant_id, a.run_id, a.base + e.ordinality::int, e.value->>'kind', e.value->'data'
         from allocated a, jsonb_array_elements(a.events) with ordinality as e(value, ordinality)
     )
     select a.run_id::text as run_id, a.base, a.count${withTime ? ", now() as created_at" : ""}
       from allocated a
      order by a.run_id`;
}

const APPEND_EVENT_BATCHES = appendEventBatchesStatement(false);
const APPEND_EVENT_BATCHES_WITH_TIME = appendEventBatchesStatement(true);

/**
 * Appends the events of many runs in one statement, each run fenced by its own lease (the
 * condition of `leaseHeld`, per run): a run whose lease is lost gets nothing written and no row
 * back. The run rows are locked in run id order (concurrent multi-run appenders cannot deadlock
 * each other) and, as in `appendEvents`, held to commit, so each run's sequences commit in order.
 * Run outside a transaction the statement is its own, so it commits before the rows come back.
 * Returns one row per run written, in run id order.
 *
 * Each run is found by one primary-key probe: a lateral subquery that locks is never flattened
 * into a join, so the planner cannot pick a scan of every run instead. It did, joining by hash
 * with the batch it guesses at 100 rows: a flush then cost a sequential scan of `runs`, 30–70 ms
 * on PGlite at 5,000 runs (docs/benchmarks.md). The nested loop takes the batch in array order,
 * so the batch is sent sorted by run id, and that is the order the rows are locked in.
 */
export async function appendEventBatches(
  db: Queryable,
  batches: readonly EventBatch[],
  options: BatchAppendOptions = {},
): Promise<AppendedRun[]> {
  if (batches.length === 0) return [];
  return db.query<AppendedRun>(options.withTime ? APPEND_EVENT_BATCHES_WITH_TIME : APPEND_EVENT_BATCHES, [batchJson(byRunId(batches))]);
}

/** Run id order, the order the rows are locked in. */
function byRunId(batches: readonly EventBatch[]): EventBatch[] {
  return [...batches].sort((a, b) => byLeaseRunId(a.lease, b.lease));
}

/**
 * The batches as the statement's jsonb parameter, written out by hand so each event's data that
 * was serialised already (`dataJson`) is spliced in as is rather than serialised a second time.
 */
function batchJson(batches: readonly EventBatch[]): string {
  // One string built by concatenation: measured about twice as fast as arrays joined, and as
  // JSON.stringify of the whole batch, per event.
  let out = "[";
  for (let b = 0; b < batches.length; b++) {
    const { lease, events, dataJson } = batches[b]!;
    out +=
      (b === 0 ? "{" : ",{") +
      `"tenant_id":${JSON.stringify(lease.tenantId)},"run_id":${JSON.stringify(lease.runId)},` +
      `"attempt":${JSON.stringify(lease.attempt)},"owner":${JSON.stringify(lease.owner)},"events":[`;
    for (let i = 0; i < events.length; i++) {
      const event = events[i]!;
      const data = dataJson?.[i] ?? (JSON.stringify(event.data) as string | undefined);
      out += (i === 0 ? '{"kind":' : ',{"kind":') + JSON.stringify(event.kind) + (data === undefined ? "}" : `,"data":${data}}`);
    }
    out += "]}";
  }
  return out + "]";
}

/** Where a reader of many runs' logs is: events after `after` are wanted. */
export interface LogCursor {
  readonly tenantId: string;
  readonly runId: string;
  readonly after: number;
}

const READ_EVENTS = `select run_id::text as run_id, sequence, kind, data, created_at from run_events
      where tenant_id = $1 and run_id = $2 and sequence > $3 order by sequence limit $4 offset $5`;

/** One run's events after `after`, skipping `offset` of them, at most `limit`, in sequence order. */
export async function readEvents(
  db: Queryable,
  tenantId: string,
  runId: string,
  after: number,
  limit: number,
  offset = 0,
): Promise<RunEvent[]> {
  const rows = await db.query<LogRow>(READ_EVENTS, [tenantId, runId, after, limit, offset]);
  return rows.map(toRunEvent);
}

/**
 * The events after each cursor, up to `limit` per run, in one statement (a process's streams
 * share it: one read per wake-up for all the runs it follows). By run, in sequence order.
 */
export async function readEventsAfter(db: Queryable, cursors: readonly LogCursor[], limit: number): Promise<RunEvent[]> {
  if (cursors.length === 0) return [];
  const rows = await db.query<LogRow>(
    `select e.run_id::text as run_id, e.sequence, e.kind, e.data, e.created_at
       from unnest($1::text[], $2::uuid[], $3::int[]) as c(tenant_id, run_id, after)
      cross join lateral (
        select r.run_id, r.sequence, r.kind, r.data, r.created_at from run_events r
         where r.tenant_id = c.tenant_id and r.run_id = c.run_id and r.sequence > c.after
         order by r.sequence limit $4
      ) e
      order by e.run_id, e.sequence`,
    [cursors.map((cursor) => cursor.tenantId), cursors.map((cursor) => cursor.runId), cursors.map((cursor) => cursor.after), limit],
  );
  return rows.map(toRunEvent);
}

/**
 * How many of the run's attempts since its last redrive its worker handed back at shutdown
 * (`run_retrying` with reason `worker_shutdown`): they do not count toward its delivery attempts.
 * Read only when a run reaches its attempt limit, so the log's scan costs nothing on the way.
 */
export async function countHandBacks(db: Queryable, tenantId: string, runId: string): Promise<number> {
  const [row] = await db.query<{ handed_back: number }>(
    `select count(*)::int as handed_back from run_events e
      where e.tenant_id = $1 and e.run_id = $2 and e.kind = 'run_retrying' and e.data->>'reason' = 'worker_shutdown'
        and e.sequence > coalesce((select max(d.sequence) from run_events d
                                    where d.tenant_id = $1 and d.run_id = $2 and d.kind = 'run_redriven'), 0)`,
    [tenantId, runId],
  );
  return row?.handed_back ?? 0;
}

/** A row of the log as read. */
interface LogRow {
  run_id: string;
  sequence: number;
  kind: string;
  data: unknown;
  created_at: Date | string;
}

/** A log row as the API shows it. */
export function toRunEvent(row: LogRow): RunEvent {
  return loggedEvent(row.run_id, row.sequence, row.kind, row.data, iso(row.created_at));
}

/** A logged event as the API shows it, its time already in ISO form (shared by a batch's events). */
export function loggedEvent(runId: string, sequence: number, kind: string, data: unknown, createdAt: string): RunEvent {
  return { id: `${runId}:${sequence}`, run_id: runId, sequence, kind, data: data as RunEvent["data"], created_at: createdAt };
}
