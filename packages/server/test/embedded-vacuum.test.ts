import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { EmbeddedVacuum, type VacuumRound } from "../src/storage/embedded-vacuum.ts";
import { createTestDatabase, type TestDatabase } from "./support/db.ts";

/** What only a vacuum and an analyze write: pages marked all-visible, the row estimate, column statistics. */
async function maintenance(db: TestDatabase["db"], table: string) {
  const [row] = await db.query<{ all_visible: number; estimate: number; statistics: number }>(
    `select c.relallvisible::int as all_visible, c.reltuples::float8 as estimate,
            (select count(*)::int from pg_stats s where s.schemaname = current_schema() and s.tablename = c.relname) as statistics
       from pg_class c where c.relname = $1 and c.relnamespace = current_schema()::regnamespace`,
    [table],
  );
  return row!;
}

describe("the embedded database's vacuum (PGlite has no autovacuum)", () => {
  let database: TestDatabase;
  before(async () => {
    database = await createTestDatabase();
  });
  after(() => database.drop());

  it("vacuums and analyses every table of the schema, one statement each", async () => {
    const { db } = database;
    await db.query(`insert into threads (tenant_id, thread_id) select 'vacuum-tenant', gen_random_uuid() from generate_series(1, 500)`);
    for (let i = 0; i < 3; i++) await db.query(`update threads set updated_at = now() where tenant_id = 'vacuum-tenant'`);
    const before = await maintenance(db, "threads");
    assert.equal(before.statistics, 0, "no statistics before the first analyze");

    const round = await new EmbeddedVacuum(db, 60_000, { done: () => {}, failed: () => {} }).round();

    const vacuumed = await maintenance(db, "threads");
    assert.ok(vacuumed.all_visible > 0, "the vacuum marked the table's pages all-visible");
    assert.equal(vacuumed.estimate, 500, "the analyze counted the live rows");
    assert.ok(vacuumed.statistics > 0, "the analyze wrote column statistics");
    const tables = Object.keys(round.tables);
    for (const table of ["runs", "threads", "run_events", "steering_events", "checkpoints", "checkpoint_writes"])
      assert.ok(
        tables.some((name) => name.endsWith(`.${table}`)),
        `${table} is in the round (${tables.join(", ")})`,
      );
  });

  it("runs on its timer, reports each round, and stops after the round in flight", async () => {
    const rounds: VacuumRound[] = [];
    let reported!: () => void;
    const first = new Promise<void>((resolve) => (reported = resolve));
    const failures: unknown[] = [];
    const vacuum = new EmbeddedVacuum(database.db, 10, {
      done: (round) => {
        rounds.push(round);
        reported();
      },
      failed: (error) => failures.push(error),
    });
    // The vacuum's timer does not keep a process alive (a server's listener does): this test holds
    // the event loop open meanwhile, or, with PGlite on its worker thread (unref'd while idle),
    // nothing would.
    const alive = setInterval(() => {}, 1000);
    vacuum.start();
    await first.finally(() => clearInterval(alive));
    await vacuum.stop();
    const count = rounds.length;
    // A stopped vacuum starts no round: the database can be closed now.
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(rounds.length, count);
    assert.deepEqual(failures, []);
    assert.ok(rounds[0]!.totalMs >= 0 && Object.keys(rounds[0]!.tables).length > 0);
  });
});
