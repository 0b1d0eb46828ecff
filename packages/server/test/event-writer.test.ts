import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { RunEvent } from "@rudder/api";
import { ApiError } from "../src/domain/errors.ts";
import { createLocalNotifier, createPostgresNotifier, type Notice } from "../src/notify/notifier.ts";
import { appendEvents, countHandBacks, readEvents, type PendingEvent } from "../src/storage/events.ts";
import { claimRuns } from "../src/storage/runs.ts";
import { EventWriter, type EventHandoff } from "../src/worker/event-writer.ts";
import { createTestDatabase, TEST_DRIVER, type TestDatabase } from "./support/db.ts";
import { claimedRuns } from "./support/runs.ts";

const tick = (i: number): PendingEvent => ({ kind: "custom", data: { data: { i } } });
const ticksOf = (events: readonly RunEvent[]) => events.filter((e) => e.kind === "custom").map((e) => (e.data.data as { i: number }).i);

describe(`the worker's event writer on ${TEST_DRIVER}`, () => {
  let database: TestDatabase;
  before(async () => {
    database = await createTestDatabase();
  });
  after(async () => {
    await database.drop();
  });

  test("one flush writes the events of many runs in one statement (its own commit), with one notice listing them", async () => {
    const notifier = createLocalNotifier();
    const heard: Notice[] = [];
    notifier.subscribe((notice) => heard.push(notice));
    let transactions = 0;
    let statements = 0;
    const db = {
      ...database.db,
      query: <Row>(sql: string, params?: readonly unknown[]) => (statements++, database.db.query<Row>(sql, params)),
      transaction: <T>(work: Parameters<typeof database.db.transaction<T>>[0]) => (transactions++, database.db.transaction(work)),
    };
    const writer = new EventWriter(db, notifier, { flushMs: 60_000, maxBatch: 100_000 });
    const leases = await claimedRuns(database.db, 5);
    const handles = leases.map((lease) => writer.open(lease, () => assert.fail("no lease is lost")));
    for (let i = 0; i < 3; i++) for (const handle of handles) handle.push(tick(i));
    await writer.flush();
    assert.equal(statements, 1);
    assert.equal(transactions, 0);
    const flushed = heard.filter((notice) => notice.topic === "events_flushed");
    assert.equal(flushed.length, 1);
    assert.deepEqual(
      new Map(flushed[0]!.topic === "events_flushed" ? flushed[0]!.runs.map(([id, seq]) => [id, seq]) : []),
      new Map(leases.map((lease) => [lease.runId, 3])),
    );
    for (const lease of leases) assert.deepEqual(ticksOf(await readEvents(database.db, lease.tenantId, lease.runId, 0, 100)), [0, 1, 2]);
    await notifier.close();
  });

  test("a run that settles before its flush is due leaves no flush behind for the next run's events", async (t) => {
    t.mock.timers.enable({ apis: ["setTimeout"] });
    let statements = 0;
    const db = {
      ...database.db,
      query: <Row>(sql: string, params?: readonly unknown[]) => (statements++, database.db.query<Row>(sql, params)),
    };
    const writer = new EventWriter(db, createLocalNotifier(), { flushMs: 20, maxBatch: 100_000 });
    const [first, next] = await claimedRuns(database.db, 2);
    const settled = writer.open(first!, () => assert.fail("the lease is held"));
    settled.push(tick(0));
    assert.equal((await settled.take()).length, 1, "the settle takes the run's events");
    t.mock.timers.tick(15);
    const running = writer.open(next!, () => assert.fail("the lease is held"));
    running.push(tick(1));
    t.mock.timers.tick(10); // the first run's flush would have been due now
    await Promise.resolve();
    assert.equal(statements, 0, "no flush ran");
    assert.deepEqual(
      (await running.take()).map((event) => event.data),
      [{ data: { i: 1 } }],
      "the next run's event waits for its own settle",
    );
  });

  test("a run's events keep their order across flushes, and interleave correctly with other appenders", async () => {
    const notifier = createLocalNotifier();
    const writer = new EventWriter(database.db, notifier, { flushMs: 1, maxBatch: 7 });
    const [lease] = await claimedRuns(database.db, 1);
    const handle = writer.open(lease!, () => assert.fail("the lease is held"));
    for (let i = 0; i < 50; i++) {
      handle.push(tick(i));
      if (i % 10 === 9) {
        // Another appender (an accepted steer, a cancel's event) in between: it must land after what was flushed before.
        handle.flush();
        await handle.settled();
        await appendEvents(database.db, lease!.tenantId, lease!.runId, [{ kind: "custom", data: { data: { other: i } } }]);
      }
      if (i % 3 === 0) await new Promise((resolve) => setTimeout(resolve, 2));
    }
    const rest = await handle.take();
    await appendEvents(database.db, lease!.tenantId, lease!.runId, rest);
    const log = await readEvents(database.db, lease!.tenantId, lease!.runId, 0, 1000);
    assert.deepEqual(
      log.map((event) => event.sequence),
      log.map((_, index) => index + 1),
    );
    assert.deepEqual(
      ticksOf(log).filter((i) => i !== undefined),
      Array.from({ length: 50 }, (_, i) => i),
    );
    const others = log.filter((event) => (event.data.data as { other?: number }).other !== undefined);
    for (const other of others) {
      const before = log.filter((event) => event.sequence < other.sequence && (event.data.data as { i?: number }).i !== undefined);
      assert.equal(
        before.length,
        (other.data.data as { other: number }).other + 1,
        "every tick pushed before the other appender's event precedes it",
      );
    }
    await notifier.close();
  });

  test("a stale attempt's buffered events are not written once its lease is lost; other runs in the flush still are", async () => {
    const notifier = createLocalNotifier();
    const writer = new EventWriter(database.db, notifier, { flushMs: 60_000, maxBatch: 100_000 });
    const [stale, healthy] = await claimedRuns(database.db, 2);
    let lost = 0;
    const staleHandle = writer.open(stale!, () => lost++);
    const healthyHandle = writer.open(healthy!, () => assert.fail("the healthy run keeps its lease"));
    staleHandle.push(tick(0));
    healthyHandle.push(tick(0));
    await writer.flush();
    // Its lease expires and another worker claims the run (attempt 2).
    await database.db.query("update runs set lease_expires_at = now() - interval '1 second' where run_id = $1", [stale!.runId]);
    const [reclaimed] = await claimRuns(database.db, "another-worker", 60_000, 1000, { to: "running", thread: "busy" });
    assert.equal(reclaimed?.run_id, stale!.runId);
    staleHandle.push(tick(1));
    staleHandle.push(tick(2));
    healthyHandle.push(tick(1));
    await writer.flush();
    assert.equal(lost, 1);
    await assert.rejects(staleHandle.settled());
    staleHandle.push(tick(3)); // after the loss: dropped
    await writer.flush();
    assert.deepEqual(ticksOf(await readEvents(database.db, stale!.tenantId, stale!.runId, 0, 100)), [0]);
    assert.deepEqual(ticksOf(await readEvents(database.db, healthy!.tenantId, healthy!.runId, 0, 100)), [0, 1]);
    await assert.rejects(staleHandle.take());
    await notifier.close();
  });

  test("a flush that got no connection in time is written again, once, in its place; no attempt stops", async () => {
    const notifier = createLocalNotifier();
    let refused = 1;
    const db = {
      ...database.db,
      transaction: <T>(work: Parameters<typeof database.db.transaction<T>>[0]) => {
        if (refused-- > 0) {
          const error = new ApiError("unavailable", "the database is unreachable");
          error.cause = new Error("timeout exceeded when trying to connect");
          return Promise.reject(error);
        }
        return database.db.transaction(work);
      },
    };
    const writer = new EventWriter(db, notifier, { flushMs: 60_000, maxBatch: 100_000 });
    const [lease] = await claimedRuns(database.db, 1);
    const handle = writer.open(lease!, () => assert.fail("the attempt keeps going"));
    handle.push(tick(0));
    handle.push(tick(1));
    await writer.flush();
    handle.push(tick(2));
    await writer.flush();
    assert.deepEqual(ticksOf(await readEvents(database.db, lease!.tenantId, lease!.runId, 0, 100)), [0, 1, 2]);
    await notifier.close();
  });

  test("a crash between flushes loses only what was not flushed: every acknowledged event is in the log", async () => {
    const notifier = createLocalNotifier();
    const writer = new EventWriter(database.db, notifier, { flushMs: 60_000, maxBatch: 100_000 });
    const [lease] = await claimedRuns(database.db, 1);
    let lost = 0;
    const handle = writer.open(lease!, () => lost++);
    for (let i = 0; i < 10; i++) handle.push(tick(i));
    handle.flush();
    await handle.settled(); // acknowledged: durable
    for (let i = 10; i < 15; i++) handle.push(tick(i)); // in memory only when the process dies
    // The process dies here: the writer is dropped without a flush.
    assert.deepEqual(
      ticksOf(await readEvents(database.db, lease!.tenantId, lease!.runId, 0, 100)),
      Array.from({ length: 10 }, (_, i) => i),
    );
    // The next attempt appends after them: sequences stay dense and ordered.
    await database.db.query("update runs set lease_expires_at = now() - interval '1 second' where run_id = $1", [lease!.runId]);
    const [next] = await claimRuns(database.db, "next-worker", 60_000, 1000, { to: "running", thread: "busy" });
    const again = new EventWriter(database.db, notifier, { flushMs: 60_000, maxBatch: 100_000 });
    const nextHandle = again.open({ tenantId: next!.tenant_id, runId: next!.run_id, attempt: next!.attempt, owner: "next-worker" }, () =>
      assert.fail("held"),
    );
    nextHandle.push(tick(100));
    await again.flush();
    // The dead attempt "wakes up" and flushes what it held: its lease is gone, nothing lands.
    await writer.flush();
    assert.equal(lost, 1);
    const log = await readEvents(database.db, lease!.tenantId, lease!.runId, 0, 100);
    assert.deepEqual(ticksOf(log), [...Array.from({ length: 10 }, (_, i) => i), 100]);
    assert.deepEqual(
      log.map((event) => event.sequence),
      log.map((_, index) => index + 1),
    );
    await notifier.close();
  });

  test("with a hand-off, the committed events go to this process's streams as the log holds them, before the notice", async () => {
    const notifier = createLocalNotifier();
    const order: string[] = [];
    const delivered: RunEvent[] = [];
    const [followed, unfollowed] = await claimedRuns(database.db, 2);
    const handoff: EventHandoff = {
      follows: (runId) => runId === followed!.runId,
      deliver: (runId, events) => {
        order.push(`deliver ${runId}`);
        delivered.push(...events);
      },
    };
    notifier.subscribe((notice) => {
      if (notice.topic === "events_flushed") order.push("notice");
    });
    const writer = new EventWriter(database.db, notifier, { flushMs: 60_000, maxBatch: 100_000 }, handoff);
    const a = writer.open(followed!, () => assert.fail("held"));
    const b = writer.open(unfollowed!, () => assert.fail("held"));
    a.push(tick(0));
    a.push({ kind: "custom", data: { data: { z: 1, a: [1, 2], s: "é" } } });
    b.push(tick(0));
    await writer.flush();
    assert.deepEqual(order, [`deliver ${followed!.runId}`, "notice"]);
    assert.deepEqual(delivered, await readEvents(database.db, followed!.tenantId, followed!.runId, 0, 100));
    await notifier.close();
  });

  test("an event is stored and handed over as it was when pushed, whatever the graph does to its object later", async () => {
    const notifier = createLocalNotifier();
    const delivered: RunEvent[] = [];
    const [lease] = await claimedRuns(database.db, 1);
    const handoff: EventHandoff = { follows: () => true, deliver: (_runId, events) => delivered.push(...events) };
    const writer = new EventWriter(database.db, notifier, { flushMs: 60_000, maxBatch: 100_000 }, handoff);
    const handle = writer.open(lease!, () => assert.fail("held"));
    const data = { data: { text: "first" } };
    handle.push({ kind: "custom", data });
    data.data.text = "changed";
    await writer.flush();
    const log = await readEvents(database.db, lease!.tenantId, lease!.runId, 0, 100);
    assert.deepEqual(
      log.map((event) => event.data),
      [{ data: { text: "first" } }],
    );
    assert.deepEqual(delivered, log);
    await notifier.close();
  });

  test("a flush is one statement, and its notices reach this process at once and, on PostgreSQL, another process, every run once, in notices of runsPerNotice runs", async () => {
    // On PGlite there is no other process to hear: the local notifier's own listeners are checked.
    const sender = database.url ? createPostgresNotifier(database.url) : createLocalNotifier();
    const receiver = database.url ? createPostgresNotifier(database.url) : undefined;
    const mine: Notice[] = [];
    const theirs: Notice[] = [];
    sender.subscribe((notice) => mine.push(notice));
    receiver?.subscribe((notice) => theirs.push(notice));
    // The LISTEN connection comes up on its own: wait until it hears a notice.
    for (let heard = receiver === undefined; !heard;) {
      await sender.publish({ topic: "schedules_changed" });
      await new Promise((resolve) => setTimeout(resolve, 50));
      heard = theirs.length > 0;
    }
    theirs.length = 0;
    mine.length = 0;
    let statements = 0;
    const db = {
      ...database.db,
      query: <Row>(sql: string, params?: readonly unknown[]) => (statements++, database.db.query<Row>(sql, params)),
    };
    const writer = new EventWriter(db, sender, { flushMs: 60_000, maxBatch: 100_000, runsPerNotice: 2 });
    const leases = await claimedRuns(database.db, 5);
    const handles = leases.map((lease) => writer.open(lease, () => assert.fail("held")));
    for (let i = 0; i < 3; i++) for (const handle of handles) handle.push(tick(i));
    await writer.flush();
    assert.equal(statements, 1, "the append is one statement (its notices go on the notifier's own connection)");
    const expected = new Map(leases.map((lease) => [lease.runId, 3]));
    const runsIn = (notices: Notice[]) =>
      notices.flatMap((notice) => (notice.topic === "events_flushed" ? notice.runs.map(([id, seq]) => [id, seq] as const) : []));
    assert.deepEqual(new Map(runsIn(mine)), expected);
    assert.equal(mine.length, 3);
    if (receiver) {
      for (let waited = 0; runsIn(theirs).length < 5 && waited < 5000; waited += 20)
        await new Promise((resolve) => setTimeout(resolve, 20));
      assert.equal(runsIn(theirs).length, 5);
      assert.deepEqual(new Map(runsIn(theirs)), expected);
      assert.ok(theirs.every((notice) => notice.topic === "events_flushed" && notice.runs.length <= 2));
    }
    await sender.close();
    await receiver?.close();
  });
});

describe(`a run's hand-backs in its log on ${TEST_DRIVER}`, () => {
  let database: TestDatabase;
  before(async () => {
    database = await createTestDatabase();
  });
  after(() => database.drop());

  test("countHandBacks counts the worker_shutdown retries since the run's last redrive, and no other event", async () => {
    const [lease] = await claimedRuns(database.db, 1);
    const { tenantId, runId } = lease!;
    const retrying = (reason: "error" | "worker_shutdown"): PendingEvent => ({
      kind: "run_retrying",
      data: { attempt: 1, reason, delay_ms: 0, error: null },
    });
    assert.equal(await countHandBacks(database.db, tenantId, runId), 0);
    await appendEvents(database.db, tenantId, runId, [retrying("worker_shutdown"), retrying("error"), retrying("worker_shutdown")]);
    assert.equal(await countHandBacks(database.db, tenantId, runId), 2);
    await appendEvents(database.db, tenantId, runId, [
      { kind: "run_redriven", data: { from: "dead_letter" } },
      retrying("worker_shutdown"),
    ]);
    assert.equal(await countHandBacks(database.db, tenantId, runId), 1, "only those since the redrive");
    assert.equal(await countHandBacks(database.db, `${tenantId}-other`, runId), 0, "another tenant's run of that id has none");
  });
});
