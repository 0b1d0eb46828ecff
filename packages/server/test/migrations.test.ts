import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createPostgresDb } from "../src/storage/db.ts";
import { loadMigrations, migrate, MigrationError, migrationStatus } from "../src/storage/migrate.ts";
import { resolveConfig } from "../src/config/config.ts";
import { SchemaOutdatedError, startServer } from "../src/server.ts";
import { runRudder } from "./support/cli.ts";
import { createTestDatabase, TEST_DRIVER } from "./support/db.ts";
import { EXAMPLES_CONFIG, TEST_SECRET } from "./support/server.ts";

const FIXTURE_CHAIN = loadMigrations(fileURLToPath(new URL("./fixtures/migrations/", import.meta.url)));

describe("migrations", () => {
  test("the shipped chain is numbered in increasing order, each revision once", () => {
    const ids = loadMigrations().map((m) => m.id);
    assert.ok(ids.length > 0 && ids[0] === 1);
    assert.ok(
      ids.every((id, i) => i === 0 || id > ids[i - 1]!),
      `ids: ${ids.join(", ")}`,
    );
  });

  test("a revision that ships below one already applied is still applied, and the server waits for it", async () => {
    // Two changes developed at once reserve revisions 2 and 3; 3 lands (and is applied) first.
    const one = FIXTURE_CHAIN[0]!;
    const two = { id: 2, name: "late_two", sql: "create table fixture_late_two (id int)" };
    const three = { id: 3, name: "late_three", sql: "create table fixture_late_three (id int)" };
    const { db, drop } = await createTestDatabase({ migrated: false });
    try {
      assert.deepEqual(await migrate(db, { chain: [one, three] }), [1, 3]);
      const status = await migrationStatus(db, [one, two, three]);
      assert.deepEqual([status.current, status.latest], [3, 3]);
      assert.deepEqual(
        status.pending.map((m) => m.id),
        [2],
        "pending although below the current revision",
      );
      assert.deepEqual(await migrate(db, { chain: [one, two, three] }), [2]);
      assert.deepEqual((await migrationStatus(db, [one, two, three])).pending, []);
      const [row] = await db.query<{ n: number }>(
        "select count(*)::int as n from information_schema.tables where table_name in ('fixture_late_two', 'fixture_late_three')",
      );
      assert.equal(row!.n, 2);
    } finally {
      await drop();
    }
  });

  test("a server that needs the schema current refuses one that lacks a revision below its current one", async () => {
    const { db, drop } = await createTestDatabase();
    try {
      const [missing] = loadMigrations().slice(-2, -1);
      await db.query("delete from rudder_migrations where id = $1", [missing!.id]);
      const config = { ...resolveConfig({ config: EXAMPLES_CONFIG, port: 0 }, {}) };
      config.auth = { ...config.auth, jwtSecret: TEST_SECRET };
      await assert.rejects(startServer({ config, db, schema: "require-current", logger: false, worker: false }), (error: unknown) => {
        assert.ok(error instanceof SchemaOutdatedError);
        assert.match(error.message, new RegExp(`not applied: ${missing!.id}\\)`));
        return true;
      });
    } finally {
      await drop();
    }
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
      // A binary that knows only 1..2 (rolled back) migrating by default: the newer database is kept, no error.
      assert.deepEqual(await migrate(db, { chain: FIXTURE_CHAIN.slice(0, 2) }), []);
      assert.equal((await migrationStatus(db, FIXTURE_CHAIN)).current, 3);
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
