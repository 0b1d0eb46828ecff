import type { Db, Queryable } from "./db.ts";
import { distinctPrefixLength, GroupCommit } from "./group-commit.ts";

/**
 * The checkpoint saver's writes as data, so that several can go to the database in one statement:
 * a checkpoint row (`put`) or a task's write rows (`putWrites`).
 */
export interface CheckpointWrite {
  /** Identity of every row it writes: two writes of one row never share a statement. */
  readonly keys: readonly string[];
  /** tenant_id, thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint_type, checkpoint, metadata (json text). */
  readonly checkpoints: readonly (readonly unknown[])[];
  /** tenant_id, thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, value_type, value. */
  readonly writes: readonly (readonly unknown[])[];
}

export function checkpointWrite(
  row: [
    tenantId: string,
    threadId: string,
    ns: string,
    checkpointId: string,
    parentId: string | null,
    type: string,
    bytes: Uint8Array,
    metadata: string,
  ],
): CheckpointWrite {
  return { keys: [`c|${JSON.stringify(row.slice(0, 4))}`], checkpoints: [row], writes: [] };
}

export function taskWrites(
  target: { tenantId: string; threadId: string; ns: string; checkpointId: string; taskId: string; taskPath: string },
  rows: readonly (readonly [idx: number, channel: string, type: string, bytes: Uint8Array])[],
): CheckpointWrite {
  const { tenantId, threadId, ns, checkpointId, taskId, taskPath } = target;
  return {
    keys: rows.map(([idx]) => `w|${JSON.stringify([tenantId, threadId, ns, checkpointId, taskId, idx])}`),
    checkpoints: [],
    writes: rows.map(([idx, channel, type, bytes]) => [tenantId, threadId, ns, checkpointId, taskId, taskPath, idx, channel, type, bytes]),
  };
}

/** The most rows one statement carries (PostgreSQL takes at most 65,535 parameters). */
const MAX_ROWS = 500;

/** Writes in order, as few statements as the rule "one row at most once per statement" allows. */
export async function writeAll(db: Queryable, writes: readonly CheckpointWrite[]): Promise<void> {
  for (let start = 0; start < writes.length;) {
    const batch = distinctPrefix(writes, start);
    await writeOnce(db, batch);
    start += batch.length;
  }
}

/**
 * Group commit for writes that need not wait for anything else (durability `sync` and `async`):
 * see `GroupCommit`. LangGraph puts a task's writes and, once the step's tasks are done, the
 * step's checkpoint in one turn, and chains each `put` on the previous one's promise, so a run's
 * writes for one step share a statement and a commit, and other runs' writes join them. A batch
 * holds no row twice (`distinctPrefix`): writes of one row keep their order across statements.
 */
export class CheckpointWriteBatcher {
  private readonly group: GroupCommit<CheckpointWrite, undefined>;

  constructor(db: Db) {
    this.group = new GroupCommit(
      async (writes) => {
        await writeOnce(db, writes);
        return writes.map(() => undefined);
      },
      (waiting) => distinctPrefix(waiting, 0).length,
    );
  }

  write(write: CheckpointWrite): Promise<void> {
    return this.group.submit(write);
  }
}

/** The longest run of writes from `start` whose rows are all distinct (and within MAX_ROWS). */
function distinctPrefix(writes: readonly CheckpointWrite[], start: number): CheckpointWrite[] {
  const rest = writes.slice(start);
  return rest.slice(
    0,
    distinctPrefixLength(
      rest,
      (write) => write.keys,
      MAX_ROWS,
      (write) => write.keys.length,
    ),
  );
}

/** One statement: the checkpoint rows and the write rows of `writes`, which must all be distinct. */
async function writeOnce(db: Queryable, writes: readonly CheckpointWrite[]): Promise<void> {
  const params: unknown[] = [];
  const checkpointRows = writes.flatMap((write) => write.checkpoints);
  const writeRows = writes.flatMap((write) => write.writes);
  const statements: string[] = [];
  if (checkpointRows.length > 0)
    statements.push(`${INSERT_CHECKPOINTS} values ${valuesOf(checkpointRows, CHECKPOINT_CASTS, params)} ${ON_CHECKPOINT_CONFLICT}`);
  if (writeRows.length > 0) statements.push(`${INSERT_WRITES} values ${valuesOf(writeRows, WRITE_CASTS, params)} ${ON_WRITE_CONFLICT}`);
  if (statements.length === 0) return;
  const sql = statements.length === 1 ? statements[0]! : `with checkpoints_written as (${statements[0]}) ${statements[1]}`;
  await db.query(sql, params);
}

/** A write one run's attempt holds, named by its run (what a fence checks). */
export interface RunCheckpointWrite {
  readonly runId: string;
  readonly write: CheckpointWrite;
}

/**
 * Writes of several runs as CTEs for another statement to carry, fenced: only the rows of the runs
 * the CTE `fence` lists (its column `run_id`, a uuid) are written. Their parameters are appended to
 * `params`. Undefined when one statement cannot take them (a row twice, or more than `MAX_ROWS`):
 * the caller writes them apart (`writeAll`).
 */
export function fencedWriteCtes(writes: readonly RunCheckpointWrite[], params: unknown[], fence: string): string[] | undefined {
  const all = writes.map(({ write }) => write);
  if (distinctPrefix(all, 0).length < all.length) return undefined;
  const tagged = (rowsOf: (write: CheckpointWrite) => readonly (readonly unknown[])[]) =>
    writes.flatMap(({ runId, write }) => rowsOf(write).map((row) => [runId, ...row]));
  const fenced = (
    name: string,
    insert: string,
    columns: readonly string[],
    casts: readonly string[],
    rows: unknown[][],
    conflict: string,
  ) =>
    `${name} as (${insert} select ${columns.join(", ")} from (values ${valuesOf(rows, ["uuid", ...casts], params)})
       as v(run_id, ${columns.join(", ")}) where v.run_id in (select run_id from ${fence}) ${conflict})`;
  const checkpointRows = tagged((write) => write.checkpoints);
  const writeRows = tagged((write) => write.writes);
  return [
    ...(checkpointRows.length > 0
      ? [fenced("fenced_checkpoints", INSERT_CHECKPOINTS, CHECKPOINT_COLUMNS, CHECKPOINT_CASTS, checkpointRows, ON_CHECKPOINT_CONFLICT)]
      : []),
    ...(writeRows.length > 0 ? [fenced("fenced_writes", INSERT_WRITES, WRITE_COLUMNS, WRITE_CASTS, writeRows, ON_WRITE_CONFLICT)] : []),
  ];
}

/** `($1::text, $2::bytea, …), …` for `rows`, their values appended to `params`. */
function valuesOf(rows: readonly (readonly unknown[])[], casts: readonly string[], params: unknown[]): string {
  return rows
    .map((row) => {
      params.push(...row);
      const base = params.length - row.length;
      return `(${casts.map((cast, column) => `$${base + column + 1}::${cast}`).join(", ")})`;
    })
    .join(", ");
}

const CHECKPOINT_COLUMNS = [
  "tenant_id",
  "thread_id",
  "checkpoint_ns",
  "checkpoint_id",
  "parent_checkpoint_id",
  "checkpoint_type",
  "checkpoint",
  "metadata",
];
const INSERT_CHECKPOINTS = `insert into checkpoints (${CHECKPOINT_COLUMNS.join(", ")})`;
const CHECKPOINT_CASTS = ["text", "text", "text", "text", "text", "text", "bytea", "jsonb"];
/** LangGraph may put a checkpoint id again: the latest content wins, the parent link stays. */
const ON_CHECKPOINT_CONFLICT = `on conflict (tenant_id, thread_id, checkpoint_ns, checkpoint_id) do update
  set checkpoint_type = excluded.checkpoint_type, checkpoint = excluded.checkpoint, metadata = excluded.metadata`;

const WRITE_COLUMNS = [
  "tenant_id",
  "thread_id",
  "checkpoint_ns",
  "checkpoint_id",
  "task_id",
  "task_path",
  "idx",
  "channel",
  "value_type",
  "value",
];
const INSERT_WRITES = `insert into checkpoint_writes (${WRITE_COLUMNS.join(", ")})`;
const WRITE_CASTS = ["text", "text", "text", "text", "text", "text", "integer", "text", "text", "bytea"];
/** Ordinary writes are insert-if-absent (a replayed task must not change what was recorded); special writes (negative index) are upserts. */
const ON_WRITE_CONFLICT = `on conflict (tenant_id, thread_id, checkpoint_ns, checkpoint_id, task_id, idx) do update
  set channel = excluded.channel, value_type = excluded.value_type, value = excluded.value, task_path = excluded.task_path
  where checkpoint_writes.idx < 0`;
