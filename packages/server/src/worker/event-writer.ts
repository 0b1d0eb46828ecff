import type { RunEvent } from "@rudder/api";
import type { Notice, Notifier } from "../notify/notifier.ts";
import { isConnectWait, type Db } from "../storage/db.ts";
import { appendEventBatches, loggedEvent, type AppendedRun, type EventBatch, type PendingEvent } from "../storage/events.ts";
import type { Lease } from "../storage/lease.ts";
import { iso } from "../storage/rows.ts";

/** Where a worker hands the events it committed to streams of its own process (`rudder dev`). */
export interface EventHandoff {
  /** Whether a stream of this process follows the run now (its events are then handed over). */
  follows(runId: string): boolean;
  /** The run's events, committed, in sequence order: called after the commit, before its notice. */
  deliver(runId: string, events: readonly RunEvent[]): void;
}

export interface EventWriterOptions {
  /** A flush starts at most this long after the first event it carries was pushed. */
  readonly flushMs: number;
  /** A flush starts at once when this many events are waiting (across runs). */
  readonly maxBatch: number;
  /** Runs per `events_flushed` notice (NOTIFY payloads are bounded). */
  readonly runsPerNotice?: number;
}

/** A run's share of a flush: every event's data as JSON, written as is and handed over parsed. */
interface FlushBatch extends EventBatch {
  readonly dataJson: readonly (string | undefined)[];
}

/** Thrown to the attempts whose events a flush could not write (the database failed, not the lease). */
export class EventFlushError extends Error {}

/** PostgreSQL's deadlock and serialization failures: the flush is written again. */
const RETRYABLE = new Set(["40P01", "40001"]);
/** A flush is tried this often before the attempts it carries stop (a lost lease to them). */
const MAX_WRITE_ATTEMPTS = 5;

/**
 * One writer per worker process: every attempt's events wait here, and each flush writes the
 * events of all its runs in one multi-row insert (`appendEventBatches`), in one commit with one
 * notice listing the runs and their new last sequence (`events_flushed`). A chatty graph's token
 * stream costs a share of a commit per flush, not a commit per run per 20 ms.
 *
 * Each attempt has a handle (`open`). Flushes are chained (one in flight at a time), so a run's
 * batches commit in the order they were pushed. A run whose lease is gone gets nothing written:
 * its handle is told (`lost`) and drops what it holds, so a stale attempt's buffered events never
 * land. A flush the database refuses fails the handles of every run it carried (the caller treats
 * it as a lost lease: another attempt redoes the work), as one run's own flush did before.
 */
export class EventWriter {
  private readonly waiting = new Map<string, RunEvents>();
  private pendingCount = 0;
  private timer: NodeJS.Timeout | undefined;
  private chain: Promise<void> = Promise.resolve();
  /** A flush is queued on the chain and has not taken its batch yet. */
  private queued = false;

  constructor(
    private readonly db: Db,
    private readonly notifier: Notifier,
    private readonly options: EventWriterOptions,
    private readonly handoff?: EventHandoff,
  ) {}

  /** A handle for one attempt's events, fenced by its lease; `lost` is called once if the lease is found gone. */
  open(lease: Lease, lost: () => void): RunEvents {
    return new RunEvents(this, lease, lost);
  }

  /** @internal: a handle has a new event waiting. */
  enqueue(handle: RunEvents): void {
    this.waiting.set(handle.lease.runId, handle);
    this.pendingCount++;
    if (this.pendingCount >= this.options.maxBatch) this.flush();
    else if (!this.timer) {
      this.timer = setTimeout(() => void this.flush(), this.options.flushMs);
      this.timer.unref();
    }
  }

  /**
   * @internal: a handle stopped batching (its rest goes with the settle) with `events` not taken:
   * it no longer holds a flush due. Without this, a run that settled before its flush was due left
   * the timer running, and the next run's first events were flushed by it (a commit of their own)
   * instead of riding that run's settle.
   */
  release(handle: RunEvents, events: number): void {
    if (this.waiting.get(handle.lease.runId) !== handle) return;
    this.waiting.delete(handle.lease.runId);
    this.pendingCount = Math.max(0, this.pendingCount - events);
    if (this.waiting.size === 0) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  /**
   * Queues a flush of everything waiting when it starts; resolves once it committed (or failed:
   * each handle learns its own fate). A flush queued behind another takes what arrived meanwhile.
   */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.queued) return this.chain;
    this.queued = true;
    this.chain = this.chain.then(() => {
      this.queued = false;
      return this.writeWaiting();
    });
    return this.chain;
  }

  private async writeWaiting(): Promise<void> {
    const handles = [...this.waiting.values()];
    this.waiting.clear();
    this.pendingCount = 0;
    const batches = handles.map((handle) => ({ handle, taken: handle.takeForFlush() })).filter((batch) => batch.taken.events.length > 0);
    if (batches.length === 0) return;
    try {
      const appended = await this.write(batches.map(({ handle, taken }) => ({ lease: handle.lease, ...taken })));
      const written = new Map<string, number>();
      for (const row of appended) written.set(row.run_id, row.count);
      for (const { handle, taken } of batches) {
        if (written.get(handle.lease.runId) === taken.events.length) handle.flushed();
        else handle.leaseLost();
      }
    } catch (error) {
      for (const { handle } of batches) handle.failed(new EventFlushError("writing the run's events failed", { cause: error }));
    }
  }

  /**
   * One statement, outside a transaction (so its own, atomic): the append. Once it committed, the
   * hand-off to this process's streams, then the notices (this process's listeners at once, other
   * processes through the notifier's batched NOTIFY, which the flush does not wait for).
   */
  private async write(batches: FlushBatch[]): Promise<AppendedRun[]> {
    const handoff = this.handoff;
    const withTime = handoff !== undefined && batches.some((batch) => handoff.follows(batch.lease.runId));
    for (let attempt = 1; ; attempt++) {
      let appended: AppendedRun[];
      try {
        appended = await appendEventBatches(this.db, batches, { withTime });
      } catch (error) {
        // Rolled back for certain (a deadlock, a serialization failure) or never begun (no
        // connection in time): written again, in the same place in the chain, so order holds.
        // Anything else may or may not have committed: the attempts it carried stop.
        const again = RETRYABLE.has(String((error as { code?: unknown }).code)) || isConnectWait(error);
        if (!again || attempt >= MAX_WRITE_ATTEMPTS) throw error;
        continue;
      }
      if (appended.length === 0) return appended;
      if (handoff && withTime) deliver(handoff, batches, appended);
      const last = appended.map((row): [string, number] => [row.run_id, row.base + row.count]);
      void this.notifier.publish(...flushedNotices(last, this.options.runsPerNotice ?? 100)).catch(() => {});
      return appended;
    }
  }
}

/** The runs and their new last sequences, as notices of at most `perNotice` runs each. */
function flushedNotices(runs: [string, number][], perNotice: number): Notice[] {
  const notices: Notice[] = [];
  for (let at = 0; at < runs.length; at += perNotice) notices.push({ topic: "events_flushed", runs: runs.slice(at, at + perNotice) });
  return notices;
}

/**
 * The committed events of the runs a stream of this process follows, built from what the writer
 * holds (the log gave the run's events `base + 1` … in order, all at one time): the data as its
 * JSON was written, not read back from the database.
 */
function deliver(handoff: EventHandoff, batches: readonly FlushBatch[], appended: readonly AppendedRun[]): void {
  const byRun = new Map<string, FlushBatch>();
  for (const batch of batches) byRun.set(batch.lease.runId, batch);
  // One time for all: the statement's transaction time, which its every row carries.
  const createdAt = appended.length > 0 ? iso(appended[0]!.created_at!) : "";
  for (const row of appended) {
    const batch = byRun.get(row.run_id);
    if (!batch || !handoff.follows(row.run_id)) continue;
    const events = batch.events.map((event, i) => {
      const text = batch.dataJson[i];
      // The data as written, parsed again: the graph may change its object after emitting it.
      const data: unknown = text === undefined ? null : JSON.parse(text);
      return loggedEvent(row.run_id, row.base + i + 1, event.kind, data, createdAt);
    });
    handoff.deliver(row.run_id, events);
  }
}

/**
 * One attempt's events in the process's writer. `push` adds an event; `flush` + `settled` make
 * everything pushed so far durable (steering's drain needs the log up to date first); `take` stops
 * batching and returns what no flush has taken, for the settle's own transaction, after waiting
 * for the flushes that carry this run's earlier events (so the log stays in push order).
 */
export class RunEvents {
  private pending: PendingEvent[] = [];
  /** Each pending event's data as JSON (`JSON.stringify(event.data)`), serialised once. */
  private pendingJson: (string | undefined)[] = [];
  /** Flushes that took events of this run and have not finished. */
  private inFlight = 0;
  private idle: (() => void)[] = [];
  private failure: unknown;
  private requested: Promise<void> | undefined;
  private gone = false;
  private closed = false;

  constructor(
    private readonly writer: EventWriter,
    readonly lease: Lease,
    private readonly lost: () => void,
  ) {}

  /** `dataJson`: the event's data as JSON when the caller serialised it already (`assertStorable`). */
  push(event: PendingEvent, dataJson?: string): void {
    if (this.gone || this.closed) return;
    this.pending.push(event);
    this.pendingJson.push(dataJson ?? (JSON.stringify(event.data) as string | undefined));
    this.writer.enqueue(this);
  }

  /** Starts a flush now (of every run's waiting events); a failure surfaces from the next `settled()`. */
  flush(): void {
    if (this.pending.length > 0) this.requested = this.writer.flush();
  }

  /**
   * Waits for the flush `flush()` asked for and every flush that took this run's events so far;
   * throws if one failed or the lease was lost.
   */
  async settled(): Promise<void> {
    await this.requested;
    if (this.inFlight > 0) await new Promise<void>((resolve) => this.idle.push(resolve));
    if (this.failure !== undefined) throw this.failure;
  }

  /**
   * Stops batching and returns the events no flush has taken, for the final transaction, once the
   * flushes that took earlier ones have committed (so they keep their place before these).
   */
  async take(): Promise<PendingEvent[]> {
    this.closed = true;
    const rest = this.pending;
    this.pending = [];
    this.pendingJson = [];
    this.writer.release(this, rest.length);
    if (this.inFlight > 0) await new Promise<void>((resolve) => this.idle.push(resolve));
    if (this.failure !== undefined) throw this.failure;
    return rest;
  }

  /** @internal: the writer takes this run's waiting events into a flush. */
  takeForFlush(): { events: PendingEvent[]; dataJson: (string | undefined)[] } {
    const taken = { events: this.pending, dataJson: this.pendingJson };
    this.pending = [];
    this.pendingJson = [];
    if (taken.events.length > 0) this.inFlight++;
    return taken;
  }

  /** @internal */
  flushed(): void {
    this.done();
  }

  /** @internal: the lease was not held: nothing of this flush was written, and nothing more will be. */
  leaseLost(): void {
    this.failure ??= new EventFlushError("the lease was lost: the attempt's events were not written");
    this.gone = true;
    this.pending = [];
    this.pendingJson = [];
    this.done();
    this.lost();
  }

  /** @internal */
  failed(error: EventFlushError): void {
    this.failure ??= error;
    this.gone = true;
    this.pending = [];
    this.pendingJson = [];
    this.done();
    this.lost();
  }

  private done(): void {
    this.inFlight--;
    if (this.inFlight > 0) return;
    for (const resolve of this.idle.splice(0)) resolve();
  }
}
