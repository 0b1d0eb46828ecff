import type { Db } from "../storage/db.ts";
import { sweepExpiredItems } from "../storage/store.ts";

/** Rows one sweep statement deletes at most (a short transaction, however many expired). */
const SWEEP_BATCH = 1000;

/**
 * Deletes expired store items every `intervalMs`. Reads never wait for it (they skip expired rows
 * themselves); it only reclaims space. Safe with many processes: each statement skips rows
 * another sweeper holds.
 */
export class StoreSweeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly db: Db,
    private readonly intervalMs: number,
    private readonly onError: (error: unknown) => void,
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      this.running ??= this.sweep()
        .then(() => undefined, this.onError)
        .finally(() => {
          this.running = undefined;
        });
    }, this.intervalMs);
    this.timer.unref();
  }

  /** Deletes every item expired now, in batches; returns how many. */
  async sweep(): Promise<number> {
    let total = 0;
    for (;;) {
      const deleted = await sweepExpiredItems(this.db, SWEEP_BATCH);
      total += deleted;
      if (deleted < SWEEP_BATCH) return total;
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }
}
