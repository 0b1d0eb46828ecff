import type { FastifyBaseLogger } from "fastify";
import type { ScheduleError } from "@rudder/api";
import { ApiError } from "../domain/errors.ts";
import { firingAt } from "../domain/schedules.ts";
import type { Notifier } from "../notify/notifier.ts";
import type { Metrics } from "../observability/metrics.ts";
import type { RunService } from "../runs/service.ts";
import type { Db, Transaction } from "../storage/db.ts";
import { advanceSchedule, claimDueSchedules, msUntilNextDue, type DueSchedule } from "../storage/schedules.ts";

export interface SchedulerOptions {
  /** Due schedules fired per transaction. */
  readonly batchSize: number;
  /** On PostgreSQL, transactions a pass runs at once (each claims its own batch); PGlite runs one. */
  readonly parallelBatches: number;
  /**
   * The longest the executor sleeps without looking at the table, when no schedule is due sooner
   * and no notice comes (notices are only hints).
   */
  readonly pollMs: number;
  /**
   * A due time older than this when claimed counts as missed (no executor ran): missed due times
   * of a schedule fire once, as the latest. Younger ones fire each on its own, so a busy executor
   * loses none.
   */
  readonly misfireGraceMs: number;
  /** After a failed pass (the database is down), the next one waits this long. */
  readonly retryMs: number;
  /**
   * The clock due times are compared with. Default: the database's `now()`, one clock for every
   * executor whatever their hosts' clocks say. Tests pass a controllable one.
   */
  readonly now?: (() => Date) | undefined;
  /** false: `start()` runs no loop and passes happen only through `fireDue()` (tests with a controlled clock). */
  readonly loop?: boolean | undefined;
}

export const DEFAULT_SCHEDULER_OPTIONS: SchedulerOptions = {
  batchSize: 50,
  parallelBatches: 4,
  pollMs: 30_000,
  misfireGraceMs: 10_000,
  retryMs: 1_000,
};

export interface SchedulerDeps {
  readonly db: Db;
  readonly runService: RunService;
  readonly notifier: Notifier;
  readonly log: FastifyBaseLogger;
  /** Fire lag (due time → the fire's commit) goes here when given. */
  readonly metrics?: Metrics;
}

/** How long to wait when every due row is locked by another executor's pass. */
const LOCKED_ELSEWHERE_MS = 50;

/** The problems a run's creation answers that mean "this due time cannot create a run": recorded, not retried. */
const REFUSALS = new Set(["validation_error", "not_found", "quota_exceeded", "conflict", "concurrent_run", "payload_too_large"]);

/**
 * The cron executor: fires every due time of every enabled schedule exactly once, however many
 * executors run (DESIGN.md "Schedules"). A pass claims due rows `for update skip locked` and, in
 * the same transaction, creates each one's run (`RunService.create(…, tx)`) and advances it past
 * that due time; a crash before the commit leaves the row due for the next executor, a commit
 * makes both durable. Between passes it sleeps until the earliest due time, waking early on
 * `schedules_changed` notices.
 */
export class Scheduler {
  private stopping = false;
  private loop: Promise<void> = Promise.resolve();
  private wake: (() => void) | undefined;
  private woken = false;

  constructor(
    private readonly deps: SchedulerDeps,
    private readonly options: SchedulerOptions = DEFAULT_SCHEDULER_OPTIONS,
  ) {}

  start(): void {
    if (this.options.loop === false) return;
    this.loop = this.run();
  }

  /** Stops after the pass in flight (its transaction commits or rolls back whole). */
  async stop(): Promise<void> {
    this.stopping = true;
    this.nudge();
    await this.loop;
  }

  /**
   * One pass: fires the schedules due now, `batchSize` per transaction, until none is due.
   * Returns how many due times it handled (fired or recorded as refused).
   */
  async fireDue(): Promise<number> {
    // PGlite has one connection: its transactions would only queue behind each other.
    const lanes = this.deps.db.driver === "postgres" ? this.options.parallelBatches : 1;
    let handled = 0;
    for (;;) {
      // Concurrent batches claim disjoint rows (skip locked) and commit independently.
      const counts = await Promise.all(Array.from({ length: lanes }, () => this.deps.db.transaction((tx) => this.fireBatch(tx))));
      handled += counts.reduce((sum, count) => sum + count, 0);
      if (counts.every((count) => count < this.options.batchSize) || this.stopping) return handled;
    }
  }

  private async fireBatch(tx: Transaction): Promise<number> {
    const due = await claimDueSchedules(tx, this.options.now?.() ?? null, this.options.batchSize);
    for (const schedule of due) await this.fire(tx, schedule);
    return due.length;
  }

  /**
   * Fires one claimed schedule inside the batch's transaction. A refusal (its assistant or thread
   * is gone, its input no longer fits the graph, the tenant's queue is full) rolls back to the
   * savepoint and is recorded on the schedule instead (`last_error`), which still advances: a
   * due time that cannot create a run is skipped, never retried in a loop.
   */
  private async fire(tx: Transaction, schedule: DueSchedule): Promise<void> {
    const { scheduledAt, nextRunAt } = firingAt(schedule.cron, schedule.timezone, schedule.due, schedule.now, this.options.misfireGraceMs);
    await tx.query("savepoint fire_schedule");
    try {
      const { run } = await this.deps.runService.create(
        schedule.tenant_id,
        schedule.thread_id,
        {
          assistant_id: schedule.assistant_id,
          input: schedule.input,
          metadata: { ...schedule.metadata, schedule_id: schedule.schedule_id, scheduled_at: scheduledAt.toISOString() },
          multitask_strategy: "enqueue",
        },
        { tx },
      );
      await advanceSchedule(tx, schedule.tenant_id, schedule.schedule_id, schedule.due, { nextRunAt, scheduledAt, runId: run.run_id });
      await tx.query("release savepoint fire_schedule");
      const metrics = this.deps.metrics;
      if (metrics)
        tx.afterCommit(() =>
          metrics.scheduleFireLag.observe(Math.max(0, (this.options.now?.() ?? new Date()).getTime() - scheduledAt.getTime()) / 1000),
        );
    } catch (error) {
      if (!(error instanceof ApiError && REFUSALS.has(error.code))) throw error;
      await tx.query("rollback to savepoint fire_schedule");
      const refusal: ScheduleError = { code: error.code, message: error.message, scheduled_at: scheduledAt.toISOString() };
      this.deps.log.warn(
        { schedule_id: schedule.schedule_id, tenant_id: schedule.tenant_id, scheduled_at: refusal.scheduled_at, code: error.code },
        `schedule skipped a due time: ${error.message}`,
      );
      await advanceSchedule(tx, schedule.tenant_id, schedule.schedule_id, schedule.due, { nextRunAt, error: refusal });
    }
  }

  private nudge(): void {
    this.woken = true;
    this.wake?.();
  }

  private async run(): Promise<void> {
    const unsubscribe = this.deps.notifier.subscribe((notice) => {
      if (notice.topic === "schedules_changed") this.nudge();
    });
    try {
      while (!this.stopping) {
        this.woken = false;
        let sleepMs: number;
        try {
          const handled = await this.fireDue();
          const untilDue = await msUntilNextDue(this.deps.db, this.options.now?.() ?? null);
          if (untilDue === null) sleepMs = this.options.pollMs;
          // Still due after a pass that found nothing to claim: another executor holds those rows
          // and is about to advance them; look again shortly rather than spin.
          else if (untilDue <= 0) sleepMs = handled === 0 ? LOCKED_ELSEWHERE_MS : 0;
          else sleepMs = Math.min(Math.ceil(untilDue), this.options.pollMs);
        } catch (error) {
          this.deps.log.warn({ err: error }, "firing schedules failed; retrying");
          sleepMs = this.options.retryMs;
        }
        if (this.stopping) return;
        await this.sleep(sleepMs);
      }
    } finally {
      unsubscribe();
    }
  }

  /** Until `ms` passed, a notice came or stop; a notice during the pass ends it at once. */
  private sleep(ms: number): Promise<void> {
    if (this.woken) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      const wake = () => done();
      this.wake = wake;
      function done() {
        clearTimeout(timer);
        resolve();
      }
    }).then(() => {
      this.wake = undefined;
    });
  }
}
