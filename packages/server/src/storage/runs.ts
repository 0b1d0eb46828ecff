import type { ResumeBody, Run, ThreadStatus } from "@rudder/api";
import type { Usage } from "../domain/budget.ts";
import { LEASED_STATUSES, type Durability, type MultitaskStrategy, type RunError, type RunStatus } from "../domain/runs.ts";
import type { Queryable } from "./db.ts";
import { byLeaseRunId, HELD_LEASES, HELD_RUNS, type Lease } from "./lease.ts";
import type { PendingEvent } from "./events.ts";
import { iso, json } from "./rows.ts";

/** What a worker needs beyond the public view. */
export interface ClaimedRun extends Run {
  tenant_id: string;
  graph_id: string;
  /** What the run starts with besides its input: a resume's (or create's) Command. */
  command: ResumeBody | null;
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
  /** What a replay under `idempotencyKey` must match (`requestFingerprint`); null without a key. */
  requestHash: string | null;
  /** Seconds from now before which no worker claims the run (LangGraph's `after_seconds`); null: at once. */
  afterSeconds: number | null;
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
 * The reaper takes the thread before the run this way and never waits, so it cannot deadlock with
 * creates and settles, which lock the thread first and may wait. (The claim skips held threads
 * too, but locks only the threads of the runs it chose: its `held` step.)
 */
const THREAD_LOCKED_UNLESS_HELD =
  "exists (select 1 from threads t where t.tenant_id = r.tenant_id and t.thread_id = r.thread_id for update skip locked)";

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

/**
 * The runs table's statements. Each takes the executor it runs on (the pool, or the transaction a
 * service opened) and never begins or commits: the services decide what commits together. Their
 * texts are module constants, built once: a text built per call (a few KB for the claim or the
 * settle) is hashed and compared in full again by every lookup of its prepared statement's name.
 */

/**
 * For run `r` (a row whose tenant_id and thread_id name the thread): whether another run holds the
 * thread (pending, running or cancelling), so `r` joins it blocked (docs/runs.md).
 */
const THREAD_HELD_BY_ANOTHER = `exists (select 1 from runs h where h.tenant_id = r.tenant_id and h.thread_id = r.thread_id
                                         and h.run_id <> r.run_id and h.status in ('pending', 'running', 'cancelling'))`;

/**
 * Releases the next run of a thread that something just let go of: unblocks its oldest blocked
 * pending run, unless another run still holds the thread (one running or cancelling, or a pending
 * one not blocked). `freed` is a relation (a CTE) with the thread's tenant_id and thread_id and the
 * run_id of the run that let go, excluded because the statement's snapshot still shows it as it
 * was. The caller holds the thread's row lock, so the next run cannot change under it.
 */
function releaseNextRun(freed: string): string {
  return `update runs n set blocked = false
      from ${freed}
     where n.tenant_id = ${freed}.tenant_id
       and n.run_id = (select q.run_id from runs q
                        where q.tenant_id = ${freed}.tenant_id and q.thread_id = ${freed}.thread_id and q.status = 'pending' and q.blocked
                        order by q.created_at, q.run_id limit 1)
       and not exists (select 1 from runs h
                        where h.tenant_id = ${freed}.tenant_id and h.thread_id = ${freed}.thread_id and h.run_id <> ${freed}.run_id
                          and (h.status in ('running', 'cancelling') or (h.status = 'pending' and not h.blocked)))
    returning n.run_id`;
}

/**
 * Inserts a run with the quota, the thread's existence and the idempotency key as the insert's own
 * conditions; undefined when one of them stopped it (the caller's reads say which). The thread row
 * is share-locked so a create and a settle of the thread's previous run are ordered (`settleAttempt`).
 * The run is blocked when another run holds its thread. That check share-locks the run it finds:
 * a create that waited for the thread's lock still reads with the snapshot from before the wait,
 * and the lock makes it re-read a run that a settle or cancel changed meanwhile, so it never joins
 * blocked behind a run that already let go of the thread (with nobody left to release it).
 */
export async function insertRun(db: Queryable, run: NewRun, queuedRunQuota: number): Promise<ClaimedRun | undefined> {
  return (await insertRuns(db, [run], queuedRunQuota)).get(run.runId);
}

const INSERT_RUNS = `with batch as (
       select * from jsonb_to_recordset($1::jsonb) as b(nth int, run_id uuid, tenant_id text, thread_id uuid, assistant_id text,
                graph_id text, input jsonb, command jsonb, context jsonb, config jsonb, metadata jsonb, multitask_strategy text,
                durability text, run_timeout float8, max_model_calls float8, max_tool_calls float8, max_tokens float8,
                max_cost float8, idempotency_key text, request_hash text, after_seconds float8)
     ), queued as materialized (
       select t.tenant_id, (select count(*) from runs r where r.tenant_id = t.tenant_id and r.status = 'pending') as pending
         from (select distinct tenant_id from batch) t
     )
     insert into runs (run_id, tenant_id, thread_id, assistant_id, graph_id, input, command, context, config, metadata,
                       multitask_strategy, durability, run_timeout, max_model_calls, max_tool_calls, max_tokens, max_cost,
                       idempotency_key, request_hash, not_before, available_at, blocked)
     select b.run_id, b.tenant_id, b.thread_id, b.assistant_id, b.graph_id, b.input, b.command, b.context, b.config, b.metadata,
            b.multitask_strategy, b.durability, b.run_timeout, b.max_model_calls, b.max_tool_calls, b.max_tokens, b.max_cost,
            b.idempotency_key, b.request_hash,
            now() + b.after_seconds * interval '1 second', now() + coalesce(b.after_seconds, 0) * interval '1 second',
            b.thread_id is not null and exists (select 1 from runs h where h.tenant_id = b.tenant_id and h.thread_id = b.thread_id
                                                                     and h.status in ('pending', 'running', 'cancelling') for share)
       from batch b join queued q on q.tenant_id = b.tenant_id
      where (b.thread_id is null or exists (select 1 from threads t where t.tenant_id = b.tenant_id and t.thread_id = b.thread_id for share))
        and q.pending + b.nth <= $2
     on conflict (tenant_id, idempotency_key) where idempotency_key is not null do nothing
     returning ${RUN_COLUMNS}`;

/**
 * `insertRun` for several runs in one statement: the inserted ones by id. The quota counts each
 * tenant's pending runs once (materialized: not once per run), and ranks the batch's own runs of
 * a tenant after them. The statement sees none of its own rows, so two runs of one thread must
 * not share it (the second would not be blocked behind the first).
 */
export async function insertRuns(db: Queryable, runs: readonly NewRun[], queuedRunQuota: number): Promise<Map<string, ClaimedRun>> {
  /** How many of the batch's runs each tenant has so far: a run's rank among its tenant's (1 for the first). */
  const ranks = new Map<string, number>();
  const rankOf = (tenantId: string): number => {
    const rank = (ranks.get(tenantId) ?? 0) + 1;
    ranks.set(tenantId, rank);
    return rank;
  };
  const rows = await db.query<RunRow>(INSERT_RUNS, [
    json(
      runs.map((run) => ({
        nth: rankOf(run.tenantId),
        run_id: run.runId,
        tenant_id: run.tenantId,
        thread_id: run.threadId,
        assistant_id: run.assistantId,
        graph_id: run.graphId,
        input: run.input ?? null,
        command: run.command,
        context: run.context,
        config: run.config,
        metadata: run.metadata,
        multitask_strategy: run.multitaskStrategy,
        durability: run.durability,
        run_timeout: run.runTimeout,
        max_model_calls: run.maxModelCalls,
        max_tool_calls: run.maxToolCalls,
        max_tokens: run.maxTokens,
        max_cost: run.maxCost,
        idempotency_key: run.idempotencyKey ?? null,
        request_hash: run.requestHash,
        after_seconds: run.afterSeconds,
      })),
    ),
    queuedRunQuota,
  ]);
  return new Map(rows.map((row) => [row.run_id, toClaimed(row)]));
}

const SELECT_RUN_BY_IDEMPOTENCY_KEY = `select ${RUN_COLUMNS} from runs where tenant_id = $1 and idempotency_key = $2`;

/** The run an Idempotency-Key of the tenant already names, with the fingerprint of its request. */
export async function findByIdempotencyKey(
  db: Queryable,
  tenantId: string,
  key: string,
): Promise<(ClaimedRun & { request_hash: string | null }) | undefined> {
  const [row] = await db.query<RunRow>(SELECT_RUN_BY_IDEMPOTENCY_KEY, [tenantId, key]);
  return row && toClaimed(row);
}

export async function threadExists(db: Queryable, tenantId: string, threadId: string): Promise<boolean> {
  return (await db.query("select 1 from threads where tenant_id = $1 and thread_id = $2", [tenantId, threadId])).length > 0;
}

const LOCK_RUN_WITH_THREAD = `with run as (
       select thread_id from runs where tenant_id = $1 and run_id = $2
     ), locked_thread as (
       select 1 from threads t join run on t.tenant_id = $1 and t.thread_id = run.thread_id for update of t
     )
     select ${RUN_COLUMNS} from runs where tenant_id = $1 and run_id = $2 and (select count(*) from locked_thread) >= 0
        for update of runs`;

/**
 * A run, locked, after its thread's row (the lock order every waiting transaction keeps), in one
 * statement: the thread is locked by an init plan of the run's filter, which runs before the run's
 * row is locked. Undefined when the tenant has no such run. A cancel, a redrive or a resume costs
 * one round trip for what was a read of the run's thread, `lockThread` and a locked read of the run.
 * The run comes back as it is once locked (a row changed while the statement waited is re-read).
 */
export async function lockRunWithThread(tx: Queryable, tenantId: string, runId: string): Promise<ClaimedRun | undefined> {
  const [row] = await tx.query<RunRow>(LOCK_RUN_WITH_THREAD, [tenantId, runId]);
  return row && toClaimed(row);
}

export async function countPending(db: Queryable, tenantId: string): Promise<number> {
  const [row] = await db.query<{ queued: number }>("select count(*)::int as queued from runs where tenant_id = $1 and status = 'pending'", [
    tenantId,
  ]);
  return row?.queued ?? 0;
}

const LOCK_RUNS_OF_THREAD = `select ${RUN_COLUMNS} from runs where tenant_id = $1 and thread_id = $2 and status = any($3::text[])
      order by created_at, run_id for update`;

/** The thread's runs in one of `statuses`, locked (after its thread: see `lockThread`). */
export async function lockRunsOfThread(
  tx: Queryable,
  tenantId: string,
  threadId: string,
  statuses: readonly RunStatus[],
): Promise<ClaimedRun[]> {
  const rows = await tx.query<RunRow>(LOCK_RUNS_OF_THREAD, [tenantId, threadId, statuses]);
  return rows.map(toClaimed);
}

const LOCK_UNANSWERED_PAUSED_RUN = `select ${RUN_COLUMNS} from runs
      where tenant_id = $1 and thread_id = $2 and status = 'paused' and superseded_by_run_id is null
      order by created_at desc, run_id desc limit 1 for update`;

/** The thread's newest paused run that no resume has continued yet, locked (under the thread's lock). */
export async function lockUnansweredPausedRun(tx: Queryable, tenantId: string, threadId: string): Promise<ClaimedRun | undefined> {
  const [row] = await tx.query<RunRow>(LOCK_UNANSWERED_PAUSED_RUN, [tenantId, threadId]);
  return row && toClaimed(row);
}

const SELECT_RUN = `select ${RUN_COLUMNS} from runs where tenant_id = $1 and run_id = $2`;

export async function getRun(db: Queryable, tenantId: string, runId: string): Promise<ClaimedRun | undefined> {
  const [row] = await db.query<RunRow>(SELECT_RUN, [tenantId, runId]);
  return row && toClaimed(row);
}

const LIST_RUNS_OF_THREAD = `select ${RUN_COLUMNS} from runs where tenant_id = $1 and thread_id = $2
      order by created_at desc, run_id desc limit $3 offset $4`;

export async function listRunsOfThread(
  db: Queryable,
  tenantId: string,
  threadId: string,
  page: { limit: number; offset: number },
): Promise<ClaimedRun[]> {
  const rows = await db.query<RunRow>(LIST_RUNS_OF_THREAD, [tenantId, threadId, page.limit, page.offset]);
  return rows.map(toClaimed);
}

/** What `GET /v1/runs` filters by; `metadata` matches by containment (`@>`). */
export interface RunListFilter {
  readonly status?: string | undefined;
  readonly assistantId?: string | undefined;
  readonly threadId?: string | undefined;
  readonly metadata?: Record<string, unknown> | undefined;
}

const LIST_RUNS = `select ${RUN_COLUMNS} from runs
      where tenant_id = $1 and ($2::text is null or status = $2) and ($3::text is null or assistant_id = $3)
        and ($4::uuid is null or thread_id = $4::uuid) and ($5::jsonb is null or metadata @> $5::jsonb)
      order by created_at desc, run_id desc limit $6 offset $7`;

/** The tenant's runs, newest first, filtered. */
export async function listRuns(
  db: Queryable,
  tenantId: string,
  filter: RunListFilter,
  page: { limit: number; offset: number },
): Promise<ClaimedRun[]> {
  const rows = await db.query<RunRow>(LIST_RUNS, [
    tenantId,
    filter.status ?? null,
    filter.assistantId ?? null,
    filter.threadId ?? null,
    filter.metadata === undefined ? null : json(filter.metadata),
    page.limit,
    page.offset,
  ]);
  return rows.map(toClaimed);
}

/** A claimed run and how long it had been claimable (since created, its backoff passed, or its lease expired). */
export type Claim = ClaimedRun & { readonly claimableSeconds: number };

const CLAIM_RUNS = `with candidate as (
         select r.tenant_id, r.run_id, r.thread_id,
                extract(epoch from (clock_timestamp() - case when r.status = 'pending' then r.available_at else r.lease_expires_at end))::float8 as claimable_seconds
           from runs r
          where (r.status = 'pending' and not r.blocked and r.available_at <= now()
                 and (r.thread_id is null or (
                   (r.tenant_id, r.thread_id, r.run_id) in (
                     select distinct on (h.tenant_id, h.thread_id) h.tenant_id, h.thread_id, h.run_id
                       from runs h
                      where h.status = 'pending' and not h.blocked and h.thread_id is not null
                      order by h.tenant_id, h.thread_id, h.created_at, h.run_id)
                   and not exists (select 1 from runs a where a.tenant_id = r.tenant_id and a.thread_id = r.thread_id
                                                and a.status in ('running', 'cancelling')))))
             or (r.status = 'running' and r.lease_expires_at < now())
          order by r.created_at, r.run_id
          limit $3
          for update skip locked
       ), held as materialized (
         select t.tenant_id, t.thread_id from threads t
          where (t.tenant_id, t.thread_id) in (select c.tenant_id, c.thread_id from candidate c where c.thread_id is not null)
            for update skip locked
       ), chosen as (
         select c.tenant_id, c.run_id, c.claimable_seconds from candidate c
           left join held h on h.tenant_id = c.tenant_id and h.thread_id = c.thread_id
          where c.thread_id is null or h.thread_id is not null
       ), claimed as (
         update runs r set status = $4, attempt = r.attempt + 1, lease_owner = $1, steering_closed = false,
                lease_expires_at = now() + $2 * interval '1 millisecond',
                started_at = coalesce(r.started_at, clock_timestamp()), updated_at = now()
           from chosen where r.tenant_id = chosen.tenant_id and r.run_id = chosen.run_id
         returning ${runColumns("r")}, chosen.claimable_seconds
       ), busy as (
         update threads t set status = $5, updated_at = now()
           from claimed where t.tenant_id = claimed.tenant_id and t.thread_id = claimed.thread_id::uuid
       )
       select * from claimed order by created_at, run_id`;

/**
 * Claims up to `limit` of the oldest runnable runs: pending runs not blocked behind another run of
 * their thread, whose backoff (or not-before time: `available_at` starts there, `insertRun`) has
 * passed, and running runs whose lease expired (their worker died). Only those are in the scan
 * (`runs_claimable` holds the pending runs that are not blocked), so runs queued behind busy
 * threads cost it nothing. The thread rule is checked again on each candidate: no active run on
 * it, and it is its thread's oldest unblocked pending run (two creates at once may both join
 * unblocked; FIFO per thread, so at most one run per thread qualifies). Those heads are found once
 * per claim (one `distinct on`, hashed) rather than probed per candidate, so no plan, however stale
 * its statistics, makes a claim cost the square of the claimable runs (docs/database.md, "The
 * queue"). One statement, `for update skip locked`, so concurrent workers never claim the same
 * row; it also marks the claimed runs' threads busy. It locks the threads of the runs it chose,
 * after the limit (`held`, skip locked too), not of every candidate, and drops a run whose thread
 * someone else holds (a create deciding its multitask strategy, a settle): a claim never waits, so
 * it cannot deadlock against them; their commit's notice brings it back. A running run whose
 * lease expired is taken only with its thread too: its first attempt may still be settling
 * (holding the thread, then updating the run), and a claim that took the run without its thread
 * deadlocked with that settle when it came to mark the thread busy (seen under a standing load).
 * The unique index on active runs per thread backs the thread rule: a claim that loses that
 * race claims nothing and the caller tries again. The new statuses come from the lifecycle's
 * claim rule (`to` and `thread`). The candidate scan crosses tenants (one queue on one
 * PostgreSQL); every other part of it joins on (tenant_id, id), so it can run per tenant
 * (docs/architecture.md, "Distributing by tenant").
 */
export async function claimRuns(
  db: Queryable,
  owner: string,
  leaseMs: number,
  limit: number,
  rule: { to: RunStatus; thread: ThreadStatus },
): Promise<Claim[]> {
  try {
    const rows = await db.query<RunRow & { claimable_seconds: number }>(CLAIM_RUNS, [owner, leaseMs, limit, rule.to, rule.thread]);
    return rows.map(({ claimable_seconds: seconds, ...row }) => ({ ...toClaimed(row), claimableSeconds: Math.max(0, Number(seconds)) }));
  } catch (error) {
    // Another worker made a run of the same thread active first: nothing to claim right now.
    if ((error as { code?: string }).code === "23505") return [];
    throw error;
  }
}

/**
 * The heartbeat of one worker's leases, in one statement: each run's lease is extended and what
 * it has spent so far saved (a crash loses at most one heartbeat of usage), only while its lease
 * (tenant, run, attempt, owner) is still held. The rows are locked in run id order, as the event
 * writer's flush locks them (storage/events.ts): two statements locking many runs of one worker
 * in different orders would deadlock each other and whoever queued between them (a steer).
 * Returns the status of each run whose lease still holds; a run missing from it lost its lease.
 */
export async function heartbeatLeases(
  db: Queryable,
  owner: string,
  leases: readonly { readonly tenantId: string; readonly runId: string; readonly attempt: number; readonly usage: Usage }[],
  leaseMs: number,
): Promise<Map<string, RunStatus>> {
  if (leases.length === 0) return new Map();
  const rows = await db.query<{ run_id: string; status: RunStatus }>(
    `with held as materialized (
       select r.tenant_id, r.run_id, l.usage
         from runs r
         join unnest($7::text[], $1::uuid[], $2::int[], $3::text[]) as l(tenant_id, run_id, attempt, usage)
           on r.tenant_id = l.tenant_id and r.run_id = l.run_id and r.attempt = l.attempt
        where r.lease_owner = $4 and r.status = any($6::text[])
        order by r.run_id
          for update of r
     )
     update runs r set lease_expires_at = now() + $5 * interval '1 millisecond', usage = h.usage::jsonb
       from held h
      where r.tenant_id = h.tenant_id and r.run_id = h.run_id
      returning r.run_id::text as run_id, r.status`,
    [
      leases.map((lease) => lease.runId),
      leases.map((lease) => lease.attempt),
      leases.map((lease) => json(lease.usage)),
      owner,
      leaseMs,
      LEASED_STATUSES,
      leases.map((lease) => lease.tenantId),
    ],
  );
  return new Map(rows.map((row) => [row.run_id, row.status]));
}

/** What an attempt's settle writes on the run row. */
export interface SettleFields {
  readonly status: RunStatus;
  readonly output: unknown;
  readonly error: RunError | null;
  readonly finishes: boolean;
  readonly retryDelayMs: number;
  readonly threadStatus: ThreadStatus | null;
  readonly usage: Usage;
  /** The run lets go of its thread (`freesThread`): the settle releases the thread's next run. */
  readonly freesThread: boolean;
  /** Appended to the run's event log by the same statement, in order (the attempt's last events and its outcome's). */
  readonly events: readonly PendingEvent[];
}

/** One attempt's settle in a batch (`settleAttempts`): its fencing lease and what it writes. */
export interface AttemptSettle {
  readonly lease: Lease;
  readonly fields: SettleFields;
  /** Return the run's row as the settle left it (someone in this process waits for its end). */
  readonly returnRun?: boolean;
}

/** What a settle whose lease held reports of its run. */
export interface SettledAttempt {
  /** The run's thread has a run waiting (a claim may now find it). */
  readonly threadHasQueued: boolean;
  /** The run's row as the settle committed it, when asked for (`returnRun`). */
  readonly run?: ClaimedRun;
}

const SETTLE_ATTEMPTS = `with batch as (
       select * from jsonb_to_recordset($1::jsonb) as b(tenant_id text, run_id uuid, attempt int, owner text, status text,
              output jsonb, error jsonb, finishes boolean, retry_delay_ms float8, usage jsonb, thread_status text,
              frees_thread boolean, events jsonb, return_run boolean)
     ), ${HELD_LEASES}, settled as (
       update runs r set status = b.status, output = coalesce(b.output, 'null'), error = coalesce(b.error, 'null'),
              lease_owner = null, lease_expires_at = null, finished_at = case when b.finishes then now() else r.finished_at end,
              available_at = now() + b.retry_delay_ms * interval '1 millisecond', usage = b.usage, updated_at = now(),
              last_event_sequence = r.last_event_sequence + jsonb_array_length(b.events)
         from ${HELD_RUNS} and (r.status <> 'cancelling' or b.status = 'cancelled')
        returning r.tenant_id, r.run_id, r.thread_id, r.last_event_sequence - jsonb_array_length(b.events) as event_base,
                  b.events, b.finishes, b.thread_status, b.frees_thread, case when b.return_run then r end as run_row
     ), appended as (
       insert into run_events (tenant_id, run_id, sequence, kind, data)
       select s.tenant_id, s.run_id, s.event_base + e.ordinality::int, e.value->>'kind', e.value->'data'
         from settled s, jsonb_array_elements(s.events) with ordinality as e(value, ordinality)
     ), thread as (
       update threads t set status = s.thread_status, updated_at = now()
         from settled s where t.tenant_id = s.tenant_id and t.thread_id = s.thread_id and s.thread_status is not null
     ), stateless_writes as (
       delete from checkpoint_writes w using settled s
        where s.finishes and s.thread_id is null and w.tenant_id = s.tenant_id and w.thread_id = s.run_id::text
     ), stateless_checkpoints as (
       delete from checkpoints c using settled s
        where s.finishes and s.thread_id is null and c.tenant_id = s.tenant_id and c.thread_id = s.run_id::text
     ), freed as (
       select tenant_id, thread_id, run_id from settled where thread_id is not null and frees_thread
     ), released as (
       ${releaseNextRun("freed")}
     )
     select s.run_id::text as settled_run_id,
            -- A stateless run has no thread to look in: without the case, a plan that finds the
            -- tenant's pending runs first walks all of them to match none (docs/database.md).
            case when s.thread_id is null then false
                 else exists (select 1 from runs p where p.tenant_id = s.tenant_id and p.thread_id = s.thread_id
                                                     and p.status = 'pending') end as thread_has_queued,
            ${runColumns("(s.run_row)")}
       from settled s`;

/**
 * Attempts' ends on their run rows, each fenced by its own lease, in one statement: each run's new
 * status and its thread's, its last events appended (sequences from the same update of the run
 * row, as `appendEvents` hands them out), a finished stateless run's checkpoints dropped, and the
 * next run of each thread a run lets go of released (`releaseNextRun`). Returns, by run id, the
 * runs whose lease held, each saying whether its thread has a run waiting (a claim may now find
 * it), with its new row when asked for (a join of this process then need not read it); a run
 * whose lease was lost gets nothing written and is missing. The runs are locked in run
 * id order, as every statement that locks several runs does (the event flush, the lease keeper's
 * heartbeat), so two of them cannot deadlock. On a thread, the caller has locked the thread in an
 * earlier statement of the same transaction (`lockThreads`), so that this statement's snapshot sees
 * every run created on the thread before the lock was granted; stateless runs need no transaction.
 */
export async function settleAttempts(db: Queryable, settles: readonly AttemptSettle[]): Promise<Map<string, SettledAttempt>> {
  if (settles.length === 0) return new Map();
  const rows = await db.query<{ settled_run_id: string; thread_has_queued: boolean } & (RunRow | { [K in keyof RunRow]: null })>(
    SETTLE_ATTEMPTS,
    [settleBatchJson(settles)],
  );
  return new Map(
    rows.map(({ settled_run_id: runId, thread_has_queued: threadHasQueued, ...run }) => [
      runId,
      run.run_id === null ? { threadHasQueued } : { threadHasQueued, run: toClaimed(run) },
    ]),
  );
}

/**
 * Whether the lease still holds its run and the run reads `cancelling`: a settle that wrote nothing
 * was stopped by a cancel its worker had not heard of, not by a lost lease (`settleAttempts` writes
 * nothing but `cancelled` over `cancelling`).
 */
export async function isCancellingUnder(db: Queryable, lease: Lease): Promise<boolean> {
  const rows = await db.query(
    "select 1 from runs where tenant_id = $1 and run_id = $2 and attempt = $3 and lease_owner = $4 and status = 'cancelling'",
    [lease.tenantId, lease.runId, lease.attempt, lease.owner],
  );
  return rows.length > 0;
}

/** One attempt's settle (`settleAttempts`); undefined, writing nothing, when the lease was lost. */
export async function settleAttempt(
  db: Queryable,
  lease: Lease,
  fields: SettleFields,
  returnRun = false,
): Promise<SettledAttempt | undefined> {
  return (await settleAttempts(db, [{ lease, fields, returnRun }])).get(lease.runId);
}

/** The batch as `settleAttempts`' one jsonb parameter, in run id order (the order the rows are locked in). */
function settleBatchJson(settles: readonly AttemptSettle[]): string {
  return json(
    [...settles]
      .sort((a, b) => byLeaseRunId(a.lease, b.lease))
      .map(({ lease, fields, returnRun }) => ({
        tenant_id: lease.tenantId,
        run_id: lease.runId,
        attempt: lease.attempt,
        owner: lease.owner,
        status: fields.status,
        // A JSON null arrives as SQL null; the update stores it back as jsonb null, as the run row always had.
        output: fields.output ?? null,
        error: fields.error,
        finishes: fields.finishes,
        retry_delay_ms: fields.retryDelayMs,
        usage: fields.usage,
        thread_status: fields.threadStatus,
        frees_thread: fields.freesThread,
        events: fields.events,
        return_run: returnRun === true,
      })),
  );
}

const UPDATE_RUN_STATUS = `with changed as (
       update runs r set status = $3, error = $4::jsonb, updated_at = now(),
              finished_at = case when $5 then now() when $6 then null else r.finished_at end,
              lease_owner = case when $5 then null else r.lease_owner end,
              lease_expires_at = case when $5 then null else r.lease_expires_at end,
              attempt = case when $6 then 0 else r.attempt end,
              started_at = case when $6 then null else r.started_at end,
              output = case when $6 then null else r.output end,
              available_at = case when $6 then now() else r.available_at end,
              blocked = case when $6 then r.thread_id is not null and ${THREAD_HELD_BY_ANOTHER} else r.blocked end
        where r.tenant_id = $1 and r.run_id = $2 returning ${runColumns("r")}
     ), freed as (
       select tenant_id, thread_id::uuid as thread_id, run_id::uuid as run_id from changed where thread_id is not null and $7::boolean
     ), released as (
       ${releaseNextRun("freed")}
     )
     select *, exists (select 1 from released) as released_next from changed`;

/**
 * A status change outside an attempt (cancel, redrive, the reaper): the row, as the lifecycle
 * decided it. A requeued run (redrive) joins its thread blocked when another run holds it; a run
 * that lets go of its thread (`freesThread`) releases the thread's next run in the same statement
 * (`releasedNext` says whether there was one).
 * On a thread, the caller holds the thread's row lock (`lockThread`, or the reaper's skip-locked
 * equivalent).
 */
export async function updateRunStatus(
  tx: Queryable,
  tenantId: string,
  runId: string,
  change: { status: RunStatus; finishes: boolean; error: RunError | null; requeue?: boolean; freesThread?: boolean },
): Promise<{ run: ClaimedRun; releasedNext: boolean }> {
  const [row] = await tx.query<RunRow & { released_next: boolean }>(UPDATE_RUN_STATUS, [
    tenantId,
    runId,
    change.status,
    json(change.error),
    change.finishes,
    change.requeue ?? false,
    change.freesThread ?? false,
  ]);
  const { released_next: releasedNext, ...run } = row!;
  return { run: toClaimed(run), releasedNext };
}

const MOVE_RUN_STATUS = `update runs r set status = m.to_status, updated_at = now()
       from unnest($3::text[], $4::text[]) as m(from_status, to_status)
      where r.tenant_id = $1 and r.run_id = $2 and r.status = m.from_status and r.superseded_by_run_id is null
      returning ${runColumns("r")}`;

/**
 * A row-only move (`rowOnlyMoves`) as one statement, without the thread's lock: the run's status
 * becomes `moves.get(status)` when its status has a move and no resume superseded it. Undefined,
 * writing nothing, otherwise (the caller then takes the locking path and its refusals).
 */
export async function moveRunStatus(
  db: Queryable,
  tenantId: string,
  runId: string,
  moves: ReadonlyMap<RunStatus, RunStatus>,
): Promise<ClaimedRun | undefined> {
  if (moves.size === 0) return undefined;
  const [row] = await db.query<RunRow>(MOVE_RUN_STATUS, [tenantId, runId, [...moves.keys()], [...moves.values()]]);
  return row && toClaimed(row);
}

export async function setThreadStatus(tx: Queryable, tenantId: string, threadId: string, status: ThreadStatus): Promise<void> {
  await tx.query("update threads set status = $3, updated_at = now() where tenant_id = $1 and thread_id = $2", [
    tenantId,
    threadId,
    status,
  ]);
}

const INSERT_SUCCESSOR = `insert into runs (run_id, tenant_id, thread_id, assistant_id, graph_id, input, command, context, config, metadata,
                       multitask_strategy, durability, run_timeout, max_model_calls, max_tool_calls, max_tokens, max_cost, request_hash,
                       blocked)
     select $2, r.tenant_id, r.thread_id, r.assistant_id, r.graph_id, null, $3::jsonb, r.context, coalesce($4::jsonb, r.config),
            r.metadata || jsonb_build_object('resumed_from_run_id', r.run_id::text) || coalesce($6::jsonb, '{}'), 'enqueue', r.durability, r.run_timeout,
            r.max_model_calls, r.max_tool_calls, r.max_tokens, r.max_cost, null,
            r.thread_id is not null and ${THREAD_HELD_BY_ANOTHER}
       from runs r where r.tenant_id = $5 and r.run_id = $1
        and (select count(*) from runs q where q.tenant_id = $5 and q.status = 'pending') < $7
     returning ${RUN_COLUMNS}`;

/**
 * The run that continues a resumed one: same thread, assistant, graph, context, config (unless
 * `config` replaces it) and limits, `metadata.resumed_from_run_id` (and `metadata`'s keys, when
 * given); the old run's typed link to it is `linkSuccessor`'s. Undefined, writing nothing, when the tenant's queued
 * runs are at `queuedRunQuota` (the insert's own condition, as for a create). It joins its thread
 * blocked when another run holds the thread; the caller holds the thread's row lock (`lockThread`).
 */
export async function insertSuccessor(
  tx: Queryable,
  tenantId: string,
  runId: string,
  newRunId: string,
  command: NonNullable<ClaimedRun["command"]>,
  options: { config?: Record<string, unknown> | undefined; metadata?: Record<string, unknown> | undefined; queuedRunQuota: number },
): Promise<ClaimedRun | undefined> {
  const [row] = await tx.query<RunRow>(INSERT_SUCCESSOR, [
    runId,
    newRunId,
    json(command),
    options.config === undefined ? null : json(options.config),
    tenantId,
    options.metadata === undefined ? null : json(options.metadata),
    options.queuedRunQuota,
  ]);
  return row && toClaimed(row);
}

/** The paused run's typed link to the run that continues it: what makes its resume 409 from now on. */
export async function linkSuccessor(tx: Queryable, tenantId: string, runId: string, successorId: string): Promise<void> {
  await tx.query("update runs set superseded_by_run_id = $3, updated_at = now() where tenant_id = $1 and run_id = $2", [
    tenantId,
    runId,
    successorId,
  ]);
}

/**
 * A stateless run's checkpoints (kept under its own id) handed to the run that resumes it, so the
 * resume continues from the interrupt. The paused run holds no lease, so nothing writes them meanwhile.
 */
export async function moveRunCheckpoints(tx: Queryable, tenantId: string, fromRunId: string, toRunId: string): Promise<void> {
  await tx.query("update checkpoint_writes set thread_id = $3 where tenant_id = $1 and thread_id = $2", [tenantId, fromRunId, toRunId]);
  await tx.query("update checkpoints set thread_id = $3 where tenant_id = $1 and thread_id = $2", [tenantId, fromRunId, toRunId]);
}

/**
 * Where a resume of a paused thread run continues: undefined when the thread's newest checkpoint is
 * the run's own or no run's (a state update made while it was paused: the resume takes it in), so
 * from the thread's head; when another run wrote the head (it ran on the thread after this one
 * paused), this run's own newest checkpoint, so that the resume answers this run's interrupt and
 * not the other's. Each checkpoint names its writer in `metadata.rudder_run_id`.
 */
const RESUME_CHECKPOINT = `with head as (
       select metadata->>'rudder_run_id' as writer from checkpoints
        where tenant_id = $1 and thread_id = $2 and checkpoint_ns = '' order by checkpoint_id desc limit 1
     )
     select case when head.writer is not null and head.writer <> $3 then
              (select max(checkpoint_id) from checkpoints
                where tenant_id = $1 and thread_id = $2 and checkpoint_ns = '' and metadata->>'rudder_run_id' = $3)
            end as checkpoint_id
       from head`;

export async function resumeCheckpoint(tx: Queryable, tenantId: string, threadId: string, runId: string): Promise<string | undefined> {
  const [row] = await tx.query<{ checkpoint_id: string | null }>(RESUME_CHECKPOINT, [tenantId, threadId, runId]);
  return row?.checkpoint_id ?? undefined;
}

const LOCK_ABANDONED_CANCELS = `select ${RUN_COLUMNS} from runs r
      where r.status = 'cancelling' and r.lease_expires_at < now()
        and (r.thread_id is null or ${THREAD_LOCKED_UNLESS_HELD})
      for update skip locked`;

/**
 * Cancelling runs whose worker died (the lease expired), locked: thread before run, skipping what
 * others hold, as the claim does, so a late settle of the same run and the reaper cannot deadlock.
 * A sweep over every tenant (docs/architecture.md, "Distributing by tenant").
 */
export async function lockAbandonedCancels(tx: Queryable): Promise<ClaimedRun[]> {
  const rows = await tx.query<RunRow>(LOCK_ABANDONED_CANCELS);
  return rows.map(toClaimed);
}

/** Status only, for a follower's re-checks. */
export async function runStatus(db: Queryable, tenantId: string, runId: string): Promise<RunStatus | undefined> {
  const [row] = await db.query<{ status: RunStatus }>("select status from runs where tenant_id = $1 and run_id = $2", [tenantId, runId]);
  return row?.status;
}

const DELETE_ENDED_RUN = `with target as (
       select run_id, thread_id from runs where tenant_id = $1 and run_id = $2::text::uuid
          and (status = any($3::text[]) or (status = 'paused' and superseded_by_run_id is not null)) for update
     ), events as (
       delete from run_events e using target t where e.tenant_id = $1 and e.run_id = t.run_id
     ), writes as (
       delete from checkpoint_writes w using target t where t.thread_id is null and w.tenant_id = $1 and w.thread_id = $2::text
     ), checkpoints as (
       delete from checkpoints c using target t where t.thread_id is null and c.tenant_id = $1 and c.thread_id = $2::text
     )
     delete from runs r using target t where r.tenant_id = $1 and r.run_id = t.run_id returning r.run_id::text as run_id`;

/**
 * Deletes a run in one of `statuses` (or paused and resumed: a successor carries on its work),
 * its events and, by the keys' cascade, its steering; a
 * stateless run's checkpoints too (they are kept under its run id). A thread's checkpoints stay:
 * they are the thread's state. False when the tenant has no such run in those statuses.
 */
export async function deleteRunIn(db: Queryable, tenantId: string, runId: string, statuses: readonly RunStatus[]): Promise<boolean> {
  const rows = await db.query(DELETE_ENDED_RUN, [tenantId, runId, statuses]);
  return rows.length > 0;
}
