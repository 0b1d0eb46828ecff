import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createPostgresDb } from "../src/storage/db.ts";
import { loadMigrations, migrate, MigrationError, migrationStatus } from "../src/storage/migrate.ts";
import { runRudder } from "./support/cli.ts";
import { createTestDatabase, TEST_DRIVER } from "./support/db.ts";

const FIXTURE_CHAIN = loadMigrations(fileURLToPath(new URL("./fixtures/migrations/", import.meta.url)));

describe("migrations", () => {
  test("the shipped chain is numbered 1..n without gaps", () => {
    const ids = loadMigrations().map((m) => m.id);
    assert.deepEqual(
      ids,
      ids.map((_, i) => i + 1),
    );
  });

  test("a fresh database migrates to the latest revision, once", async () => {
    const { db, drop } = await createTestDatabase({ migrated: false });
    try {
      const before = await migrationStatus(db);
      assert.equal(before.current, 0);
      assert.equal(before.pending.length, loadMigrations().length);
      assert.deepEqual(
        await migrate(db),
        loadMigrations().map((m) => m.id),
      );
      const after = await migrationStatus(db);
      assert.deepEqual([after.current, after.pending.length], [after.latest, 0]);
      assert.deepEqual(await migrate(db), [], "running it again applies nothing");
    } finally {
      await drop();
    }
  });

  test("--to stops at a revision; going below the current one is refused", async () => {
    const { db, drop } = await createTestDatabase({ migrated: false });
    try {
      assert.deepEqual(await migrate(db, { chain: FIXTURE_CHAIN, to: 2 }), [1, 2]);
      assert.equal((await migrationStatus(db, FIXTURE_CHAIN)).current, 2);
      await assert.rejects(migrate(db, { chain: FIXTURE_CHAIN, to: 1 }), (error: unknown) => {
        assert.ok(error instanceof MigrationError);
        assert.match(error.message, /revision 2.*down to 1.*forward-only/);
        return true;
      });
      await assert.rejects(migrate(db, { chain: FIXTURE_CHAIN, to: 9 }), /unknown migration revision 9/);
      assert.deepEqual(await migrate(db, { chain: FIXTURE_CHAIN }), [3]);
      const [row] = await db.query<{ n: number }>("select count(*)::int as n from fixture_two");
      assert.equal(row!.n, 1);
    } finally {
      await drop();
    }
  });

  test("a failing migration rolls back whole and is not recorded", async () => {
    const { db, drop } = await createTestDatabase({ migrated: false });
    try {
      const broken = [
        ...FIXTURE_CHAIN.slice(0, 1),
        { id: 2, name: "broken", sql: "create table half (id int); select no_such_function();" },
      ];
      await assert.rejects(migrate(db, { chain: broken }));
      assert.equal((await migrationStatus(db, broken)).current, 1);
      const [row] = await db.query<{ n: number }>("select count(*)::int as n from information_schema.tables where table_name = 'half'");
      assert.equal(row!.n, 0);
    } finally {
      await drop();
    }
  });

  test("twenty migrators at once apply each migration exactly once", async () => {
    const { db, url, drop } = await createTestDatabase({ migrated: false });
    // On PostgreSQL each migrator has its own connection; PGlite has one connection to share.
    const migrators = Array.from({ length: 20 }, () => (url ? createPostgresDb(url, { max: 1 }) : db));
    try {
      const applied = await Promise.all(migrators.map((m) => migrate(m, { chain: FIXTURE_CHAIN })));
      assert.deepEqual(applied.flat().sort(), [1, 2, 3]);
      const [row] = await db.query<{ n: number }>("select count(*)::int as n from fixture_two");
      assert.equal(row!.n, 1, "the data migration ran once");
    } finally {
      if (url) await Promise.all(migrators.map((m) => m.close()));
      await drop();
    }
  });

  describe(`the CLI on ${TEST_DRIVER}`, () => {
    /** The same database the CLI will open: a private PostgreSQL database, or a PGlite data dir. */
    async function cliDatabase() {
      if (TEST_DRIVER === "postgres") {
        const database = await createTestDatabase({ migrated: false });
        await database.db.close();
        return { env: { DATABASE_URL: database.url }, args: [] as string[], drop: () => database.drop() };
      }
      const dataDir = mkdtempSync(join(tmpdir(), "rudder-cli-"));
      return { env: { DATABASE_URL: undefined }, args: ["--data-dir", dataDir], drop: async () => {} };
    }

    test("serve refuses an outdated schema; migrate --status, migrate, and a refused downgrade", async () => {
      const target = await cliDatabase();
      const env = { ...target.env, RUDDER_JWT_SECRET: "s".repeat(32) };
      try {
        const refused = await runRudder(["serve", "--port", "0", ...target.args], env);
        assert.equal(refused.code, 1, refused.stderr);
        assert.match(refused.stderr, /schema is at revision 0 but this server needs \d+; run `rudder migrate`/);

        const status = await runRudder(["migrate", "--status", ...target.args], env);
        assert.equal(status.code, 0, status.stderr);
        assert.match(status.stdout, /database revision: 0/);
        assert.match(status.stdout, /pending +000001 foundation/);

        const applied = await runRudder(["migrate", ...target.args], env);
        assert.equal(applied.code, 0, applied.stderr);
        assert.match(applied.stdout, /applied 000001/);

        const down = await runRudder(["migrate", "--to", "0", ...target.args], env);
        assert.equal(down.code, 1);
        assert.match(down.stderr, /not supported \(migrations are forward-only\)/);

        const after = await runRudder(["migrate", "--status", ...target.args], env);
        assert.match(after.stdout, /applied +000001 foundation/);
      } finally {
        await target.drop();
      }
    });
  });
});
