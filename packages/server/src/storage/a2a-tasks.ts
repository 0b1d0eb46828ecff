import type { Run } from "@rudder/api";
import type { RunStatus } from "../domain/runs.ts";
import type { Queryable } from "./db.ts";
import { iso } from "./rows.ts";

/**
 * What the A2A gateway reads of a run to describe its task. A task is its first run, which the
 * gateway tags with its own id (`metadata.a2a_task_id = run_id`: no client chooses a run's id, so
 * no client can make such a run), and the runs that resume it, found along the typed
 * `superseded_by_run_id`; the run at the end of that chain is the task's current one. Run
 * metadata is the client's to write (a resume copies it, and a client may copy it into a run of
 * its own), so it marks where a task starts and nothing more.
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

const COLUMNS = (run: string) => `${run}.run_id::text as run_id, ${run}.thread_id::text as thread_id, ${run}.status, ${run}.output,
  ${run}.error, ${run}.created_at, ${run}.updated_at`;

/** A task's first run; `metadata ? 'a2a_task_id'` is the predicate of the `runs_a2a_task` index, repeated so the planner can use it. */
const IS_TASK_ROOT = (run: string) => `${run}.metadata ? 'a2a_task_id' and ${run}.metadata->>'a2a_task_id' = ${run}.run_id::text`;

/**
 * The current run of every task whose first run `roots` (a condition on `runs root`, `$1` the
 * tenant) selects: each chain walked along `superseded_by_run_id` to the run no resume superseded.
 */
const CURRENT_RUNS = (roots: string) => `with recursive chain as (
    select root.run_id as task_id, root.run_id, root.superseded_by_run_id from runs root where root.tenant_id = $1 and ${roots}
    union all
    select chain.task_id, next.run_id, next.superseded_by_run_id from chain join runs next on next.tenant_id = $1 and next.run_id = chain.superseded_by_run_id
  )
  select chain.task_id::text as task_id, ${COLUMNS("run")} from chain join runs run on run.tenant_id = $1 and run.run_id = chain.run_id
   where chain.superseded_by_run_id is null`;

const toTaskRun = (row: TaskRunRow): TaskRun => ({ ...row, created_at: iso(row.created_at), updated_at: iso(row.updated_at) });

/** The task's current run; undefined when no task of the assistant has this id (`taskId` a UUID). */
export async function currentTaskRun(db: Queryable, tenantId: string, assistantId: string, taskId: string): Promise<TaskRun | undefined> {
  const [row] = await db.query<TaskRunRow>(CURRENT_RUNS(`root.assistant_id = $2 and root.run_id = $3::uuid and ${IS_TASK_ROOT("root")}`), [
    tenantId,
    assistantId,
    taskId,
  ]);
  return row && toTaskRun(row);
}

/** A run of task `taskId`, by the run's id, as it is now. */
export async function taskRunById(db: Queryable, tenantId: string, taskId: string, runId: string): Promise<TaskRun | undefined> {
  const [row] = await db.query<TaskRunRow>(
    `select $3::text as task_id, ${COLUMNS("run")} from runs run where run.tenant_id = $1 and run.run_id = $2`,
    [tenantId, runId, taskId],
  );
  return row && toTaskRun(row);
}

/** The first run of the task a send with this Idempotency-Key started, and the fingerprint of that send's message. */
export async function taskRunByIdempotencyKey(
  db: Queryable,
  tenantId: string,
  key: string,
): Promise<{ run: TaskRun; fingerprint: string | null } | undefined> {
  const [row] = await db.query<TaskRunRow & { fingerprint: string | null }>(
    `select run.run_id::text as task_id, ${COLUMNS("run")}, run.metadata->>'a2a_fingerprint' as fingerprint from runs run
      where run.tenant_id = $1 and run.idempotency_key = $2 and ${IS_TASK_ROOT("run")}`,
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
  const tasks = `${CURRENT_RUNS(`root.assistant_id = $2 and ${IS_TASK_ROOT("root")}`)}
    and ($3::uuid is null or run.thread_id = $3::uuid) and ($4::text[] is null or run.status = any($4::text[]))
    and ($5::timestamptz is null or run.updated_at >= $5::timestamptz)`;
  const params = [tenantId, assistantId, filter.threadId ?? null, filter.statuses ?? null, filter.updatedSince ?? null];
  const rows = await db.query<TaskRunRow>(`${tasks} order by run.updated_at desc, run.run_id desc limit $6 offset $7`, [
    ...params,
    page.limit,
    page.offset,
  ]);
  const [count] = await db.query<{ total: number }>(`select count(*)::int as total from (${tasks}) tasks`, params);
  return { runs: rows.map(toTaskRun), total: count?.total ?? 0 };
}
