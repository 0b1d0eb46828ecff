import type { Queryable } from "./db.ts";

/**
 * The queue at a glance, for metrics: pending runs, those past their retry backoff, and how long
 * the longest-waiting of those has been claimable. One statement over the pending rows (the
 * `runs_tenant_pending` partial index holds exactly them), so it costs in proportion to the queue,
 * not to the runs table. Ready and the oldest age leave out runs blocked behind their thread's
 * active run: those wait for that run, not for a worker, and a long run must not read as a stuck
 * queue; they are counted apart (`blocked`).
 */
export async function readQueueStats(
  db: Queryable,
): Promise<{ pending: number; ready: number; blocked: number; oldestReadySeconds: number }> {
  const [row] = await db.query<{ pending: number; ready: number; blocked: number; oldest: number | null }>(
    `select count(*)::int as pending,
            count(*) filter (where available_at <= now() and not blocked)::int as ready,
            count(*) filter (where blocked)::int as blocked,
            extract(epoch from (now() - min(available_at) filter (where available_at <= now() and not blocked)))::float8 as oldest
       from runs where status = 'pending'`,
  );
  return {
    pending: row?.pending ?? 0,
    ready: row?.ready ?? 0,
    blocked: row?.blocked ?? 0,
    oldestReadySeconds: Math.max(0, row?.oldest ?? 0),
  };
}
