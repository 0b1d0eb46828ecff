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
