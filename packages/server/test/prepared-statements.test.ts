import { randomUUID } from "node:crypto";
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { createPgliteDb, createPostgresDb, type Db, type Queryable } from "../src/storage/db.ts";
import { MAX_NAMED_PARAMETERS, StatementNames } from "../src/storage/statement-names.ts";
import { createTestDatabase, TEST_DRIVER } from "./support/db.ts";

/** Every warning of this file's process: pg warns (once) of a statement sent while one runs. */
const processWarnings: string[] = [];
process.on("warning", (warning) => processWarnings.push(warning.message));

describe("which statements get a name (StatementNames)", () => {
  test("a text is named the second time it is sent, keeps its name, and names are unique", () => {
    const names = new StatementNames(10);
    assert.equal(names.nameFor("select 1", 0), undefined, "sent once: unnamed");
    const first = names.nameFor("select 1", 0);
    assert.ok(first);
    assert.equal(names.nameFor("select 1", 0), first);
    names.nameFor("select 2", 0);
    const second = names.nameFor("select 2", 0);
    assert.ok(second);
    assert.notEqual(second, first);
  });

  test("a statement with more parameters than a fixed-shape one (a batch sized to its rows) never gets a name", () => {
    const names = new StatementNames(10);
    const batch = "insert into t values ($1, $2), … ($65, $66)";
    names.nameFor(batch, MAX_NAMED_PARAMETERS + 1);
    assert.equal(names.nameFor(batch, MAX_NAMED_PARAMETERS + 1), undefined);
    names.nameFor("insert into t values ($1, $2)", 2);
    assert.ok(names.nameFor("insert into t values ($1, $2)", 2));
  });

  test("at most `limit` texts get a name; a refused text never gets one again and frees no name for reuse", async () => {
    const names = new StatementNames(2);
    const issued = ["a", "b", "c"].map((sql) => (names.nameFor(sql, 0), names.nameFor(sql, 0)));
    assert.deepEqual(
      issued.map((name) => name !== undefined),
      [true, true, false],
    );
    // A stale prepared form (a migration changed the result's columns): refused, and run again unnamed.
    const stale = Object.assign(new Error("cached plan must not change result type"), { code: "0A000" });
    const ran: (string | undefined)[] = [];
    const answer = await names.run("a", 0, true, async (name) => {
      ran.push(name);
      if (name !== undefined) throw stale;
      return "plain";
    });
    assert.deepEqual([answer, ...ran], ["plain", issued[0], undefined]);
    assert.equal(names.nameFor("a", 0), undefined);
    assert.equal(names.nameFor("a", 0), undefined);
    assert.equal(names.nameFor("c", 0), undefined, "still at the limit: a refused name is not handed out again");
    assert.equal(names.nameFor("b", 0), issued[1]);
  });
});

const TEXT = "select id, body, data, at, tags, big, flag from items where id = any($1::int[]) order by id";

/** The databases a prepared statement must behave the same on: this run's driver, and PGlite on its thread. */
const variants: { label: string; open: () => Promise<{ db: Db; drop: () => Promise<void> }> }[] = [
  { label: TEST_DRIVER, open: () => createTestDatabase({ migrated: false }) },
  ...(TEST_DRIVER === "pglite"
    ? [
        {
          label: "pglite on a worker thread",
          open: async () => {
            const db = await createPgliteDb({ thread: "worker" });
            return { db, drop: () => db.close() };
          },
        },
      ]
    : []),
];

for (const variant of variants) {
  describe(`prepared statements on ${variant.label}`, () => {
    const withItems = async (check: (db: Db) => Promise<void>) => {
      const { db, drop } = await variant.open();
      try {
        await db.exec(
          "create table items (id int primary key, body jsonb, data bytea, at timestamptz, tags text[], big bigint, flag boolean)",
        );
        await check(db);
      } finally {
        await drop();
      }
    };
    const prepared = async (db: Queryable) =>
      (await db.query<{ statement: string }>("select statement from pg_prepared_statements")).map((row) => row.statement);
    const insert = "insert into items values ($1, $2::jsonb, $3, $4, $5, $6, $7)";

    test("a statement sent again runs prepared and answers as the plain one: types, nulls and arrays", () =>
      withItems(async (db) => {
        const at = new Date("2026-01-02T03:04:05.678Z");
        await db.query(insert, [1, JSON.stringify({ a: [1, "b"] }), new Uint8Array([1, 2, 255]), at, ["x", "y z"], 42, true]);
        await db.query(insert, [2, null, null, null, null, null, null]);
        await db.query(insert, [3, "[]", new Uint8Array([]), at, [], -7, false]);
        const expected = [
          { id: 1, body: { a: [1, "b"] }, data: new Uint8Array([1, 2, 255]), at, tags: ["x", "y z"], big: 42, flag: true },
          { id: 2, body: null, data: null, at: null, tags: null, big: null, flag: null },
          { id: 3, body: [], data: new Uint8Array([]), at, tags: [], big: -7, flag: false },
        ];
        const normalise = (rows: Record<string, unknown>[]) =>
          rows.map((row) => ({
            ...row,
            // pg answers a bigint as a string and a bytea as a Buffer.
            big: row.big === null ? null : Number(row.big),
            data: row.data === null ? null : new Uint8Array(row.data as Uint8Array),
          }));
        // One connection (a transaction), so pg_prepared_statements sees what this session prepared.
        await db.transaction(async (tx) => {
          assert.deepEqual(normalise(await tx.query(TEXT, [[1, 2, 3]])), expected, "sent once: plain");
          assert.ok(!(await prepared(tx)).includes(TEXT));
          assert.deepEqual(normalise(await tx.query(TEXT, [[1, 2, 3]])), expected, "sent again: prepared");
          assert.deepEqual(normalise(await tx.query(TEXT, [[3]])), [expected[2]]);
          assert.ok((await prepared(tx)).includes(TEXT), "the statement is prepared on the connection");
        });
        assert.deepEqual(normalise(await db.query(TEXT, [[2]])), [expected[1]]);
      }));

    if (variant.label === "postgres")
      test("on PostgreSQL a named statement is planned at each execution until the hot tables were analyzed", async () => {
        const { db, url, drop } = await createTestDatabase();
        const afterAnalyze = createPostgresDb(url!);
        try {
          // New connections at once: each one's set-up must finish before its first statement.
          await Promise.all(Array.from({ length: 5 }, () => db.query("select pg_sleep(0.01)")));
          const runById = "select run_id from runs where tenant_id = $1 and run_id = $2";
          await db.transaction(async (tx) => {
            for (let i = 0; i < 8; i++) await tx.query(runById, ["t", randomUUID()]);
            const [stats] = await tx.query<{ generic_plans: string; custom_plans: string }>(
              "select generic_plans, custom_plans from pg_prepared_statements where statement = $1",
              [runById],
            );
            // PostgreSQL's default would switch to a generic plan, made on these empty tables, after five custom ones.
            assert.deepEqual([Number(stats?.generic_plans), Number(stats?.custom_plans)], [0, 7], JSON.stringify(stats));
          });
          await db.query("analyze");
          assert.deepEqual(
            await afterAnalyze.query("show plan_cache_mode"),
            [{ plan_cache_mode: "auto" }],
            "a connection opened after the analyze",
          );
          await new Promise((resolve) => setImmediate(resolve));
          assert.deepEqual(processWarnings, [], "no statement was sent while a connection's set-up ran");
        } finally {
          await afterAnalyze.close();
          await drop();
        }
      });

    test("a prepared statement's error keeps its SQLSTATE; the connection and transactions go on", () =>
      withItems(async (db) => {
        const add = (id: number) => db.query("insert into items (id) values ($1) returning id", [id]);
        await add(1);
        await add(2);
        const duplicate = await add(1).catch((error: unknown) => error);
        assert.equal((duplicate as { code?: string }).code, "23505");
        assert.deepEqual(await add(3), [{ id: 3 }]);
        const rolledBack = await db
          .transaction(async (tx) => {
            await tx.query("insert into items (id) values ($1) returning id", [4]);
            await tx.query("insert into items (id) values ($1) returning id", [1]);
          })
          .catch((error: unknown) => error);
        assert.equal((rolledBack as { code?: string }).code, "23505");
        const ids = await db.query<{ id: number }>("select id from items order by id");
        assert.deepEqual(
          ids.map((row) => row.id),
          [1, 2, 3],
          "the failed transaction wrote nothing",
        );
      }));

    test("a statement prepared before a migration changed its columns runs again (plain) after it", () =>
      withItems(async (db) => {
        const select = "select * from items where id = $1";
        await db.query(insert, [1, null, null, null, null, null, null]);
        await db.query(select, [1]);
        await db.query(select, [1]);
        await db.exec("alter table items add column extra int default 5");
        for (let i = 0; i < 3; i++) assert.equal((await db.query<{ extra: number }>(select, [1]))[0]?.extra, 5);
      }));
  });
}
