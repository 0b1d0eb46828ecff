import type { StopReason } from "../domain/run-lifecycle.ts";
import type { UsageMeter } from "../domain/budget.ts";
import type { Notifier } from "../notify/notifier.ts";
import type { Db } from "../storage/db.ts";
import type { Lease } from "../storage/lease.ts";
import { heartbeatLeases } from "../storage/runs.ts";

interface Held {
  readonly lease: Lease;
  readonly meter: UsageMeter;
  readonly stop: (reason: StopReason) => void;
}

/** Leases per heartbeat statement: a bound on its parameters, not a limit on how many a worker holds. */
const BATCH = 1000;

/**
 * The leases of one worker's running attempts, kept together: every `heartbeatMs` one statement
 * extends them all and saves each run's usage (a thousand waiting runs cost one statement per
 * interval, not a thousand), and a `run_changed` notice for a held run re-checks it at once,
 * batched with the other notices of the same moment (a burst of cancels is a few statements).
 * A run found cancelling stops with "cancelled"; one whose lease no longer holds stops with
 * "lease_lost". A failed heartbeat stops nothing: the next one tries again, within the lease.
 */
export class LeaseKeeper {
  private readonly held = new Map<string, Held>();
  private readonly noticed = new Set<string>();
  private noticeCheck: NodeJS.Immediate | undefined;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;

  constructor(
    private readonly deps: { readonly db: Db; readonly notifier: Notifier },
    private readonly owner: string,
    private readonly options: { readonly leaseMs: number; readonly heartbeatMs: number },
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.beat([...this.held.keys()]), this.options.heartbeatMs);
    this.unsubscribe = this.deps.notifier.subscribe((notice) => {
      if (notice.topic !== "run_changed" || !this.held.has(notice.runId)) return;
      this.noticed.add(notice.runId);
      this.noticeCheck ??= setImmediate(() => {
        this.noticeCheck = undefined;
        const runIds = [...this.noticed];
        this.noticed.clear();
        void this.beat(runIds);
      });
    });
  }

  /** Keeps `lease` until the returned function is called (the attempt ended). */
  hold(lease: Lease, meter: UsageMeter, stop: (reason: StopReason) => void): () => void {
    this.held.set(lease.runId, { lease, meter, stop });
    return () => {
      if (this.held.get(lease.runId)?.lease === lease) this.held.delete(lease.runId);
    };
  }

  /** Held leases (attempts running in this worker). */
  get size(): number {
    return this.held.size;
  }

  stop(): void {
    clearInterval(this.timer);
    if (this.noticeCheck) clearImmediate(this.noticeCheck);
    this.noticeCheck = undefined;
    this.unsubscribe?.();
  }

  private async beat(runIds: readonly string[]): Promise<void> {
    const batch = runIds.flatMap((runId) => {
      const held = this.held.get(runId);
      return held ? [held] : [];
    });
    for (let start = 0; start < batch.length; start += BATCH) {
      const chunk = batch.slice(start, start + BATCH);
      const statuses = await heartbeatLeases(
        // Its own connection where there is a pool: queued behind the pool's work, it let leases expire.
        this.deps.db.control ?? this.deps.db,
        this.owner,
        chunk.map(({ lease, meter }) => ({ tenantId: lease.tenantId, runId: lease.runId, attempt: lease.attempt, usage: meter.usage })),
        this.options.leaseMs,
      ).catch(() => undefined);
      if (!statuses) continue;
      for (const held of chunk) {
        // Released meanwhile (the attempt ended while the statement ran): nothing to stop.
        if (this.held.get(held.lease.runId) !== held) continue;
        const status = statuses.get(held.lease.runId);
        if (status === undefined) held.stop("lease_lost");
        else if (status === "cancelling") held.stop("cancelled");
      }
    }
  }
}
