import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import type { FastifyBaseLogger } from "fastify";
import { UsageMeter } from "../domain/budget.ts";
import { isRetryableError, retryDelayMs, runErrorOf, type RunError } from "../domain/runs.ts";
import type { GraphRegistry } from "../graphs/registry.ts";
import { waitForNotice, type Notifier } from "../notify/notifier.ts";
import type { ClaimedRun, Lease, PendingEvent, RunRepository } from "../storage/runs.ts";
import type { SteeringRepository } from "../storage/steering.ts";
import { steeringChannel } from "./steering-channel.ts";
import { EventBuffer } from "./event-buffer.ts";
import type { ModelPrice } from "./budget-callbacks.ts";
import { budgetOf, discardStatelessCheckpoints, executeAttempt, type AttemptResult } from "./executor.ts";

export interface WorkerOptions {
  /** Runs executed at once by this process. */
  readonly concurrency: number;
  readonly leaseMs: number;
  readonly heartbeatMs: number;
  /** Idle slots re-check the queue this often when no notice arrives. */
  readonly pollMs: number;
  /** Delivery attempts before a retryable failure becomes dead_letter. */
  readonly maxAttempts: number;
  /** First retry delay; each further one doubles, up to 60 s. */
  readonly retryBaseMs: number;
  readonly eventFlushMs: number;
  /** On stop, running attempts get this long to finish before they are aborted and handed back. */
  readonly shutdownGraceMs: number;
  /** waitForSteering re-reads storage this often when no notice arrives. */
  readonly steeringPollMs: number;
  /** Test seams: awaited at fixed points so a test can hold a window open without sleeping. */
  readonly hooks?: {
    afterClaim?: (runId: string, attempt: number) => Promise<void>;
    afterSteeringClosed?: (runId: string) => Promise<void>;
  };
}

export const DEFAULT_WORKER_OPTIONS: WorkerOptions = {
  concurrency: 10,
  leaseMs: 30_000,
  heartbeatMs: 5_000,
  pollMs: 1_000,
  maxAttempts: 5,
  retryBaseMs: 1_000,
  eventFlushMs: 20,
  steeringPollMs: 1_000,
  shutdownGraceMs: 10_000,
};

interface WorkerDeps {
  readonly runs: RunRepository;
  readonly graphs: GraphRegistry;
  readonly checkpointer: BaseCheckpointSaver;
  readonly notifier: Notifier;
  readonly log: FastifyBaseLogger;
  /** Model prices for max_cost, by model name. */
  readonly prices: Readonly<Record<string, ModelPrice>>;
  readonly steering: SteeringRepository;
}

/** Why an attempt's execution was stopped from outside the graph. */
type StopReason = "cancelled" | "lease_lost" | "shutdown" | "timed_out" | "attempts_exhausted";

/**
 * Claims runs from the queue and executes them: `concurrency` slots, each looping claim → run →
 * settle, sleeping between empty claims until a run_created notice or the poll interval.
 */
export class Worker {
  readonly id = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  private stopping = false;
  private readonly idle = new AbortController();
  private readonly active = new Map<string, AbortController & { reason?: StopReason }>();
  private slots: Promise<void>[] = [];

  constructor(
    private readonly deps: WorkerDeps,
    private readonly options: WorkerOptions = DEFAULT_WORKER_OPTIONS,
  ) {}

  start(): void {
    this.slots = Array.from({ length: this.options.concurrency }, () => this.slot());
  }

  /**
   * Stops claiming, waits up to `graceMs` for running attempts, then aborts the rest: their runs
   * go back to the queue (the lease is released without consuming a retry) for another worker.
   */
  async stop(graceMs = this.options.shutdownGraceMs): Promise<void> {
    this.stopping = true;
    this.idle.abort();
    const drained = Promise.all(this.slots);
    const timer = setTimeout(() => {
      for (const controller of this.active.values()) {
        controller.reason = "shutdown";
        controller.abort();
      }
    }, graceMs);
    await drained;
    clearTimeout(timer);
  }

  private async slot(): Promise<void> {
    while (!this.stopping) {
      const wake = waitForNotice(this.deps.notifier, (n) => n.topic === "run_created", this.options.pollMs, this.idle.signal);
      let run: ClaimedRun | undefined;
      try {
        run = await this.deps.runs.claim(this.id, this.options.leaseMs);
      } catch (error) {
        this.deps.log.warn({ err: error }, "claiming a run failed; retrying");
      }
      if (!run) await this.reapAbandonedCancels();
      if (run) {
        wake.cancel();
        await this.process(run).catch((error: unknown) => this.deps.log.error({ err: error, runId: run.run_id }, "run processing failed"));
      } else {
        await wake.promise;
      }
    }
  }

  private lastReap = 0;

  /** At most once per poll interval, an idle slot cancels cancelling runs whose worker died. */
  private async reapAbandonedCancels(): Promise<void> {
    if (Date.now() - this.lastReap < this.options.pollMs) return;
    this.lastReap = Date.now();
    const reaped = await this.deps.runs.reapAbandonedCancels().catch(() => []);
    for (const runId of reaped) {
      await this.deps.notifier.publish({ topic: "run_changed", runId });
      await this.deps.notifier.publish({ topic: "run_events", runId });
    }
  }

  private async process(run: ClaimedRun): Promise<void> {
    const lease: Lease = { runId: run.run_id, attempt: run.attempt, owner: this.id };
    const controller: AbortController & { reason?: StopReason } = new AbortController();
    this.active.set(run.run_id, controller);
    const stop = (reason: StopReason) => {
      if (controller.signal.aborted) return;
      controller.reason = reason;
      controller.abort();
    };
    const buffer = new EventBuffer(
      async (events) => {
        if (!(await this.deps.runs.appendLeased(lease, events))) stop("lease_lost");
        else await this.deps.notifier.publish({ topic: "run_events", runId: run.run_id });
      },
      this.options.eventFlushMs,
      256,
    );
    // Usage carries over from earlier attempts, so a budget holds across retries.
    const meter = new UsageMeter(budgetOf(run), run.usage);
    const watch = this.watchLease(run, lease, meter, stop);
    const deadline = this.armRunTimeout(run, stop);
    try {
      await this.options.hooks?.afterClaim?.(run.run_id, run.attempt);
      buffer.push({ kind: "run_started", data: { attempt: run.attempt, worker: this.id } });
      if (run.status === "cancelling") stop("cancelled");
      // Reclaimed after its worker died once too often: a run that keeps killing workers stops here.
      if (run.attempt > this.options.maxAttempts) stop("attempts_exhausted");
      const result = controller.signal.aborted ? ({ kind: "threw", error: new Error("cancelled") } as const) : await executeAttempt(run, {
        graphs: this.deps.graphs,
        emit: (event) => buffer.push(event),
        signal: controller.signal,
        meter,
        prices: this.deps.prices,
        ...steeringChannel(lease, this.deps.steering, this.deps.notifier, this.options.steeringPollMs),
      });
      watch.stop();
      const events = await buffer.take().catch(() => {
        stop("lease_lost");
        return [];
      });
      await this.settle(run, lease, result, controller.reason, events, meter);
    } finally {
      watch.stop();
      clearTimeout(deadline);
      this.active.delete(run.run_id);
    }
  }

  /**
   * run_timeout bounds the run from its first start, across attempts and their backoff; a pause
   * ends the run (its resume is a new run with its own clock), so paused time never counts.
   */
  private armRunTimeout(run: ClaimedRun, stop: (reason: StopReason) => void): NodeJS.Timeout | undefined {
    if (run.run_timeout === null || run.started_at === null) return undefined;
    const remainingMs = Date.parse(run.started_at) + run.run_timeout * 1000 - Date.now();
    return setTimeout(() => stop("timed_out"), Math.max(0, remainingMs));
  }

  /** Heartbeats the lease; a cancel (seen on a heartbeat or a run_changed notice) or a lost lease stops the attempt. */
  private watchLease(run: ClaimedRun, lease: Lease, meter: UsageMeter, stop: (reason: StopReason) => void): { stop: () => void } {
    const beat = async () => {
      const status = await this.deps.runs.heartbeat(lease, this.options.leaseMs, meter.usage).catch(() => "error" as const);
      if (status === undefined) stop("lease_lost");
      else if (status === "cancelling") stop("cancelled");
    };
    const timer = setInterval(() => void beat(), this.options.heartbeatMs);
    const unsubscribe = this.deps.notifier.subscribe((notice) => {
      if (notice.topic === "run_changed" && notice.runId === run.run_id) void beat();
    });
    return {
      stop: () => {
        clearInterval(timer);
        unsubscribe();
      },
    };
  }

  /** Writes the attempt's outcome, fenced by the lease, with its last events, in one transaction. */
  private async settle(
    run: ClaimedRun,
    lease: Lease,
    result: AttemptResult,
    stopped: StopReason | undefined,
    events: PendingEvent[],
    meter: UsageMeter,
  ): Promise<void> {
    if (stopped === "lease_lost") return; // another worker owns the run now; write nothing
    const outcome = this.outcomeOf(run, result, stopped);
    const final = outcome.status !== "pending" && outcome.status !== "paused";
    if (final) {
      // The graph has its result: close steering admission before the final flush, so a steer
      // that arrives now is refused (run_finalizing) rather than silently superseded.
      if (!(await this.deps.steering.closeAdmission(lease))) return;
      await this.options.hooks?.afterSteeringClosed?.(run.run_id);
    }
    const written = await this.deps.runs.settle(lease, { ...outcome, usage: meter.usage, events, outcomeEvents: outcome.events });
    if (!written) return;
    if (outcome.status !== "paused" && outcome.status !== "pending") await discardStatelessCheckpoints(run, this.deps.checkpointer).catch(() => {});
    await this.deps.notifier.publish({ topic: "run_changed", runId: run.run_id });
    await this.deps.notifier.publish({ topic: "run_events", runId: run.run_id });
    // The thread is free again: the next run queued on it may now be claimed.
    await this.deps.notifier.publish({ topic: "run_created" });
  }

  private outcomeOf(run: ClaimedRun, result: AttemptResult, stopped: StopReason | undefined) {
    if (stopped === "attempts_exhausted") {
      const error: RunError = { code: "dead_letter", message: `its worker was lost on each of ${run.attempt - 1} attempts`, retryable: true };
      return { status: "dead_letter" as const, error, threadStatus: "error" as const, events: [{ kind: "run_dead_letter", data: { error } }] };
    }
    if (stopped === "timed_out") {
      const error: RunError = { code: "run_timed_out", message: `the run exceeded its run_timeout of ${run.run_timeout} s`, retryable: false };
      return { status: "timed_out" as const, error, threadStatus: "error" as const, events: [{ kind: "run_timed_out", data: { error } }] };
    }
    if (stopped === "cancelled") {
      const error: RunError = { code: "run_cancelled", message: "cancelled by request", retryable: false };
      return { status: "cancelled" as const, error, threadStatus: "idle" as const, events: [{ kind: "run_cancelled", data: { error } }] };
    }
    if (stopped === "shutdown") {
      // Handed back untouched: the next claim is a new attempt that continues from the checkpoint.
      return { status: "pending" as const, error: null, threadStatus: "idle" as const, retryDelayMs: 0, events: [{ kind: "run_retrying", data: { reason: "worker_shutdown", attempt: run.attempt } }] };
    }
    if (result.kind === "succeeded") {
      return { status: "succeeded" as const, output: result.output, error: null, threadStatus: "idle" as const, events: [{ kind: "run_succeeded", data: {} }] };
    }
    if (result.kind === "paused") {
      return { status: "paused" as const, output: result.output, error: null, threadStatus: "paused" as const, events: [{ kind: "run_paused", data: { interrupts: result.interrupts } }] };
    }
    const error = runErrorOf(result.error);
    if (isRetryableError(result.error)) {
      if (run.attempt < this.options.maxAttempts) {
        const delay = retryDelayMs(run.attempt, this.options.retryBaseMs);
        return { status: "pending" as const, error, threadStatus: "idle" as const, retryDelayMs: delay, events: [{ kind: "run_retrying", data: { attempt: run.attempt, delay_ms: delay, error } }] };
      }
      const dead: RunError = { code: "dead_letter", message: `gave up after ${run.attempt} attempts: ${error.message}`, retryable: true };
      return { status: "dead_letter" as const, error: dead, threadStatus: "error" as const, events: [{ kind: "run_dead_letter", data: { error: dead } }] };
    }
    return { status: "failed" as const, error, threadStatus: "error" as const, events: [{ kind: "run_failed", data: { error } }] };
  }
}
