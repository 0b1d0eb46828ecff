/**
 * What the steering gate and the settle of a trivial stateless run cost the database, per run, as
 * the tenant's queue grows (issue 22, items 3 and 6): the two statements a finishing attempt sends,
 * timed alone against a fresh schema on each driver, with the run's six events, in batches as the
 * worker's group commit sends them. Both run the statement Rudder runs (`closeAdmissions`,
 * `settleAttempts`) over runs set up as a worker holds them; `--pending` puts that many runs of
 * the same tenant in the queue first, and each measurement is made before and after an `analyze`
 * (a new database's first minutes against the rest; PGlite analyses every 15 s, `EmbeddedVacuum`).
 *
 *   node --import tsx bench/settle-cost.ts [--driver pglite|postgres|both] [--runs N] [--batch 1,8]
 *        [--pending 0,10000] [--database-url URL]
 *
 * On PostgreSQL a private database rudder_settle_<uuid> is made and dropped. Figures:
 * docs/benchmarks.md, "Issue 22, twelfth pass".
 */
import { parseArgs } from "node:util";
import type { Db } from "../packages/server/src/storage/db.ts";
import { createPgliteDb } from "../packages/server/src/storage/db.ts";
import type { PendingEvent } from "../packages/server/src/storage/events.ts";
import type { Lease } from "../packages/server/src/storage/lease.ts";
import { migrate } from "../packages/server/src/storage/migrate.ts";
import { settleAttempts } from "../packages/server/src/storage/runs.ts";
import { SteeringRepository } from "../packages/server/src/storage/steering.ts";
import { succeededSettle } from "../packages/server/test/support/runs.ts";
import {
  DEFAULT_DATABASE_URL,
  drivers,
  exitWithUsage,
  fixed,
  nonNegativeList,
  positive,
  positiveList,
  privateDatabase,
  table,
  type Driver,
} from "./common.ts";

const { values: args } = parseArgs({
  options: {
    driver: { type: "string", default: "both" },
    runs: { type: "string", default: "800" },
    batch: { type: "string", default: "1,8" },
    pending: { type: "string", default: "0,10000" },
    "database-url": { type: "string", default: DEFAULT_DATABASE_URL },
    help: { type: "boolean", default: false },
  },
});
exitWithUsage(
  args.help,
  "node --import tsx bench/settle-cost.ts [--driver pglite|postgres|both] [--runs N] [--batch 1,8] [--pending 0,10000] [--database-url URL]",
);
const RUNS = positive(args.runs, "--runs");
const BATCHES = positiveList(args.batch, "--batch");
const PENDING = nonNegativeList(args.pending, "--pending");

const TENANT = "bench";
const OWNER = "bench-worker";
const TASK = "7254bf31-974c-5b85-be95-a575ba04d830";
/** What an `echo` run's settle appends: its last events and its outcome's. */
const EVENTS: PendingEvent[] = [
  { kind: "values", data: { values: { message: "hi" } } },
  { kind: "node_started", data: { node: "echo", task_id: TASK, triggers: ["branch:to:echo"] } },
  { kind: "updates", data: { updates: { echo: { reply: "hi" } } } },
  { kind: "node_completed", data: { node: "echo", error: null, task_id: TASK, interrupts: [] } },
  { kind: "values", data: { values: { reply: "hi", message: "hi" } } },
  { kind: "run_succeeded", data: {} },
];
/** The settle the worker sends for it (a stateless run's thread fields match nothing). */
const SUCCEEDED = succeededSettle(EVENTS);

async function openDb(driver: Driver): Promise<{ db: Db; drop: () => Promise<void> }> {
  if (driver === "postgres") return privateDatabase(args["database-url"], "rudder_settle");
  const db = await createPgliteDb();
  return { db, drop: () => db.close() };
}

/** `count` stateless runs held by this bench's "worker", as a claim leaves them; their leases. */
async function runningRuns(db: Db, count: number): Promise<Lease[]> {
  const rows = await db.query<{ run_id: string }>(
    `insert into runs (run_id, tenant_id, assistant_id, graph_id, status, attempt, lease_owner, lease_expires_at, started_at)
     select gen_random_uuid(), $1, 'echo', 'echo', 'running', 1, $2, now() + interval '1 hour', now() from generate_series(1, $3)
     returning run_id::text as run_id`,
    [TENANT, OWNER, count],
  );
  return rows.map(({ run_id }) => ({ tenantId: TENANT, runId: run_id, attempt: 1, owner: OWNER }));
}

/** µs per run of the gate and of the settle, each sent in batches of `batch` runs. */
async function measure(db: Db, batch: number): Promise<{ gate: number; settle: number }> {
  const leases = await runningRuns(db, RUNS);
  const steering = new SteeringRepository(db);
  const timed = async (send: (leases: Lease[]) => Promise<unknown>) => {
    const started = performance.now();
    for (let at = 0; at < leases.length; at += batch) await send(leases.slice(at, at + batch));
    return ((performance.now() - started) * 1000) / leases.length;
  };
  const gate = await timed((some) => steering.closeAdmissions(some));
  const settle = await timed((some) =>
    settleAttempts(
      db,
      some.map((lease) => ({ lease, fields: SUCCEEDED })),
    ),
  );
  return { gate, settle };
}

const rows: (string | number)[][] = [];
for (const driver of drivers(args.driver)) {
  for (const pending of PENDING) {
    const { db, drop } = await openDb(driver);
    try {
      await migrate(db);
      if (pending > 0) {
        await db.query(
          `insert into runs (run_id, tenant_id, assistant_id, graph_id) select gen_random_uuid(), $1, 'echo', 'echo' from generate_series(1, $2)`,
          [TENANT, pending],
        );
      }
      // A warm-up, so that both drivers have made their plans (PostgreSQL: generic after five).
      await measure(db, 8);
      for (const analyzed of [false, true]) {
        if (analyzed) await db.exec("analyze");
        for (const batch of BATCHES) {
          const { gate, settle } = await measure(db, batch);
          rows.push([driver, pending, analyzed ? "yes" : "no", batch, fixed(gate, 0), fixed(settle, 0)]);
          console.log(
            `  ${driver} pending=${pending} analyzed=${analyzed} batch=${batch}: gate ${fixed(gate, 0)} µs/run, settle ${fixed(settle, 0)} µs/run`,
          );
        }
      }
    } finally {
      await drop();
    }
  }
}
console.log(
  `\n${table(["driver", "tenant's queue", "analyzed", "batch", "gate µs/run", "settle µs/run"], rows, ["l", "r", "l", "r", "r", "r"])}`,
);
