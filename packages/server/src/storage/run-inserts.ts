import type { Queryable } from "./db.ts";
import { distinctPrefixLength, GroupCommit } from "./group-commit.ts";
import { insertRuns, type ClaimedRun, type NewRun } from "./runs.ts";

/** The most runs one insert takes. */
const MAX_BATCH = 100;

/**
 * Group commit for creates that are their insert alone (`enqueue` and stateless runs, outside a
 * caller's transaction): the creates of one turn of the event loop, or that arrive while the
 * previous insert is in flight, go in one statement and one commit (`insertRuns`). A batch holds
 * at most one run per thread and per idempotency key, because the statement does not see its own
 * rows; the next batch takes the rest, in order. A run the batch did not insert is answered
 * `undefined`: the caller finds out why (`RunService.createIn`). The batch ranks a tenant's runs
 * against its quota together, so at the quota's edge it may stop one that alone would fit; the
 * caller sends such a run again, alone, when the quota has room.
 */
export class RunInserts {
  private readonly group: GroupCommit<NewRun, ClaimedRun | undefined>;

  constructor(db: Queryable, queuedRunQuota: number) {
    this.group = new GroupCommit(
      async (runs) => {
        const inserted = await insertRuns(db, runs, queuedRunQuota);
        return runs.map((run) => inserted.get(run.runId));
      },
      (waiting) => distinctPrefixLength(waiting, keysOf, MAX_BATCH),
    );
  }

  insert(run: NewRun): Promise<ClaimedRun | undefined> {
    return this.group.submit(run);
  }
}

/** A run's rows the statement must not see twice: its thread's queue and its idempotency key. */
function keysOf(run: NewRun): string[] {
  return [
    ...(run.threadId === null ? [] : [`thread ${run.tenantId} ${run.threadId}`]),
    ...(run.idempotencyKey === undefined ? [] : [`key ${run.tenantId} ${run.idempotencyKey}`]),
  ];
}
