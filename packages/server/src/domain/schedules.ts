import { Cron } from "croner";

/**
 * The rules of schedules, without I/O: which crons and time zones are valid, when a schedule is
 * next due, and which due time fires after a gap (DESIGN.md "Schedules"). The executor and the
 * API share them; croner does the calendar arithmetic, time zones and DST included.
 */

/** A cron has 5 fields (minute precision), or 6 with leading seconds. */
const CRON_FIELDS = [5, 6];

/** Why a cron or time zone cannot be used, or undefined when it can. */
export function cronProblem(cron: string, timezone: string): string | undefined {
  const tzProblem = timezoneProblem(timezone);
  if (tzProblem) return tzProblem;
  const fields = cron.trim().split(/\s+/).filter(Boolean).length;
  if (!CRON_FIELDS.includes(fields))
    return `cron "${cron}" has ${fields} fields; it needs 5 (minute hour day month weekday), or 6 with leading seconds`;
  let pattern: Cron;
  try {
    pattern = compile(cron, timezone);
  } catch (error) {
    return `cron "${cron}" is not valid: ${(error as Error).message}`;
  }
  if (pattern.nextRun(new Date()) === null) return `cron "${cron}" never fires`;
  return undefined;
}

/** Why `timezone` is not an IANA time zone name (or UTC), or undefined when it is one. */
export function timezoneProblem(timezone: string): string | undefined {
  // Offsets ("+02:00") are accepted by newer Intl versions but are not time zone names.
  if (!/^[A-Za-z][A-Za-z0-9_+\-/]*$/.test(timezone)) return `timezone "${timezone}" is not an IANA time zone name`;
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: timezone });
    return undefined;
  } catch {
    return `timezone "${timezone}" is not an IANA time zone name`;
  }
}

/**
 * A valid time zone name as IANA spells it: Intl takes names in any case ("europe/paris"), and a
 * schedule keeps the spelling it was given, so it is stored spelled right. Only the case changes:
 * an alias ("Asia/Calcutta", "Etc/UTC") stays the name the user chose.
 */
export function canonicalTimezone(timezone: string): string {
  const lower = timezone.toLowerCase();
  const resolved = new Intl.DateTimeFormat("en-US", { timeZone: timezone }).resolvedOptions().timeZone;
  if (resolved.toLowerCase() === lower) return resolved;
  return Intl.supportedValuesOf("timeZone").find((name) => name.toLowerCase() === lower) ?? timezone;
}

/** The first due time strictly after `after`, in `timezone`'s wall clock; null when the cron never fires again. */
export function nextDueAfter(cron: string, timezone: string, after: Date): Date | null {
  return compile(cron, timezone).nextRun(after);
}

/** What one firing of a due schedule does: the due time it fires for and the schedule's next due time. */
export interface Firing {
  /** The due time this firing stands for (the run's `metadata.scheduled_at`, the schedule's `last_run_at`). */
  readonly scheduledAt: Date;
  /** The first due time after `now`: the schedule's new `next_run_at` (null: it never fires again). */
  readonly nextRunAt: Date | null;
}

/**
 * The firing of a schedule that was due at `due` and is looked at `now` (>= `due`). A due time
 * older than `graceMs` counts as missed: the due times missed while no executor ran fire once,
 * as the latest of them (DESIGN.md: "fire once (the latest), not once each"), and the next due
 * time is the first after `now`, so a gap leaves no backlog. A due time within the grace fires as
 * itself and the next is the one after it (still due if the executor is behind), so an executor
 * that is merely busy or a moment late loses no due time.
 */
export function firingAt(cron: string, timezone: string, due: Date, now: Date, graceMs = 0): Firing {
  const pattern = compile(cron, timezone);
  if (now.getTime() - due.getTime() <= graceMs) return { scheduledAt: due, nextRunAt: pattern.nextRun(due) };
  // The latest due time at or before now (croner includes one earlier in the same second).
  const [latest] = pattern.previousRuns(1, new Date(now.getTime() + 1));
  const scheduledAt = latest && latest.getTime() > due.getTime() && latest.getTime() <= now.getTime() ? latest : due;
  return { scheduledAt, nextRunAt: pattern.nextRun(new Date(Math.max(now.getTime(), scheduledAt.getTime()))) };
}

/** Parsed patterns by time zone and cron: thousands of schedules share a few crons, and parsing is most of a firing's cost. */
const compiled = new Map<string, Cron>();
const COMPILED_MAX = 10_000;

function compile(cron: string, timezone: string): Cron {
  const key = `${timezone}\n${cron.trim()}`;
  let pattern = compiled.get(key);
  if (!pattern) {
    pattern = new Cron(cron.trim(), { timezone, paused: true, mode: "5-or-6-parts" });
    if (compiled.size >= COMPILED_MAX) compiled.clear();
    compiled.set(key, pattern);
  }
  return pattern;
}
