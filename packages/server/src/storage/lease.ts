import type { Queryable } from "./db.ts";

/** The worker's fencing token: its writes land only while it still holds this attempt's lease. */
export interface Lease {
  tenantId: string;
  runId: string;
  attempt: number;
  owner: string;
}

/**
 * The fencing condition every write of a worker carries: the run is still held by this attempt of
 * this worker (`Lease`). Its four parameters start at `$first`, as `leaseParams` lists them: tenant,
 * run id, attempt, lease owner. A worker presumed dead that wakes up later matches nothing, so it
 * writes nothing.
 */
export function leaseHeld(first: number, alias = ""): string {
  const t = alias ? `${alias}.` : "";
  return `${t}tenant_id = $${first} and ${t}run_id = $${first + 1} and ${t}attempt = $${first + 2} and ${t}lease_owner = $${first + 3}`;
}

/** The parameters of `leaseHeld`, in its order. */
export function leaseParams(lease: Lease): [tenantId: string, runId: string, attempt: number, owner: string] {
  return [lease.tenantId, lease.runId, lease.attempt, lease.owner];
}

/**
 * The CTE `held`: the runs of the CTE `batch` (columns tenant_id, run_id, attempt, owner) whose
 * lease still holds, each found by one primary-key probe and locked, in the batch's order (a
 * lateral subquery that locks is never flattened into a join, so the planner cannot choose a scan
 * of every run instead). Callers send their batch in run id order (`byLeaseRunId`): every
 * statement that locks several runs locks them in that order, so two cannot deadlock.
 */
export const HELD_LEASES = `held as materialized (
       select h.tenant_id, h.run_id from batch b cross join lateral (
         select r.tenant_id, r.run_id from runs r
          where r.tenant_id = b.tenant_id and r.run_id = b.run_id and r.attempt = b.attempt and r.lease_owner = b.owner
            for update
       ) h
     )`;

/**
 * What an update of the held runs joins (`update runs r set … from ${HELD_RUNS}`). Joined with
 * the batch as well, the held runs are found by primary-key probes; joined alone, the planner
 * hashed them against a scan of `runs` (bench/explain.ts prints the plans).
 */
export const HELD_RUNS = `held h, batch b
        where r.tenant_id = h.tenant_id and r.run_id = h.run_id and b.tenant_id = h.tenant_id and b.run_id = h.run_id`;

/** Run id order of leases (lowercase UUID text sorts as PostgreSQL sorts the uuid). */
export const byLeaseRunId = (a: Lease, b: Lease): number => (a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0);

/**
 * Ends every lease now, so the runs they hold are claimable at once (a retry; their checkpoints
 * keep their progress). Only for a database this process alone uses, where any lease found at
 * start belongs to a process that is gone. Returns how many leases it ended. A sweep over every
 * tenant (docs/architecture.md, "Distributing by tenant").
 */
export async function expireLeases(db: Queryable): Promise<number> {
  const rows = await db.query<{ run_id: string }>(
    `update runs set lease_expires_at = now()
      where status in ('running', 'cancelling') and lease_expires_at > now()
      returning run_id`,
  );
  return rows.length;
}
