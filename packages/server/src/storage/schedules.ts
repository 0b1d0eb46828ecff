import type { JsonObject, Schedule, ScheduleError } from "@rudder/api";
import type { Queryable } from "./db.ts";
import { iso, json } from "./rows.ts";

/**
 * Schedules, always scoped by tenant; and the executor's statements: the claim of due rows and
 * their advance, which run inside the transaction that creates the run.
 */

interface ScheduleRow {
  schedule_id: string;
  assistant_id: string;
  cron: string;
  timezone: string;
  input: JsonObject;
  enabled: boolean;
  metadata: JsonObject;
  thread_id: string | null;
  next_run_at: Date | string | null;
  last_run_at: Date | string | null;
  last_run_id: string | null;
  last_error: ScheduleError | null;
  created_at: Date | string;
  updated_at: Date | string;
}

/** A due schedule as the executor claimed it, with the instant it was claimed at. */
export interface DueSchedule extends Schedule {
  readonly tenant_id: string;
  /** The schedule's due time (its `next_run_at`) when claimed. */
  readonly due: Date;
  /** The claiming statement's `now()` (or the caller's clock). */
  readonly now: Date;
}

/** What a PATCH may change (all of it written back). */
export interface ScheduleChanges {
  readonly cron: string;
  readonly timezone: string;
  readonly input: JsonObject;
  readonly metadata: JsonObject;
  readonly enabled: boolean;
  /** Recomputed by the caller from cron, timezone and enabled. */
  readonly nextRunAt: Date | null;
}

export interface NewSchedule extends ScheduleChanges {
  readonly tenantId: string;
  readonly scheduleId: string;
  readonly assistantId: string;
  readonly threadId: string | null;
}

const COLUMNS = `schedule_id::text as schedule_id, assistant_id, cron, timezone, input, enabled, metadata, thread_id::text as thread_id,
  next_run_at, last_run_at, last_run_id::text as last_run_id, last_error, created_at, updated_at`;

const isoOrNull = (value: Date | string | null) => (value === null ? null : iso(value));

const toSchedule = (row: ScheduleRow): Schedule => ({
  schedule_id: row.schedule_id,
  assistant_id: row.assistant_id,
  cron: row.cron,
  timezone: row.timezone,
  input: row.input,
  enabled: row.enabled,
  metadata: row.metadata,
  thread_id: row.thread_id,
  next_run_at: isoOrNull(row.next_run_at),
  last_run_at: isoOrNull(row.last_run_at),
  last_run_id: row.last_run_id,
  last_error: row.last_error,
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

export async function insertSchedule(db: Queryable, schedule: NewSchedule): Promise<Schedule> {
  const [row] = await db.query<ScheduleRow>(
    `insert into schedules (tenant_id, schedule_id, assistant_id, thread_id, cron, timezone, input, metadata, enabled, next_run_at)
      values ($1, $2, $3, $4, $5, $6, $7::jsonb, $8::jsonb, $9, $10) returning ${COLUMNS}`,
    [
      schedule.tenantId,
      schedule.scheduleId,
      schedule.assistantId,
      schedule.threadId,
      schedule.cron,
      schedule.timezone,
      json(schedule.input),
      json(schedule.metadata),
      schedule.enabled,
      schedule.nextRunAt,
    ],
  );
  return toSchedule(row!);
}

export async function findSchedule(
  db: Queryable,
  tenantId: string,
  scheduleId: string,
  options: { lock?: boolean } = {},
): Promise<Schedule | undefined> {
  const [row] = await db.query<ScheduleRow>(
    `select ${COLUMNS} from schedules where tenant_id = $1 and schedule_id = $2${options.lock ? " for update" : ""}`,
    [tenantId, scheduleId],
  );
  return row && toSchedule(row);
}

/** Newest first. */
/** What a schedule list filters by (all optional); `metadata` matches by containment (`@>`). */
export interface ScheduleFilter {
  readonly assistantId?: string | undefined;
  readonly threadId?: string | undefined;
  readonly enabled?: boolean | undefined;
  readonly metadata?: JsonObject | undefined;
}

/** The columns a list may be ordered by (default: created_at, newest first). */
export const SCHEDULE_SORT_COLUMNS = ["schedule_id", "assistant_id", "thread_id", "created_at", "updated_at", "next_run_at"] as const;
export type ScheduleSortColumn = (typeof SCHEDULE_SORT_COLUMNS)[number];

const filterSql = `tenant_id = $1 and ($2::text is null or assistant_id = $2) and ($3::uuid is null or thread_id = $3::uuid)
      and ($4::boolean is null or enabled = $4) and ($5::jsonb is null or metadata @> $5::jsonb)`;
const filterParams = (tenantId: string, filter: ScheduleFilter) => [
  tenantId,
  filter.assistantId ?? null,
  filter.threadId ?? null,
  filter.enabled ?? null,
  filter.metadata === undefined ? null : json(filter.metadata),
];

export async function listSchedules(
  db: Queryable,
  tenantId: string,
  page: { limit: number; offset: number },
  filter: ScheduleFilter = {},
  sort: { column: ScheduleSortColumn; order: "asc" | "desc" } = { column: "created_at", order: "desc" },
): Promise<Schedule[]> {
  // The column and order come from the closed lists above, never from the caller's text.
  const column = SCHEDULE_SORT_COLUMNS.includes(sort.column) ? sort.column : "created_at";
  const order = sort.order === "asc" ? "asc" : "desc";
  const rows = await db.query<ScheduleRow>(
    `select ${COLUMNS} from schedules where ${filterSql}
      order by ${column} ${order} nulls last, schedule_id ${order} limit $6 offset $7`,
    [...filterParams(tenantId, filter), page.limit, page.offset],
  );
  return rows.map(toSchedule);
}

export async function countSchedules(db: Queryable, tenantId: string, filter: ScheduleFilter = {}): Promise<number> {
  const [row] = await db.query<{ count: string | number }>(
    `select count(*) as count from schedules where ${filterSql}`,
    filterParams(tenantId, filter),
  );
  return Number(row?.count ?? 0);
}

/** Replaces the definition; the last firing (last_run_at, last_run_id, last_error) stays. */
export async function updateSchedule(
  db: Queryable,
  tenantId: string,
  scheduleId: string,
  changes: ScheduleChanges,
): Promise<Schedule | undefined> {
  const [row] = await db.query<ScheduleRow>(
    `update schedules set cron = $3, timezone = $4, input = $5::jsonb, metadata = $6::jsonb, enabled = $7, next_run_at = $8, updated_at = now()
      where tenant_id = $1 and schedule_id = $2 returning ${COLUMNS}`,
    [tenantId, scheduleId, changes.cron, changes.timezone, json(changes.input), json(changes.metadata), changes.enabled, changes.nextRunAt],
  );
  return row && toSchedule(row);
}

export async function deleteSchedule(db: Queryable, tenantId: string, scheduleId: string): Promise<boolean> {
  const rows = await db.query("delete from schedules where tenant_id = $1 and schedule_id = $2 returning 1", [tenantId, scheduleId]);
  return rows.length > 0;
}

/**
 * Locks up to `limit` enabled schedules due at `now` (the database's `now()` when null), oldest
 * due first, skipping rows another executor holds. A row another transaction advanced is
 * re-checked against its new `next_run_at` before it is locked (PostgreSQL re-evaluates the
 * condition on the newest row version), so a due time is claimed by one transaction only; the
 * caller advances each row in the same transaction, or the rollback leaves it due for the next.
 */
export async function claimDueSchedules(tx: Queryable, now: Date | null, limit: number): Promise<DueSchedule[]> {
  const rows = await tx.query<ScheduleRow & { tenant_id: string; claimed_at: Date | string }>(
    `select tenant_id, ${COLUMNS}, coalesce($1::timestamptz, now()) as claimed_at from schedules
      where enabled and next_run_at is not null and next_run_at <= coalesce($1::timestamptz, now())
      order by next_run_at limit $2 for update skip locked`,
    [now, limit],
  );
  return rows.map((row) => ({
    ...toSchedule(row),
    tenant_id: row.tenant_id,
    due: new Date(row.next_run_at!),
    now: new Date(row.claimed_at),
  }));
}

/** What one due time did to a schedule: a run was created, or it could not be (`error`). */
export type ScheduleAdvance =
  | { readonly nextRunAt: Date | null; readonly scheduledAt: Date; readonly runId: string }
  | { readonly nextRunAt: Date | null; readonly error: ScheduleError };

/**
 * Moves a claimed schedule past the due time it held (`due`: the row must still be at it, so an
 * advance can never apply twice), recording the run it created or why none was.
 */
export async function advanceSchedule(
  tx: Queryable,
  tenantId: string,
  scheduleId: string,
  due: Date,
  advance: ScheduleAdvance,
): Promise<boolean> {
  const rows =
    "runId" in advance
      ? await tx.query(
          `update schedules set next_run_at = $4, last_run_at = $5, last_run_id = $6, last_error = null
            where tenant_id = $1 and schedule_id = $2 and next_run_at = $3 returning 1`,
          [tenantId, scheduleId, due, advance.nextRunAt, advance.scheduledAt, advance.runId],
        )
      : await tx.query(
          `update schedules set next_run_at = $4, last_error = $5::jsonb
            where tenant_id = $1 and schedule_id = $2 and next_run_at = $3 returning 1`,
          [tenantId, scheduleId, due, advance.nextRunAt, json(advance.error)],
        );
  return rows.length > 0;
}

/**
 * Milliseconds from the database's `now()` (or `now`) to the earliest due time of any enabled
 * schedule (0 or less: one is due), or null when none is due ever.
 */
export async function msUntilNextDue(db: Queryable, now: Date | null): Promise<number | null> {
  const [row] = await db.query<{ ms: number | null }>(
    `select (extract(epoch from (min(next_run_at) - coalesce($1::timestamptz, now()))) * 1000)::float8 as ms
      from schedules where enabled and next_run_at is not null`,
    [now],
  );
  return row?.ms ?? null;
}

/** A deleted thread's schedules (they would fire into a missing thread): see `ThreadService.delete`. */
export async function deleteSchedulesOfThread(db: Queryable, tenantId: string, threadId: string): Promise<void> {
  await db.query("delete from schedules where tenant_id = $1 and thread_id = $2::text::uuid", [tenantId, threadId]);
}
