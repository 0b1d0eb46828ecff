import { randomUUID } from "node:crypto";
import type { Assistant, CreateRunBody, JsonObject, ResumeBody, Run, RunEvent } from "@rudder/api";
import { ApiError, notFound } from "../domain/errors.ts";
import { isRefusal, transitionFor, type RunTrigger } from "../domain/run-lifecycle.ts";
import {
  ACTIVE_STATUSES,
  carriesCommand,
  isSettled,
  requestFingerprint,
  requireUsableConfig,
  startCheckpointOf,
  TERMINAL_STATUSES,
  withRunDefaults,
  type MultitaskStrategy,
  type StartCheckpoint,
} from "../domain/runs.ts";
import type { AssistantCatalog } from "../graphs/assistants.ts";
import { validateGoto, validateGraphInput } from "../graphs/input.ts";
import type { GraphRegistry } from "../graphs/registry.ts";
import type { Notice, Notifier } from "../notify/notifier.ts";
import { wakeups, type Wakeup } from "../notify/wakeups.ts";
import type { Metrics } from "../observability/metrics.ts";
import { withoutTransaction, type Db, type Queryable, type Transaction } from "../storage/db.ts";
import { readEvents } from "../storage/events.ts";
import { RunInserts } from "../storage/run-inserts.ts";
import * as runRows from "../storage/runs.ts";
import { publicRun, type ClaimedRun, type NewRun } from "../storage/runs.ts";
import { migrateToSuccessor } from "../storage/steering.ts";
import { hasCheckpoint, lockThread, writeThreadMetadata } from "../storage/threads.ts";
import { ReplayTurns } from "./replay-turns.ts";
import { EventFeed, mayHaveSettled, type RunEndWaiter } from "./event-feed.ts";
import { applyRowOnlyMove, applyTransition } from "./transitions.ts";

export interface RunLimits {
  readonly queuedRunQuota: number;
  /** Where creations and settles are counted (none: not counted). */
  readonly metrics?: Metrics;
}

/** What a follower of a run sees: new events, a quiet interval, or the run's end (terminal or paused). */
export type FollowUpdate =
  | {
      readonly type: "events";
      readonly events: RunEvent[];
      /**
       * Call once the page is written out: a page read from the log behind the shared tail holds
       * one of its tenant's replay turns until then (or until the next page is asked for), so a
       * stream that waits for a slow reader's socket gives it back first.
       */
      readonly sent: () => void;
    }
  | { readonly type: "quiet" }
  | { readonly type: "settled"; readonly run: Run };

export interface FollowOptions {
  /** Events after this sequence (default 0: from the start). */
  readonly after?: number;
  /** Whether to read events at all (join needs only the status). */
  readonly events?: boolean;
  /** Re-read storage this often when no notice arrives (notices are only hints). */
  readonly recheckMs?: number;
  readonly signal?: AbortSignal;
}

/** How often a waiter re-reads storage when no notice arrives. */
export const RECHECK_MS = 1000;
/** Events read per statement while following a run. */
const EVENT_PAGE = 500;
/** How many streams of one tenant read the log behind their run's tail at once (`ReplayTurns`). */
const REPLAYS_PER_TENANT = 4;

/**
 * Creating, reading, following and controlling runs: the rules the HTTP API, the scheduler and the
 * gateways share. Each operation is one unit of work: it opens the transaction (or joins the
 * caller's), applies the lifecycle's decision, and storage only runs statements.
 */
/** How a run is created, beyond its request (`RunService.create`). */
export interface CreateRunOptions {
  /** The Idempotency-Key: a repeat with the same key and body replays the first answer. */
  readonly idempotencyKey?: string | undefined;
  /** Create it inside the caller's transaction. */
  readonly tx?: Transaction;
  /** The run's id, when the caller must name it before it exists. */
  readonly runId?: string | undefined;
  /** Claimable only once this many seconds have passed (LangGraph's `after_seconds`). */
  readonly afterSeconds?: number;
  /** Keys merged into the thread's metadata in the run's own transaction (the LangGraph facade records graph and assistant). */
  readonly threadMetadata?: JsonObject;
}

export class RunService {
  /** The process's shared reads of run event logs: every stream of a run reads through it. */
  readonly feed: EventFeed;
  private readonly inserts: RunInserts;
  private readonly replayTurns = new ReplayTurns(REPLAYS_PER_TENANT);

  constructor(
    private readonly db: Db,
    private readonly assistants: AssistantCatalog,
    private readonly graphs: GraphRegistry,
    private readonly notifier: Notifier,
    private readonly limits: RunLimits,
  ) {
    this.feed = new EventFeed(db, notifier);
    this.inserts = new RunInserts(db, limits.queuedRunQuota);
  }

  /**
   * Creates a run: the Idempotency-Key replay rule, the thread's existence, the tenant's
   * queued-run quota and the thread's multitask strategy, in that order, with the notices heard
   * once it commits. Pass `tx` to create it inside the caller's transaction (the scheduler commits
   * a run with its schedule's advance). For `enqueue` (and a stateless run) the insert is one
   * statement, sent without a transaction and shared with the creates arriving with it
   * (`RunInserts`); `reject` and `cancel_previous` decide under the thread's row lock, which
   * serialises creates on that thread. A caller that must name the run before it exists (the A2A
   * gateway's task id is its first run's id) passes `runId`.
   * `afterSeconds` (the LangGraph facade's `after_seconds`) creates it pending, claimable only
   * once that time has passed.
   */
  async create(
    tenantId: string,
    threadId: string | null,
    request: CreateRunBody,
    options: CreateRunOptions = {},
  ): Promise<{ run: Run; replayed: boolean }> {
    const { idempotencyKey, tx, runId = randomUUID() } = options;
    const assistant = await this.checkRequest(tenantId, request, tx);
    const fields = withRunDefaults(request);
    const config = mergeConfig(assistant.config, fields.config);
    await this.requireStartCheckpoint(tenantId, threadId, startCheckpointOf(config), tx);
    const run: NewRun = {
      tenantId,
      runId,
      threadId,
      assistantId: assistant.assistant_id,
      graphId: assistant.graph_id,
      input: fields.input,
      command: carriesCommand(fields) ? { resume: fields.resume, update: fields.update, goto: fields.goto } : null,
      context: { ...assistant.context, ...fields.context },
      config,
      metadata: fields.metadata,
      multitaskStrategy: fields.multitask_strategy,
      durability: fields.durability,
      runTimeout: fields.run_timeout,
      maxModelCalls: fields.max_model_calls,
      maxToolCalls: fields.max_tool_calls,
      maxTokens: fields.max_tokens,
      maxCost: fields.max_cost,
      idempotencyKey,
      // Only a keyed create can be replayed, so only its request is fingerprinted.
      requestHash: idempotencyKey === undefined ? null : requestFingerprint(threadId, fields),
      afterSeconds: options.afterSeconds ? options.afterSeconds : null,
    };
    const create = async (within: Transaction, batched = false) => {
      // The thread's row before the run's, the order settles lock them in.
      if (options.threadMetadata && threadId !== null) await this.recordOnThread(within, tenantId, threadId, options.threadMetadata);
      return this.createIn(within, run, batched);
    };
    // A create that is its insert alone needs no transaction around it, and shares its insert with
    // the creates arriving with it (`RunInserts`).
    const oneStatement = !options.threadMetadata && !decidedUnderThreadLock(run);
    const created = await (tx
      ? create(tx)
      : oneStatement
        ? withoutTransaction(this.db, (direct) => create(direct, true))
        : this.db.transaction(create));
    return { run: publicRun(created.run), replayed: created.replayed };
  }

  /**
   * The checks of a run's request that need no thread or queue: its assistant exists and its
   * graph is loaded, its input fits the graph, its goto names one of its nodes, its config sets no
   * reserved key. Run creation makes them first; a schedule makes them when it is created or
   * changed, so its fires are not refused for what could be told then. Answers the assistant.
   */
  async checkRequest(
    tenantId: string,
    request: Pick<CreateRunBody, "assistant_id" | "input" | "config" | "goto">,
    tx?: Transaction,
  ): Promise<Assistant> {
    const assistant = await this.assistants.get(tenantId, request.assistant_id, tx).catch((error: unknown) => {
      // An unknown assistant is a fault in the body, not a missing resource at this URL.
      if (error instanceof ApiError && error.code === "not_found") {
        throw new ApiError("validation_error", `assistant_id "${request.assistant_id}" names no assistant`);
      }
      throw error;
    });
    const graph = await this.graphs.get(assistant.graph_id);
    if (!graph) throw new ApiError("validation_error", `the graph of assistant ${assistant.assistant_id} is not loaded`);
    requireUsableConfig(request.config);
    await validateGraphInput(graph, request.input);
    validateGoto(graph, request.goto);
    return assistant;
  }

  /**
   * A run named to start from a checkpoint starts from one its thread has: another's (another
   * thread's, another tenant's) or an unknown one is 404, as the thread's state and fork answer it,
   * before anything is created. LangGraph would start from nothing, or fail on its input, instead.
   * A stateless run's thread is its own, new one: it has none. One statement, only when one is named.
   */
  async requireStartCheckpoint(
    tenantId: string,
    threadId: string | null,
    start: StartCheckpoint | undefined,
    tx?: Transaction,
  ): Promise<void> {
    if (start === undefined) return;
    const found = threadId !== null && (await hasCheckpoint(tx ?? this.db, tenantId, threadId, start.checkpointNs, start.checkpointId));
    if (!found) throw notFound("checkpoint", start.checkpointId);
  }

  /**
   * `batched`: the insert may share a statement with other creates (`RunInserts`); outside a
   * transaction only. The shared insert ranks a tenant's runs against its quota together, so a
   * run it stopped while the quota still has room is inserted again, alone, and that decides.
   */
  private async createIn(tx: Transaction, run: NewRun, batched: boolean): Promise<{ run: ClaimedRun; replayed: boolean }> {
    let answered: ClaimedRun | undefined;
    if (decidedUnderThreadLock(run)) {
      const replay = await this.replayOf(tx, run);
      if (replay) return replay;
      if (!(await lockThread(tx, run.tenantId, run.threadId))) throw notFound("thread", run.threadId);
      // A copy of this request that held the lock first may have created the key's run meanwhile:
      // deciding again would cancel it (cancel_previous) or refuse its retry (reject).
      const created = await this.replayOf(tx, run);
      if (created) return created;
      answered = await this.pausedRunAnswered(tx, run);
      await this.applyMultitaskStrategy(tx, run.tenantId, run.threadId, run.multitaskStrategy);
    }
    const quota = this.limits.queuedRunQuota;
    // The run that continues a paused one names it, as a resume's does.
    const row = answered ? { ...run, metadata: { ...run.metadata, resumed_from_run_id: answered.run_id } } : run;
    const inserted = await (batched ? this.inserts.insert(row) : runRows.insertRun(tx, row, quota)).catch((error: unknown) => {
      // The thread was deleted between the check and the insert.
      if ((error as { code?: string }).code === "23503" && run.threadId !== null) throw notFound("thread", run.threadId);
      throw error;
    });
    if (inserted) {
      if (answered) await this.continuePaused(tx, answered, inserted.run_id);
      // A delayed run's notice says when it comes due, so a worker wakes then rather than at once.
      const dueAt = run.afterSeconds === null ? undefined : Date.now() + run.afterSeconds * 1000;
      await this.notifier.publishWithin(tx, dueAt === undefined ? { topic: "run_created" } : { topic: "run_created", dueAt });
      this.afterCreated(tx, inserted);
      return { run: inserted, replayed: false };
    }
    // The insert's conditions stopped it: say which.
    const replay = await this.replayOf(tx, run);
    if (replay) return replay;
    if (run.threadId !== null && !(await runRows.threadExists(tx, run.tenantId, run.threadId))) throw notFound("thread", run.threadId);
    const queued = await runRows.countPending(tx, run.tenantId);
    if (batched && queued < quota) return this.createIn(tx, run, false);
    throw quotaExceeded(queued);
  }

  /** The run an Idempotency-Key already names: a replay when the request is the same, else 409. */
  private async replayOf(db: Queryable, run: NewRun): Promise<{ run: ClaimedRun; replayed: true } | undefined> {
    if (run.idempotencyKey === undefined) return undefined;
    const existing = await runRows.findByIdempotencyKey(db, run.tenantId, run.idempotencyKey);
    if (!existing) return undefined;
    if (existing.request_hash !== run.requestHash) {
      throw new ApiError("idempotency_conflict", "this Idempotency-Key was used with a different request");
    }
    return { run: existing, replayed: true };
  }

  /**
   * The paused run a thread run created with a command answers, if any: the thread's newest run
   * that paused and no resume has continued, when the new run would start from its checkpoint
   * (the thread's head is its, or an edit made since). Left resumable, its resume would run the
   * graph on from the same interrupt a second time, and the steering it holds would go there
   * ("No duplicate run", spec section 3); so the new run continues it, as its resume would.
   */
  private async pausedRunAnswered(tx: Transaction, run: NewRun & { threadId: string }): Promise<ClaimedRun | undefined> {
    if (run.command === null) return undefined;
    const paused = await runRows.lockUnansweredPausedRun(tx, run.tenantId, run.threadId);
    if (!paused) return undefined;
    // Another run wrote the thread since it paused: the new run starts from that, not from its interrupt.
    if ((await runRows.resumeCheckpoint(tx, run.tenantId, run.threadId, paused.run_id)) !== undefined) return undefined;
    await this.transition(tx, paused, "resume");
    return paused;
  }

  /**
   * Links a paused run to the run that continues it (its resume is 409 from then on) and moves its
   * unconsumed steering there: what a resume, or a create that answers it, does once that run is inserted.
   */
  private async continuePaused(tx: Transaction, paused: ClaimedRun, successorId: string): Promise<void> {
    await runRows.linkSuccessor(tx, paused.tenant_id, paused.run_id, successorId);
    const moved = await migrateToSuccessor(tx, paused.tenant_id, paused.run_id, successorId);
    const metrics = this.limits.metrics;
    if (metrics) tx.afterCommit(() => metrics.supersededSteering(moved, "resume_transfer"));
  }

  /** reject: 409 while the thread has an active run. cancel_previous: its pending and running runs are cancelled first. */
  private async applyMultitaskStrategy(tx: Transaction, tenantId: string, threadId: string, strategy: MultitaskStrategy): Promise<void> {
    if (strategy === "reject") {
      const active = await runRows.lockRunsOfThread(tx, tenantId, threadId, ACTIVE_STATUSES);
      if (active.length) throw new ApiError("concurrent_run", `thread ${threadId} has an active run (multitask_strategy "reject")`);
      return;
    }
    if (strategy !== "cancel_previous") return;
    for (const previous of await runRows.lockRunsOfThread(tx, tenantId, threadId, ["pending", "running"])) {
      await this.transition(tx, previous, "cancel_previous");
    }
  }

  /** Applies the lifecycle's rule for `trigger`, or throws its refusal as the API error. */
  private async transition(tx: Transaction, run: ClaimedRun, trigger: RunTrigger): Promise<ClaimedRun> {
    const decision = transitionFor(run, trigger);
    if (isRefusal(decision)) {
      const link = run.superseded_by_run_id ? { fields: { superseded_by_run_id: run.superseded_by_run_id } } : {};
      throw new ApiError(decision.refused, decision.detail, link);
    }
    return applyTransition(tx, this.notifier, run, trigger, decision, this.limits.metrics);
  }

  private async recordOnThread(tx: Transaction, tenantId: string, threadId: string, metadata: JsonObject): Promise<void> {
    if (!(await writeThreadMetadata(tx, tenantId, threadId, metadata, "merge"))) throw notFound("thread", threadId);
  }

  /** Once committed: the run is counted, and its joins and streams in this process need not read it to start. */
  private afterCreated(tx: Transaction, run: ClaimedRun): void {
    const metrics = this.limits.metrics;
    tx.afterCommit(() => {
      metrics?.runCreated(run.graph_id);
      this.feed.created(run.tenant_id, run.run_id);
    });
  }

  /** 404 unless the run is the tenant's; no read for a run this process created and has not heard settle. */
  async assertOwn(tenantId: string, runId: string): Promise<void> {
    if (!this.feed.knownUnsettled(tenantId, runId)) await this.own(this.db, tenantId, runId);
  }

  async get(tenantId: string, runId: string): Promise<Run> {
    return publicRun(await this.own(this.db, tenantId, runId));
  }

  /** The tenant's runs, newest first, filtered (`GET /v1/runs`). */
  async list(tenantId: string, filter: runRows.RunListFilter, page: { limit: number; offset: number }): Promise<Run[]> {
    return (await runRows.listRuns(this.db, tenantId, filter, page)).map(publicRun);
  }

  async listByThread(tenantId: string, threadId: string, page: { limit: number; offset: number }): Promise<Run[]> {
    return (await runRows.listRunsOfThread(this.db, tenantId, threadId, page)).map(publicRun);
  }

  /**
   * A run's events after `after` and its end, as they become durable: one iterator for SSE, join
   * and the gateways. Events come through the process's shared tail of the run (`EventFeed`: one
   * read per notice for all the streams of all runs, or none when this process's worker handed
   * them over); the run row is read at the start, on its run_changed notices and on re-checks.
   * The final status commits with the last events, so after a settled status one more read finds
   * everything. It re-reads storage every `recheckMs` in case a notice was lost ("quiet" then,
   * when nothing new came). The first run read checks the run is the tenant's (404 otherwise);
   * a run this process created and has not heard settle needs no read to start
   * (`EventFeed.knownUnsettled`).
   */
  async *follow(tenantId: string, runId: string, options: FollowOptions = {}): AsyncGenerator<FollowUpdate, void, undefined> {
    if (options.events === false) {
      yield* this.followStatus(tenantId, runId, options);
      return;
    }
    let cursor = options.after ?? 0;
    const intervalMs = options.recheckMs ?? RECHECK_MS;
    const { signal } = options;
    // The run is the tenant's before anything of it is read: its tail is shared with the run's other streams.
    await this.assertOwn(tenantId, runId);
    const tail = this.feed.attach(tenantId, runId, cursor);
    const end = this.feed.awaitEnd(runId);
    /** The replay turn the page being sent holds (`ReplayTurns`): given back once it is sent, or when the next page is asked for. */
    let turn: (() => void) | undefined;
    const sent = () => {
      turn?.();
      turn = undefined;
    };
    /** The next page after the cursor: from the shared tail, or from the log while behind it, in the tenant's turn. */
    const nextPage = async (): Promise<RunEvent[]> => {
      sent();
      let events = tail.since(cursor);
      if (events === undefined) {
        turn = await this.replayTurns.take(tenantId);
        events = tail.since(cursor) ?? (await readEvents(this.db, tenantId, runId, cursor, EVENT_PAGE));
      }
      if (events.length) tail.moved((cursor = events.at(-1)!.sequence));
      return events;
    };
    try {
      let wakeup: "start" | "notice" | "recheck" = "start";
      let seenChanges = tail.changes;
      while (!signal?.aborted) {
        tail.take();
        // A notice was read by the tail for every follower; at the start and on a re-check (a
        // notice may have been lost) the log is read again now.
        if (wakeup !== "notice") await tail.refresh();
        let news = false;
        for (let page = await nextPage(); page.length; page = await nextPage()) {
          news = true;
          yield { type: "events", events: page, sent };
        }
        // The run row is read only when its status may have changed: first, on run_changed, on a re-check.
        if (wakeup !== "notice" || tail.changes !== seenChanges) {
          seenChanges = tail.changes;
          const run = await this.runAt(wakeup, end, tenantId, runId);
          if (run && isSettled(run.status)) {
            // The final status committed with the last events: reading on until a read finds no
            // full page finds them all (a read takes at most a page per run).
            do {
              await tail.refresh();
              for (let rest = await nextPage(); rest.length; rest = await nextPage()) yield { type: "events", events: rest, sent };
            } while (tail.more);
            yield { type: "settled", run: publicRun(run) };
            return;
          }
        }
        if (!news && wakeup === "recheck") yield { type: "quiet" };
        wakeup = await tail.wait(intervalMs, signal);
      }
    } finally {
      sent();
      end.detach();
      tail.detach();
    }
  }

  /** A run's end without its events (join): woken by its run_changed notices that may have settled it. */
  private async *followStatus(tenantId: string, runId: string, options: FollowOptions): AsyncGenerator<FollowUpdate, void, undefined> {
    const settling = (n: Notice) => n.topic === "run_changed" && n.runId === runId && mayHaveSettled(n);
    const end = this.feed.awaitEnd(runId);
    try {
      for await (const wakeup of wakeups(this.notifier, settling, {
        intervalMs: options.recheckMs ?? RECHECK_MS,
        signal: options.signal,
      })) {
        const run = await this.runAt(wakeup, end, tenantId, runId);
        if (run && isSettled(run.status)) {
          yield { type: "settled", run: publicRun(run) };
          return;
        }
        if (wakeup === "recheck") yield { type: "quiet" };
      }
    } finally {
      end.detach();
    }
  }

  /**
   * The run at a waiter's wake-up: on a notice, the row a worker of this process handed over if
   * its settle ended the run; else read (the first read also checks the run is the tenant's).
   * Undefined at the start when this process created the run and has heard no settle of it
   * (`EventFeed.knownUnsettled`, asked now that the waiter is subscribed): not settled, not read.
   */
  private async runAt(wakeup: Wakeup, end: RunEndWaiter, tenantId: string, runId: string): Promise<ClaimedRun | undefined> {
    if (wakeup === "start" && this.feed.knownUnsettled(tenantId, runId)) return undefined;
    const handed = wakeup === "notice" ? end.settled() : undefined;
    return handed && isSettled(handed.status) ? handed : this.own(this.db, tenantId, runId);
  }

  /** Waits until the run is terminal or paused; 408 join_timeout when the wait ends first. */
  async join(tenantId: string, runId: string, timeoutSeconds: number, signal?: AbortSignal): Promise<Run> {
    // A timer takes whole milliseconds: `0.0005` s (valid: more than 0) waits one.
    const deadline = AbortSignal.timeout(Math.ceil(timeoutSeconds * 1000));
    for await (const update of this.follow(tenantId, runId, {
      events: false,
      signal: signal ? AbortSignal.any([signal, deadline]) : deadline,
    })) {
      if (update.type === "settled") return update.run;
    }
    const run = await this.own(this.db, tenantId, runId);
    if (isSettled(run.status)) return publicRun(run);
    // A wait the caller stopped (the server shutting down) did not wait the timeout out.
    const waited = deadline.aborted ? `after ${timeoutSeconds} s` : "and this server stopped waiting (it is shutting down)";
    throw new ApiError("join_timeout", `run ${runId} is still ${run.status} ${waited}; join again to keep waiting`);
  }

  /**
   * Waits while the run stays paused and not resumed: the run once it was resumed (its
   * `superseded_by_run_id` is set) or left paused (cancelled); undefined when `signal` aborts first.
   */
  async waitWhilePaused(tenantId: string, runId: string, signal: AbortSignal): Promise<Run | undefined> {
    for await (const _wakeup of wakeups(this.notifier, (n) => n.topic === "run_changed" && n.runId === runId, {
      intervalMs: RECHECK_MS,
      signal,
    })) {
      const run = await this.own(this.db, tenantId, runId);
      if (run.status !== "paused" || run.superseded_by_run_id) return publicRun(run);
    }
    return undefined;
  }

  /**
   * Cancel: pending and paused runs end cancelled at once; a running run goes to cancelling and its
   * worker stops it. That last, the common case, changes the run's row alone and takes one statement
   * (`applyRowOnlyMove`); every other status takes the locked transaction.
   */
  async cancel(tenantId: string, runId: string): Promise<Run> {
    const moved = await applyRowOnlyMove(this.db, this.notifier, tenantId, runId, "cancel", this.limits.metrics);
    if (moved) return publicRun(moved);
    return this.db.transaction(async (tx) => {
      const run = await this.lockOwn(tx, tenantId, runId);
      return publicRun(await this.transition(tx, run, "cancel"));
    });
  }

  /**
   * Deletes an ended run with its events and steering (LangGraph's `runs.delete`), a paused run
   * that a resume continued included; a run that is pending, running, cancelling or paused
   * awaiting its resume is a 409 (cancel it first). One statement when it can go.
   */
  async delete(tenantId: string, runId: string): Promise<void> {
    if (await runRows.deleteRunIn(this.db, tenantId, runId, [...TERMINAL_STATUSES])) return;
    const run = await this.own(this.db, tenantId, runId);
    throw new ApiError("conflict", `run ${runId} is ${run.status}; only an ended (or resumed) run can be deleted: cancel it first`);
  }

  /**
   * Resumes a paused run (spec section 3, "paused → POST resume"): in one transaction, the run that
   * continues it and the old run's typed link; its unconsumed steering moves along. The row lock
   * makes one of concurrent resumes win; the others find the link set (409 run_resume_conflict).
   * The new run is claimable only once this commits. `options.config` replaces the config the new
   * run would inherit (the LangGraph facade records the resuming request's stream modes and breakpoints there);
   * `options.metadata` adds keys to the metadata it inherits.
   */
  async resume(
    tenantId: string,
    runId: string,
    command: ResumeBody,
    options: { config?: Record<string, unknown>; threadMetadata?: JsonObject; metadata?: JsonObject } = {},
  ): Promise<Run> {
    return this.db.transaction(async (tx) => {
      const old = await this.lockOwn(tx, tenantId, runId);
      const graph = command.goto == null ? undefined : await this.graphs.get(old.graph_id);
      if (graph) validateGoto(graph, command.goto);
      if (options.threadMetadata && old.thread_id !== null) await this.recordOnThread(tx, tenantId, old.thread_id, options.threadMetadata);
      await this.transition(tx, old, "resume");
      // Checked once the run is known to be paused (a resume of any other run is 409 whatever its
      // body); refused here, the transaction rolls back and the paused run stays resumable.
      if (!carriesCommand(command)) {
        throw new ApiError(
          "validation_error",
          "a resume needs a non-null resume value, a non-empty update or a goto: LangGraph reads null as no answer, and the run that continued would fail",
        );
      }
      const config = old.thread_id === null ? options.config : await this.resumeConfig(tx, old, options.config ?? old.config);
      // The run that continues it is a new queued run: the tenant's quota holds for it as for a create.
      const successor = await runRows.insertSuccessor(
        tx,
        tenantId,
        runId,
        randomUUID(),
        { resume: command.resume, update: command.update ?? null, goto: command.goto ?? null },
        { config, metadata: options.metadata, queuedRunQuota: this.limits.queuedRunQuota },
      );
      if (!successor) throw quotaExceeded(await runRows.countPending(tx, tenantId));
      // A stateless run checkpoints under its own id: its state goes to the run that continues it.
      if (old.thread_id === null) await runRows.moveRunCheckpoints(tx, tenantId, runId, successor.run_id);
      await this.continuePaused(tx, old, successor.run_id);
      await this.notifier.publishWithin(tx, { topic: "run_created" });
      this.afterCreated(tx, successor);
      return publicRun(successor);
    });
  }

  /**
   * The config of the run that continues a paused thread run: it starts where `resumeCheckpoint`
   * says, from the paused run's own checkpoint when another run has written the thread since (or
   * it would answer that run's interrupt), else from the thread's head; never from the checkpoint
   * the paused run was created at, which its config may name.
   */
  private async resumeConfig(tx: Transaction, old: ClaimedRun, config: Record<string, unknown>): Promise<Record<string, unknown>> {
    const pinned = await runRows.resumeCheckpoint(tx, old.tenant_id, old.thread_id!, old.run_id);
    const { checkpoint_id: _created, ...configurable } = (config.configurable as Record<string, unknown> | undefined) ?? {};
    return { ...config, configurable: { ...configurable, ...(pinned !== undefined ? { checkpoint_id: pinned } : {}) } };
  }

  /** Re-queues a failed or dead-lettered run as it was (same id, input, config, graph); attempts start over. */
  async redrive(tenantId: string, runId: string): Promise<Run> {
    return this.db.transaction(async (tx) => {
      const run = await this.lockOwn(tx, tenantId, runId);
      return publicRun(await this.transition(tx, run, "redrive"));
    });
  }

  async events(tenantId: string, runId: string, page: { after: number; limit: number; offset: number }): Promise<RunEvent[]> {
    await this.assertOwn(tenantId, runId);
    return readEvents(this.db, tenantId, runId, page.after, page.limit, page.offset);
  }

  /**
   * The run, locked after its thread (the lock order of every waiting transaction): a change that
   * lets go of the thread, or joins it, decides who is next under the thread's lock (docs/runs.md).
   */
  private async lockOwn(tx: Transaction, tenantId: string, runId: string): Promise<ClaimedRun> {
    const run = await runRows.lockRunWithThread(tx, tenantId, runId);
    if (!run) throw notFound("run", runId);
    return run;
  }

  private async own(db: Queryable, tenantId: string, runId: string): Promise<ClaimedRun> {
    const run = await runRows.getRun(db, tenantId, runId);
    if (!run) throw notFound("run", runId);
    return run;
  }
}

/**
 * Whether the create decides under its thread's lock (`reject`, `cancel_previous`, a command, …). Otherwise
 * (a stateless run, or `enqueue`) its insert decides alone, in one statement: thread, quota,
 * idempotency key, `blocked`.
 */
function decidedUnderThreadLock(run: NewRun): run is NewRun & { threadId: string } {
  return run.threadId !== null && (run.multitaskStrategy !== "enqueue" || run.command !== null);
}

/** Request config over the assistant's; `configurable` merges one level deeper. */
function mergeConfig(base: Record<string, unknown>, override: Record<string, unknown>): Record<string, unknown> {
  const configurable = { ...asObject(base.configurable), ...asObject(override.configurable) };
  return { ...base, ...override, ...(Object.keys(configurable).length ? { configurable } : {}) };
}

function asObject(value: unknown): Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

/** 429: the tenant's queued runs are at its quota (spec section 8); retryable once some start. */
function quotaExceeded(queued: number): ApiError {
  return new ApiError("quota_exceeded", `the tenant has ${queued} queued runs, the most it may have`, { retryAfterSeconds: 5 });
}
