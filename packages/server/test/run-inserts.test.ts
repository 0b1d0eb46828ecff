import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { RunInserts } from "../src/storage/run-inserts.ts";
import { insertRun, type NewRun } from "../src/storage/runs.ts";
import { insertThread } from "../src/storage/threads.ts";
import { createTestDatabase, TEST_DRIVER } from "./support/db.ts";
import { interceptedDb } from "./support/intercepted-db.ts";
import { stateless } from "./support/runs.ts";

test(`creates submitted together share one insert, with the quota ranked per tenant, a thread or key once per statement, on ${TEST_DRIVER}`, async () => {
  const database = await createTestDatabase();
  let inserts = 0;
  const db = interceptedDb(database.db, (target, sql, params) => {
    if (/\binsert into runs\b/.test(sql)) inserts++;
    return target.query(sql, params);
  });
  try {
    const quota = 4;
    const [a, b, c] = ["a", "b", "c"].map((name) => `inserts-${name}-${randomUUID()}`) as [string, string, string];
    for (let i = 0; i < 2; i++) await insertRun(db, stateless(a), quota);
    const thread = randomUUID();
    await insertThread(db, c, thread, {});
    const onThread = (): NewRun => ({ ...stateless(c), threadId: thread });
    const keyed = (): NewRun => ({ ...stateless(b), idempotencyKey: "same", requestHash: "same request" });
    const runs = {
      a1: stateless(a),
      a2: stateless(a),
      a3: stateless(a), // a has 2 pending: the batch's third run of a is over its quota of 4
      b1: stateless(b),
      k1: keyed(),
      t1: onThread(),
      t2: onThread(), // the thread again: the next statement, blocked behind t1
      k2: keyed(), // the key again: the next statement, where it conflicts with k1
    };
    inserts = 0;
    const group = new RunInserts(db, quota);
    const answers = await Promise.all(Object.values(runs).map((run) => group.insert(run)));
    const inserted = Object.fromEntries(Object.keys(runs).map((name, index) => [name, answers[index]]));
    assert.equal(inserts, 2, "one statement for the first seven; the thread's and the key's second runs in the next");
    for (const name of ["a1", "a2", "b1", "k1", "t1", "t2"]) {
      assert.equal(inserted[name]?.run_id, runs[name as keyof typeof runs].runId, name);
      assert.equal(inserted[name]?.status, "pending", name);
    }
    assert.equal(inserted.a3, undefined, "over the quota");
    assert.equal(inserted.k2, undefined, "the key names k1");
    const blocked = await db.query<{ run_id: string; blocked: boolean }>(
      "select run_id::text as run_id, blocked from runs where tenant_id = $1 order by created_at, run_id",
      [c],
    );
    assert.deepEqual(
      Object.fromEntries(blocked.map((row) => [row.run_id, row.blocked])),
      { [runs.t1.runId]: false, [runs.t2.runId]: true },
      "the thread's second run waits behind its first",
    );
    // Alone, the run the batch stopped is stopped still: the quota is full.
    assert.equal(await insertRun(db, runs.a3, quota), undefined);
  } finally {
    await database.drop();
  }
});
