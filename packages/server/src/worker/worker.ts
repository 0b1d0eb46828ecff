import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { FastifyBaseLogger } from "fastify";
import { UsageMeter } from "../domain/budget.ts";
import {
  attemptOutcome,
  countedAttempts,
  runDeadline,
  isRefusal,
  transitionFor,
  RUN_TRANSITIONS,
  type AttemptOutcome,
  type StopReason,
} from "../domain/run-lifecycle.ts";
import type { GraphRegistry } from "../graphs/registry.ts";
import type { Notice, Notifier } from "../notify/notifier.ts";
import type { Metrics } from "../observability/metrics.ts";
import { applyTransition } from "../runs/transitions.ts";
import type { Db } from "../storage/db.ts";
import { freesThread, type RunStatus } from "../domain/runs.ts";
import { countHandBacks, type PendingEvent } from "../storage/events.ts";
import type { Lease } from "../storage/lease.ts";
import {
  claimRuns,
  isCancellingUnder,
  lockAbandonedCancels,
  settleAttempt,
  settleAttempts,
  type AttemptSettle,
  type SettledAttempt,
  type Claim,
  type ClaimedRun,
  type SettleFields,
} from "../storage/runs.ts";
import { GroupCommit } from "../storage/group-commit.ts";
import { lockThread, lockThreads } from "../storage/threads.ts";
import { supersedeAtFinalBoundary } from "../storage/steering.ts";
import type { SteeringRepository } from "../storage/steering.ts";
import type { AttemptCheckpoints, RudderCheckpointSaver } from "../storage/checkpointer.ts";
import type { CheckpointWrite } from "../storage/checkpoint-writes.ts";
import { steeringChannel } from "./steering-channel.ts";
import { EventWriter, type EventHandoff } from "./event-writer.ts";
import type { ModelPrice } from "./budget-callbacks.ts";
import { attemptCheckpoints, budgetOf, executeAttempt, type AttemptResult } from "./executor.ts";
import { atDeadline } from "./deadline.ts";
import { LeaseKeeper } from "./lease-keeper.ts";
import { TenantStore } from "../store/langgraph-store.ts";
import type { StoreService } from "../store/service.ts";

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
  readonly db: Db;
  readonly graphs: GraphRegistry;
  readonly checkpointer: RudderCheckpointSaver;
  readonly notifier: Notifier;
  readonly log: FastifyBaseLogger;
  /** Model prices for max_cost, by model name. */
  readonly prices: Readonly<Record<string, ModelPrice>>;
  readonly steering: SteeringRepository;
  /** Where claims, attempts, settles and steering are counted (none: not counted). */
  readonly metrics?: Metrics;
  /** The long-term store: each run's nodes get its tenant's, as LangGraph's store. */
  readonly store: StoreService;
  /** Streams of this process (API and worker in one process): flushed events go to them directly. */
  readonly handoff?: EventHandoff & SettleHandoff;
}

/** How a worker hands the runs it settles to the waiters of its own process (the run service's `EventFeed`). */
export interface SettleHandoff {
  /** Whether a waiter of this process awaits the run's end (its settle then returns the row to hand over). */
  awaitsEnd(runId: string): boolean;
  /** The run's row as its settle committed it: called after the commit, before its notice. */
  settled(run: ClaimedRun): void;
}

/** Due times of delayed runs a worker remembers; later ones are found by the poll. */
const MAX_DUE_TIMES = 1000;
/** A flush starts at once when this many events of all runs wait (else after `eventFlushMs`). */
const EVENT_FLUSH_BATCH = 2048;

/**
 * Finishing comes before starting. While runs this worker was told to stop (a cancel, a timeout)
 * are still settling, it claims at most this many runs, at most once per
 * STOPPING_CLAIM_INTERVAL_MS: a burst of cancels frees the threads of the queued runs behind
 * them, and claiming all of those at once took the CPU and connections the cancels' settles and
 * the API needed (docs/runs.md, "Finishing before starting"). The queue still drains meanwhile.
 */
const STOPPING_CLAIM_LIMIT = 10;
const STOPPING_CLAIM_INTERVAL_MS = 500;
/**
 * A run still not settled this long after it was told to stop no longer paces the claims: a graph
 * that ignores its abort signal must not hold a whole worker at STOPPING_CLAIM_LIMIT.
 */
const STOPPING_PACES_FOR_MS = 10_000;

/** The lifecycle's claim rule: the status and thread status a claim writes. */
const CLAIM_RULE = RUN_TRANSITIONS.find((rule) => rule.trigger === "claim" && rule.from.includes("pending"))!;

/** The `run_created` an attempt's settle sends: a retry's carries when its backoff ends, so a worker claims it then. */
function runCreatedNotice(outcome: AttemptOutcome): Notice {
  return outcome.status === "pending" && outcome.retryDelayMs > 0
    ? { topic: "run_created", dueAt: Date.now() + outcome.retryDelayMs }
    : { topic: "run_created" };
}

/**
 * Claims runs from the queue and executes them, up to `concurrency` at once. One claim loop per
 * process claims as many runs as it has free slots in one statement, and only when there may be
 * work: after a run_created notice, after a claim that filled every free slot (the queue may hold
 * more), when a delayed run it heard of comes due, or on the poll timer (a lost notice, a retry
 * whose backoff passed, an expired lease).
 * Idle slots never query the queue on their own, so a notice costs one claim, not one per slot.
 */
export class Worker {
  readonly id = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  private stopping = false;
  private readonly wakeUp = new Wakeup();
  private readonly active = new Map<string, AbortController & { reason?: StopReason }>();
  /** Attempts told to stop (not lease_lost: those write nothing) that have not settled yet, and when (epoch ms). */
  private readonly toldToStop = new Map<string, number>();
  private lastStopSettled = -Infinity;
  private readonly running = new Set<Promise<void>>();
  private loop: Promise<void> = Promise.resolve();
  /** Every attempt's events, written in one multi-run insert per flush. */
  private readonly events: EventWriter;
  private readonly leases: LeaseKeeper;
  /**
   * Final boundaries' steering gates, closed together: one statement for the runs finishing at
   * once, carrying the checkpoint writes their attempts still hold (durability `sync`: the last
   * step's; none for a stateless run, whose settle drops its checkpoints), written only for the
   * runs whose gate closed.
   */
  private readonly gates: GroupCommit<{ lease: Lease; held: readonly CheckpointWrite[] }, { steered: boolean } | undefined>;
  /** Settles that need nothing but their statement (see `settle`), written together. */
  private readonly settles: GroupCommit<AttemptSettle & { threadId: string | null }, SettledAttempt | undefined>;

  constructor(
    private readonly deps: WorkerDeps,
    private readonly options: WorkerOptions = DEFAULT_WORKER_OPTIONS,
  ) {
    this.events = new EventWriter(deps.db, deps.notifier, { flushMs: options.eventFlushMs, maxBatch: EVENT_FLUSH_BATCH }, deps.handoff);
    this.leases = new LeaseKeeper(deps, this.id, options);
    this.gates = new GroupCommit(async (gates) => {
      const leases = gates.map(({ lease }) => lease);
      const closed = await deps.steering.closeAdmissions(
        leases,
        gates.flatMap(({ lease, held }) => held.map((write) => ({ runId: lease.runId, write }))),
      );
      return leases.map((lease) => closed.get(lease.runId));
    }, atMostMax);
    this.settles = new GroupCommit(async (settles) => {
      const threads = settles.flatMap(({ lease, threadId }) => (threadId === null ? [] : [{ tenantId: lease.tenantId, threadId }]));
      // On a thread, the thread's lock first, in a statement of its own (see `settleAttempts`).
      const settled =
        threads.length === 0
          ? await settleAttempts(deps.db, settles)
          : await deps.db.transaction(async (tx) => {
              await lockThreads(tx, threads);
              return settleAttempts(tx, settles);
            });
      return settles.map(({ lease }) => settled.get(lease.runId));
    }, atMostMax);
  }

  start(): void {
    this.leases.start();
    this.loop = this.claimLoop();
  }

  /** Attempts this process is executing now. */
  get activeAttempts(): number {
    return this.running.size;
  }

  /**
   * Stops claiming, waits up to `graceMs` for running attempts, then aborts the rest: their runs
   * go back to the queue (the lease is released without consuming a retry) for another worker.
   */
  async stop(graceMs = this.options.shutdownGraceMs): Promise<void> {
    this.stopping = true;
    this.wakeUp.wake();
    await this.loop;
    const timer = setTimeout(() => {
      for (const controller of this.active.values()) {
        controller.reason = "shutdown";
        controller.abort();
      }
    }, graceMs);
    await Promise.all(this.running);
    clearTimeout(timer);
    this.leases.stop();
  }

  private async claimLoop(): Promise<void> {
    let wanted = true;
    let lastClaim = 0;
    // When delayed runs heard of come due (epoch ms), earliest first: a claim then, not at the notice.
    let dueTimes: number[] = [];
    const unsubscribe = this.deps.notifier.subscribe((notice) => {
      if (notice.topic !== "run_created") return;
      if (notice.dueAt !== undefined && notice.dueAt > Date.now())
        dueTimes = [...dueTimes, notice.dueAt].sort((a, b) => a - b).slice(0, MAX_DUE_TIMES);
      else wanted = true;
      this.wakeUp.wake();
    });
    try {
      while (!this.stopping) {
        const now = Date.now();
        if (dueTimes.length && dueTimes[0]! <= now) {
          wanted = true;
          dueTimes = dueTimes.filter((due) => due > now);
        }
        const free = this.options.concurrency - this.running.size;
        if (wanted && free > 0) {
          // Runs told to stop settle first: a claim waits for them, or for its interval (a settle wakes the loop).
          const paced = this.pacingClaims(Date.now());
          const held = paced ? lastClaim + STOPPING_CLAIM_INTERVAL_MS - Date.now() : 0;
          if (held > 0) {
            await this.wakeUp.wait(held);
            continue;
          }
          const limit = paced ? Math.min(free, STOPPING_CLAIM_LIMIT) : free;
          // Cleared before the claim: a notice that arrives while it is in flight sets it again.
          wanted = false;
          lastClaim = Date.now();
          const claimed = await this.claim(limit);
          if (claimed.length === limit) wanted = true;
          if (claimed.length === 0) await this.reapAbandonedCancels();
          continue;
        }
        // Woken by a notice, a finished run (a slot is free) or stop. The poll counts from the
        // last claim, so finishing runs cannot keep postponing it.
        const untilPoll = lastClaim + this.options.pollMs - Date.now();
        if (untilPoll <= 0) {
          wanted = true;
          if (free > 0) continue;
        }
        const untilDue = dueTimes.length ? dueTimes[0]! - Date.now() : Infinity;
        if (untilDue < (untilPoll > 0 ? untilPoll : this.options.pollMs)) {
          await this.wakeUp.wait(Math.max(untilDue, 0));
          continue;
        }
        if (!(await this.wakeUp.wait(untilPoll > 0 ? untilPoll : this.options.pollMs))) wanted = true;
      }
    } finally {
      unsubscribe();
    }
  }

  /**
   * Whether runs told to stop (within STOPPING_PACES_FOR_MS) are settling, or were within the last
   * STOPPING_CLAIM_INTERVAL_MS: in a burst of cancels one settles before the next request lands,
   * and the gap between them is no reason to claim everything their threads released.
   */
  private pacingClaims(now: number): boolean {
    if (now - this.lastStopSettled < STOPPING_CLAIM_INTERVAL_MS) return true;
    for (const told of this.toldToStop.values()) if (now - told < STOPPING_PACES_FOR_MS) return true;
    return false;
  }

  private async claim(limit: number): Promise<Claim[]> {
    const claimed = await claimRuns(this.deps.db, this.id, this.options.leaseMs, limit, {
      to: CLAIM_RULE.to as "running",
      thread: CLAIM_RULE.thread!,
    }).catch((error: unknown) => {
      this.deps.log.warn({ err: error }, "claiming runs failed; retrying");
      return [];
    });
    for (const run of claimed) {
      this.deps.metrics?.claimWait.observe(run.claimableSeconds);
      const log = this.deps.log.child({
        run_id: run.run_id,
        attempt: run.attempt,
        worker_id: this.id,
        tenant_id: run.tenant_id,
        thread_id: run.thread_id,
        graph_id: run.graph_id,
      });
      const processing = this.process(run, log)
        .catch((error: unknown) => log.error({ err: error }, "run processing failed"))
        .finally(() => {
          this.running.delete(processing);
          this.wakeUp.wake();
        });
      this.running.add(processing);
    }
    return claimed;
  }

  private lastReap = 0;

  /** At most once per poll interval, an idle worker cancels cancelling runs whose worker died. */
  private async reapAbandonedCancels(): Promise<void> {
    if (Date.now() - this.lastReap < this.options.pollMs) return;
    this.lastReap = Date.now();
    await this.deps.db
      .transaction(async (tx) => {
        for (const run of await lockAbandonedCancels(tx)) {
          const rule = transitionFor(run, "reap");
          if (!isRefusal(rule)) await applyTransition(tx, this.deps.notifier, run, "reap", rule, this.deps.metrics);
        }
      })
      .catch((error: unknown) => this.deps.log.warn({ err: error }, "reaping abandoned cancels failed; retrying on the next poll"));
  }

  /** The attempt's steering channel, and its checkpointer, which commits what the channel's tasks consumed with their writes. */
  private steeringAndCheckpointer(run: Claim, lease: Lease, checkpoints: AttemptCheckpoints, flushEvents: () => Promise<void>) {
    const { channel, commitHook } = steeringChannel(run, lease, {
      db: this.deps.db,
      notifier: this.deps.notifier,
      metrics: this.deps.metrics,
      pollMs: this.options.steeringPollMs,
      flushEvents,
    });
    return { channel, checkpointer: this.deps.checkpointer.forRun({ tenantId: run.tenant_id, attempt: checkpoints, commitHook }) };
  }

  /** One attempt of a claimed run; `log` carries its run_id, attempt and worker_id. */
  private async process(run: Claim, log: FastifyBaseLogger): Promise<void> {
    const claimedAt = performance.now();
    const lease: Lease = { tenantId: run.tenant_id, runId: run.run_id, attempt: run.attempt, owner: this.id };
    const controller: AbortController & { reason?: StopReason } = new AbortController();
    this.active.set(run.run_id, controller);
    const stop = (reason: StopReason) => {
      if (controller.signal.aborted) return;
      controller.reason = reason;
      if (reason !== "lease_lost") this.toldToStop.set(run.run_id, Date.now());
      controller.abort();
    };
    const buffer = this.events.open(lease, () => stop("lease_lost"));
    // Usage carries over from earlier attempts, so a budget holds across retries. A refusal stops
    // the graph even when its code catches the error (the attempt then ends with that error).
    const meter = new UsageMeter(budgetOf(run), run.usage, () => controller.abort());
    const release = this.leases.hold(lease, meter, stop);
    const deadline = this.armRunTimeout(run, stop);
    const checkpoints = attemptCheckpoints(run);
    try {
      log.info({ claimable_seconds: run.claimableSeconds }, "attempt started");
      await this.options.hooks?.afterClaim?.(run.run_id, run.attempt);
      // Reclaimed after its worker died once too often: a run that keeps killing workers stops here,
      // without starting (no run_started for an attempt that never runs its graph).
      if (await this.attemptsExhausted(run)) stop("attempts_exhausted");
      // Claimed with its run_timeout already past (a retry's backoff, a queue): its graph would
      // run only to be thrown away, so it does not start.
      else if (run.status !== "cancelling" && (runDeadline(run) ?? Number.POSITIVE_INFINITY) <= Date.now()) stop("timed_out");
      else buffer.push({ kind: "run_started", data: { attempt: run.attempt, worker: this.id } });
      if (run.status === "cancelling") stop("cancelled");
      const executed = controller.signal.aborted
        ? ({ kind: "threw", error: new Error("cancelled") } as const)
        : await executeAttempt(run, {
            graphs: this.deps.graphs,
            store: new TenantStore(this.deps.store, run.tenant_id),
            emit: (event, dataJson) => buffer.push(event, dataJson),
            signal: controller.signal,
            meter,
            prices: this.deps.prices,
            checkpoints,
            commitHeld: () => this.deps.checkpointer.commitHeld(checkpoints),
            ...this.steeringAndCheckpointer(run, lease, checkpoints, () => {
              buffer.flush();
              return buffer.settled();
            }),
          });
      const result: AttemptResult = meter.exceeded ? { kind: "threw", error: meter.exceeded } : executed;
      release();
      // A run a stream of this process follows sends its last events with the writer's next flush,
      // while its gate closes, rather than holding them for the settle: when many runs end at once,
      // their settles queue behind each other's gates, and a token stream's last tokens waited for
      // all of them. Other runs keep them for the settle and take them before the gate, as before:
      // done for every run, it cost trivial runs at c=50 a third more statements (0.30 -> 0.40 per
      // run on PostgreSQL; the gates of runs ending together were no longer sent together).
      const followed = this.deps.handoff?.follows(run.run_id) ?? false;
      if (followed) buffer.flush();
      // Undefined: the lease was lost, or a flush of this run's events failed (write nothing).
      const events = buffer.take().catch(() => {
        stop("lease_lost");
        return undefined;
      });
      if (!followed) await events;
      const status = await this.settle(run, lease, result, controller.reason, { events, meter, checkpoints });
      const seconds = (performance.now() - claimedAt) / 1000;
      if (status === undefined) {
        log.warn(
          { reason: controller.reason ?? "lease_lost" },
          "attempt ended without a settle: the lease was lost, another worker owns the run",
        );
        return;
      }
      this.deps.metrics?.attemptDuration.observe({ status, graph_id: run.graph_id }, seconds);
      const fields = { status, stop_reason: controller.reason ?? null, duration_ms: Math.round(seconds * 1000) };
      // A graph's failure is logged once, here, with its stack; the run's error event has the message.
      if (result.kind === "threw" && controller.reason === undefined) log.warn({ ...fields, err: result.error }, "attempt failed");
      else log.info(fields, "attempt settled");
    } finally {
      release();
      deadline?.cancel();
      this.active.delete(run.run_id);
      if (this.toldToStop.delete(run.run_id)) this.lastStopSettled = Date.now();
    }
  }

  /**
   * Whether the run was delivered more often than the limit allows: reclaimed after its worker died
   * once too often. Attempts its workers handed back at shutdown do not count (read only past the limit).
   */
  private async attemptsExhausted(run: ClaimedRun): Promise<boolean> {
    const max = this.options.maxAttempts;
    if (run.attempt <= max) return false;
    const handedBack = await countHandBacks(this.deps.db, run.tenant_id, run.run_id);
    return countedAttempts({ attempt: run.attempt, handed_back: handedBack }) > max;
  }

  /**
   * run_timeout bounds the run from its first start, across attempts and their backoff; a pause
   * ends the run (its resume is a new run with its own clock), so paused time never counts.
   */
  private armRunTimeout(run: ClaimedRun, stop: (reason: StopReason) => void): { cancel(): void } | undefined {
    const deadline = runDeadline(run);
    return deadline === undefined ? undefined : atDeadline(deadline, () => stop("timed_out"));
  }

  /**
   * Ends the attempt as the lifecycle decides (`attemptOutcome`), fenced by the lease: at a final
   * boundary, steering admission closes first (its own commit: the `run_finalizing` window). Then
   * the settle statement: the run's and thread's new status and one append of the events not
   * written yet, the supersede events and the outcome's event; on a thread, after the thread's
   * lock (the order a create deciding its multitask strategy takes them in, so the two cannot
   * deadlock; it also orders this settle with creates on the thread, so a waiting run always gets
   * a wake-up). Gates and settles of runs that end at the same moment go together, one statement
   * (and one transaction, for runs on threads) for all (`GroupCommit`). A run with steering to
   * supersede or deferred checkpoint writes settles alone, in a transaction with those. Writes
   * nothing when the lease was lost; returns the status it left the run in (undefined: not settled).
   */
  private async settle(
    run: ClaimedRun,
    lease: Lease,
    result: AttemptResult,
    stopped: StopReason | undefined,
    {
      events: taking,
      meter,
      checkpoints,
      gated,
    }: {
      events: Promise<PendingEvent[] | undefined>;
      meter: UsageMeter;
      checkpoints: AttemptCheckpoints;
      /** Set when this attempt's gate already closed steering admission (whether the run was steered). */
      gated?: { steered: boolean };
    },
  ): Promise<RunStatus | undefined> {
    if (stopped === "lease_lost") return undefined; // another worker owns the run now; write nothing
    // At its attempt limit, a run's hand-backs at shutdown decide whether a failure retries once more.
    const handedBack = run.attempt >= this.options.maxAttempts ? await countHandBacks(this.deps.db, run.tenant_id, run.run_id) : 0;
    const outcome = attemptOutcome({ ...run, handed_back: handedBack }, result, stopped, this.options);
    const { rule } = outcome;
    let steered = gated?.steered ?? false;
    // A finished stateless run's checkpoints are dropped by the settle: the writes its attempt
    // still holds (the last step's) are not written first, by the gate or by the settle.
    const keepCheckpoints = !(rule.finishes && run.thread_id === null);
    if (rule.finishes && !gated) {
      // The graph has its result: close steering admission before the final flush, so a steer
      // that arrives now is refused (run_finalizing) rather than silently superseded.
      const held = await checkpoints.heldForGate();
      const gate = await this.gates.submit({ lease, held: keepCheckpoints ? held : [] });
      if (!gate) return undefined;
      steered = gate.steered;
      await this.options.hooks?.afterSteeringClosed?.(run.run_id);
    }
    // The events no flush took, once the flushes that took this run's earlier ones committed.
    const events = await taking;
    if (events === undefined) return undefined;
    const fields = (superseded: readonly PendingEvent[]): SettleFields => ({
      status: outcome.status,
      output: outcome.output,
      error: outcome.error,
      finishes: rule.finishes,
      retryDelayMs: outcome.retryDelayMs,
      threadStatus: rule.thread,
      usage: meter.usage,
      freesThread: freesThread(run.status, outcome.status),
      events: [...events, ...superseded, outcome.event],
    });
    // A join or stream of this process waiting for the run's end gets its row from the settle, not a read.
    const returnRun = this.deps.handoff?.awaitsEnd(run.run_id) ?? false;
    const settled: (SettledAttempt & { superseded: number }) | undefined =
      !steered && !(keepCheckpoints && checkpoints.deferred.length > 0)
        ? await this.settles
            .submit({ lease, fields: fields([]), threadId: run.thread_id, returnRun })
            .then((done) => done && { ...done, superseded: 0 })
        : await this.deps.db
            .transaction(async (tx) => {
              if (run.thread_id !== null) await lockThread(tx, run.tenant_id, run.thread_id);
              // A run dead-lettered because its workers kept dying computed no result: its pending
              // rows stay for a redrive (spec: the supersede is for a result the graph computed).
              const superseded =
                steered && stopped !== "attempts_exhausted" ? await supersedeAtFinalBoundary(tx, lease.tenantId, lease.runId) : [];
              if (keepCheckpoints) await this.deps.checkpointer.flushDeferred(tx, checkpoints);
              const done = await settleAttempt(tx, lease, fields(superseded), returnRun);
              if (!done) throw LEASE_LOST; // the lease was lost meanwhile: undo the supersede and the writes
              return { ...done, superseded: superseded.length };
            })
            .catch((error: unknown) => {
              if (error === LEASE_LOST) return undefined;
              throw error;
            });
    if (!settled) {
      // A cancel committed after this worker last heard of its run (the settle writes nothing over
      // `cancelling` but `cancelled`): the run ends cancelled, as its canceller was answered.
      if (stopped !== "cancelled" && (await isCancellingUnder(this.deps.db, lease))) {
        const gate = rule.finishes ? { steered } : undefined;
        return this.settle(run, lease, result, "cancelled", { events: taking, meter, checkpoints, ...(gate ? { gated: gate } : {}) });
      }
      return undefined;
    }
    // Counted once committed, before the notices: whoever hears of the end finds it counted (the
    // attempt's duration too: the notices are not waited for, as the event writer does not).
    const metrics = this.deps.metrics;
    if (metrics) {
      metrics.runStatusChanged(outcome.status, run.graph_id);
      if (outcome.status === "pending")
        metrics.retries.inc({ reason: outcome.trigger === "hand_back" ? "worker_shutdown" : "error", graph_id: run.graph_id });
      metrics.supersededSteering(settled.superseded, "unconsumed_at_final_boundary");
    }
    if (settled.run) this.deps.handoff?.settled(settled.run);
    void this.deps.notifier
      .publish(
        { topic: "run_changed", runId: run.run_id, status: outcome.status },
        { topic: "run_events", runId: run.run_id },
        // Back in the queue, or its thread is free for the run waiting on it: a claim may find it
        // now, or, for a retry after a backoff, when the backoff ends (no claim finds it sooner).
        ...(outcome.status === "pending" || settled.threadHasQueued ? [runCreatedNotice(outcome)] : []),
      )
      .catch(() => {}); // a lost notice costs its waiters a re-check, nothing more
    return outcome.status;
  }
}

/** The most gates or settles one statement takes (a settle carries the run's output and last events). */
const GROUP_COMMIT_MAX = 100;
const atMostMax = <Item>(waiting: readonly Item[]): number => Math.min(waiting.length, GROUP_COMMIT_MAX);

/** Thrown inside the settle's transaction to roll it back when the lease turns out lost. */
const LEASE_LOST = Symbol("lease lost");

/** A resettable wake-up for one waiter: `wait` resolves true when woken, false when the timeout passes first. */
class Wakeup {
  private resolve: ((woken: boolean) => void) | undefined;
  private woken = false;

  wake(): void {
    if (this.resolve) this.resolve(true);
    else this.woken = true;
  }

  wait(timeoutMs: number): Promise<boolean> {
    if (this.woken) {
      this.woken = false;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => finish(false), timeoutMs);
      const finish = (woken: boolean) => {
        clearTimeout(timer);
        this.resolve = undefined;
        resolve(woken);
      };
      this.resolve = finish;
    });
  }
}
