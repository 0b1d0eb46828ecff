import { randomUUID } from "node:crypto";
import type { CreateScheduleBody, PatchScheduleBody, Schedule } from "@rudder/api";
import { ApiError, notFound } from "../domain/errors.ts";
import { canonicalTimezone, cronProblem, nextDueAfter } from "../domain/schedules.ts";
import type { Notifier } from "../notify/notifier.ts";
import type { RunService } from "../runs/service.ts";
import type { Db } from "../storage/db.ts";
import * as scheduleRows from "../storage/schedules.ts";
import { findThread } from "../storage/threads.ts";

export type { ScheduleFilter, ScheduleSortColumn } from "../storage/schedules.ts";

/**
 * Schedules as the API manages them (DESIGN.md "Schedules"): the definition's rules, and the
 * `next_run_at` each change implies. Every change publishes `schedules_changed`, so executors
 * that sleep until the next due time recompute it at once.
 */
export class ScheduleService {
  constructor(
    private readonly db: Db,
    /** Checks a schedule's run request as run creation does, so its fires are not refused for what can be told now. */
    private readonly runs: Pick<RunService, "checkRequest">,
    private readonly notifier: Notifier,
    /** The clock next due times are computed from (tests move it). */
    private readonly clock: () => Date = () => new Date(),
  ) {}

  async create(tenantId: string, body: CreateScheduleBody): Promise<Schedule> {
    const timezone = requireValid(body.cron, body.timezone ?? "UTC");
    await this.runs.checkRequest(tenantId, { assistant_id: body.assistant_id, input: body.input ?? {} });
    const threadId = body.thread_id ?? null;
    if (threadId !== null && !(await findThread(this.db, tenantId, threadId))) {
      throw new ApiError("validation_error", `thread_id "${threadId}" names no thread`);
    }
    const enabled = body.enabled ?? true;
    const schedule = await scheduleRows.insertSchedule(this.db, {
      tenantId,
      scheduleId: randomUUID(),
      assistantId: body.assistant_id,
      threadId,
      cron: body.cron.trim(),
      timezone,
      input: body.input ?? {},
      metadata: body.metadata ?? {},
      enabled,
      nextRunAt: enabled ? nextDueAfter(body.cron, timezone, this.clock()) : null,
    });
    await this.changed();
    return schedule;
  }

  async get(tenantId: string, scheduleId: string): Promise<Schedule> {
    const schedule = await scheduleRows.findSchedule(this.db, tenantId, scheduleId);
    if (!schedule) throw notFound("schedule", scheduleId);
    return schedule;
  }

  async list(
    tenantId: string,
    page: { limit: number; offset: number },
    filter: scheduleRows.ScheduleFilter = {},
    sort?: { column: scheduleRows.ScheduleSortColumn; order: "asc" | "desc" },
  ): Promise<Schedule[]> {
    return scheduleRows.listSchedules(this.db, tenantId, page, filter, sort);
  }

  async count(tenantId: string, filter: scheduleRows.ScheduleFilter = {}): Promise<number> {
    return scheduleRows.countSchedules(this.db, tenantId, filter);
  }

  /**
   * Replaces the fields given. A new cron or time zone, or enabling, recomputes `next_run_at` from
   * now; disabling clears it; other changes keep it (a due time already set still fires). Under the
   * row's lock: an executor firing the schedule finishes first, or skips it until this commits.
   */
  async update(tenantId: string, scheduleId: string, patch: PatchScheduleBody): Promise<Schedule> {
    // Nothing to change: the schedule as it is (an empty patch must not move updated_at).
    if (Object.keys(patch).length === 0) return this.get(tenantId, scheduleId);
    const updated = await this.db.transaction(async (tx) => {
      const current = await scheduleRows.findSchedule(tx, tenantId, scheduleId, { lock: true });
      if (!current) throw notFound("schedule", scheduleId);
      const cron = patch.cron?.trim() ?? current.cron;
      const enabled = patch.enabled ?? current.enabled;
      const timezone =
        patch.cron !== undefined || patch.timezone !== undefined
          ? requireValid(cron, patch.timezone ?? current.timezone)
          : current.timezone;
      if (patch.input !== undefined) await this.runs.checkRequest(tenantId, { assistant_id: current.assistant_id, input: patch.input }, tx);
      const retimed = cron !== current.cron || timezone !== current.timezone || (enabled && !current.enabled);
      let nextRunAt: Date | null = current.next_run_at === null ? null : new Date(current.next_run_at);
      if (!enabled) nextRunAt = null;
      else if (retimed) nextRunAt = nextDueAfter(cron, timezone, this.clock());
      const changed = await scheduleRows.updateSchedule(tx, tenantId, scheduleId, {
        cron,
        timezone,
        enabled,
        input: patch.input ?? current.input,
        metadata: patch.metadata ?? current.metadata,
        nextRunAt,
      });
      if (!changed) throw notFound("schedule", scheduleId);
      return changed;
    });
    await this.changed();
    return updated;
  }

  /** Deleting stops further fires at once: an executor holding the row finishes its firing first. */
  async delete(tenantId: string, scheduleId: string): Promise<void> {
    if (!(await scheduleRows.deleteSchedule(this.db, tenantId, scheduleId))) throw notFound("schedule", scheduleId);
    await this.changed();
  }

  private async changed(): Promise<void> {
    await this.notifier.publish({ topic: "schedules_changed" });
  }
}

/** The time zone, spelled as IANA does, of a valid cron and time zone; a 422 otherwise. */
function requireValid(cron: string, timezone: string): string {
  const problem = cronProblem(cron, timezone);
  if (problem) throw new ApiError("validation_error", problem);
  return canonicalTimezone(timezone);
}
