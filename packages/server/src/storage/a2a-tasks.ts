import type { Run } from "@rudder/api";
import type { RunStatus } from "../domain/runs.ts";
import type { Queryable } from "./db.ts";
import { iso } from "./rows.ts";

/**
 * What the A2A gateway reads of a run to describe its task: a task is the chain of runs that
 * share `metadata.a2a_task_id` (the first run's id; a resume copies the metadata), and the run
 * that is not superseded is the task's current one.
 */
export type TaskRun = Pick<Run, "run_id" | "thread_id" | "status" | "output" | "error" | "created_at" | "updated_at"> & { task_id: string };

type TaskRunRow = Omit<TaskRun, "created_at" | "updated_at"> & {
  created_at: Date | string;
  updated_at: Date | string;
};

export interface TaskFilter {
  readonly threadId?: string | undefined;
  readonly statuses?: readonly RunStatus[] | undefined;
  /** Tasks whose current run changed at or after this instant. */
  readonly updatedSince?: string | undefined;
}

const COLUMNS = `metadata->>'a2a_task_id' as task_id, run_id::text as run_id, thread_id::text as thread_id, status, output, error,
  created_at, updated_at`;

/** The predicate of the `runs_a2a_task` index, repeated so the planner can use it. */
const IS_TASK_RUN = "metadata ? 'a2a_task_id'";

const toTaskRun = (row: TaskRunRow): TaskRun => ({ ...row, created_at: iso(row.created_at), updated_at: iso(row.updated_at) });

/** The task's current run: the newest of its runs that no resume has superseded. */
export async function currentTaskRun(db: Queryable, tenantId: string, assistantId: string, taskId: string): Promise<TaskRun | undefined> {
  const [row] = await db.query<TaskRunRow>(
    `select ${COLUMNS} from runs
      where tenant_id = $1 and assistant_id = $2 and ${IS_TASK_RUN} and metadata->>'a2a_task_id' = $3 and superseded_by_run_id is null
      order by created_at desc, run_id desc limit 1`,
    [tenantId, assistantId, taskId],
  );
  return row && toTaskRun(row);
}

/** A run of a task, by the run's id. */
export async function taskRunById(db: Queryable, tenantId: string, runId: string): Promise<TaskRun | undefined> {
  const [row] = await db.query<TaskRunRow>(`select ${COLUMNS} from runs where tenant_id = $1 and run_id = $2 and ${IS_TASK_RUN}`, [
    tenantId,
    runId,
  ]);
  return row && toTaskRun(row);
}

/** The first run of the task a send with this Idempotency-Key started, and the fingerprint of that send's message. */
export async function taskRunByIdempotencyKey(
  db: Queryable,
  tenantId: string,
  key: string,
): Promise<{ run: TaskRun; fingerprint: string | null } | undefined> {
  const [row] = await db.query<TaskRunRow & { fingerprint: string | null }>(
    `select ${COLUMNS}, metadata->>'a2a_fingerprint' as fingerprint from runs where tenant_id = $1 and idempotency_key = $2 and ${IS_TASK_RUN}`,
    [tenantId, key],
  );
  if (!row) return undefined;
  const { fingerprint, ...run } = row;
  return { run: toTaskRun(run), fingerprint };
}

/** A page of the assistant's tasks (their current runs), most recently changed first, and how many match in all. */
export async function listTaskRuns(
  db: Queryable,
  tenantId: string,
  assistantId: string,
  filter: TaskFilter,
  page: { limit: number; offset: number },
): Promise<{ runs: TaskRun[]; total: number }> {
  const where = `tenant_id = $1 and assistant_id = $2 and ${IS_TASK_RUN} and superseded_by_run_id is null
    and ($3::uuid is null or thread_id = $3::uuid) and ($4::text[] is null or status = any($4::text[]))
    and ($5::timestamptz is null or updated_at >= $5::timestamptz)`;
  const params = [tenantId, assistantId, filter.threadId ?? null, filter.statuses ?? null, filter.updatedSince ?? null];
  const rows = await db.query<TaskRunRow>(
    `select ${COLUMNS} from runs where ${where} order by updated_at desc, run_id desc limit $6 offset $7`,
    [...params, page.limit, page.offset],
  );
  const [count] = await db.query<{ total: number }>(`select count(*)::int as total from runs where ${where}`, params);
  return { runs: rows.map(toTaskRun), total: count?.total ?? 0 };
}
