import { ApiError } from "../domain/errors.ts";
import type { Db } from "./db.ts";
import { iso, json } from "./rows.ts";

export type ThreadStatus = "idle" | "busy" | "paused" | "error";

export interface Thread {
  thread_id: string;
  metadata: Record<string, unknown>;
  status: ThreadStatus;
  created_at: string;
  updated_at: string;
}

interface ThreadRow {
  thread_id: string;
  metadata: Record<string, unknown>;
  status: ThreadStatus;
  created_at: Date | string;
  updated_at: Date | string;
}

export interface ThreadListQuery {
  limit: number;
  offset: number;
  /** Threads whose metadata contains this object. */
  metadata?: Record<string, unknown> | undefined;
}

const COLUMNS = "thread_id::text as thread_id, metadata, status, created_at, updated_at";

const toThread = (row: ThreadRow): Thread => ({
  thread_id: row.thread_id,
  metadata: row.metadata,
  status: row.status,
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

/** Threads, always scoped by tenant: another tenant's thread is indistinguishable from none. */
export class ThreadRepository {
  constructor(private readonly db: Db) {}

  async create(tenantId: string, threadId: string, metadata: Record<string, unknown>): Promise<Thread> {
    const [row] = await this.db.query<ThreadRow>(
      `insert into threads (thread_id, tenant_id, metadata) values ($1, $2, $3::jsonb) returning ${COLUMNS}`,
      [threadId, tenantId, json(metadata)],
    );
    return toThread(row!);
  }

  async get(tenantId: string, threadId: string): Promise<Thread | undefined> {
    const [row] = await this.db.query<ThreadRow>(
      `select ${COLUMNS} from threads where tenant_id = $1 and thread_id = $2`,
      [tenantId, threadId],
    );
    return row && toThread(row);
  }

  async replaceMetadata(tenantId: string, threadId: string, metadata: Record<string, unknown>): Promise<Thread | undefined> {
    const [row] = await this.db.query<ThreadRow>(
      `update threads set metadata = $3::jsonb, updated_at = now()
        where tenant_id = $1 and thread_id = $2 returning ${COLUMNS}`,
      [tenantId, threadId, json(metadata)],
    );
    return row && toThread(row);
  }

  /**
   * Deletes the thread and, in the same transaction, its runs, checkpoints and pending writes.
   * Refused (409) while a run is pending, running or cancelling; the thread row lock serialises
   * this check with run creation on the thread.
   */
  async delete(tenantId: string, threadId: string): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const [thread] = await tx.query("select 1 from threads where tenant_id = $1 and thread_id = $2 for update", [tenantId, threadId]);
      if (!thread) return false;
      const active = await tx.query("select 1 from runs where thread_id = $1 and status in ('pending', 'running', 'cancelling') limit 1", [threadId]);
      if (active.length) throw new ApiError("conflict", `thread ${threadId} has an active run; cancel it or wait before deleting the thread`);
      await tx.query("delete from threads where thread_id = $1", [threadId]);
      await tx.query("delete from checkpoint_writes where thread_id = $1", [threadId]);
      await tx.query("delete from checkpoints where thread_id = $1", [threadId]);
      return true;
    });
  }

  /** Newest first; `metadata` matches by containment (`@>`), served by the GIN index. */
  async list(tenantId: string, query: ThreadListQuery): Promise<Thread[]> {
    const rows = await this.db.query<ThreadRow>(
      `select ${COLUMNS} from threads
        where tenant_id = $1 and ($2::jsonb is null or metadata @> $2::jsonb)
        order by created_at desc, thread_id desc
        limit $3 offset $4`,
      [tenantId, query.metadata === undefined ? null : json(query.metadata), query.limit, query.offset],
    );
    return rows.map(toThread);
  }
}
