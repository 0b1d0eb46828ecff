import type { RunEvent } from "@rudder/api";
import { isSettled, type RunStatus } from "../domain/runs.ts";
import type { Notice, Notifier } from "../notify/notifier.ts";
import type { Db } from "../storage/db.ts";
import { readEventsAfter } from "../storage/events.ts";
import type { ClaimedRun } from "../storage/runs.ts";
import type { EventHandoff } from "../worker/event-writer.ts";
import type { SettleHandoff } from "../worker/worker.ts";

/** Events read per run per statement. */
const PAGE = 500;
/** Events a run's tail keeps for its readers; one that falls further behind reads the log itself. */
const MAX_CACHED = 2000;
/** Runs this process created that it remembers as unsettled; beyond this the oldest are forgotten (and read). */
const MAX_CREATED = 10_000;

/**
 * The streams of one process share their reads of the event log. Each followed run has one tail
 * (however many streams follow it), which holds the events its slowest reader has not taken yet.
 * One notifier subscription serves every tail: a notice for a run (`run_events`, or a worker's
 * `events_flushed` with the run's new last sequence) marks its tail due, and one statement reads
 * the new events of every due run (`readEventsAfter`), then wakes their readers, who take the
 * events from memory. A tail skips the read when it already holds the notice's sequence: a worker
 * in this process (`rudder dev`) hands its committed events over (`deliver`) before its notice.
 *
 * The log stays the truth: tails read only committed rows, in sequence order (a run's sequences
 * commit in order, see storage/events.ts), and a reader that joins behind a tail's memory (a
 * replay from Last-Event-ID) reads the log itself until it catches up.
 *
 * Waiters for a run's end (a join, a stream) register too (`awaitEnd`): a worker of this process
 * that settles the run hands over the row its settle committed (`settled`) before its notice, so
 * the waiter answers without reading the run again.
 *
 * The runs this process created and has not heard settle are remembered with their tenant
 * (`created`), so a join or stream of such a run, the common case (create, then join), neither
 * reads it to check its tenant nor to see whether it ended: it ended only if a settle was handed
 * over or its notice heard, and both forget it. A notice lost meanwhile leaves it remembered;
 * the waiter's re-check reads it then, as for any lost notice.
 */
export class EventFeed implements EventHandoff, SettleHandoff {
  private readonly tails = new Map<string, RunTail>();
  private readonly ends = new Map<string, { waiters: number; run: ClaimedRun | undefined }>();
  /** Runs created here and not heard settled: their tenant, oldest first. */
  private readonly unsettled = new Map<string, string>();
  private due = new Set<RunTail>();
  private next: { promise: Promise<void>; resolve: () => void; reject: (error: unknown) => void } | undefined;
  private reading: Promise<void> = Promise.resolve();
  private readonly unsubscribe: () => void;

  constructor(
    private readonly db: Db,
    notifier: Notifier,
  ) {
    this.unsubscribe = notifier.subscribe((notice) => this.heard(notice));
  }

  close(): void {
    this.unsubscribe();
  }

  /**
   * Starts following a run from `after`; `detach` when done. Only for a run the caller has checked
   * is the tenant's: a tail is shared by every stream of the run in this process.
   */
  attach(tenantId: string, runId: string, after: number): TailReader {
    let tail = this.tails.get(runId);
    if (!tail) this.tails.set(runId, (tail = new RunTail(this, tenantId, runId, after)));
    return tail.attach(after);
  }

  /** @internal */
  release(tail: RunTail): void {
    if (this.tails.get(tail.runId) === tail) this.tails.delete(tail.runId);
    this.due.delete(tail);
  }

  follows(runId: string): boolean {
    return this.tails.has(runId);
  }

  deliver(runId: string, events: readonly RunEvent[]): void {
    this.tails.get(runId)?.deliver(events);
  }

  /**
   * Waits for a run's end in this process; `detach` when done. `settled()` is the run as the last
   * settle of a worker of this process committed it, if one did since. Only for a run the caller
   * has checked is the tenant's.
   */
  awaitEnd(runId: string): RunEndWaiter {
    let end = this.ends.get(runId);
    if (!end) this.ends.set(runId, (end = { waiters: 0, run: undefined }));
    const waited = end;
    waited.waiters++;
    let detached = false;
    return {
      settled: () => waited.run,
      detach: () => {
        if (detached) return;
        detached = true;
        if (--waited.waiters === 0 && this.ends.get(runId) === waited) this.ends.delete(runId);
      },
    };
  }

  awaitsEnd(runId: string): boolean {
    return this.ends.has(runId);
  }

  settled(run: ClaimedRun): void {
    if (isSettled(run.status)) this.unsettled.delete(run.run_id);
    const end = this.ends.get(run.run_id);
    if (end) end.run = run;
  }

  /** A run this process created, once committed: remembered as the tenant's and unsettled until it settles. */
  created(tenantId: string, runId: string): void {
    this.unsettled.set(runId, tenantId);
    if (this.unsettled.size > MAX_CREATED) this.unsettled.delete(this.unsettled.keys().next().value!);
  }

  /**
   * Whether the run is the tenant's and has not settled, as far as this process knows without
   * reading it: it created the run and has heard no settle of it since. Ask only once subscribed
   * to the run's notices (and its `awaitEnd`), so that a settle after the answer still wakes you.
   */
  knownUnsettled(tenantId: string, runId: string): boolean {
    return this.unsettled.get(runId) === tenantId;
  }

  private heard(notice: Notice): void {
    switch (notice.topic) {
      case "run_events":
        this.hint(notice.runId, Number.POSITIVE_INFINITY);
        break;
      case "events_flushed":
        for (const [runId, sequence] of notice.runs) this.hint(runId, sequence);
        break;
      case "run_changed":
        if (mayHaveSettled(notice)) {
          this.unsettled.delete(notice.runId);
          this.tails.get(notice.runId)?.changed();
        }
        break;
      default:
    }
  }

  private hint(runId: string, sequence: number): void {
    const tail = this.tails.get(runId);
    // A failed read is retried by the readers' own re-checks, which also surface the error.
    if (tail && tail.head < sequence) this.refresh(tail).catch(() => {});
  }

  /**
   * Reads the tail's new events, batched with every other tail due: resolves once a read that
   * started after this call has finished (reads are chained, one at a time).
   */
  refresh(tail: RunTail): Promise<void> {
    this.due.add(tail);
    if (!this.next) {
      let resolve!: () => void;
      let reject!: (error: unknown) => void;
      const promise = new Promise<void>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      this.next = { promise, resolve, reject };
      this.reading = this.reading.then(() => this.readDue());
    }
    return this.next.promise;
  }

  private async readDue(): Promise<void> {
    const batch = this.next!;
    this.next = undefined;
    const tails = [...this.due];
    this.due = new Set();
    try {
      const events = await readEventsAfter(
        this.db,
        tails.map((tail) => ({ tenantId: tail.tenantId, runId: tail.runId, after: tail.head })),
        PAGE,
      );
      const byRun = new Map<string, RunEvent[]>();
      for (const event of events) {
        const found = byRun.get(event.run_id);
        if (found) found.push(event);
        else byRun.set(event.run_id, [event]);
      }
      for (const tail of tails) {
        const found = byRun.get(tail.runId) ?? [];
        // A full page: there may be more; read on (the callers' promise waits for this read only).
        tail.more = found.length === PAGE;
        tail.deliver(found);
        if (tail.more) this.refresh(tail).catch(() => {});
      }
      batch.resolve();
    } catch (error) {
      batch.reject(error);
    }
  }
}

/**
 * Whether a run's change may have settled it (terminal or paused), so that a follower waiting for
 * its end must read it: not when the notice names a status that is neither (a cancel of a running
 * run leaves it `cancelling`; its settle sends its own notice).
 */
export function mayHaveSettled(notice: { readonly status?: RunStatus }): boolean {
  return notice.status === undefined || isSettled(notice.status);
}

/** A waiter for a run's end (`EventFeed.awaitEnd`). */
export interface RunEndWaiter {
  /** The run as a settle of this process's worker committed it, if one did while waiting. */
  settled(): ClaimedRun | undefined;
  detach(): void;
}

/** One stream's view of a run's tail. */
export interface TailReader {
  /** Events after `cursor` held in memory (up to a page); undefined when the cursor is behind what is held. */
  since(cursor: number): RunEvent[] | undefined;
  /** Reads the log now (with the other due runs); resolves once a read started after this call finished. */
  refresh(): Promise<void>;
  /** Whether the tail's last read filled its page (one read takes at most a page): the log may hold more. */
  readonly more: boolean;
  /** Resolves "notice" once something happened since the last `take`, or "recheck" after `ms`, or on abort. */
  wait(ms: number, signal?: AbortSignal): Promise<"notice" | "recheck">;
  /** Clears the wake-up flag: call before looking at `since` and `changes`. */
  take(): void;
  /** Count of `run_changed` notices heard for the run. */
  readonly changes: number;
  /** Where this reader is, so the tail can drop what every reader has taken. */
  moved(cursor: number): void;
  detach(): void;
}

class RunTail {
  /** Events (sequence > base), ascending. */
  private cache: RunEvent[] = [];
  private base: number;
  /** The highest sequence read. */
  head: number;
  /** Whether the last read of the log filled its page: the log may hold events after `head`. */
  more = false;
  changes = 0;
  private readonly readers = new Set<Reader>();

  constructor(
    private readonly feed: EventFeed,
    readonly tenantId: string,
    readonly runId: string,
    after: number,
  ) {
    this.base = after;
    this.head = after;
  }

  attach(after: number): TailReader {
    const reader = new Reader(this, after);
    this.readers.add(reader);
    return reader;
  }

  detach(reader: Reader): void {
    this.readers.delete(reader);
    if (this.readers.size === 0) this.feed.release(this);
    else this.trim();
  }

  refresh(): Promise<void> {
    return this.feed.refresh(this);
  }

  /** Committed events, in order: appended when they continue what is held, else a read fills the gap. */
  deliver(events: readonly RunEvent[]): void {
    const fresh = events.filter((event) => event.sequence > this.head);
    if (fresh.length === 0) return;
    if (fresh[0]!.sequence !== this.head + 1) {
      // Something committed in between that this process did not see yet: read it from the log.
      this.refresh().catch(() => {});
      return;
    }
    for (const event of fresh) this.cache.push(event);
    this.head = fresh.at(-1)!.sequence;
    this.trim();
    this.wake();
  }

  changed(): void {
    this.changes++;
    this.wake();
  }

  since(cursor: number): RunEvent[] | undefined {
    if (cursor < this.base) return undefined;
    let low = 0;
    let high = this.cache.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (this.cache[middle]!.sequence <= cursor) low = middle + 1;
      else high = middle;
    }
    return this.cache.slice(low, low + PAGE);
  }

  /** Drops what every reader has taken, and beyond the cap what the slowest have not (they read the log). */
  trim(): void {
    let slowest = this.head;
    for (const reader of this.readers) slowest = Math.min(slowest, reader.cursor);
    let drop = 0;
    while (drop < this.cache.length && this.cache[drop]!.sequence <= slowest) drop++;
    drop = Math.max(drop, this.cache.length - MAX_CACHED);
    if (drop <= 0) return;
    this.base = this.cache[drop - 1]!.sequence;
    this.cache = this.cache.slice(drop);
  }

  private wake(): void {
    for (const reader of this.readers) reader.wake();
  }
}

class Reader implements TailReader {
  private woken = false;
  private waiting: ((reason: "notice" | "recheck") => void) | undefined;
  /**
   * One re-check timer and one abort listener for the reader's life, re-armed per wait: at token
   * rate a reader waits once per event, and a new timer and listener each time showed in profiles.
   */
  private timer: NodeJS.Timeout | undefined;
  private timerMs = 0;
  private watched: AbortSignal | undefined;
  private readonly onAbort = () => this.waiting?.("notice");

  constructor(
    private readonly tail: RunTail,
    public cursor: number,
  ) {}

  get changes(): number {
    return this.tail.changes;
  }

  get more(): boolean {
    return this.tail.more;
  }

  since(cursor: number): RunEvent[] | undefined {
    return this.tail.since(cursor);
  }

  refresh(): Promise<void> {
    return this.tail.refresh();
  }

  moved(cursor: number): void {
    this.cursor = cursor;
  }

  take(): void {
    this.woken = false;
  }

  wake(): void {
    this.woken = true;
    this.waiting?.("notice");
  }

  async wait(ms: number, signal?: AbortSignal): Promise<"notice" | "recheck"> {
    if (this.woken || signal?.aborted) return "notice";
    this.watch(signal);
    return new Promise((resolve) => {
      this.waiting = (reason) => {
        this.waiting = undefined;
        resolve(reason);
      };
      if (this.timer && this.timerMs === ms) this.timer.refresh();
      else {
        clearTimeout(this.timer);
        this.timerMs = ms;
        this.timer = setTimeout(() => this.waiting?.("recheck"), ms);
      }
    });
  }

  private watch(signal: AbortSignal | undefined): void {
    if (signal === this.watched) return;
    this.watched?.removeEventListener("abort", this.onAbort);
    this.watched = signal;
    signal?.addEventListener("abort", this.onAbort);
  }

  detach(): void {
    clearTimeout(this.timer);
    this.watch(undefined);
    this.waiting?.("notice");
    this.tail.detach(this);
  }
}
