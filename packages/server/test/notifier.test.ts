import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createLocalNotifier, createPostgresNotifier, type Notice, type Notifier } from "../src/notify/notifier.ts";
import { createTestDatabase, TEST_DRIVER, type TestDatabase } from "./support/db.ts";

/** What a notifier's subscribers heard, in order. */
function listen(notifier: Notifier): { heard: Notice[]; next: (match: (notice: Notice) => boolean) => Promise<Notice> } {
  const heard: Notice[] = [];
  notifier.subscribe((notice) => heard.push(notice));
  const next = (match: (notice: Notice) => boolean) =>
    new Promise<Notice>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no notice within 5 s")), 5000);
      const unsubscribe = notifier.subscribe((notice) => {
        if (!match(notice)) return;
        clearTimeout(timer);
        unsubscribe();
        resolve(notice);
      });
    });
  return { heard, next };
}

describe(`notices on ${TEST_DRIVER}`, () => {
  let database: TestDatabase;
  /** Two processes' notifiers on one database (on PGlite, one process: the same notifier). */
  let sender: Notifier;
  let receiver: Notifier;
  before(async () => {
    database = await createTestDatabase();
    if (database.url) {
      sender = createPostgresNotifier(database.url);
      receiver = createPostgresNotifier(database.url);
    } else {
      sender = receiver = createLocalNotifier();
    }
  });
  after(async () => {
    await sender.close();
    if (receiver !== sender) await receiver.close();
    await database.drop();
  });

  test("a notice published within a transaction is heard after its commit, by this process and another, once each", async () => {
    const mine = listen(sender);
    const theirs = listen(receiver);
    const arrived = theirs.next((notice) => notice.topic === "run_changed" && notice.runId === "r1");
    await database.db.transaction(async (tx) => {
      await sender.publishWithin(tx, { topic: "run_changed", runId: "r1" }, { topic: "run_created" });
      await tx.query("select 1");
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.deepEqual(mine.heard, [], "nothing is heard before the commit");
      assert.deepEqual(theirs.heard, []);
    });
    await arrived;
    await new Promise((resolve) => setTimeout(resolve, 100));
    const expected = [{ topic: "run_changed", runId: "r1" }, { topic: "run_created" }];
    assert.deepEqual(mine.heard, expected);
    assert.deepEqual(theirs.heard, expected);
  });

  test("a rolled-back transaction's notices are never heard", async () => {
    const theirs = listen(receiver);
    await assert.rejects(
      database.db.transaction(async (tx) => {
        await sender.publishWithin(tx, { topic: "run_changed", runId: "rolled-back" });
        throw new Error("abort");
      }),
      /abort/,
    );
    const later = theirs.next((notice) => notice.topic === "run_changed" && notice.runId === "after");
    await sender.publish({ topic: "run_changed", runId: "after" });
    await later;
    assert.ok(!theirs.heard.some((notice) => notice.topic === "run_changed" && notice.runId === "rolled-back"));
  });

  test("concurrent publishes are all heard; payloads over PostgreSQL's limit are split", async () => {
    const theirs = listen(receiver);
    const runIds = Array.from({ length: 400 }, (_, index) => `run-${index}-${"x".repeat(40)}`);
    const last = theirs.next((notice) => notice.topic === "run_events" && notice.runId === runIds.at(-1));
    await Promise.all(runIds.map((runId) => sender.publish({ topic: "run_events", runId })));
    await last;
    await new Promise((resolve) => setTimeout(resolve, 100));
    const heard = new Set(theirs.heard.flatMap((notice) => (notice.topic === "run_events" ? [notice.runId] : [])));
    assert.equal(heard.size, runIds.length);
  });
});
