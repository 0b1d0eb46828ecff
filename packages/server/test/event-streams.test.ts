import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { get, type IncomingMessage } from "node:http";
import { fileURLToPath } from "node:url";
import type { RunEvent } from "@rudder/api";
import { createLocalNotifier, createPostgresNotifier, type Notifier } from "../src/notify/notifier.ts";
import { EventFeed } from "../src/runs/event-feed.ts";
import { RECHECK_MS } from "../src/runs/service.ts";
import type { RunStatus } from "../src/domain/runs.ts";
import { createPostgresDb, type Db } from "../src/storage/db.ts";
import { readEvents } from "../src/storage/events.ts";
import type { ClaimedRun } from "../src/storage/runs.ts";
import { EventWriter } from "../src/worker/event-writer.ts";
import { createTestDatabase, TEST_DRIVER, type TestDatabase } from "./support/db.ts";
import { interceptedDb } from "./support/intercepted-db.ts";
import { claimedRuns } from "./support/runs.ts";
import { startServer } from "../src/server.ts";
import { startTestServer, type TestServer } from "./support/server.ts";
import { openSse, parseSse, type SseEvent } from "./support/sse.ts";

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));

/** `database`, counting the statements that read run event logs. */
function countingLogReads(database: TestDatabase): { database: TestDatabase; reads: () => number } {
  let reads = 0;
  const isLogRead = (sql: string) => /^\s*select\b[\s\S]*\bfrom\b[\s\S]*\brun_events\b/i.test(sql);
  const db = interceptedDb(database.db, (target, sql, params) => {
    if (isLogRead(sql)) reads++;
    return target.query(sql, params);
  });
  return { database: { ...database, db }, reads: () => reads };
}

/** `database`, counting the reads of each run's row since the last `reset`. */
function countingRunReads(database: TestDatabase): { database: TestDatabase; readsOf: (runId: string) => number; reset: () => void } {
  const reads = new Map<unknown, number>();
  const isRunRead = (sql: string) => /^\s*select run_id::text as run_id, tenant_id, thread_id::text as thread_id\b/.test(sql);
  const db = interceptedDb(database.db, (target, sql, params) => {
    if (isRunRead(sql)) reads.set(params?.[1], (reads.get(params?.[1]) ?? 0) + 1);
    return target.query(sql, params);
  });
  return { database: { ...database, db }, readsOf: (runId) => reads.get(runId) ?? 0, reset: () => reads.clear() };
}

/** `database`, with every read of run event logs made `ms` slower while `slow()` says so (a loaded database). */
function slowLogReads(database: TestDatabase, ms: number, slow: () => boolean): TestDatabase {
  const isLogRead = (sql: string) => /^\s*select\b[\s\S]*\bfrom\b[\s\S]*\brun_events\b/i.test(sql);
  const db = interceptedDb(database.db, async (target, sql, params) => {
    if (slow() && isLogRead(sql)) await new Promise((resolve) => setTimeout(resolve, ms));
    return target.query(sql, params);
  });
  return { ...database, db };
}

/** The notifier the server would choose for `database`, counting its subscriptions (each waiting join holds one). */
function countingSubscriptions(database: TestDatabase): { notifier: Notifier; subscriptions: () => number } {
  const notifier = database.url ? createPostgresNotifier(database.url) : createLocalNotifier();
  let subscriptions = 0;
  const subscribe: Notifier["subscribe"] = (listener) => {
    subscriptions++;
    return notifier.subscribe(listener);
  };
  return { notifier: { ...notifier, subscribe }, subscriptions: () => subscriptions };
}

/**
 * `request`'s answer and how many re-checks its wait may have made: a join re-reads the run every
 * `RECHECK_MS` while no notice comes (in case one was lost), so on a loaded machine a slow run
 * costs a read per second of waiting besides the ones a test counts.
 */
async function timedWait<T>(request: Promise<T>): Promise<{ answer: T; rechecks: number }> {
  const started = performance.now();
  const answer = await request;
  return { answer, rechecks: Math.floor((performance.now() - started) / RECHECK_MS) };
}

/**
 * How close to a join's request a run's end may fall and still have been heard before the join
 * began: on a loaded machine the server (in this process) may take that long to start handling it.
 */
const ENDED_BEFORE_SLACK_MS = 250;

/** `actual` reads are `expected` plus at most one per re-check the wait may have made. */
function assertReads(actual: number, expected: number, rechecks: number, message: string): void {
  assert.ok(
    actual >= expected && actual <= expected + rechecks,
    `${message}: ${actual} reads, ${expected} expected (+ up to ${rechecks} re-checks)`,
  );
}

const parsed = (events: readonly SseEvent[]) => events.map((event) => JSON.parse(event.data) as RunEvent);
const ticksOf = (events: readonly RunEvent[]) => events.filter((e) => e.kind === "custom").map((e) => (e.data.data as { i: number }).i);

describe(`shared stream reads on ${TEST_DRIVER}`, () => {
  let server: TestServer;
  let reads: () => number;
  before(async () => {
    const counted = countingLogReads(await createTestDatabase());
    reads = counted.reads;
    server = await startTestServer({ configFile: TESTING_CONFIG, database: counted.database, config: { streamHeartbeatMs: 5_000 } });
  });
  after(async () => {
    await server.close();
  });

  test("readers from the start, joining mid-stream, and resuming from Last-Event-ID each get every event once, in log order", async () => {
    const count = 120;
    const created = await server.request("POST", "/v1/runs", { body: { assistant_id: "ticks", input: { count, interval_ms: 4 } } });
    assert.equal(created.status, 202);
    const runId = String(created.body.run_id);
    const token = await server.token();
    const streamUrl = `${server.url}/v1/runs/${runId}/stream`;
    const open = (lastEventId?: string) =>
      openSse(streamUrl, { headers: { authorization: `Bearer ${token}` }, ...(lastEventId === undefined ? {} : { lastEventId }) });
    const early = await Promise.all([open(), open(), open()]);
    // Wait until the run is well under way, then join: one from the start, one from where another reader is.
    const first = early[0]!;
    const seen: SseEvent[] = [];
    while (seen.filter((event) => event.event === "custom").length < 30) seen.push((await first.next())!);
    const fromStart = await open();
    const resumeAt = seen.at(-1)!.id!;
    const resumed = await open(resumeAt);
    const [firstRest, ...others] = await Promise.all([
      first.rest(),
      ...early.slice(1).map((s) => s.rest()),
      fromStart.rest(),
      resumed.rest(),
    ]);
    const log = await readEvents(server.database.db, "t1", runId, 0, 10_000);
    assert.equal(ticksOf(log).length, count);
    assert.equal(log.at(-1)!.kind, "run_succeeded");
    const whole = [...seen, ...firstRest!];
    for (const stream of [whole, others[0]!, others[1]!, others[2]!]) assert.deepEqual(parsed(stream), log);
    assert.deepEqual(
      parsed(others[3]!),
      log.filter((event) => event.sequence > Number(resumeAt)),
    );
  });

  test("five readers of a streaming run cost fewer log reads than events (not a read per reader per flush)", async () => {
    const count = 100;
    const created = await server.request("POST", "/v1/runs", { body: { assistant_id: "ticks", input: { count, interval_ms: 5 } } });
    const runId = String(created.body.run_id);
    const token = await server.token();
    const before = reads();
    const streams = await Promise.all(
      Array.from({ length: 5 }, () => openSse(`${server.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${token}` } })),
    );
    const all = await Promise.all(streams.map((stream) => stream.rest()));
    for (const events of all) assert.equal(ticksOf(parsed(events)).length, count);
    // Before shared reads, each reader read the log once per flush (every 20 ms, so > 25 flushes here): 125+.
    const used = reads() - before;
    assert.ok(used < count / 2, `${used} log reads for 5 readers of ${count} events`);
  });
});

describe(`the event feed without a hand-off (API and worker in different processes) on ${TEST_DRIVER}`, () => {
  let database: TestDatabase;
  let reads: () => number;
  before(async () => {
    const counted = countingLogReads(await createTestDatabase());
    database = counted.database;
    reads = counted.reads;
  });
  after(async () => {
    await database.drop();
  });

  test("one read per flush serves every reader of every run, each getting its run's events once and in order", async () => {
    const leases = await claimedRuns(database.db, 6);
    // Two notifiers joined by hand stand for two processes: the worker's notices reach the API's feed, nothing else does.
    const workerNotifier = createLocalNotifier();
    const apiNotifier = createLocalNotifier();
    workerNotifier.subscribe((notice) => void apiNotifier.publish(notice));
    const feed = new EventFeed(database.db, apiNotifier);
    const writer = new EventWriter(database.db, workerNotifier, { flushMs: 60_000, maxBatch: 100_000 });
    const handles = leases.map((lease) => writer.open(lease, () => assert.fail("held")));
    const readers = leases.flatMap((lease) =>
      [0, 1].map(() => ({
        tenantId: lease.tenantId,
        runId: lease.runId,
        reader: feed.attach(lease.tenantId, lease.runId, 0),
        got: [] as RunEvent[],
      })),
    );
    const before = reads();
    const flushes = 8;
    for (let flush = 0; flush < flushes; flush++) {
      for (const handle of handles) for (let i = 0; i < 5; i++) handle.push({ kind: "custom", data: { data: { i: flush * 5 + i } } });
      await writer.flush();
      // Every reader waits for its wake-up, then takes what the tail read for it.
      for (const entry of readers) {
        await entry.reader.wait(5_000);
        entry.reader.take();
        const cursor = entry.got.at(-1)?.sequence ?? 0;
        const page = entry.reader.since(cursor) ?? [];
        entry.reader.moved(page.at(-1)?.sequence ?? cursor);
        entry.got.push(...page);
      }
    }
    const used = reads() - before;
    assert.ok(used <= flushes, `${used} log reads for ${flushes} flushes of ${leases.length} runs with ${readers.length} readers`);
    for (const entry of readers) {
      assert.deepEqual(
        ticksOf(entry.got),
        Array.from({ length: flushes * 5 }, (_, i) => i),
      );
      assert.deepEqual(entry.got, await readEvents(database.db, entry.tenantId, entry.runId, 0, 1000));
    }
    for (const entry of readers) entry.reader.detach();
    assert.equal(feed.follows(leases[0]!.runId), false);
    feed.close();
  });
});

describe("the event feed's memory of the runs this process created", () => {
  test("a created run is known unsettled for its tenant until a settle is handed over or heard; the oldest are forgotten past the cap", async () => {
    const notifier = createLocalNotifier();
    // These calls read nothing: the feed's database is never touched.
    const feed = new EventFeed(undefined as unknown as Db, notifier);
    const row = (runId: string, status: RunStatus) => ({ run_id: runId, status }) as ClaimedRun;
    try {
      feed.created("t1", "r1");
      assert.equal(feed.knownUnsettled("t1", "r1"), true);
      assert.equal(feed.knownUnsettled("t2", "r1"), false, "another tenant's run is never known: it is read (and 404s)");
      await notifier.publish({ topic: "run_changed", runId: "r1", status: "cancelling" });
      assert.equal(feed.knownUnsettled("t1", "r1"), true, "cancelling is not an end");
      await notifier.publish({ topic: "run_changed", runId: "r1", status: "cancelled" });
      assert.equal(feed.knownUnsettled("t1", "r1"), false);

      feed.created("t1", "r2");
      feed.settled(row("r2", "pending"));
      assert.equal(feed.knownUnsettled("t1", "r2"), true, "a retry back in the queue has not ended");
      feed.settled(row("r2", "paused"));
      assert.equal(feed.knownUnsettled("t1", "r2"), false);

      feed.created("t1", "r3");
      await notifier.publish({ topic: "run_changed", runId: "r3" });
      assert.equal(feed.knownUnsettled("t1", "r3"), false, "a notice without a status may be an end");

      for (let i = 0; i <= 10_000; i++) feed.created("t1", `many-${i}`);
      assert.equal(feed.knownUnsettled("t1", "many-0"), false, "the oldest is forgotten past the cap");
      assert.equal(feed.knownUnsettled("t1", "many-1"), true);
      assert.equal(feed.knownUnsettled("t1", "many-10000"), true);
    } finally {
      feed.close();
      await notifier.close();
    }
  });
});

describe(`long run logs on ${TEST_DRIVER}`, () => {
  let server: TestServer;
  let slow = false;
  before(async () => {
    // Reads of the log take a while, as on a busy database: a stream must not end before the
    // tail's next page arrives.
    const database = slowLogReads(await createTestDatabase(), 30, () => slow);
    server = await startTestServer({ configFile: TESTING_CONFIG, database });
  });
  after(async () => {
    await server.close();
  });

  test("a stream of an ended run longer than a read's page replays every event and its end, alone or beside other readers", async () => {
    const count = 1_600; // a read takes 500 events per run: more than three pages
    const created = await server.request("POST", "/v1/runs", { body: { assistant_id: "ticks", input: { count, interval_ms: 0 } } });
    const runId = String(created.body.run_id);
    assert.equal((await server.request("GET", `/v1/runs/${runId}/join?timeout=60`)).body.status, "succeeded");
    const log = await readEvents(server.database.db, "t1", runId, 0, 10_000);
    assert.equal(ticksOf(log).length, count);
    const token = await server.token();
    slow = true;
    const open = (lastEventId?: string) =>
      openSse(`${server.url}/v1/runs/${runId}/stream`, {
        headers: { authorization: `Bearer ${token}` },
        ...(lastEventId === undefined ? {} : { lastEventId }),
      });
    assert.deepEqual(parsed(await (await open()).rest()), log, "one reader from the start");
    // More readers than a tenant's replay turns (four): some wait for a turn, none loses an event.
    const from = [0, 0, 0, 0, 300, 700, log.length - 1];
    const together = await Promise.all(from.map(async (after) => (await open(after === 0 ? undefined : String(after))).rest()));
    for (const [index, after] of from.entries()) {
      assert.deepEqual(
        parsed(together[index]!),
        log.filter((event) => event.sequence > after),
        `reader ${index}, from ${after}`,
      );
    }
  });
});

describe(`readers that do not read on ${TEST_DRIVER}`, () => {
  const SCRAPE_TOKEN = "event-streams-scrape-token";
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ configFile: TESTING_CONFIG, config: { metricsToken: SCRAPE_TOKEN } });
  });
  after(async () => {
    await server.close();
  });

  /** The SSE streams the server is serving now (its gauge). */
  const openStreams = async () => {
    const metrics = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${SCRAPE_TOKEN}` } })).text();
    return Number(/^rudder_sse_streams_open (\d+)$/m.exec(metrics)?.[1]);
  };

  /** A stream after `lastEventId` whose client takes nothing off its socket until `read()`; resolves once its first bytes came. */
  const openPaused = (url: string, token: string, lastEventId: number) =>
    new Promise<{ read(): Promise<SseEvent[]> }>((resolve, reject) => {
      const headers = { authorization: `Bearer ${token}`, accept: "text/event-stream", "last-event-id": String(lastEventId) };
      get(url, { headers }, (response: IncomingMessage) => {
        response.pause();
        response.once("readable", () =>
          resolve({
            async read() {
              const events: SseEvent[] = [];
              for await (const item of parseSse(response)) if (item.type === "event") events.push(item);
              return events;
            },
          }),
        );
      }).on("error", reject);
    });

  test("a replay to a reader that does not read goes no further than its socket takes, holds no replay turn, and is whole once it reads", async () => {
    // Pages of 500 events of 25 KB: a page is more than a socket's buffers take on both ends.
    const count = 1_100;
    const created = await server.request("POST", "/v1/runs", {
      body: { assistant_id: "ticks", input: { count, interval_ms: 0, pad_bytes: 25_000 } },
    });
    const runId = String(created.body.run_id);
    assert.equal((await server.request("GET", `/v1/runs/${runId}/join?timeout=120`)).body.status, "succeeded");
    const token = await server.token();
    const url = `${server.url}/v1/runs/${runId}/stream`;
    const readAll = async () => parsed(await (await openSse(url, { headers: { authorization: `Bearer ${token}` } })).rest());
    const log = await readAll();
    assert.deepEqual(ticksOf(log), [...Array(count).keys()]);

    // The first reader's stream reads through the process's tail of the run; each later one starts
    // behind it, so it reads the log in one of the tenant's four replay turns.
    const from = [400, 300, 200, 100, 50];
    const paused = [];
    for (const after of from) paused.push(await openPaused(url, token, after));
    // Their streams wait for their sockets: not one of them was written out whole into the process's memory.
    assert.equal(await openStreams(), from.length);
    // Another of the tenant's replays still gets turns, and reads the whole log.
    const noTurn = new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error("the other replay got no turn in 60 s")), 60_000).unref(),
    );
    assert.deepEqual(await Promise.race([readAll(), noTurn]), log);
    // Once they read, each gets every event after its Last-Event-ID, in order, and its end.
    for (const [index, reader] of paused.entries()) {
      assert.deepEqual(
        parsed(await reader.read()),
        log.filter((event) => event.sequence > from[index]!),
        `reader from ${from[index]}`,
      );
    }
  });
});

describe(`waiting for a run's end on ${TEST_DRIVER}`, () => {
  test("a join of a run this process created reads it not at all; one after its end reads it once; another tenant's gets 404", async () => {
    const counted = countingRunReads(await createTestDatabase());
    const server = await startTestServer({ configFile: TESTING_CONFIG, database: counted.database });
    try {
      for (let i = 0; i < 5; i++) {
        const created = await server.request("POST", "/v1/runs", {
          body: { assistant_id: "ticks", input: { count: 5, interval_ms: 100 } },
        });
        assert.equal(created.status, 202, JSON.stringify(created.body));
        const runId = String(created.body.run_id);
        counted.reset();
        assert.equal((await server.request("GET", `/v1/runs/${runId}/join?timeout=30`, { tenant: "t2" })).status, 404);
        assert.equal(counted.readsOf(runId), 1, "another tenant's join reads the run, and finds it is not theirs");
        counted.reset();
        const joinSent = Date.now();
        const { answer: joined, rechecks } = await timedWait(server.request("GET", `/v1/runs/${runId}/join?timeout=30`));
        assert.equal(joined.body.status, "succeeded", JSON.stringify(joined.body));
        const joinReads = counted.readsOf(runId);
        const stored = await server.request("GET", `/v1/runs/${runId}`);
        // On a loaded machine the run may end before the join is sent (it is then read once, as
        // below); one that ended well after reads nothing.
        const endedAfterJoin = Date.parse(String(stored.body.finished_at)) - joinSent > ENDED_BEFORE_SLACK_MS;
        assertReads(
          joinReads,
          0,
          rechecks + (endedAfterJoin ? 0 : 1),
          "created here and not yet ended: the join's start reads nothing, its end is handed over",
        );
        assert.deepEqual(joined.body, stored.body);
        // Once its end was heard, the run is read like any other: its row says how it ended.
        counted.reset();
        const again = await server.request("GET", `/v1/runs/${runId}/join?timeout=30`);
        assert.deepEqual(again.body, stored.body);
        assert.equal(counted.readsOf(runId), 1, "a join after the end reads the run once");
      }
      // LangGraph's create-and-wait: no read of the run at all.
      counted.reset();
      const { answer: waited, rechecks } = await timedWait(
        server.request("POST", "/runs/wait", { body: { assistant_id: "ticks", input: { count: 5, interval_ms: 20 } } }),
      );
      assert.equal(waited.status, 200, JSON.stringify(waited.body));
      const runId = String(waited.headers.get("content-location")?.split("/").at(-1));
      assert.equal((await server.request("GET", `/v1/runs/${runId}`)).body.status, "succeeded");
      assertReads(counted.readsOf(runId), 1, rechecks, "the only read of the run is the GET's");
    } finally {
      await server.close();
    }
  });

  test(
    "in an API process without a worker, a join of a run it created reads it once: on the notice of the worker process's settle",
    { skip: TEST_DRIVER === "pglite" && "needs PostgreSQL: processes share one database" },
    async () => {
      const counted = countingRunReads(await createTestDatabase());
      const api = await startTestServer({ configFile: TESTING_CONFIG, database: counted.database, worker: false, scheduler: false });
      // The worker's own handle on the database: its reads are not the API's, and are not counted.
      const workerDb = createPostgresDb(counted.database.url!);
      const worker = await startServer({
        config: { ...api.config, metricsPort: undefined },
        db: workerDb,
        schema: "require-current",
        api: false,
        worker: { pollMs: 100 },
        scheduler: false,
        logger: false,
      });
      try {
        for (let i = 0; i < 3; i++) {
          const created = await api.request("POST", "/v1/runs", { body: { assistant_id: "ticks", input: { count: 3, interval_ms: 20 } } });
          assert.equal(created.status, 202, JSON.stringify(created.body));
          const runId = String(created.body.run_id);
          const { answer: joined, rechecks } = await timedWait(api.request("GET", `/v1/runs/${runId}/join?timeout=30`));
          assert.equal(joined.body.status, "succeeded", JSON.stringify(joined.body));
          assertReads(
            counted.readsOf(runId),
            1,
            rechecks,
            "no read to start (created here), one on the settle's notice from the other process",
          );
          counted.reset();
          // Heard settled, it is no longer known: a join now reads it, once.
          assert.deepEqual((await api.request("GET", `/v1/runs/${runId}/join?timeout=30`)).body, joined.body);
          assert.equal(counted.readsOf(runId), 1);
          counted.reset();
        }
      } finally {
        await worker.close();
        await workerDb.close();
        await api.close();
      }
    },
  );

  test("streams and a join of a run created here read it not at all: not to start, not on `cancelling`, not at its end", async () => {
    const counted = countingRunReads(await createTestDatabase());
    const { notifier, subscriptions } = countingSubscriptions(counted.database);
    const server = await startTestServer({
      configFile: TESTING_CONFIG,
      database: counted.database,
      notifier,
      config: { streamHeartbeatMs: 30_000 },
    });
    try {
      const created = await server.request("POST", "/v1/runs", {
        body: { assistant_id: "steerable", input: { rounds: 20, waitMs: 5000 } },
      });
      assert.equal(created.status, 202, JSON.stringify(created.body));
      const runId = String(created.body.run_id);
      const token = await server.token();
      const open = () => openSse(`${server.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${token}` } });
      const streams = [await open(), await open()];
      for (const stream of streams) for (let event = await stream.next(); event?.event !== "run_started"; event = await stream.next());
      // Created here: neither the streams nor the join read the run to start.
      assert.equal(counted.readsOf(runId), 0, `${counted.readsOf(runId)} reads of the run by two streams`);
      const before = subscriptions();
      const join = timedWait(server.request("GET", `/v1/runs/${runId}/join?timeout=30`));
      while (subscriptions() === before) await new Promise((resolve) => setTimeout(resolve, 5));

      const cancelled = await server.request("POST", `/v1/runs/${runId}/cancel`);
      assert.equal(cancelled.body.status, "cancelling");
      const ends = await Promise.all(streams.map((stream) => stream.rest()));
      for (const rest of ends) assert.equal(rest.filter((event) => event.event !== "heartbeat").at(-1)?.event, "run_cancelled");
      const { answer: joined, rechecks } = await join;
      assert.equal(joined.body.status, "cancelled");
      // None on the cancel's notice (the run was only cancelling); none on the settle's: the worker
      // of this process handed the settled row over with it. (The streams re-check every 30 s.)
      assertReads(counted.readsOf(runId), 0, rechecks, "two streams and a join");
      assert.deepEqual(joined.body, (await server.request("GET", `/v1/runs/${runId}`)).body, "the join answers the run as stored");
    } finally {
      await server.close();
    }
  });
});
