import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  createLocalNotifier,
  createPostgresNotifier,
  envelopes,
  MAX_PAYLOAD_BYTES,
  type Notice,
  type Notifier,
} from "../src/notify/notifier.ts";
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

/** Resolves once the notifier's LISTEN connection is up (checked every 10 ms, for up to 30 s). */
async function untilListening(notifier: Notifier): Promise<void> {
  for (const deadline = Date.now() + 30_000; !notifier.health?.().listening;) {
    if (Date.now() > deadline) throw new Error("the LISTEN connection did not come up within 30 s");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
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
      // PostgreSQL keeps no notice for a listener still connecting: on a loaded machine the first
      // test's notice could commit before the LISTEN did (seen once in CI, "no notice within 5 s").
      await untilListening(sender);
      await untilListening(receiver);
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

describe("NOTIFY payloads (envelopes)", () => {
  /** The split as it was first written: the batch serialised again as each notice joins it. */
  function reference(from: string, notices: readonly Notice[]): string[] {
    const payloads: string[] = [];
    let batch: Notice[] = [];
    for (const notice of notices) {
      batch.push(notice);
      if (Buffer.byteLength(JSON.stringify({ from, notices: batch })) > MAX_PAYLOAD_BYTES) {
        batch.pop();
        if (batch.length > 0) payloads.push(JSON.stringify({ from, notices: batch }));
        batch = [notice];
      }
    }
    if (batch.length > 0) payloads.push(JSON.stringify({ from, notices: batch }));
    return payloads;
  }

  const from = "3f0c8a52-8a2e-4a31-9d1f-0d6f4c1f9b7e";
  const cases: [string, Notice[]][] = [
    ["none", []],
    ["one", [{ topic: "run_changed", runId: "r" }]],
    [
      "a burst of 1,000",
      Array.from({ length: 1000 }, (_, i): Notice => ({ topic: "run_events", runId: `run-${i}-${"x".repeat(i % 50)}` })),
    ],
    ["non-ASCII ids", Array.from({ length: 300 }, (_, i): Notice => ({ topic: "run_changed", runId: `ラン-${i}-é` }))],
    [
      "one too large for any payload, between others",
      [
        { topic: "run_changed", runId: "before" },
        { topic: "run_changed", runId: "y".repeat(MAX_PAYLOAD_BYTES) },
        { topic: "run_changed", runId: "after" },
      ],
    ],
  ];
  for (const [name, notices] of cases) {
    test(`${name}: the same payloads as serialising the batch, each within the limit unless one notice is too large`, () => {
      const payloads = envelopes(
        from,
        notices.map((notice) => JSON.stringify(notice)),
      );
      assert.deepEqual(payloads, reference(from, notices));
      assert.deepEqual(
        payloads.flatMap((payload) => (JSON.parse(payload) as { notices: Notice[] }).notices),
        notices,
      );
      for (const payload of payloads) {
        const parsed = JSON.parse(payload) as { from: string; notices: Notice[] };
        assert.equal(parsed.from, from);
        assert.ok(Buffer.byteLength(payload) <= MAX_PAYLOAD_BYTES || parsed.notices.length === 1);
      }
    });
  }
});
