import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { createPgliteDb, type Db } from "../src/storage/db.ts";

/**
 * PGlite on its worker thread (storage/pglite-thread.ts) keeps the Db seam's meaning: the
 * suite's other files run on it too (the default); these are the cases only a message protocol
 * could get wrong.
 */
describe("PGlite on a worker thread", { skip: process.env.RUDDER_TEST_DATABASE_URL ? "PGlite only" : false }, () => {
  const withDb = async (check: (db: Db) => Promise<void>) => {
    const db = await createPgliteDb({ thread: "worker" });
    try {
      await db.exec("create table items (id int primary key, body jsonb, data bytea, at timestamptz)");
      await check(db);
    } finally {
      await db.close();
    }
  };

  test("values cross the thread typed, and errors keep their SQLSTATE", () =>
    withDb(async (db) => {
      const at = new Date("2026-01-02T03:04:05.678Z");
      await db.query("insert into items values ($1, $2::jsonb, $3, $4)", [
        1,
        JSON.stringify({ a: [1, "b"] }),
        new Uint8Array([1, 2, 255]),
        at,
      ]);
      const [row] = await db.query<{ id: number; body: unknown; data: Uint8Array; at: Date }>("select * from items");
      assert.deepEqual(row, { id: 1, body: { a: [1, "b"] }, data: new Uint8Array([1, 2, 255]), at });
      const duplicate = await db.query("insert into items (id) values (1)").catch((error: unknown) => error);
      assert.ok(duplicate instanceof Error);
      assert.equal((duplicate as { code?: string }).code, "23505");
      assert.match(duplicate.message, /duplicate key/);
    }));

  test("a transaction commits, rolls back on a throw or a failed statement, and holds the one connection", () =>
    withDb(async (db) => {
      let committed = false;
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      const writer = db.transaction(async (tx) => {
        await tx.query("insert into items (id) values (1)");
        await tx.query("insert into items (id) values (2)");
        tx.afterCommit(() => (committed = true));
        await held;
      });
      // Sent while the transaction is open: runs after its commit, never inside it.
      const reader = db.query<{ n: number }>("select count(*)::int as n from items");
      release();
      await writer;
      assert.equal(committed, true);
      assert.deepEqual(await reader, [{ n: 2 }]);

      await assert.rejects(
        db.transaction(async (tx) => {
          await tx.query("insert into items (id) values (3)");
          throw new Error("abandon");
        }),
        /abandon/,
      );
      let leaked: Parameters<Parameters<Db["transaction"]>[0]>[0] | undefined;
      await assert.rejects(
        db.transaction(async (tx) => {
          leaked = tx;
          await tx.query("insert into items (id) values (4)");
          await tx.query("insert into items (id) values (1)");
        }),
        (error: unknown) => (error as { code?: string }).code === "23505",
      );
      await assert.rejects(leaked!.query("select 1"), /transaction is closed/);
      assert.deepEqual(await db.query("select id from items order by id"), [{ id: 1 }, { id: 2 }]);
    }));

  test("a closed database refuses statements", async () => {
    const db = await createPgliteDb({ thread: "worker" });
    await db.close();
    await assert.rejects(db.query("select 1"), /exited/);
  });
});
