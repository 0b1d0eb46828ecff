/** The worker's fencing token: its writes land only while it still holds this attempt's lease. */
export interface Lease {
  runId: string;
  attempt: number;
  owner: string;
}

/**
 * The fencing condition every write of a worker carries: the run is still held by this attempt of
 * this worker (`Lease`). Its three parameters start at `$first`: run id, attempt, lease owner. A
 * worker presumed dead that wakes up later matches nothing, so it writes nothing.
 */
export function leaseHeld(first: number, alias = ""): string {
  const t = alias ? `${alias}.` : "";
  return `${t}run_id = $${first} and ${t}attempt = $${first + 1} and ${t}lease_owner = $${first + 2}`;
}
