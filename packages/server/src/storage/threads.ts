import type { JsonObject, Thread, ThreadStatus } from "@rudder/api";
import type { Queryable } from "./db.ts";
import { iso, json } from "./rows.ts";

interface ThreadRow {
  thread_id: string;
  metadata: JsonObject;
  status: ThreadStatus;
  created_at: Date | string;
  updated_at: Date | string;
}

export interface ThreadListQuery {
  limit: number;
  offset: number;
  /** Threads whose metadata contains this object. */
  metadata?: JsonObject | undefined;
  /** Threads in this status. */
  status?: ThreadStatus | undefined;
  /** The order (default: newest first); ties go by thread id in the same direction. */
  sort?: { by: ThreadSortField; order: "asc" | "desc" } | undefined;
}

/** What a thread list may sort by: LangGraph's `ThreadSortBy`. */
export type ThreadSortField = "thread_id" | "status" | "created_at" | "updated_at" | "state_updated_at";

/** `state_updated_at` is when the thread's latest checkpoint was written (its update time without one). */
const SORT_EXPRESSIONS: Record<ThreadSortField, string> = {
  thread_id: "thread_id",
  status: "status",
  created_at: "created_at",
  updated_at: "updated_at",
  state_updated_at: `coalesce((select max(c.created_at) from checkpoints c
      where c.tenant_id = threads.tenant_id and c.thread_id = threads.thread_id::text and c.checkpoint_ns = ''), updated_at)`,
};

const orderBy = (sort: ThreadListQuery["sort"]) =>
  sort ? `${SORT_EXPRESSIONS[sort.by]} ${sort.order}, thread_id ${sort.order}` : "created_at desc, thread_id desc";

const COLUMNS = "thread_id::text as thread_id, metadata, status, created_at, updated_at";

const toThread = (row: ThreadRow): Thread => ({
  thread_id: row.thread_id,
  metadata: row.metadata,
  status: row.status,
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

// Threads, always scoped by tenant: another tenant's thread is indistinguishable from none.

const INSERT_THREAD = `insert into threads (thread_id, tenant_id, metadata)
     select $1::uuid, $2::text, $3::jsonb where not exists (select 1 from runs where tenant_id = $2 and run_id = $1::uuid)
     on conflict (tenant_id, thread_id) do nothing
     returning ${COLUMNS}`;

/**
 * Inserts the thread; undefined when the tenant already has the id: as a thread, or as a run's id
 * (a stateless run keeps its checkpoints under its own id, which a thread of that id would share).
 */
export async function insertThread(db: Queryable, tenantId: string, threadId: string, metadata: JsonObject): Promise<Thread | undefined> {
  const [row] = await db.query<ThreadRow>(INSERT_THREAD, [threadId, tenantId, json(metadata)]);
  return row && toThread(row);
}

const SELECT_THREAD = `select ${COLUMNS} from threads where tenant_id = $1 and thread_id = $2`;

export async function findThread(db: Queryable, tenantId: string, threadId: string): Promise<Thread | undefined> {
  const [row] = await db.query<ThreadRow>(SELECT_THREAD, [tenantId, threadId]);
  return row && toThread(row);
}

/**
 * Locks the thread row for the rest of the transaction (a thread before its runs: the lock order
 * every waiting transaction keeps; it orders run creation on the thread); false when there is none.
 */
export async function lockThread(tx: Queryable, tenantId: string, threadId: string): Promise<boolean> {
  const rows = await tx.query("select 1 from threads where tenant_id = $1 and thread_id = $2 for update", [tenantId, threadId]);
  return rows.length > 0;
}

/**
 * Locks several threads' rows in one statement, in (tenant, thread id) order, so two transactions
 * that lock several cannot deadlock; a transaction that locks one (`lockThread`) holds no other.
 */
export async function lockThreads(tx: Queryable, threads: readonly { tenantId: string; threadId: string }[]): Promise<void> {
  if (threads.length === 0) return;
  // The nested loop takes the arrays in order, and that is the order the rows are locked in.
  const ordered = [...new Map(threads.map((thread) => [`${thread.tenantId}\u0000${thread.threadId}`, thread])).entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([, thread]) => thread);
  await tx.query(
    `select 1 from unnest($1::text[], $2::uuid[]) as l(tenant_id, thread_id)
       cross join lateral (select 1 from threads t where t.tenant_id = l.tenant_id and t.thread_id = l.thread_id for update) t`,
    [ordered.map((thread) => thread.tenantId), ordered.map((thread) => thread.threadId)],
  );
}

/**
 * Writes the thread's metadata: `replace` sets it, `merge` adds these top-level keys to it (jsonb
 * `||`, in the statement itself, so concurrent merges cannot lose each other's keys).
 */
export async function writeThreadMetadata(
  db: Queryable,
  tenantId: string,
  threadId: string,
  metadata: JsonObject,
  mode: "replace" | "merge",
): Promise<Thread | undefined> {
  const value = mode === "merge" ? "metadata || $3::jsonb" : "$3::jsonb";
  const [row] = await db.query<ThreadRow>(
    `update threads set metadata = ${value}, updated_at = now()
      where tenant_id = $1 and thread_id = $2 returning ${COLUMNS}`,
    [tenantId, threadId, json(metadata)],
  );
  return row && toThread(row);
}

/** Whether a run of the thread is pending, running or cancelling. */
export async function threadHasActiveRun(db: Queryable, tenantId: string, threadId: string): Promise<boolean> {
  const active = await db.query(
    "select 1 from runs where tenant_id = $1 and thread_id = $2 and status in ('pending', 'running', 'cancelling') limit 1",
    [tenantId, threadId],
  );
  return active.length > 0;
}

/**
 * Deletes the thread, its runs' events, its checkpoints and pending writes (none has a foreign key
 * to it: checkpoints are keyed by thread id alone, and events lost theirs in migration 000015),
 * then, by the keys' cascade, its runs and their steering. One statement: the events are found
 * through the runs as the statement's snapshot sees them, before the cascade removes the runs.
 */
const DELETE_THREAD = `with events as (
       delete from run_events e using runs r
        where r.tenant_id = $1 and r.thread_id = $2::text::uuid and e.tenant_id = r.tenant_id and e.run_id = r.run_id
     ), writes as (
       delete from checkpoint_writes where tenant_id = $1 and thread_id = $2::text
     ), checkpoints as (
       delete from checkpoints where tenant_id = $1 and thread_id = $2::text
     )
     delete from threads where tenant_id = $1 and thread_id = $2::text::uuid`;

export async function deleteThread(tx: Queryable, tenantId: string, threadId: string): Promise<void> {
  await tx.query(DELETE_THREAD, [tenantId, threadId]);
}

/** How many of the tenant's threads match a list query's filters (its paging aside). */
export async function countThreads(db: Queryable, tenantId: string, query: Omit<ThreadListQuery, "limit" | "offset">): Promise<number> {
  const rows = await db.query<{ count: string | number }>(
    `select count(*) as count from threads
      where tenant_id = $1 and ($2::jsonb is null or metadata @> $2::jsonb) and ($3::text is null or status = $3::text)`,
    [tenantId, query.metadata === undefined ? null : json(query.metadata), query.status ?? null],
  );
  return Number(rows[0]?.count ?? 0);
}

/** Newest first unless sorted; `metadata` matches by containment (`@>`), served by the GIN index. */
export async function listThreads(db: Queryable, tenantId: string, query: ThreadListQuery): Promise<Thread[]> {
  const rows = await db.query<ThreadRow>(
    `select ${COLUMNS} from threads
      where tenant_id = $1 and ($2::jsonb is null or metadata @> $2::jsonb) and ($5::text is null or status = $5::text)
      order by ${orderBy(query.sort)}
      limit $3 offset $4`,
    [tenantId, query.metadata === undefined ? null : json(query.metadata), query.limit, query.offset, query.status ?? null],
  );
  return rows.map(toThread);
}

/**
 * A copy of the thread under a new id, in one statement (one snapshot): its metadata, checkpoints
 * and pending writes; where checkpoint metadata names the thread, it names the copy (as LangGraph
 * Platform's copy does). Undefined when the tenant has no such thread.
 */
const COPY_THREAD = `with source as (
       select metadata from threads where tenant_id = $1 and thread_id = $2::text::uuid
     ), copy as (
       insert into threads (thread_id, tenant_id, metadata) select $3::text::uuid, $1, metadata from source returning ${COLUMNS}
     ), writes as (
       insert into checkpoint_writes (tenant_id, thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, value_type, value)
       select tenant_id, $3::text, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, value_type, value
         from checkpoint_writes where tenant_id = $1 and thread_id = $2::text and exists (select 1 from source)
     ), checkpoints as (
       insert into checkpoints (tenant_id, thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint_type, checkpoint, metadata, created_at)
       select tenant_id, $3::text, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint_type, checkpoint,
              replace(metadata::text, $2::text, $3::text)::jsonb, created_at
         from checkpoints where tenant_id = $1 and thread_id = $2::text and exists (select 1 from source)
     )
     select * from copy`;

export async function copyThread(db: Queryable, tenantId: string, threadId: string, copyId: string): Promise<Thread | undefined> {
  const [row] = await db.query<ThreadRow>(COPY_THREAD, [tenantId, threadId, copyId]);
  return row && toThread(row);
}

/**
 * Keeps the thread's latest checkpoint of each namespace and deletes the older ones with their
 * pending writes (LangGraph's prune `keep_latest`); latest as the saver reads it, by checkpoint id.
 */
const KEEP_LATEST_CHECKPOINTS = `with latest as (
       select checkpoint_ns, max(checkpoint_id) as checkpoint_id from checkpoints
        where tenant_id = $1 and thread_id = $2 group by checkpoint_ns
     ), writes as (
       delete from checkpoint_writes w where w.tenant_id = $1 and w.thread_id = $2
          and not exists (select 1 from latest l where l.checkpoint_ns = w.checkpoint_ns and l.checkpoint_id = w.checkpoint_id)
     )
     delete from checkpoints c where c.tenant_id = $1 and c.thread_id = $2
        and not exists (select 1 from latest l where l.checkpoint_ns = c.checkpoint_ns and l.checkpoint_id = c.checkpoint_id)`;

export async function keepLatestCheckpoints(tx: Queryable, tenantId: string, threadId: string): Promise<void> {
  await tx.query(KEEP_LATEST_CHECKPOINTS, [tenantId, threadId]);
}

/** Whether the thread has this checkpoint: one lookup of the primary key. */
export async function hasCheckpoint(
  db: Queryable,
  tenantId: string,
  threadId: string,
  checkpointNs: string,
  checkpointId: string,
): Promise<boolean> {
  const rows = await db.query(
    `select 1 from checkpoints where tenant_id = $1 and thread_id = $2 and checkpoint_ns = $3 and checkpoint_id = $4`,
    [tenantId, threadId, checkpointNs, checkpointId],
  );
  return rows.length > 0;
}

/**
 * Adds these keys to the metadata of the thread's latest checkpoint (LangGraph's `patchState`), in
 * one statement; false when the thread has no checkpoint.
 */
export async function mergeLatestCheckpointMetadata(
  db: Queryable,
  tenantId: string,
  threadId: string,
  metadata: JsonObject,
): Promise<boolean> {
  const rows = await db.query(
    `update checkpoints set metadata = metadata || $3::jsonb
      where tenant_id = $1 and thread_id = $2 and checkpoint_ns = ''
        and checkpoint_id = (select max(checkpoint_id) from checkpoints where tenant_id = $1 and thread_id = $2 and checkpoint_ns = '')
      returning 1`,
    [tenantId, threadId, json(metadata)],
  );
  return rows.length > 0;
}
