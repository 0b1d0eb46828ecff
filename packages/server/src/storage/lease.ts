/** The worker's fencing token: its writes land only while it still holds this attempt's lease. */
export interface Lease {
  runId: string;
  attempt: number;
  owner: string;
}
