import { randomUUID } from "node:crypto";
import type { SteeringEvent } from "@rudder/api";
import type { RunStatus } from "../domain/runs.ts";
import type { Db, Queryable } from "./db.ts";
import { appendEvents, type PendingEvent } from "./events.ts";
import type { Lease } from "./lease.ts";
import { iso, json } from "./rows.ts";

export interface SteerRequest {
  kind: string;
  payload: unknown;
  metadata: Record<string, unknown>;
  idempotencyKey: string | undefined;
}

/** Where in the graph a drain happened, for run.steer.consumed. */
export interface DrainContext {
  node: string | null;
  namespace: string[];
  taskId: string | null;
}

type SteeringRow = Omit<SteeringEvent, "created_at"> & { tenant_id: string; created_at: Date | string };

/** The steering row columns, optionally qualified by a table alias (for UPDATE ... FROM). */
function steeringColumns(alias = ""): string {
  const t = alias ? `${alias}.` : "";
  return `${t}id::text as id, ${t}tenant_id, ${t}run_id::text as run_id, ${t}sequence, ${t}kind, ${t}payload, ${t}metadata,
    ${t}idempotency_key, ${t}status, ${t}source_event_id::text as source_event_id, ${t}created_at`;
}

const COLUMNS = steeringColumns();

const toEvent = ({ tenant_id: _tenant, ...row }: SteeringRow): SteeringEvent => ({ ...row, created_at: iso(row.created_at) });

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

/** The steering event a (tenant, run, idempotency key) already names. */
export async function findSteeringByKey(db: Queryable, tenantId: string, runId: string, key: string): Promise<SteeringEvent | undefined> {
  const [row] = await db.query<SteeringRow>(
    `select ${COLUMNS} from steering_events where tenant_id = $1 and run_id = $2 and idempotency_key = $3`,
    [tenantId, runId, key],
  );
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

/** A new steering row with the run's next steering sequence, and its run.steer.accepted event. */
export async function insertSteeringEvent(tx: Queryable, tenantId: string, runId: string, request: SteerRequest): Promise<SteeringEvent> {
  const [row] = await tx.query<SteeringRow>(
    `with seq as (
       update runs set last_steering_sequence = last_steering_sequence + 1 where run_id = $2 returning last_steering_sequence
     )
     insert into steering_events (id, tenant_id, run_id, sequence, kind, payload, metadata, idempotency_key)
     select $3, $1, $2, seq.last_steering_sequence, $4, $5::jsonb, $6::jsonb, $7 from seq
     returning ${COLUMNS}`,
    [tenantId, runId, randomUUID(), request.kind, json(request.payload), json(request.metadata), request.idempotencyKey ?? null],
  );
  const event = toEvent(row!);
  await appendEvents(tx, runId, [acceptedEvent(event)]);
  return event;
}

export class SteeringRepository {
  constructor(private readonly db: Db) {}

  /** The run's unconsumed events, in sequence order, without taking them. */
  async peek(runId: string): Promise<SteeringEvent[]> {
    const rows = await this.db.query<SteeringRow>(
      `select ${COLUMNS} from steering_events where run_id = $1 and status in ('pending', 'delivered') order by sequence`,
      [runId],
    );
    return rows.map(toEvent);
  }

  /**
   * Hands the run's unconsumed events to the draining task, in sequence order, as `delivered`:
   * pending rows, rows delivered by an earlier attempt (whose worker died before committing
   * them), and rows delivered before to this same task (LangGraph retried the node). One
   * statement, fenced by the lease; the run row lock serialises parallel drains, so each row goes
   * to one task. A run that is not `running` under this lease gets nothing: cancel wins.
   * Consumption commits later, with the task's checkpoint write (`commitConsumed`).
   */
  async deliver(lease: Lease, context: DrainContext): Promise<SteeringEvent[]> {
    const rows = await this.db.query<SteeringRow>(
      `with fence as (
         select run_id from runs where run_id = $1 and attempt = $2 and lease_owner = $3 and status = 'running' for update
       )
       update steering_events s set status = 'delivered', delivered_attempt = $2, delivered_task_id = $4, delivered_node = $5, delivered_ns = $6
         from fence
        where s.run_id = fence.run_id
          and (s.status = 'pending' or (s.status = 'delivered' and (s.delivered_attempt < $2 or s.delivered_task_id = $4)))
       returning ${steeringColumns("s")}`,
      [lease.runId, lease.attempt, lease.owner, context.taskId ?? "", context.node, context.namespace.join("|")],
    );
    return rows.map(toEvent).sort((a, b) => a.sequence - b.sequence);
  }

  /**
   * Closes steering admission before the final flush (spec: "worker closes steering admission
   * before its final flush"). False when the lease is lost.
   */
  async closeAdmission(lease: Lease): Promise<boolean> {
    const rows = await this.db.query("update runs set steering_closed = true where run_id = $1 and attempt = $2 and lease_owner = $3 returning 1", [
      lease.runId,
      lease.attempt,
      lease.owner,
    ]);
    return rows.length > 0;
  }

  async list(tenantId: string, runId: string): Promise<SteeringEvent[]> {
    const rows = await this.db.query<SteeringRow>(`select ${COLUMNS} from steering_events where tenant_id = $1 and run_id = $2 order by sequence`, [
      tenantId,
      runId,
    ]);
    return rows.map(toEvent);
  }
}

/**
 * At the final boundary, inside the transaction that writes the run's final state: every row the
 * run still holds becomes superseded. Returns their run.steer.superseded events, in sequence
 * order, for the caller to append with the run's last events.
 */
export async function supersedeAtFinalBoundary(tx: Queryable, runId: string): Promise<PendingEvent[]> {
  const rows = await tx.query<SteeringRow>(
    `update steering_events set status = 'superseded' where run_id = $1 and status in ('pending', 'delivered') returning ${COLUMNS}`,
    [runId],
  );
  const events = rows.map(toEvent).sort((a, b) => a.sequence - b.sequence);
  return events.map((row) => supersededEvent(row, "unconsumed_at_final_boundary", null));
}

/**
 * Moves a resumed run's unconsumed rows to its successor, inside the resume transaction: new ids,
 * the same order as sequences 1..n, the same kind, payload, metadata and idempotency key, the
 * root id kept in source_event_id, the original created_at. The old rows become superseded.
 */
export async function migrateToSuccessor(tx: Queryable, oldRunId: string, newRunId: string): Promise<void> {
  const rows = (
    await tx.query<SteeringRow>(
      `update steering_events set status = 'superseded' where run_id = $1 and status in ('pending', 'delivered') returning ${COLUMNS}`,
      [oldRunId],
    )
  )
    .map(toEvent)
    .sort((a, b) => a.sequence - b.sequence);
  if (rows.length === 0) return;
  const moved = rows.map((row, index) => ({ ...row, id: randomUUID(), run_id: newRunId, sequence: index + 1, status: "pending" as const, source_event_id: row.source_event_id ?? row.id }));
  await tx.query(
    `insert into steering_events (id, tenant_id, run_id, sequence, kind, payload, metadata, idempotency_key, status, source_event_id, created_at)
     select m.id, s.tenant_id, $1, m.sequence, s.kind, s.payload, s.metadata, s.idempotency_key, 'pending', m.source_event_id, s.created_at
       from jsonb_to_recordset($2::jsonb) as m(old_id uuid, id uuid, sequence int, source_event_id uuid)
       join steering_events s on s.id = m.old_id`,
    [newRunId, json(moved.map((row, index) => ({ old_id: rows[index]!.id, id: row.id, sequence: row.sequence, source_event_id: row.source_event_id })))],
  );
  await tx.query("update runs set last_steering_sequence = $2 where run_id = $1", [newRunId, moved.length]);
  await appendEvents(tx, oldRunId, rows.map((row, index) => supersededEvent(row, "resume_transfer", { runId: newRunId, eventId: moved[index]!.id })));
  await appendEvents(tx, newRunId, moved.map(acceptedEvent));
}

/** Which delivered rows a checkpoint write covers: one task's writes, or a namespace's checkpoint. */
export type ConsumptionScope = { taskId: string } | { checkpointNs: string };

/**
 * Inside the transaction that checkpoints a task's result: the rows delivered to that task in
 * this attempt become consumed, each with its run.steer.consumed event. Fenced by the lease and
 * skipped once the run is no longer running (cancel wins). Replaying it finds nothing to do.
 */
export async function commitConsumed(tx: Queryable, lease: Lease, scope: ConsumptionScope): Promise<number> {
  const byTask = "taskId" in scope;
  const rows = await tx.query<SteeringRow & { latency: number; delivered_node: string | null; delivered_ns: string; delivered_task_id: string }>(
    `with fence as (
       select run_id from runs where run_id = $1 and attempt = $2 and lease_owner = $3 and status = 'running' for update
     )
     update steering_events s set status = 'consumed', consumed_at = now()
       from fence
      where s.run_id = fence.run_id and s.status = 'delivered' and s.delivered_attempt = $2
        and ${byTask ? "s.delivered_task_id = $4" : "s.delivered_ns = $4"}
     returning ${steeringColumns("s")}, s.delivered_node, s.delivered_ns, s.delivered_task_id,
               extract(epoch from (now() - s.created_at))::float8 as latency`,
    [lease.runId, lease.attempt, lease.owner, byTask ? scope.taskId : scope.checkpointNs],
  );
  rows.sort((a, b) => a.sequence - b.sequence);
  await appendEvents(
    tx,
    lease.runId,
    rows.map((row) => ({
      kind: "run.steer.consumed",
      data: {
        steering_event_id: row.id,
        ...(row.source_event_id ? { source_event_id: row.source_event_id } : {}),
        sequence: row.sequence,
        kind: row.kind,
        queue_latency_seconds: Math.max(0, Number(row.latency)),
        node: row.delivered_node,
        namespace: row.delivered_ns ? row.delivered_ns.split("|") : [],
        task_id: row.delivered_task_id || null,
      },
    })),
  );
  return rows.length;
}
