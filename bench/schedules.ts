/**
 * Schedule fire lag: N schedules (default 1,000) all due at the same second, one executor, and
 * how late their runs are. Two figures per run, both from the due time:
 *
 * - *claimed*: the run's `created_at`, the database's `now()` of the transaction that claimed the
 *   schedule and created the run (so it measures the wake-up and the queue of batches before it);
 * - *committed*: when the run was first visible to another connection (a poller counts the runs
 *   of that due time every 10 ms), i.e. when a worker could claim it.
 *
 * The executor wakes at the due time it read from the table (not a poll). Workers are off: runs
 * stay pending, so only firing is measured.
 *
 *   node --import tsx bench/schedules.ts [--driver pglite|postgres|both] [--schedules N] [--batch N] [--parallel N]
 *
 * PostgreSQL: RUDDER_TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test); a
 * private database is created and dropped.
 */
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { randomUUID } from "node:crypto";
import { createPgliteDb, createPostgresDb } from "../packages/server/src/storage/db.ts";
import type { TestDatabase } from "../packages/server/test/support/db.ts";
import { startTestServer } from "../packages/server/test/support/server.ts";
import { mapLimit } from "../packages/server/test/support/api.ts";

const { values } = parseArgs({
  options: {
    driver: { type: "string", default: "both" },
    schedules: { type: "string", default: "1000" },
    batch: { type: "string", default: "50" },
    parallel: { type: "string", default: "4" },
  },
});
const PARALLEL = Number(values.parallel);
const SCHEDULES = Number(values.schedules);
const BATCH = Number(values.batch);
const CONFIG = fileURLToPath(new URL("../packages/server/test/fixtures/testing.rudder.json", import.meta.url));

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
const summary = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return `p50 ${Math.round(percentile(sorted, 50))} ms, p99 ${Math.round(percentile(sorted, 99))} ms, max ${Math.round(sorted.at(-1)!)} ms`;
};

const DATABASE_URL = process.env.RUDDER_TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

/** A private database: PGlite in memory, or a fresh PostgreSQL database dropped afterwards. */
async function privateDatabase(driver: "pglite" | "postgres"): Promise<TestDatabase> {
  if (driver === "pglite") {
    const db = await createPgliteDb();
    return { url: undefined, db, drop: () => db.close() };
  }
  const name = `rudder_bench_${randomUUID().replaceAll("-", "")}`;
  const admin = createPostgresDb(DATABASE_URL, { max: 1 });
  await admin.query(`create database ${name}`);
  const url = new URL(DATABASE_URL);
  url.pathname = `/${name}`;
  const db = createPostgresDb(url.toString());
  return {
    url: url.toString(),
    db,
    async drop() {
      await db.close();
      await admin.query(`drop database if exists ${name} with (force)`);
      await admin.close();
    },
  };
}

async function bench(driver: "pglite" | "postgres"): Promise<void> {
  const database = await privateDatabase(driver);
  const server = await startTestServer({
    configFile: CONFIG,
    database,
    worker: false,
    scheduler: { batchSize: BATCH, parallelBatches: PARALLEL },
    config: { queuedRunQuota: 10 * SCHEDULES },
  });
  try {
    // A due second far enough ahead for every schedule to exist before it.
    const createdBy = Date.now() + 5_000 + SCHEDULES * 20;
    const due = new Date(Math.ceil(createdBy / 1000) * 1000);
    const cron = `${due.getUTCSeconds()} ${due.getUTCMinutes()} ${due.getUTCHours()} * * *`;
    await mapLimit(Array.from({ length: SCHEDULES }), 20, async (_, i) => {
      const created = await server.request("POST", "/v1/schedules", { body: { assistant_id: "echo", cron, input: { message: `s${i}` } } });
      if (created.status !== 201 || created.body.next_run_at !== due.toISOString())
        throw new Error(`schedule ${i}: ${JSON.stringify(created.body)}`);
    });
    if (Date.now() >= due.getTime()) throw new Error("creating the schedules took past their due time; lower --schedules");
    const scheduledAt = due.toISOString();
    const seen: number[] = [];
    while (seen.length < SCHEDULES) {
      const [row] = await database.db.query<{ n: number }>("select count(*)::int as n from runs where metadata->>'scheduled_at' = $1", [
        scheduledAt,
      ]);
      const at = Date.now();
      while (seen.length < (row?.n ?? 0)) seen.push(at - due.getTime());
      if (Date.now() > due.getTime() + 120_000) throw new Error(`only ${seen.length} of ${SCHEDULES} fired within 2 minutes`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const claimed = await database.db.query<{ ms: number }>(
      "select (extract(epoch from created_at - $1::text::timestamptz) * 1000)::float8 as ms from runs where metadata->>'scheduled_at' = $1::text",
      [scheduledAt],
    );
    console.log(
      `${driver}: ${SCHEDULES} schedules due at ${scheduledAt}, batches of ${BATCH}${driver === "postgres" ? `, ${PARALLEL} at once` : ""}`,
    );
    console.log(`  claimed   (due -> created_at):        ${summary(claimed.map((row) => row.ms))}`);
    console.log(`  committed (due -> visible to others): ${summary(seen)}`);
  } finally {
    await server.close();
  }
}

for (const driver of values.driver === "both" ? (["pglite", "postgres"] as const) : [values.driver as "pglite" | "postgres"])
  await bench(driver);
