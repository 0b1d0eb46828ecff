import { ApiError, notFound } from "../domain/errors.ts";
import type { Usage } from "../domain/budget.ts";
import type { Durability, MultitaskStrategy, RunError, RunStatus } from "../domain/runs.ts";
import type { Db, Queryable, Transaction } from "./db.ts";
import { appendEvents } from "./events.ts";
import { migrateToSuccessor, supersedeAtFinalBoundary } from "./steering.ts";
import { iso, json } from "./rows.ts";

export type RunUsage = Usage;

/** A run as the API shows it (DESIGN.md "Run"). */
export interface Run {
  run_id: string;
  thread_id: string | null;
  assistant_id: string;
  status: RunStatus;
  input: unknown;
  context: Record<string, unknown>;
  config: Record<string, unknown>;
  metadata: Record<string, unknown>;
  output: unknown;
  error: RunError | null;
  attempt: number;
  multitask_strategy: MultitaskStrategy;
  durability: Durability;
  run_timeout: number | null;
  max_model_calls: number | null;
  max_tool_calls: number | null;
  max_tokens: number | null;
  max_cost: number | null;
  usage: RunUsage;
  /** Set once, when a resume created the run that continues this paused one. */
  superseded_by_run_id: string | null;
  /** Steering admission closed by the worker before its final flush; reset on each claim. */
  steering_closed: boolean;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  updated_at: string;
}

/** What a worker needs beyond the public view. */
export interface ClaimedRun extends Run {
  tenant_id: string;
  graph_id: string;
  command: { resume?: unknown; update?: Record<string, unknown> | null; goto?: string | null } | null;
}

export interface NewRun {
  tenantId: string;
  runId: string;
  threadId: string | null;
  assistantId: string;
  graphId: string;
  input: unknown;
  command: ClaimedRun["command"];
  context: Record<string, unknown>;
  config: Record<string, unknown>;
  metadata: Record<string, unknown>;
  multitaskStrategy: MultitaskStrategy;
  durability: Durability;
  runTimeout: number | null;
  maxModelCalls: number | null;
  maxToolCalls: number | null;
  maxTokens: number | null;
  maxCost: number | null;
  idempotencyKey: string | undefined;
  requestHash: string;
}

/** One entry of a run's event log, as stored and streamed. */
export interface RunEvent {
  id: string;
  run_id: string;
  sequence: number;
  kind: string;
  data: Record<string, unknown>;
  created_at: string;
}

export interface PendingEvent {
  kind: string;
  data: Record<string, unknown>;
}

/** The worker's fencing token: its writes land only while it still holds this attempt's lease. */
export interface Lease {
  runId: string;
  attempt: number;
  owner: string;
}

type Timestamp = Date | string;
type RunRow = Omit<ClaimedRun, "created_at" | "started_at" | "finished_at" | "updated_at"> & {
  created_at: Timestamp;
  started_at: Timestamp | null;
  finished_at: Timestamp | null;
  updated_at: Timestamp;
  idempotency_key: string | null;
  request_hash: string | null;
};

/** The run columns, optionally qualified by a table alias (for UPDATE ... FROM). */
function runColumns(alias = ""): string {
  const t = alias ? `${alias}.` : "";
  return `${t}run_id::text as run_id, ${t}tenant_id, ${t}thread_id::text as thread_id, ${t}assistant_id, ${t}graph_id,
    ${t}status, ${t}input, ${t}command, ${t}context, ${t}config, ${t}metadata, ${t}output, ${t}error, ${t}attempt,
    ${t}multitask_strategy, ${t}durability, ${t}run_timeout, ${t}max_model_calls, ${t}max_tool_calls, ${t}max_tokens,
    ${t}max_cost, ${t}usage, ${t}idempotency_key, ${t}request_hash, ${t}superseded_by_run_id::text as superseded_by_run_id, ${t}steering_closed,
    ${t}created_at, ${t}started_at, ${t}finished_at, ${t}updated_at`;
}

const RUN_COLUMNS = runColumns();

/**
 * For a candidate run `r`: locks its thread row, or is false when another transaction holds it.
 * Claims and the reaper take the thread before the run this way and never wait, so they cannot
 * deadlock with creates and settles, which lock the thread first and may wait.
 */
const THREAD_LOCKED_UNLESS_HELD = "exists (select 1 from threads t where t.thread_id = r.thread_id for update skip locked)";

function toClaimed(row: RunRow): ClaimedRun & { idempotency_key: string | null; request_hash: string | null } {
  return {
    ...row,
    created_at: iso(row.created_at),
    started_at: row.started_at === null ? null : iso(row.started_at),
    finished_at: row.finished_at === null ? null : iso(row.finished_at),
    updated_at: iso(row.updated_at),
  };
}

/** The public view: drops tenant, graph, command and idempotency bookkeeping. */
export function publicRun(run: ClaimedRun): Run {
  const { tenant_id: _t, graph_id: _g, command: _c, ...rest } = run as ClaimedRun & Record<string, unknown>;
  delete rest.idempotency_key;
  delete rest.request_hash;
  return rest as unknown as Run;
}

interface EventRow {
  run_id: string;
  sequence: number;
  kind: string;
  data: Record<string, unknown>;
  created_at: Timestamp;
}

const toEvent = (row: EventRow): RunEvent => ({
  id: `${row.run_id}:${row.sequence}`,
  run_id: row.run_id,
  sequence: row.sequence,
  kind: row.kind,
  data: row.data,
  created_at: iso(row.created_at),
});

export class RunRepository {
  constructor(private readonly db: Db) {}

  /**
   * Creates a run, applying (in order) the Idempotency-Key replay rule, the thread's existence,
   * the tenant's queued-run quota and the thread's multitask strategy, then `onCreated` in the
   * same transaction (the notices; it gets the ids of runs cancel_previous moved to cancelling,
   * whose workers must be told). Returns the run and whether it was a replay. For `enqueue` (and a
   * stateless run) the insert is one statement; `reject` and `cancel_previous` decide under the
   * thread's row lock, which serialises creates on that thread.
   */
  async create(
    run: NewRun,
    queuedRunQuota: number,
    onCreated: (tx: Transaction, cancelling: string[]) => Promise<void>,
  ): Promise<{ run: ClaimedRun; replayed: boolean }> {
    return this.db.transaction(async (tx) => {
      let cancelling: string[] = [];
      if (run.threadId !== null && run.multitaskStrategy !== "enqueue") {
        const replay = await this.replayOf(tx, run);
        if (replay) return replay;
        const [thread] = await tx.query("select 1 from threads where tenant_id = $1 and thread_id = $2 for update", [run.tenantId, run.threadId]);
        if (!thread) throw notFound("thread", run.threadId);
        cancelling = await applyMultitaskStrategy(tx, run.threadId, run.multitaskStrategy);
      }
      const created = await this.insert(tx, run, queuedRunQuota);
      if (!created.replayed) await onCreated(tx, cancelling);
      return created;
    });
  }

  /**
   * The insert, with the quota, the thread check and the idempotency key as its conditions: when
   * it writes nothing, the reads after it say which one stopped it. The thread row is share-locked
   * so a create and a settle of the thread's previous run are ordered (see `settle`).
   */
  private async insert(db: Queryable, run: NewRun, queuedRunQuota: number): Promise<{ run: ClaimedRun; replayed: boolean }> {
    const rows = db.query<RunRow>(
      `insert into runs (run_id, tenant_id, thread_id, assistant_id, graph_id, input, command, context, config, metadata,
                         multitask_strategy, durability, run_timeout, max_model_calls, max_tool_calls, max_tokens, max_cost,
                         idempotency_key, request_hash)
       select $1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8::jsonb, $9::jsonb, $10::jsonb, $11, $12, $13, $14, $15, $16, $17, $18, $19
        where ($3::uuid is null or exists (select 1 from threads where tenant_id = $2 and thread_id = $3::uuid for share))
          and (select count(*) from runs where tenant_id = $2 and status = 'pending') < $20
       on conflict (tenant_id, idempotency_key) where idempotency_key is not null do nothing
       returning ${RUN_COLUMNS}`,
      [
        run.runId, run.tenantId, run.threadId, run.assistantId, run.graphId, json(run.input ?? null), json(run.command),
        json(run.context), json(run.config), json(run.metadata), run.multitaskStrategy, run.durability, run.runTimeout,
        run.maxModelCalls, run.maxToolCalls, run.maxTokens, run.maxCost, run.idempotencyKey ?? null, run.requestHash, queuedRunQuota,
      ],
    );
    const [row] = await rows.catch((error: unknown) => {
      // The thread was deleted between the check and the insert.
      if ((error as { code?: string }).code === "23503" && run.threadId !== null) throw notFound("thread", run.threadId);
      throw error;
    });
    if (row) return { run: toClaimed(row), replayed: false };
    const replay = await this.replayOf(db, run);
    if (replay) return replay;
    if (run.threadId !== null) {
      const [thread] = await db.query("select 1 from threads where tenant_id = $1 and thread_id = $2", [run.tenantId, run.threadId]);
      if (!thread) throw notFound("thread", run.threadId);
    }
    const [{ queued } = { queued: 0 }] = await db.query<{ queued: number }>(
      "select count(*)::int as queued from runs where tenant_id = $1 and status = 'pending'",
      [run.tenantId],
    );
    throw new ApiError("quota_exceeded", `the tenant has ${queued} queued runs, the most it may have`, { retryAfterSeconds: 5 });
  }

  /** The run an Idempotency-Key already names: a replay when the request is the same, else 409. */
  private async replayOf(db: Queryable, run: NewRun): Promise<{ run: ClaimedRun; replayed: true } | undefined> {
    if (run.idempotencyKey === undefined) return undefined;
    const [existing] = await db.query<RunRow>(`select ${RUN_COLUMNS} from runs where tenant_id = $1 and idempotency_key = $2`, [
      run.tenantId,
      run.idempotencyKey,
    ]);
    if (!existing) return undefined;
    if (existing.request_hash !== run.requestHash) {
      throw new ApiError("idempotency_conflict", "this Idempotency-Key was used with a different request");
    }
    return { run: toClaimed(existing), replayed: true };
  }

  async get(tenantId: string, runId: string): Promise<ClaimedRun | undefined> {
    const [row] = await this.db.query<RunRow>(`select ${RUN_COLUMNS} from runs where tenant_id = $1 and run_id = $2`, [tenantId, runId]);
    return row && toClaimed(row);
  }

  async listByThread(tenantId: string, threadId: string, page: { limit: number; offset: number }): Promise<ClaimedRun[]> {
    const rows = await this.db.query<RunRow>(
      `select ${RUN_COLUMNS} from runs where tenant_id = $1 and thread_id = $2
        order by created_at desc, run_id desc limit $3 offset $4`,
      [tenantId, threadId, page.limit, page.offset],
    );
    return rows.map(toClaimed);
  }

  /**
   * Claims up to `limit` of the oldest runnable runs: pending runs whose backoff has passed and
   * whose thread has no active run and no older pending run (FIFO per thread, so at most one run
   * per thread qualifies), and running runs whose lease expired (their worker died). One
   * statement, `for update skip locked`, so concurrent workers never claim the same row; it also
   * marks the claimed runs' threads busy. It locks a pending run's thread before the run, and
   * skips a thread someone else holds (a create deciding its multitask strategy, a settle): a
   * claim never waits, so it cannot deadlock against them; their commit's notice brings it back.
   * The unique index on active runs per thread backs the thread rule: a claim that loses that
   * race claims nothing and the caller tries again.
   */
  async claim(owner: string, leaseMs: number, limit: number): Promise<ClaimedRun[]> {
    try {
      const rows = await this.db.query<RunRow>(
        `with candidate as (
           select r.run_id from runs r
            where (r.status = 'pending' and r.available_at <= now()
                   and (r.thread_id is null or (
                     not exists (select 1 from runs a where a.thread_id = r.thread_id and a.status in ('running', 'cancelling'))
                     and not exists (select 1 from runs p where p.thread_id = r.thread_id and p.status = 'pending'
                                      and (p.created_at, p.run_id) < (r.created_at, r.run_id))
                     and ${THREAD_LOCKED_UNLESS_HELD})))
               or (r.status = 'running' and r.lease_expires_at < now())
            order by r.created_at, r.run_id
            limit $3
            for update skip locked
         ), claimed as (
           update runs r set status = 'running', attempt = r.attempt + 1, lease_owner = $1, steering_closed = false,
                  lease_expires_at = now() + $2 * interval '1 millisecond',
                  started_at = coalesce(r.started_at, clock_timestamp()), updated_at = now()
             from candidate where r.run_id = candidate.run_id
           returning ${runColumns("r")}
         ), busy as (
           update threads t set status = 'busy', updated_at = now()
             from claimed where t.thread_id = claimed.thread_id::uuid
         )
         select * from claimed order by created_at, run_id`,
        [owner, leaseMs, limit],
      );
      return rows.map(toClaimed);
    } catch (error) {
      // Another worker made a run of the same thread active first: nothing to claim right now.
      if ((error as { code?: string }).code === "23505") return [];
      throw error;
    }
  }

  /**
   * Extends the lease and saves what the run has spent so far (so a crash loses at most one
   * heartbeat of usage); returns the run's status, or undefined when the lease is lost.
   */
  async heartbeat(lease: Lease, leaseMs: number, usage: Usage): Promise<RunStatus | undefined> {
    const [row] = await this.db.query<{ status: RunStatus }>(
      `update runs set lease_expires_at = now() + $4 * interval '1 millisecond', usage = $5::jsonb
        where run_id = $1 and attempt = $2 and lease_owner = $3 and status in ('running', 'cancelling')
        returning status`,
      [lease.runId, lease.attempt, lease.owner, leaseMs, json(usage)],
    );
    return row?.status;
  }

  /** A worker's buffered events; false when the lease is lost (nothing was written). */
  async appendLeased(lease: Lease, events: readonly PendingEvent[]): Promise<boolean> {
    if (events.length === 0) return true;
    return (await appendEvents(this.db, lease.runId, events, lease)).length > 0;
  }

  async append(runId: string, events: readonly PendingEvent[]): Promise<number[]> {
    return appendEvents(this.db, runId, events);
  }

  /**
   * Ends an attempt in one transaction, fenced by the lease: the run's new status and its thread's
   * (one statement, which also drops a finished stateless run's checkpoints), whatever the caller
   * must commit with it (deferred checkpoint writes, notices; it learns whether a claim may now
   * find work: the run went back to the queue, or its thread has a run waiting), at a final
   * boundary the supersede of steering the run still holds, and one append of the events the
   * worker had not written yet, the supersede events and the outcome's own events
   * (run_succeeded …), in that order. Returns false, writing nothing, when the lease was lost.
   */
  async settle(
    lease: Lease,
    threadId: string | null,
    outcome: {
      status: RunStatus;
      output?: unknown;
      error?: RunError | null;
      /** For a retry: back to pending after this delay. */
      retryDelayMs?: number;
      threadStatus?: "idle" | "busy" | "paused" | "error";
      /** What the run has spent, across attempts. */
      usage: Usage;
      /** Buffered events the worker had not written yet. */
      events: readonly PendingEvent[];
      /** The outcome's own events, written last. */
      outcomeEvents: readonly PendingEvent[];
    },
    withinTransaction: (tx: Transaction, settled: { queueChanged: boolean }) => Promise<void>,
  ): Promise<boolean> {
    const final = outcome.status !== "pending" && outcome.status !== "paused";
    return this.db.transaction(async (tx) => {
      // The thread before the run, the order a create deciding its multitask strategy takes them
      // in, so the two cannot deadlock. Locked first, it also orders this settle with creates on
      // the thread (they share-lock it): the statement below, whose snapshot starts after the
      // lock, sees every run created before it, and a create after it waits for this commit, then
      // its own notice finds the thread free. Either way a waiting run gets a wake-up.
      if (threadId !== null) await tx.query("select 1 from threads where thread_id = $1 for update", [threadId]);
      const [row] = await tx.query<{ steered: boolean; thread_has_queued: boolean }>(
        `with settled as (
           update runs set status = $4, output = $5::jsonb, error = $6::jsonb, lease_owner = null, lease_expires_at = null,
                  finished_at = case when $7 then now() else finished_at end,
                  available_at = now() + $8 * interval '1 millisecond', usage = $9::jsonb, updated_at = now()
            where run_id = $1 and attempt = $2 and lease_owner = $3
            returning run_id, thread_id, last_steering_sequence
         ), thread as (
           update threads t set status = $10, updated_at = now()
             from settled where t.thread_id = settled.thread_id and $10::text is not null
         ), stateless_writes as (
           delete from checkpoint_writes w using settled
            where $7 and settled.thread_id is null and w.thread_id = settled.run_id::text
         ), stateless_checkpoints as (
           delete from checkpoints c using settled
            where $7 and settled.thread_id is null and c.thread_id = settled.run_id::text
         )
         select last_steering_sequence > 0 as steered,
                exists (select 1 from runs p where p.thread_id = settled.thread_id and p.status = 'pending') as thread_has_queued
           from settled`,
        [
          lease.runId, lease.attempt, lease.owner, outcome.status, json(outcome.output ?? null), json(outcome.error ?? null),
          final, outcome.retryDelayMs ?? 0, json(outcome.usage), outcome.threadStatus ?? null,
        ],
      );
      if (!row) return false;
      // The fence held and the row stays locked to commit: nothing below needs the lease.
      const settled = { queueChanged: outcome.status === "pending" || row.thread_has_queued };
      await withinTransaction(tx, settled);
      const superseded = final && row.steered ? await supersedeAtFinalBoundary(tx, lease.runId) : [];
      await appendEvents(tx, lease.runId, [...outcome.events, ...superseded, ...outcome.outcomeEvents]);
      return true;
    });
  }

  /**
   * Cancel: pending and paused runs end cancelled at once; a running run goes to cancelling and
   * its worker stops it. Terminal runs are a 409 conflict.
   */
  async cancel(tenantId: string, runId: string): Promise<{ run: ClaimedRun; signalWorker: boolean }> {
    return this.db.transaction(async (tx) => {
      const [current] = await tx.query<RunRow>(`select ${RUN_COLUMNS} from runs where tenant_id = $1 and run_id = $2 for update`, [tenantId, runId]);
      if (!current) throw notFound("run", runId);
      // Decided on the typed column only: user metadata of the same name never counts.
      if (current.superseded_by_run_id !== null) {
        throw new ApiError("run_superseded", `run ${runId} was resumed as run ${current.superseded_by_run_id}; cancel that run instead`, {
          fields: { superseded_by_run_id: current.superseded_by_run_id },
        });
      }
      if (current.status === "pending" || current.status === "paused") {
        await appendEvents(tx, runId, [{ kind: "run_cancelled", data: { reason: "cancelled", from: current.status } }]);
        const [row] = await tx.query<RunRow>(
          `update runs set status = 'cancelled', finished_at = now(), updated_at = now(),
                  error = '{"code":"run_cancelled","message":"cancelled by request","retryable":false}'::jsonb
            where run_id = $1 returning ${RUN_COLUMNS}`,
          [runId],
        );
        if (row!.thread_id !== null && current.status === "paused") {
          await tx.query("update threads set status = 'idle', updated_at = now() where thread_id = $1", [row!.thread_id]);
        }
        return { run: toClaimed(row!), signalWorker: false };
      }
      if (current.status === "running") {
        const [row] = await tx.query<RunRow>(
          `update runs set status = 'cancelling', updated_at = now() where run_id = $1 returning ${RUN_COLUMNS}`,
          [runId],
        );
        return { run: toClaimed(row!), signalWorker: true };
      }
      if (current.status === "cancelling") return { run: toClaimed(current), signalWorker: true };
      throw new ApiError("conflict", `run ${runId} is ${current.status}; only pending, running or paused runs can be cancelled`);
    });
  }

  /**
   * Resumes a paused run: in one transaction, creates the run that continues it (same thread,
   * assistant, graph, context, config and limits; `metadata.resumed_from_run_id`) and sets the
   * old run's `superseded_by_run_id`. The row lock makes one of concurrent resumes win; the
   * others find the link set (409 run_resume_conflict). The new run is claimable only once this
   * commits.
   */
  async resume(tenantId: string, runId: string, newRunId: string, command: NonNullable<ClaimedRun["command"]>): Promise<ClaimedRun> {
    return this.db.transaction(async (tx) => {
      const [old] = await tx.query<RunRow>(`select ${RUN_COLUMNS} from runs where tenant_id = $1 and run_id = $2 for update`, [tenantId, runId]);
      if (!old) throw notFound("run", runId);
      if (old.superseded_by_run_id !== null) {
        throw new ApiError("run_resume_conflict", `run ${runId} was already resumed as run ${old.superseded_by_run_id}`, {
          fields: { superseded_by_run_id: old.superseded_by_run_id },
        });
      }
      if (old.status !== "paused") throw new ApiError("conflict", `run ${runId} is ${old.status}; only a paused run can be resumed`);
      const [row] = await tx.query<RunRow>(
        `insert into runs (run_id, tenant_id, thread_id, assistant_id, graph_id, input, command, context, config, metadata,
                           multitask_strategy, durability, run_timeout, max_model_calls, max_tool_calls, max_tokens, max_cost, request_hash)
         select $2, tenant_id, thread_id, assistant_id, graph_id, null, $3::jsonb, context, config,
                metadata || jsonb_build_object('resumed_from_run_id', run_id::text), 'enqueue', durability, run_timeout,
                max_model_calls, max_tool_calls, max_tokens, max_cost, null
           from runs where run_id = $1
         returning ${RUN_COLUMNS}`,
        [runId, newRunId, json(command)],
      );
      await tx.query("update runs set superseded_by_run_id = $2, updated_at = now() where run_id = $1", [runId, newRunId]);
      await migrateToSuccessor(tx, runId, newRunId);
      return toClaimed(row!);
    });
  }

  /** Re-queues a failed or dead-lettered run as it was (same id, input, config, graph); attempts start over. */
  async redrive(tenantId: string, runId: string): Promise<ClaimedRun> {
    return this.db.transaction(async (tx) => {
      const [current] = await tx.query<{ status: RunStatus }>("select status from runs where tenant_id = $1 and run_id = $2 for update", [tenantId, runId]);
      if (!current) throw notFound("run", runId);
      if (current.status !== "failed" && current.status !== "dead_letter") {
        throw new ApiError("conflict", `run ${runId} is ${current.status}; only failed or dead_letter runs can be redriven`);
      }
      await appendEvents(tx, runId, [{ kind: "run_redriven", data: { from: current.status } }]);
      const [row] = await tx.query<RunRow>(
        `update runs set status = 'pending', attempt = 0, error = null, output = null, finished_at = null,
                available_at = now(), updated_at = now()
          where run_id = $1 returning ${RUN_COLUMNS}`,
        [runId],
      );
      return toClaimed(row!);
    });
  }

  /**
   * A cancelling run whose worker died cannot be stopped by anyone: once its lease has expired it
   * is cancelled here. Returns the ids it cancelled.
   */
  async reapAbandonedCancels(): Promise<string[]> {
    return this.db.transaction(async (tx) => {
      // Thread before run, skipping what others hold, as the claim does: a late settle of the same
      // run (it takes the thread first) and the reaper cannot deadlock.
      const rows = await tx.query<{ run_id: string; thread_id: string | null }>(
        `with abandoned as (
           select r.run_id from runs r
            where r.status = 'cancelling' and r.lease_expires_at < now()
              and (r.thread_id is null or ${THREAD_LOCKED_UNLESS_HELD})
            for update skip locked
         )
         update runs r set status = 'cancelled', finished_at = now(), updated_at = now(), lease_owner = null, lease_expires_at = null,
                error = '{"code":"run_cancelled","message":"cancelled by request (its worker stopped)","retryable":false}'::jsonb
           from abandoned where r.run_id = abandoned.run_id
          returning r.run_id::text as run_id, r.thread_id::text as thread_id`,
      );
      for (const row of rows) {
        await appendEvents(tx, row.run_id, [{ kind: "run_cancelled", data: { reason: "lease_expired" } }]);
        if (row.thread_id !== null) await tx.query("update threads set status = 'idle', updated_at = now() where thread_id = $1", [row.thread_id]);
      }
      return rows.map((row) => row.run_id);
    });
  }

  async readEvents(runId: string, after: number, limit: number): Promise<RunEvent[]> {
    const rows = await this.db.query<EventRow>(
      `select run_id::text as run_id, sequence, kind, data, created_at from run_events
        where run_id = $1 and sequence > $2 order by sequence limit $3`,
      [runId, after, limit],
    );
    return rows.map(toEvent);
  }

  /** Status only, for the stream's and join's re-checks. */
  async status(runId: string): Promise<RunStatus | undefined> {
    const [row] = await this.db.query<{ status: RunStatus }>("select status from runs where run_id = $1", [runId]);
    return row?.status;
  }
}

/** reject: 409 while the thread has an active run. cancel_previous: cancels them first. */
async function applyMultitaskStrategy(tx: Queryable, threadId: string, strategy: MultitaskStrategy): Promise<string[]> {
  if (strategy === "enqueue") return [];
  if (strategy === "reject") {
    const active = await tx.query("select 1 from runs where thread_id = $1 and status in ('pending', 'running', 'cancelling') limit 1", [threadId]);
    if (active.length) throw new ApiError("concurrent_run", `thread ${threadId} has an active run (multitask_strategy "reject")`);
    return [];
  }
  const changed = await tx.query<{ run_id: string; status: RunStatus }>(
    `update runs set status = case when status = 'pending' then 'cancelled' else 'cancelling' end,
            finished_at = case when status = 'pending' then now() else finished_at end,
            error = case when status = 'pending'
                         then '{"code":"run_cancelled","message":"cancelled by a newer run (cancel_previous)","retryable":false}'::jsonb
                         else error end,
            updated_at = now()
      where thread_id = $1 and status in ('pending', 'running')
      returning run_id::text as run_id, status`,
    [threadId],
  );
  return changed.filter((run) => run.status === "cancelling").map((run) => run.run_id);
}
