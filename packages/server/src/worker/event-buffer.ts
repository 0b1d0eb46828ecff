import type { PendingEvent } from "../storage/events.ts";

/**
 * Batches a run's events so a chatty graph (a token per `messages` event) costs one commit per
 * batch, not per event. Writes are chained, so batches land in order; `take()` hands whatever is
 * left to the final transaction, which writes it together with the run's last state.
 */
export class EventBuffer {
  private pending: PendingEvent[] = [];
  private writing: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private failure: unknown;

  constructor(
    private readonly write: (events: PendingEvent[]) => Promise<void>,
    private readonly delayMs: number,
    private readonly maxBatch: number,
  ) {}

  push(event: PendingEvent): void {
    this.pending.push(event);
    if (this.pending.length >= this.maxBatch) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), this.delayMs);
  }

  /** Starts writing what is buffered now; a failure surfaces from the next `settled()`. */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending.length === 0) return;
    const batch = this.pending;
    this.pending = [];
    this.writing = this.writing
      .then(() => this.write(batch))
      .catch((error: unknown) => {
        this.failure ??= error;
      });
  }

  /** Waits for every batch started so far; throws the first write failure. */
  async settled(): Promise<void> {
    await this.writing;
    if (this.failure !== undefined) throw this.failure;
  }

  /** Stops batching and returns the events not yet written, for the final transaction. */
  async take(): Promise<PendingEvent[]> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.settled();
    const rest = this.pending;
    this.pending = [];
    return rest;
  }
}
