import { randomUUID } from "node:crypto";
import type { SteeringEvent } from "@rudder/api";
import type { RunStatus } from "../domain/runs.ts";
import type { Db, Queryable } from "./db.ts";
import { fencedWriteCtes, writeAll, type RunCheckpointWrite } from "./checkpoint-writes.ts";
import { appendEvents, type PendingEvent } from "./events.ts";
import { byLeaseRunId, HELD_LEASES, HELD_RUNS, leaseHeld, type Lease } from "./lease.ts";
import { iso, json } from "./rows.ts";

export interface SteerRequest {
  kind: string;
  payload: unknown;
  metadata: Record<string, unknown>;
  idempotencyKey: string | undefined;
}

/** The attempt reading its run's steering: what fences its writes and where its checkpoints live. */
export interface SteeringHolder {
  tenantId: string;
  runId: string;
  attempt: number;
  /** The worker holding the lease. */
  owner: string;
  /** Unique to this attempt's execution: marks the rows it took. */
  takerId: string;
  /** The thread its checkpoints are stored under (a stateless run's own id). */
  checkpointThreadId: string;
}

/** Where in the graph a read happens, and whether it may get its task's consumed rows again. */
export interface SteeringReader {
  taskId: string | null;
  node: string | null;
  namespace: string[];
  step: number | null;
  /** The checkpoint the task was prepared from. */
  checkpointId: string | null;
  /**
   * The first read of this execution of the task: it also gets the rows the task consumed in an
   * execution that did not complete. Later reads of the same execution have had them.
   */
  firstOfExecution: boolean;
}

/** A row a drain consumed just now, with what its run.steer.consumed reports. */
export interface ConsumedRow extends SteeringEvent {
  latencySeconds: number;
}

type SteeringRow = Omit<SteeringEvent, "created_at"> & { tenant_id: string; created_at: Date | string };

/** The steering row columns, optionally qualified by a table alias (for UPDATE ... FROM). */
function steeringColumns(alias = ""): string {
  const t = alias ? `${alias}.` : "";
  return `${t}id::text as id, ${t}tenant_id, ${t}run_id::text as run_id, ${t}sequence, ${t}kind, ${t}payload, ${t}metadata,
    ${t}idempotency_key, ${t}status, ${t}source_event_id::text as source_event_id, ${t}created_at`;
}

const COLUMNS = steeringColumns();

const toEvent = (row: SteeringRow): SteeringEvent => ({
  id: row.id,
  run_id: row.run_id,
  sequence: row.sequence,
  kind: row.kind,
  payload: row.payload,
  metadata: row.metadata,
  idempotency_key: row.idempotency_key,
  status: row.status,
  source_event_id: row.source_event_id,
  created_at: iso(row.created_at),
});

/** run.steer.accepted; `source_event_id` only for a row moved by a resume (spec section 6, rule 2). */
export function acceptedEvent(row: SteeringEvent): PendingEvent {
  return {
    kind: "run.steer.accepted",
    data: {
      steering_event_id: row.id,
      ...(row.source_event_id ? { source_event_id: row.source_event_id } : {}),
      sequence: row.sequence,
      kind: row.kind,
    },
  };
}

/** run.steer.superseded; `source_event_id` always present (the row's own id when never moved). */
function supersededEvent(
  row: SteeringEvent,
  reason: "resume_transfer" | "unconsumed_at_final_boundary",
  successor: { runId: string; eventId: string } | null,
): PendingEvent {
  return {
    kind: "run.steer.superseded",
    data: {
      steering_event_id: row.id,
      source_event_id: row.source_event_id ?? row.id,
      sequence: row.sequence,
      kind: row.kind,
      reason,
      superseded_by_run_id: successor?.runId ?? null,
      replacement_steering_event_id: successor?.eventId ?? null,
    },
  };
}

const SELECT_STEERING_BY_KEY = `select ${COLUMNS} from steering_events where tenant_id = $1 and run_id = $2 and idempotency_key = $3`;

/** The steering event a (tenant, run, idempotency key) already names. */
export async function findSteeringByKey(db: Queryable, tenantId: string, runId: string, key: string): Promise<SteeringEvent | undefined> {
  const [row] = await db.query<SteeringRow>(SELECT_STEERING_BY_KEY, [tenantId, runId, key]);
  return row && toEvent(row);
}

/**
 * The run's admission facts, locked: admission is decided against the same state the
 * finalization gate and a resume change.
 */
export async function lockRunForSteering(
  tx: Queryable,
  tenantId: string,
  runId: string,
): Promise<{ run_id: string; status: RunStatus; steering_closed: boolean; superseded_by_run_id: string | null } | undefined> {
  const [run] = await tx.query<{ run_id: string; status: RunStatus; steering_closed: boolean; superseded_by_run_id: string | null }>(
    `select run_id::text as run_id, status, steering_closed, superseded_by_run_id::text as superseded_by_run_id
       from runs where tenant_id = $1 and run_id = $2 for update`,
    [tenantId, runId],
  );
  return run;
}

const INSERT_STEERING_EVENT = `with seq as (
       update runs set last_steering_sequence = last_steering_sequence + 1 where tenant_id = $1 and run_id = $2
       returning last_steering_sequence
     )
     insert into steering_events (id, tenant_id, run_id, sequence, kind, payload, metadata, idempotency_key)
     select $3, $1, $2, seq.last_steering_sequence, $4, $5::jsonb, $6::jsonb, $7 from seq
     returning ${COLUMNS}`;

/** A new steering row with the run's next steering sequence, and its run.steer.accepted event. */
export async function insertSteeringEvent(tx: Queryable, tenantId: string, runId: string, request: SteerRequest): Promise<SteeringEvent> {
  const [row] = await tx.query<SteeringRow>(INSERT_STEERING_EVENT, [
    tenantId,
    runId,
    randomUUID(),
    request.kind,
    json(request.payload),
    json(request.metadata),
    request.idempotencyKey ?? null,
  ]);
  const event = toEvent(row!);
  await appendEvents(tx, tenantId, runId, [acceptedEvent(event)]);
  return event;
}

const LIST_STEERING = `select ${COLUMNS} from steering_events where tenant_id = $1 and run_id = $2 order by sequence`;

export class SteeringRepository {
  constructor(private readonly db: Db) {}

  /**
   * Closes steering admission before the final flush (spec: "worker closes steering admission
   * before its final flush") of several runs in one statement, each fenced by its own lease; the
   * runs are locked in run id order, as every statement that locks several runs does. Returns, by
   * run id, those whose lease held, each saying whether the run was ever steered: with admission
   * closed no row can arrive any more, so a run never steered has none to supersede at its final
   * boundary. A run whose lease was lost is missing. `held`: checkpoint writes the attempts still
   * hold (durability `sync`), written by the same statement for the runs whose lease held, or, when
   * one statement cannot take them all (`fencedWriteCtes`), in a transaction with it.
   */
  async closeAdmissions(leases: readonly Lease[], held: readonly RunCheckpointWrite[] = []): Promise<Map<string, { steered: boolean }>> {
    if (leases.length === 0) return new Map();
    const close = async (db: Queryable, carried: readonly RunCheckpointWrite[]) => {
      const statement = closeAdmissionsStatement(leases, carried);
      if (!statement) return undefined;
      const rows = await db.query<{ run_id: string; steered: boolean }>(statement.sql, statement.params);
      return new Map(rows.map((row) => [row.run_id, { steered: row.steered }]));
    };
    return (
      (await close(this.db, held)) ??
      this.db.transaction(async (tx) => {
        const closed = (await close(tx, []))!;
        await writeAll(
          tx,
          held.filter(({ runId }) => closed.has(runId)).map(({ write }) => write),
        );
        return closed;
      })
    );
  }

  async list(tenantId: string, runId: string): Promise<SteeringEvent[]> {
    const rows = await this.db.query<SteeringRow>(LIST_STEERING, [tenantId, runId]);
    return rows.map(toEvent);
  }
}

/** `closeAdmissions`'s statement; undefined when it cannot carry `held` (`fencedWriteCtes`). */
function closeAdmissionsStatement(
  leases: readonly Lease[],
  held: readonly RunCheckpointWrite[],
): { sql: string; params: unknown[] } | undefined {
  const ordered = [...leases].sort(byLeaseRunId);
  const params: unknown[] = [
    ordered.map((lease) => lease.tenantId),
    ordered.map((lease) => lease.runId),
    ordered.map((lease) => lease.attempt),
    ordered.map((lease) => lease.owner),
  ];
  const writes = held.length > 0 ? fencedWriteCtes(held, params, "held") : [];
  if (writes === undefined) return undefined;
  const sql = `with batch as (
       select * from unnest($1::text[], $2::uuid[], $3::int[], $4::text[]) as b(tenant_id, run_id, attempt, owner)
     ), ${HELD_LEASES}${writes.map((cte) => `,\n     ${cte}`).join("")}
     update runs r set steering_closed = true from ${HELD_RUNS}
      returning r.run_id::text as run_id, r.last_steering_sequence > 0 as steered`;
  return { sql, params };
}

const SUPERSEDE_UNCONSUMED = `update steering_events set status = 'superseded'
      where tenant_id = $1 and run_id = $2 and status in ('pending', 'delivered') returning ${COLUMNS}`;

/** The run's rows not consumed yet, now superseded, in sequence order. */
async function supersedeUnconsumed(tx: Queryable, tenantId: string, runId: string): Promise<SteeringEvent[]> {
  const rows = await tx.query<SteeringRow>(SUPERSEDE_UNCONSUMED, [tenantId, runId]);
  return rows.map(toEvent).sort((a, b) => a.sequence - b.sequence);
}

/**
 * At the final boundary, inside the transaction that writes the run's final state: every row the
 * run still holds becomes superseded. Returns their run.steer.superseded events, in sequence
 * order, for the caller to append with the run's last events.
 */
export async function supersedeAtFinalBoundary(tx: Queryable, tenantId: string, runId: string): Promise<PendingEvent[]> {
  const superseded = await supersedeUnconsumed(tx, tenantId, runId);
  return superseded.map((row) => supersededEvent(row, "unconsumed_at_final_boundary", null));
}

/**
 * Moves a resumed run's unconsumed rows to its successor, inside the resume transaction: new ids,
 * the same order as sequences 1..n, the same kind, payload, metadata and idempotency key, the
 * root id kept in source_event_id, the original created_at. The old rows become superseded;
 * returns how many.
 */
export async function migrateToSuccessor(tx: Queryable, tenantId: string, oldRunId: string, newRunId: string): Promise<number> {
  // Consumed rows stay consumed (their run.steer.consumed is written); those of a task that did not
  // complete (it interrupted) go to the new run's re-execution of that task.
  await tx.query(
    `update steering_events set replay_run_id = $3, consumed_attempt = null, taken_by = null
      where tenant_id = $1 and replay_run_id = $2 and status = 'consumed' and settled_at is null`,
    [tenantId, oldRunId, newRunId],
  );
  const rows = await supersedeUnconsumed(tx, tenantId, oldRunId);
  if (rows.length === 0) return 0;
  const moved = rows.map((row, index) => ({
    ...row,
    id: randomUUID(),
    run_id: newRunId,
    sequence: index + 1,
    status: "pending" as const,
    source_event_id: row.source_event_id ?? row.id,
  }));
  await tx.query(
    `insert into steering_events (id, tenant_id, run_id, sequence, kind, payload, metadata, idempotency_key, status, source_event_id, created_at)
     select m.id, s.tenant_id, $1, m.sequence, s.kind, s.payload, s.metadata, s.idempotency_key, 'pending', m.source_event_id, s.created_at
       from jsonb_to_recordset($2::jsonb) as m(old_id uuid, id uuid, sequence int, source_event_id uuid)
       join steering_events s on s.tenant_id = $3 and s.id = m.old_id`,
    [
      newRunId,
      json(
        moved.map((row, index) => ({ old_id: rows[index]!.id, id: row.id, sequence: row.sequence, source_event_id: row.source_event_id })),
      ),
      tenantId,
    ],
  );
  await tx.query("update runs set last_steering_sequence = $3 where tenant_id = $1 and run_id = $2", [tenantId, newRunId, moved.length]);
  await appendEvents(
    tx,
    tenantId,
    oldRunId,
    rows.map((row, index) => supersededEvent(row, "resume_transfer", { runId: newRunId, eventId: moved[index]!.id })),
  );
  await appendEvents(tx, tenantId, newRunId, moved.map(acceptedEvent));
  return rows.length;
}

/**
 * A read's parameters: $1 tenant, $2 run, $3 attempt, $4 lease owner, $5 checkpoint thread, $6
 * task, $7 first read of the execution, $8 the attempt's taker id.
 */
function readParams(holder: SteeringHolder, reader: SteeringReader): unknown[] {
  return [
    holder.tenantId,
    holder.runId,
    holder.attempt,
    holder.owner,
    holder.checkpointThreadId,
    reader.taskId,
    reader.firstOfExecution,
    holder.takerId,
  ];
}

/**
 * Rows consumed before that a reader gets again: (a) the rows its own task consumed, on the first
 * read of an execution of that task (the execution that consumed them did not complete: the task
 * is running again); (b) rows taken by an earlier attempt (or by a resumed run) whose task can
 * never run again, because the checkpoint it was prepared from was never stored (durability
 * `exit`, or a crash before an `async` write): they go to whichever task reads next.
 */
const HANDED_AGAIN = `(($7::boolean and s.consumed_task_id = $6)
  or (s.taken_by is distinct from $8
      and not exists (select 1 from checkpoints c
                       where c.tenant_id = $1 and c.thread_id = $5 and c.checkpoint_ns = s.consumed_ns and c.checkpoint_id = s.consumed_checkpoint_id)))`;

/** The lease fence ($1..$4 are `leaseParams`): the run is running under this attempt (a cancel or a lost lease stops every read). */
const HOLDS_RUN = `${leaseHeld(1)} and status = 'running'`;

/** Stamps a row with the task that takes it now ($9 node, $10 namespace, $11 step, $12 checkpoint). */
const TAKEN_BY = `consumed_task_id = $6, consumed_node = $9, consumed_ns = $10, consumed_step = $11, consumed_checkpoint_id = $12,
                  consumed_attempt = $3, taken_by = $8`;

/** The columns of the CTEs that return `steeringColumns("s")` and `consumed_at`. */
const READ_COLUMNS =
  "id, tenant_id, run_id, sequence, kind, payload, metadata, idempotency_key, status, source_event_id, created_at, consumed_at";

type ReadRow = SteeringRow & { is_new: boolean; latency?: number | null };

const TAKE_STEERING = `with fence as (
       select tenant_id, run_id from runs where ${HOLDS_RUN} for update
     ), again as (
       update steering_events s set ${TAKEN_BY}
         from fence
        where s.tenant_id = fence.tenant_id and s.replay_run_id = fence.run_id and s.status = 'consumed' and s.settled_at is null
          and ${HANDED_AGAIN}
       returning ${steeringColumns("s")}, s.consumed_at
     ), taken as (
       update steering_events s set status = 'consumed', consumed_at = now(), replay_run_id = fence.run_id, ${TAKEN_BY}
         from fence
        where s.tenant_id = fence.tenant_id and s.run_id = fence.run_id and s.status in ('pending', 'delivered')
       returning ${steeringColumns("s")}, s.consumed_at, extract(epoch from (now() - s.created_at))::float8 as latency
     )
     select ${READ_COLUMNS}, false as is_new, null::float8 as latency from again
     union all
     select ${READ_COLUMNS}, true as is_new, latency from taken
     order by is_new, consumed_at, sequence`;

/**
 * A drain, inside the caller's transaction and fenced by the lease (the run row lock also orders
 * parallel drains, so each row goes to one task): first the rows consumed before that this reader
 * gets again (its task's on the first read of an execution, and those of tasks that can never run
 * again), in the order they were consumed; then every pending row, in sequence order, turned
 * `consumed` by this task now. Only the new ones need a run.steer.consumed (`consumedEvents`).
 * A run that is not `running` under this lease gets nothing: cancel wins.
 */
export async function takeSteering(
  tx: Queryable,
  holder: SteeringHolder,
  reader: SteeringReader,
): Promise<{ again: SteeringEvent[]; consumed: ConsumedRow[] }> {
  const rows = await tx.query<ReadRow>(TAKE_STEERING, [
    ...readParams(holder, reader),
    reader.node,
    reader.namespace.join("|"),
    reader.step,
    reader.checkpointId,
  ]);
  return {
    again: rows.filter((row) => !row.is_new).map(toEvent),
    consumed: rows.filter((row) => row.is_new).map((row) => ({ ...toEvent(row), latencySeconds: Math.max(0, Number(row.latency)) })),
  };
}

const PEEK_STEERING = `select ${steeringColumns("s")}, s.consumed_at, false as is_new from steering_events s
      where s.tenant_id = $1 and s.replay_run_id = $2 and s.status = 'consumed' and s.settled_at is null and ${HANDED_AGAIN}
        and exists (select 1 from runs where ${HOLDS_RUN})
     union all
     select ${steeringColumns("s")}, s.consumed_at, true as is_new from steering_events s
      where s.tenant_id = $1 and s.run_id = $2 and s.status in ('pending', 'delivered')
        and exists (select 1 from runs where ${HOLDS_RUN})
     order by is_new, consumed_at, sequence`;

/** What a drain by this reader would return now, in the same order, without taking anything. */
export async function peekSteering(db: Queryable, holder: SteeringHolder, reader: SteeringReader): Promise<SteeringEvent[]> {
  const rows = await db.query<ReadRow>(PEEK_STEERING, readParams(holder, reader));
  return rows.map(toEvent);
}

/** run.steer.consumed for each row a drain consumed, with the task that consumed it. */
export function consumedEvents(
  rows: readonly ConsumedRow[],
  reader: Pick<SteeringReader, "node" | "namespace" | "taskId">,
): PendingEvent[] {
  return rows.map((row) => ({
    kind: "run.steer.consumed",
    data: {
      steering_event_id: row.id,
      ...(row.source_event_id ? { source_event_id: row.source_event_id } : {}),
      sequence: row.sequence,
      kind: row.kind,
      queue_latency_seconds: row.latencySeconds,
      node: reader.node,
      namespace: reader.namespace,
      task_id: reader.taskId,
    },
  }));
}

/**
 * Inside the transaction that checkpoints the writes of `taskIds` (or a checkpoint that contains
 * them): the rows they consumed are settled, never handed out again. Not fenced: it records what
 * the checkpoint store now holds, whoever wrote it.
 */
export async function settleConsumed(tx: Queryable, tenantId: string, runId: string, taskIds: readonly string[]): Promise<void> {
  if (taskIds.length === 0) return;
  await tx.query(
    `update steering_events set settled_at = now()
      where tenant_id = $1 and replay_run_id = $2 and status = 'consumed' and settled_at is null
        and consumed_task_id in (select jsonb_array_elements_text($3::jsonb))`,
    [tenantId, runId, json(taskIds)],
  );
}
