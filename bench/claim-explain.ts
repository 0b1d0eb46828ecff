/**
 * The claim's plan under a standing load (issue 22 item 6), on PostgreSQL: `--busy` threads each
 * with a running run (its lease far from expiry) and `--behind` pending runs queued behind it, then
 * `--free` pending runs on idle threads, created last. Every run is created through the storage
 * functions Rudder uses (`insertRun`, `claimRuns`), so whatever they maintain for the claim is
 * maintained here too. It prints `EXPLAIN (ANALYZE, BUFFERS)` of the claim, twice: with nothing
 * claimable (`--free 0` part: each idle worker's poll) and with the free runs to find. Each
 * explain runs in a transaction that rolls back.
 *
 *   RUDDER_BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/claim-explain.ts
 *   [--busy 1000] [--behind 10] [--free 10] [--repeat 5] [--freed] [--skip-analyze]
 *
 *   --freed          then the busy threads' running runs end at once and each thread's next run
 *                    becomes claimable (a cancel storm: the standing-load bench's cancel-all), and
 *                    the claim is explained a third time, with those 1,000 heads to choose from
 *   --skip-analyze   never `analyze`: the plans of a database autovacuum has not reached yet (a new
 *                    deployment's first minute under load; docs/database.md, "The queue")
 *
 * It creates and drops its own database. Besides the plans it prints the median execution time of
 * `--repeat` explains of each case, a timing that moves with the machine's load.
 */
import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import type { Db } from "../packages/server/src/storage/db.ts";
import { migrate } from "../packages/server/src/storage/migrate.ts";
import { claimRuns, insertRun, updateRunStatus, type NewRun } from "../packages/server/src/storage/runs.ts";
import { insertThread } from "../packages/server/src/storage/threads.ts";
import { stateless } from "../packages/server/test/support/runs.ts";
import { explainRolledBack, firstStatement, privateDatabase } from "./common.ts";

const { values: args } = parseArgs({
  options: {
    busy: { type: "string", default: "1000" },
    behind: { type: "string", default: "10" },
    free: { type: "string", default: "10" },
    repeat: { type: "string", default: "5" },
    freed: { type: "boolean", default: false },
    "skip-analyze": { type: "boolean", default: false },
  },
});
const [busy, behind, free, repeat] = [args.busy, args.behind, args.free, args.repeat].map(Number) as [number, number, number, number];

const base = process.env.RUDDER_BENCH_DATABASE_URL ?? process.env.RUDDER_TEST_DATABASE_URL;
if (!base) {
  console.log("claim-explain: set RUDDER_BENCH_DATABASE_URL (a PostgreSQL server) to run");
  process.exit(0);
}

const { db, drop } = await privateDatabase(base, "rudder_claim");
const TENANT = "tenant-claim";
const claim = (on: Db) => claimRuns(on, "explain", 3_600_000, 1, { to: "running", thread: "busy" });

try {
  await migrate(db);
  const started = performance.now();
  const busyThreads = await threads(busy);
  for (const thread of busyThreads) await insertRun(db, newRun(thread), Number.MAX_SAFE_INTEGER);
  // Each thread's first run becomes its running run, with an hour-long lease.
  while ((await claimRuns(db, "holder", 3_600_000, 100, { to: "running", thread: "busy" })).length);
  for (let round = 0; round < behind; round++)
    for (const thread of busyThreads) await insertRun(db, newRun(thread), Number.MAX_SAFE_INTEGER);
  await analyze();
  console.log(`filled: ${busy} busy threads × ${behind} queued behind each, in ${Math.round(performance.now() - started)} ms`);
  await explainClaim("nothing claimable (an idle worker's poll)");
  for (const thread of await threads(free)) await insertRun(db, newRun(thread), Number.MAX_SAFE_INTEGER);
  await analyze();
  await explainClaim(`${free} claimable runs on idle threads, created last`);
  if (args.freed) {
    // Each running run cancelled as Rudder's storage does it (the thread's next run released), all at once.
    const running = await db.query<{ run_id: string }>(
      "select run_id::text as run_id from runs where tenant_id = $1 and status = 'running'",
      [TENANT],
    );
    for (const { run_id: runId } of running)
      await updateRunStatus(db, TENANT, runId, { status: "cancelled", finishes: true, error: null, freesThread: true });
    await analyze();
    await explainClaim(`${busy} threads freed at once, each with its next run claimable`);
  }
} finally {
  await drop();
}

async function analyze(): Promise<void> {
  if (!args["skip-analyze"]) await db.query("analyze");
}

async function threads(count: number): Promise<string[]> {
  const ids = Array.from({ length: count }, () => randomUUID());
  for (const id of ids) await insertThread(db, TENANT, id, {});
  return ids;
}

function newRun(threadId: string): NewRun {
  return { ...stateless(TENANT, null), threadId, requestHash: "claim-explain" };
}

/** Prints the first plan and the median execution time over `repeat` explains. */
async function explainClaim(label: string): Promise<void> {
  const statement = await firstStatement(db, claim);
  const plans: string[] = [];
  for (let i = 0; i < repeat; i++) plans.push(await explainRolledBack(db, "analyze, buffers, costs off", statement.sql, statement.params));
  const times = plans.map((plan) => Number(/Execution Time: ([\d.]+) ms/.exec(plan)?.[1] ?? NaN)).sort((a, b) => a - b);
  console.log(`\n## claim, ${label}: median execution ${times[Math.floor(times.length / 2)]} ms over ${repeat}`);
  console.log(plans[0]);
}
