import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { createLocalNotifier, type Notifier } from "../src/notify/notifier.ts";
import { createPostgresDb, type Db, type Queryable } from "../src/storage/db.ts";
import { appendEvents } from "../src/storage/events.ts";
import { rowOnlyMoves } from "../src/domain/run-lifecycle.ts";
import {
  claimRuns,
  insertRun,
  lockRunWithThread,
  moveRunStatus,
  settleAttempt,
  settleAttempts,
  type ClaimedRun,
} from "../src/storage/runs.ts";
import { SteeringRepository } from "../src/storage/steering.ts";
import { checkpointWrite } from "../src/storage/checkpoint-writes.ts";
import { insertThread, lockThread, lockThreads } from "../src/storage/threads.ts";
import { createTestDatabase, TEST_DRIVER, type TestDatabase } from "./support/db.ts";
import { interceptedDb } from "./support/intercepted-db.ts";
import { holdTransaction, type HeldTransaction } from "./support/hold.ts";
import { stateless, succeededSettle } from "./support/runs.ts";
import { startTestServer, type TestServer } from "./support/server.ts";

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));

/** Every claim statement the server sends, with how many runs it took; every lease extension, with how many leases it extended. */
interface ClaimLog {
  claims: number[];
  heartbeats: number[];
}

/** The database, with each claim statement (the worker's queue read) recorded. */
function recordingClaims(database: TestDatabase): { database: TestDatabase; log: ClaimLog } {
  const log: ClaimLog = { claims: [], heartbeats: [] };
  const db = interceptedDb(database.db, async <Row>(target: Queryable, sql: string, params?: readonly unknown[]): Promise<Row[]> => {
    const rows = await target.query<Row>(sql, params);
    if (sql.trimStart().startsWith("with candidate as")) log.claims.push(rows.length);
    if (/^\s*(with held as materialized \([\s\S]*\)\s*)?update runs (r )?set lease_expires_at = now\(\) \+/.test(sql))
      log.heartbeats.push(rows.length);
    return rows;
  });
  return { database: { ...database, db }, log };
}

/**
 * A fresh database with a thread of tenant t1 and a pending run on it. The parts of a check that
 * hold a row lock on one connection while another statement runs are PostgreSQL's
 * (`SECOND_CONNECTION`): PGlite has one connection, where the second statement would wait.
 */
async function withRunOnThread(check: (db: Db, threadId: string, run: ClaimedRun) => Promise<void>): Promise<void> {
  const database = await createTestDatabase();
  try {
    const threadId = randomUUID();
    await insertThread(database.db, "t1", threadId, {});
    await check(database.db, threadId, (await insertRun(database.db, { ...stateless("t1", {}), threadId }, 1000))!);
  } finally {
    await database.drop();
  }
}
const SECOND_CONNECTION = TEST_DRIVER === "postgres";

/** A test server on a fresh database that records every statement it sends, and whether it went inside a transaction. */
async function serverRecordingStatements() {
  const database = await createTestDatabase();
  const sent: { sql: string; inTransaction: boolean }[] = [];
  const db = interceptedDb(database.db, <Row>(target: Queryable, sql: string, params?: readonly unknown[]) => {
    sent.push({ sql: sql.trimStart(), inTransaction: target !== database.db });
    return target.query<Row>(sql, params);
  });
  return { server: await startTestServer({ configFile: TESTING_CONFIG, database: { ...database, db } }), sent };
}

/** Until a statement of this database waits for a row lock (PostgreSQL). */
async function waitUntilSomeoneWaitsForALock(db: Db): Promise<void> {
  for (let tries = 0; tries < 500; tries++) {
    const [row] = await db.query<{ waiting: number }>(
      "select count(*)::int as waiting from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
    );
    if (row!.waiting > 0) return;
    await sleep(10);
  }
  assert.fail("no statement ever waited for a lock");
}

describe(`the worker's claim loop on ${TEST_DRIVER}`, () => {
  test("a new run costs one claim, not one per idle slot", async () => {
    const { database, log } = recordingClaims(await createTestDatabase());
    // No poll within the test: only notices and finished runs may trigger a claim.
    const server = await startTestServer({ configFile: TESTING_CONFIG, database, worker: { concurrency: 10, pollMs: 600_000 } });
    try {
      await server.request("GET", "/health");
      for (let round = 0; round < 5; round++) {
        const before = log.claims.length;
        const created = await server.request("POST", "/v1/runs", { body: { assistant_id: "echo", input: { message: `r${round}` } } });
        const joined = await server.request("GET", `/v1/runs/${created.body.run_id}/join?timeout=20`);
        assert.equal(joined.body.status, "succeeded");
        const claims = log.claims.slice(before);
        // One claim takes the run; a second, empty one may follow a startup claim still in flight.
        assert.ok(claims.length >= 1 && claims.length <= 2, `claims for one run: ${JSON.stringify(claims)}`);
        assert.equal(claims.filter((taken) => taken === 1).length, 1);
      }
    } finally {
      await server.close();
    }
  });

  test("with every notice lost, the poll still claims new runs", async () => {
    const inner = createLocalNotifier();
    const deaf: Notifier = {
      publish: async () => {},
      publishWithin: async () => {},
      subscribe: (listener) => inner.subscribe(listener),
      close: () => inner.close(),
    };
    const { database, log } = recordingClaims(await createTestDatabase());
    const server = await startTestServer({ configFile: TESTING_CONFIG, database, notifier: deaf, worker: { concurrency: 2, pollMs: 300 } });
    try {
      const created = await server.request("POST", "/v1/runs", { body: { assistant_id: "echo", input: { message: "unheard" } } });
      // join wakes on notices too; without them it re-reads storage every second.
      const joined = await server.request("GET", `/v1/runs/${created.body.run_id}/join?timeout=20`);
      assert.equal(joined.body.status, "succeeded");
      assert.ok(log.claims.includes(1), "a poll's claim took the run");
    } finally {
      await server.close();
    }
  });

  test("a cancelling run whose worker died is cancelled once its lease expires, and its thread freed", async () => {
    const database = await createTestDatabase();
    const threadId = randomUUID();
    await database.db.query("insert into threads (thread_id, tenant_id, status) values ($1, 't1', 'busy')", [threadId]);
    const run = (await insertRun(database.db, { ...stateless("t1", { message: "orphan" }), threadId }, 1000))!;
    // As a worker leaves it when it dies after the cancel request reached the run.
    await database.db.query(
      "update runs set status = 'cancelling', attempt = 1, lease_owner = 'dead-worker', lease_expires_at = now() - interval '1 second' where run_id = $1",
      [run.run_id],
    );
    const server = await startTestServer({ configFile: TESTING_CONFIG, database, worker: { pollMs: 200 } });
    try {
      const joined = await server.request("GET", `/v1/runs/${run.run_id}/join?timeout=20`);
      assert.equal(joined.body.status, "cancelled");
      assert.equal(joined.body.error.code, "run_cancelled");
      const events = (await server.request("GET", `/v1/runs/${run.run_id}/events`)).body as { kind: string; data: { reason?: string } }[];
      assert.deepEqual(
        events.map((event) => [event.kind, event.data.reason]),
        [["run_cancelled", "lease_expired"]],
      );
      assert.equal((await server.request("GET", `/v1/threads/${threadId}`)).body.status, "idle");
    } finally {
      await server.close();
    }
  });

  test("one claim fills every free slot; the rest are claimed as slots free up, each run once", async () => {
    const raw = await createTestDatabase();
    const runIds: string[] = [];
    for (let index = 0; index < 25; index++) {
      const run = (await insertRun(raw.db, stateless("t1", { message: `m${index}` }), 1000))!;
      runIds.push(run.run_id);
    }
    const { database, log } = recordingClaims(raw);
    const server = await startTestServer({ configFile: TESTING_CONFIG, database, worker: { concurrency: 10, pollMs: 600_000 } });
    try {
      for (const runId of runIds) {
        const joined = await server.request("GET", `/v1/runs/${runId}/join?timeout=30`);
        assert.equal(joined.body.status, "succeeded");
        assert.equal(joined.body.attempt, 1, "claimed exactly once");
      }
      assert.equal(log.claims[0], 10, `the first claim takes ten runs: ${JSON.stringify(log.claims)}`);
      assert.equal(
        log.claims.reduce((sum, taken) => sum + taken, 0),
        25,
      );
      assert.ok(Math.max(...log.claims) <= 10, "never more than the free slots");
    } finally {
      await server.close();
    }
  });

  test("the leases of all running runs are extended together, one statement per interval; cancels among them are noticed", async () => {
    const { database, log } = recordingClaims(await createTestDatabase());
    const server = await startTestServer({
      configFile: TESTING_CONFIG,
      database,
      worker: { concurrency: 5, heartbeatMs: 150, pollMs: 600_000 },
    });
    try {
      const runIds: string[] = [];
      for (let index = 0; index < 4; index++) {
        const created = await server.request("POST", "/v1/runs", { body: { assistant_id: "steps", input: { steps: 200, delayMs: 100 } } });
        runIds.push(created.body.run_id);
      }
      for (const runId of runIds)
        for (let i = 0; i < 400 && (await server.request("GET", `/v1/runs/${runId}`)).body.status !== "running"; i++) await sleep(25);
      // Every lease extended from now on extends all four: one statement per interval, not one per run.
      log.heartbeats.length = 0;
      for (let i = 0; i < 400 && log.heartbeats.length < 3; i++) await sleep(25);
      assert.ok(log.heartbeats.length >= 3, "the leases are being extended");
      assert.deepEqual(
        log.heartbeats.slice(0, 3),
        [4, 4, 4],
        `each heartbeat statement extends every held lease: ${JSON.stringify(log.heartbeats)}`,
      );

      const [first, second, ...rest] = runIds;
      await Promise.all([first, second].map((runId) => server.request("POST", `/v1/runs/${runId}/cancel`)));
      for (const runId of [first, second]) {
        const joined = await server.request("GET", `/v1/runs/${runId}/join?timeout=30`);
        assert.equal(joined.body.status, "cancelled");
      }
      for (const runId of rest)
        assert.equal((await server.request("GET", `/v1/runs/${runId}`)).body.status, "running", "the others keep running");
      log.heartbeats.length = 0;
      for (let i = 0; i < 400 && log.heartbeats.length < 2; i++) await sleep(25);
      assert.equal(log.heartbeats.at(-1), 2, "a finished attempt's lease is no longer extended");
      for (const runId of rest) await server.request("POST", `/v1/runs/${runId}/cancel`);
      for (const runId of rest) assert.equal((await server.request("GET", `/v1/runs/${runId}/join?timeout=30`)).body.status, "cancelled");
    } finally {
      await server.close();
    }
  });

  test("while a cancelled run settles, claims take at most ten runs each, and the queue still drains", async () => {
    const raw = await createTestDatabase();
    const { database, log } = recordingClaims(raw);
    let cancelledRunId = "";
    let entered!: () => void;
    const settling = new Promise<void>((resolve) => (entered = resolve));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const server = await startTestServer({
      configFile: TESTING_CONFIG,
      database,
      worker: {
        concurrency: 50,
        pollMs: 600_000,
        // The cancelled run's settle waits here: its worker counts it as told to stop until then.
        hooks: { afterSteeringClosed: async (runId) => void (runId === cancelledRunId && (entered(), await released)) },
      },
    });
    try {
      const held = await server.request("POST", "/v1/runs", { body: { assistant_id: "steps", input: { steps: 200, delayMs: 100 } } });
      cancelledRunId = held.body.run_id;
      for (let i = 0; i < 400 && (await server.request("GET", `/v1/runs/${cancelledRunId}`)).body.status !== "running"; i++)
        await sleep(25);
      await server.request("POST", `/v1/runs/${cancelledRunId}/cancel`);
      await settling;

      log.claims.length = 0;
      const runIds: string[] = [];
      for (let index = 0; index < 25; index++)
        runIds.push((await insertRun(raw.db, stateless("t1", { message: `q${index}` }), 1000))!.run_id);
      await server.request("POST", "/v1/runs", { body: { assistant_id: "echo", input: { message: "wake" } } });
      for (const runId of runIds) {
        const joined = await server.request("GET", `/v1/runs/${runId}/join?timeout=30`);
        assert.equal(joined.body.status, "succeeded", "the queue drains while the cancel settles");
      }
      assert.ok(
        log.claims.every((taken) => taken <= 10),
        `no claim takes more than ten runs while a stopped run settles, with 49 slots free: ${JSON.stringify(log.claims)}`,
      );
      assert.equal((await server.request("GET", `/v1/runs/${cancelledRunId}`)).body.status, "cancelling", "its settle is still held");

      release();
      const cancelled = await server.request("GET", `/v1/runs/${cancelledRunId}/join?timeout=30`);
      assert.equal(cancelled.body.status, "cancelled");
    } finally {
      release();
      await server.close();
    }
  });

  test("a cancel answered cancelling while the graph is finishing ends the run cancelled, not with the graph's result", async () => {
    let target = "";
    let cancelAnswer: { status: number; body: { status: string } } | undefined;
    const server: TestServer = await startTestServer({
      configFile: TESTING_CONFIG,
      worker: {
        // The graph has its result and steering is closed: the cancel commits before the settle,
        // and the worker has not heard of it (the settle was decided without it).
        hooks: {
          afterSteeringClosed: async (runId) => {
            if (runId === target) cancelAnswer = await server.request("POST", `/v1/runs/${runId}/cancel`);
          },
        },
      },
    });
    try {
      for (const threadId of [null, (await server.request("POST", "/v1/threads", { body: {} })).body.thread_id as string]) {
        const created = await server.request("POST", threadId ? `/v1/threads/${threadId}/runs` : "/v1/runs", {
          body: { assistant_id: "echo", input: { message: "almost" } },
        });
        target = created.body.run_id;
        const ended = (await server.request("GET", `/v1/runs/${target}/join?timeout=30`)).body;
        assert.deepEqual([cancelAnswer?.status, cancelAnswer?.body.status], [200, "cancelling"]);
        assert.equal(ended.status, "cancelled", "as its canceller was answered");
        const kinds = (await server.request("GET", `/v1/runs/${target}/events?limit=100`)).body.map(
          (event: { kind: string }) => event.kind,
        );
        assert.equal(kinds.at(-1), "run_cancelled");
        assert.ok(!kinds.includes("run_succeeded"));
        if (threadId) {
          assert.equal((await server.request("GET", `/v1/threads/${threadId}`)).body.status, "idle");
          const next = await server.request("POST", `/v1/threads/${threadId}/runs`, {
            body: { assistant_id: "echo", input: { message: "next" } },
          });
          assert.equal((await server.request("GET", `/v1/runs/${next.body.run_id}/join?timeout=30`)).body.status, "succeeded");
        }
      }
    } finally {
      target = "";
      await server.close();
    }
  });

  test("a run dead-lettered because its workers kept dying keeps its pending steering, and a redrive delivers it", async () => {
    const raw = await createTestDatabase();
    const queueOnly = await startTestServer({ configFile: TESTING_CONFIG, database: { ...raw, drop: async () => {} }, worker: false });
    const { body: run } = await queueOnly.request("POST", "/v1/runs", {
      body: { assistant_id: "steerable", input: { rounds: 1, waitMs: 100 } },
    });
    const steered = await queueOnly.request("POST", `/v1/runs/${run.run_id}/steer`, {
      body: { kind: "message", payload: { message: "kept" } },
    });
    assert.equal(steered.status, 202, JSON.stringify(steered.body));
    await queueOnly.close();
    // Two workers took it and died: claimed twice, each lease left to expire.
    for (const owner of ["dead-1", "dead-2"]) {
      assert.equal((await claimRuns(raw.db, owner, 1, 10, { to: "running", thread: "busy" })).length, 1);
      await sleep(20);
    }
    const server = await startTestServer({ configFile: TESTING_CONFIG, database: raw, worker: { maxAttempts: 2 } });
    try {
      const ended = (await server.request("GET", `/v1/runs/${run.run_id}/join?timeout=30`)).body;
      assert.deepEqual([ended.status, ended.error.code], ["dead_letter", "dead_letter"]);
      const kinds = (await server.request("GET", `/v1/runs/${run.run_id}/events?limit=100`)).body.map(
        (event: { kind: string }) => event.kind,
      );
      assert.ok(!kinds.includes("run_started"), `no attempt ran its graph, none started: ${kinds.join(", ")}`);
      assert.ok(!kinds.includes("run.steer.superseded"), kinds.join(", "));
      const statuses = async () =>
        (await raw.db.query<{ status: string }>("select status from steering_events where run_id = $1", [run.run_id])).map(
          (row) => row.status,
        );
      assert.deepEqual(await statuses(), ["pending"]);

      assert.equal((await server.request("POST", `/v1/runs/${run.run_id}/redrive`)).status, 202);
      const redriven = (await server.request("GET", `/v1/runs/${run.run_id}/join?timeout=30`)).body;
      assert.equal(redriven.status, "succeeded");
      assert.deepEqual(
        redriven.output.received.map((message: { kind: string; payload: unknown }) => [message.kind, message.payload]),
        [["message", { message: "kept" }]],
      );
      assert.deepEqual(await statuses(), ["consumed"]);
    } finally {
      await server.close();
    }
  });

  test("with every pooled connection busy for longer than a lease, the leases of running attempts are still extended", async (t) => {
    if (TEST_DRIVER !== "postgres") {
      t.skip("pg's pool: PGlite has one connection and no pool to wait in (runs in npm run test:pg)");
      return;
    }
    const raw = await createTestDatabase();
    // One pooled connection, which the test then holds; the lease keeper has a connection of its own.
    const db = createPostgresDb(raw.url!, { max: 1 });
    const server = await startTestServer({
      configFile: TESTING_CONFIG,
      database: { ...raw, db, drop: async () => (await db.close(), await raw.drop()) },
      worker: { concurrency: 2, leaseMs: 3000, heartbeatMs: 200, pollMs: 200 },
    });
    let holder: HeldTransaction<unknown> | undefined;
    try {
      const created = await server.request("POST", "/v1/runs", { body: { assistant_id: "steps", input: { steps: 100, delayMs: 100 } } });
      const runId = created.body.run_id as string;
      for (let i = 0; i < 400 && (await server.request("GET", `/v1/runs/${runId}`)).body.status !== "running"; i++) await sleep(25);

      holder = await holdTransaction(db, (tx) => tx.query("select 1"));
      // Held for longer than a lease: read through the test's own connections meanwhile.
      const expiries: number[] = [];
      for (let i = 0; i < 20; i++) {
        const [row] = await raw.db.query<{ left_ms: number }>(
          "select extract(epoch from (lease_expires_at - now())) * 1000 as left_ms from runs where run_id = $1",
          [runId],
        );
        expiries.push(Number(row!.left_ms));
        await sleep(200);
      }
      holder.release();
      await holder.done;
      assert.ok(
        expiries.every((left) => left > 0),
        `the lease never ran out while the pool was busy (ms left: ${expiries.map(Math.round).join(", ")})`,
      );
      const [run] = await raw.db.query<{ attempt: number }>("select attempt from runs where run_id = $1", [runId]);
      assert.equal(run!.attempt, 1, "not claimed again");
      await server.request("POST", `/v1/runs/${runId}/cancel`);
      assert.equal((await server.request("GET", `/v1/runs/${runId}/join?timeout=30`)).body.status, "cancelled");
    } finally {
      holder?.release();
      await server.close();
    }
  });

  test("a claim skips a run whose lease expired while its thread is held (its first attempt settling), and never waits for it", () =>
    withRunOnThread(async (db, threadId, run) => {
      const [first] = await claimRuns(db, "worker-a", 30_000, 1, { to: "running", thread: "busy" });
      assert.equal(first?.run_id, run.run_id);
      await db.query("update runs set lease_expires_at = now() - interval '1 second' where run_id = $1", [run.run_id]);

      if (SECOND_CONNECTION) {
        // worker-a settles its attempt: the thread's row first, then (were it not for this test) the run's.
        const settle = await holdTransaction(db, (tx) => lockThread(tx, "t1", threadId));
        const bound = new Promise<"waited">((resolve) => setTimeout(() => resolve("waited"), 10_000).unref());
        const claimed = await Promise.race([claimRuns(db, "worker-b", 30_000, 10, { to: "running", thread: "busy" }), bound]);
        settle.release();
        await settle.done;
        assert.deepEqual(claimed, [], "the claim skipped the run rather than wait for (and deadlock with) the settle");
      }

      const [again] = await claimRuns(db, "worker-b", 30_000, 10, { to: "running", thread: "busy" });
      assert.deepEqual([again?.run_id, again?.attempt], [run.run_id, 2], "claimed once the thread is free");
    }));

  test("lockRunWithThread locks the run after its thread, in one statement (cancel, redrive and resume)", () =>
    withRunOnThread(async (db, threadId, onThread) => {
      const loose = (await insertRun(db, stateless("t1", {}), 1000))!;
      assert.equal((await lockRunWithThread(db, "t1", loose.run_id))?.run_id, loose.run_id, "a stateless run: no thread to lock");
      assert.equal(await lockRunWithThread(db, "t1", randomUUID()), undefined);
      assert.equal(await lockRunWithThread(db, "t2", onThread.run_id), undefined, "another tenant's run is not found");

      const holder = await holdTransaction(db, (tx) => lockRunWithThread(tx, "t1", onThread.run_id));
      assert.deepEqual([holder.value?.run_id, holder.value?.thread_id, holder.value?.status], [onThread.run_id, threadId, "pending"]);
      const nowait = (sql: string, id: string) =>
        db.query(`${sql} for update nowait`, [id]).then(
          () => "free",
          (error: { code?: string }) => error.code,
        );
      const lockedThread = SECOND_CONNECTION
        ? await nowait("select 1 from threads where tenant_id = 't1' and thread_id = $1", threadId)
        : undefined;
      const lockedRun = SECOND_CONNECTION
        ? await nowait("select 1 from runs where tenant_id = 't1' and run_id = $1", onThread.run_id)
        : undefined;
      holder.release();
      await holder.done;
      if (!SECOND_CONNECTION) return;
      assert.deepEqual(
        [lockedThread, lockedRun],
        ["55P03", "55P03"],
        "the thread's row and the run's are locked until the transaction ends",
      );

      // The order: with the thread held elsewhere, the statement waits for it before locking the run.
      const thread = await holdTransaction(db, (tx) => lockThread(tx, "t1", threadId));
      const waiting = db.transaction((tx) => lockRunWithThread(tx, "t1", onThread.run_id));
      await waitUntilSomeoneWaitsForALock(db);
      const runMeanwhile = await nowait("select 1 from runs where tenant_id = 't1' and run_id = $1", onThread.run_id);
      thread.release();
      await thread.done;
      assert.equal((await waiting)?.run_id, onThread.run_id);
      assert.equal(runMeanwhile, "free", "the run is not locked while its thread is awaited");
    }));

  test("moveRunStatus cancels a running run in one statement without its thread's lock; in any other status it writes nothing", () =>
    withRunOnThread(async (db, threadId, run) => {
      const cancel = rowOnlyMoves("cancel");
      assert.equal(await moveRunStatus(db, "t1", run.run_id, cancel), undefined, "a pending run is not a row-only move");
      const [claimed] = await claimRuns(db, "worker-a", 30_000, 1, { to: "running", thread: "busy" });
      assert.equal(await moveRunStatus(db, "t2", run.run_id, cancel), undefined, "another tenant's run is not found");

      const thread = SECOND_CONNECTION ? await holdTransaction(db, (tx) => lockThread(tx, "t1", threadId)) : undefined;
      const bound = new Promise<"waited">((resolve) => setTimeout(() => resolve("waited"), 10_000).unref());
      const moved = await Promise.race([moveRunStatus(db, "t1", run.run_id, cancel), bound]);
      thread?.release();
      await thread?.done;
      assert.notEqual(moved, "waited", "the move did not wait for the thread's lock");
      assert.deepEqual(moved === "waited" ? moved : [moved?.status, moved?.attempt, moved?.thread_id], [
        "cancelling",
        claimed!.attempt,
        threadId,
      ]);
      const [row] = await db.query<{ status: string; lease_owner: string | null }>(
        "select status, lease_owner from runs where run_id = $1",
        [run.run_id],
      );
      assert.deepEqual({ ...row }, { status: "cancelling", lease_owner: "worker-a" }, "the lease stays with the worker that stops the run");
      assert.equal(await moveRunStatus(db, "t1", run.run_id, cancel), undefined, "already cancelling: nothing to write");
    }));

  test("a settle appends the attempt's events after those already logged, in the same statement; with the lease lost it writes nothing", () =>
    withRunOnThread(async (db, threadId, run) => {
      const [claimed] = await claimRuns(db, "worker-a", 30_000, 1, { to: "running", thread: "busy" });
      const lease = { tenantId: "t1", runId: run.run_id, attempt: claimed!.attempt, owner: "worker-a" };
      await appendEvents(db, "t1", run.run_id, [{ kind: "run_started", data: { attempt: 1, worker: "worker-a" } }]);
      const fields = succeededSettle([
        { kind: "values", data: { values: { ok: true } } },
        { kind: "run_succeeded", data: {} },
      ]);
      const logged = () =>
        db.query<{ sequence: number; kind: string }>(
          "select sequence, kind from run_events where tenant_id = 't1' and run_id = $1 order by sequence",
          [run.run_id],
        );

      const lost = await db.transaction(async (tx) => {
        await lockThread(tx, "t1", threadId);
        return settleAttempt(tx, { ...lease, owner: "worker-b" }, fields);
      });
      assert.equal(lost, undefined, "another owner's settle is refused");
      assert.deepEqual(
        (await logged()).map((row) => row.kind),
        ["run_started"],
        "and appends nothing",
      );

      const settled = await db.transaction(async (tx) => {
        await lockThread(tx, "t1", threadId);
        return settleAttempt(tx, lease, fields);
      });
      assert.deepEqual(settled, { threadHasQueued: false });
      assert.deepEqual(await logged(), [
        { sequence: 1, kind: "run_started" },
        { sequence: 2, kind: "values" },
        { sequence: 3, kind: "run_succeeded" },
      ]);
      const [row] = await db.query<{ status: string; last_event_sequence: number }>(
        "select status, last_event_sequence from runs where tenant_id = 't1' and run_id = $1",
        [run.run_id],
      );
      assert.deepEqual(row, { status: "succeeded", last_event_sequence: 3 });
    }));
});

/** A checkpoint an attempt of `run` holds, as the gate carries it. */
const heldCheckpoint = (run: ClaimedRun, threadId: string, checkpointId = "c1") => ({
  runId: run.run_id,
  write: checkpointWrite(["t1", threadId, "", checkpointId, null, "json", new TextEncoder().encode("{}"), "{}"]),
});

describe(`an attempt's settle on ${TEST_DRIVER}`, () => {
  test("gates and settles of several runs go in one statement each, every run fenced by its own lease", async () => {
    const database = await createTestDatabase();
    try {
      const db = database.db;
      const onThread = async () => {
        const threadId = randomUUID();
        await insertThread(db, "t1", threadId, {});
        const first = (await insertRun(db, { ...stateless("t1", {}), threadId }, 1000))!;
        return { threadId, first };
      };
      const a = await onThread();
      const b = await onThread();
      const loose = (await insertRun(db, stateless("t1", {}), 1000))!;
      const claimed = await claimRuns(db, "worker-a", 30_000, 10, { to: "running", thread: "busy" });
      assert.equal(claimed.length, 3);
      // Queued behind a's first run, blocked until its settle releases it.
      const next = (await insertRun(db, { ...stateless("t1", {}), threadId: a.threadId }, 1000))!;
      const lease = (run: ClaimedRun, owner = "worker-a") => ({ tenantId: "t1", runId: run.run_id, attempt: 1, owner });
      await db.query("update runs set last_steering_sequence = 1 where run_id = $1", [loose.run_id]);

      const gates = await new SteeringRepository(db).closeAdmissions(
        [
          lease(a.first),
          lease(b.first, "worker-b"),
          lease(loose),
          { tenantId: "t2", runId: a.first.run_id, attempt: 1, owner: "worker-a" },
        ],
        // The checkpoints the attempts still hold ride the same statement, fenced the same way.
        [heldCheckpoint(a.first, a.threadId), heldCheckpoint(b.first, b.threadId)],
      );
      assert.deepEqual(Object.fromEntries(gates), { [a.first.run_id]: { steered: false }, [loose.run_id]: { steered: true } });
      const closed = await db.query<{ run_id: string }>("select run_id::text as run_id from runs where steering_closed order by run_id");
      assert.deepEqual(closed.map((row) => row.run_id).sort(), [a.first.run_id, loose.run_id].sort(), "only where the lease held");
      const checkpoints = await db.query<{ thread_id: string }>("select thread_id from checkpoints");
      assert.deepEqual(
        checkpoints.map((row) => row.thread_id),
        [a.threadId],
        "a held checkpoint is written only where the lease held",
      );

      const fields = succeededSettle;
      const settled = await db.transaction(async (tx) => {
        await lockThreads(tx, [
          { tenantId: "t1", threadId: b.threadId },
          { tenantId: "t1", threadId: a.threadId },
        ]);
        return settleAttempts(tx, [
          { lease: lease(loose), fields: { ...fields([{ kind: "run_succeeded", data: {} }]), threadStatus: null } },
          { lease: lease(b.first, "worker-b"), fields: fields([{ kind: "run_succeeded", data: {} }]) },
          {
            lease: lease(a.first),
            fields: fields([
              { kind: "values", data: { values: { n: 1 } } },
              { kind: "run_succeeded", data: {} },
            ]),
          },
        ]);
      });
      assert.deepEqual(Object.fromEntries(settled), {
        [a.first.run_id]: { threadHasQueued: true },
        [loose.run_id]: { threadHasQueued: false },
      });
      const rows = await db.query<{ run_id: string; status: string; blocked: boolean; last_event_sequence: number }>(
        "select run_id::text as run_id, status, blocked, last_event_sequence from runs where tenant_id = 't1'",
      );
      const state = (run: ClaimedRun) => {
        const row = rows.find((candidate) => candidate.run_id === run.run_id)!;
        return [row.status, row.blocked, row.last_event_sequence];
      };
      assert.deepEqual(state(a.first), ["succeeded", false, 2]);
      assert.deepEqual(state(loose), ["succeeded", false, 1]);
      assert.deepEqual(state(b.first), ["running", false, 0], "a lost lease writes nothing");
      assert.deepEqual(state(next), ["pending", false, 0], "a's settle released the run queued behind it");
      const threads = await db.query<{ thread_id: string; status: string }>("select thread_id::text as thread_id, status from threads");
      assert.equal(threads.find((thread) => thread.thread_id === a.threadId)?.status, "idle");
      assert.equal(threads.find((thread) => thread.thread_id === b.threadId)?.status, "busy");
      const events = await db.query<{ run_id: string; sequence: number; kind: string }>(
        "select run_id::text as run_id, sequence, kind from run_events order by run_id, sequence",
      );
      assert.deepEqual(
        events.filter((event) => event.run_id === a.first.run_id).map((event) => [event.sequence, event.kind]),
        [
          [1, "values"],
          [2, "run_succeeded"],
        ],
      );
      assert.equal(events.filter((event) => event.run_id === b.first.run_id).length, 0);
    } finally {
      await database.drop();
    }
  });

  test("a gate whose held writes one statement cannot take (a row twice) writes them in a transaction with it, still fenced", async () => {
    const database = await createTestDatabase();
    try {
      const db = database.db;
      const threadId = randomUUID();
      await insertThread(db, "t1", threadId, {});
      const run = (await insertRun(db, { ...stateless("t1", {}), threadId }, 1000))!;
      const lost = (await insertRun(db, stateless("t1", {}), 1000))!;
      assert.equal((await claimRuns(db, "worker-a", 30_000, 10, { to: "running", thread: "busy" })).length, 2);
      const statements: string[] = [];
      const counted: Db = { ...db, query: (sql, params) => (statements.push(sql), db.query(sql, params)) };
      const twice = { ...heldCheckpoint(run, threadId), write: { ...heldCheckpoint(run, threadId).write } };
      const gates = await new SteeringRepository(counted).closeAdmissions(
        [
          { tenantId: "t1", runId: run.run_id, attempt: 1, owner: "worker-a" },
          { tenantId: "t1", runId: lost.run_id, attempt: 1, owner: "worker-b" },
        ],
        [heldCheckpoint(run, threadId), twice, heldCheckpoint(lost, lost.run_id, "c2")],
      );
      assert.deepEqual([...gates.keys()], [run.run_id]);
      assert.ok(!statements.some((sql) => /update runs r set steering_closed[\s\S]*insert into/.test(sql) || /fenced_/.test(sql)));
      const checkpoints = await db.query<{ thread_id: string }>("select thread_id from checkpoints");
      assert.deepEqual(
        checkpoints.map((row) => row.thread_id),
        [threadId],
        "written once, and only for the run whose lease held",
      );
    } finally {
      await database.drop();
    }
  });

  test("a cancel of a running run is one statement outside a transaction; the run still ends cancelled with one run_cancelled", async () => {
    const { server, sent } = await serverRecordingStatements();
    try {
      const threadId = (await server.request("POST", "/v1/threads", { body: {} })).body.thread_id as string;
      const created = await server.request("POST", `/v1/threads/${threadId}/runs`, {
        body: { assistant_id: "steps", input: { steps: 1, delayMs: 60_000 } },
      });
      const runId = created.body.run_id as string;
      for (let tries = 0; (await server.request("GET", `/v1/runs/${runId}`)).body.status !== "running"; tries++) {
        assert.ok(tries < 400, "the run started");
        await sleep(25);
      }
      const before = sent.length;
      const cancelling = await server.request("POST", `/v1/runs/${runId}/cancel`);
      assert.equal(cancelling.body.status, "cancelling");
      const during = sent.slice(before).filter((statement) => !statement.sql.startsWith("with batch as")); // the worker's own settle may overlap
      const moves = during.filter((statement) => statement.sql.includes("as m(from_status, to_status)"));
      assert.equal(moves.length, 1, "one conditional update");
      assert.equal(moves[0]!.inTransaction, false, "on its own, not inside a begin … commit");
      assert.ok(!during.some((statement) => statement.sql.includes("locked_thread as (")), "no locked read of the run and its thread");

      const ended = await server.request("GET", `/v1/runs/${runId}/join?timeout=20`);
      assert.equal(ended.body.status, "cancelled");
      assert.equal((await server.request("GET", `/v1/threads/${threadId}`)).body.status, "idle");
      const events = (await server.request("GET", `/v1/runs/${runId}/events`)).body as { kind: string }[];
      assert.deepEqual(
        events.filter((event) => event.kind.startsWith("run_") && event.kind !== "run_started").map((event) => event.kind),
        ["run_cancelled"],
      );
      assert.equal((await server.request("POST", `/v1/runs/${runId}/cancel`)).status, 409, "a cancelled run: the locked path refuses");
    } finally {
      await server.close();
    }
  });

  test("a stateless run never steered settles in one statement after the gate; its events are whole and in order", async () => {
    const { server, sent } = await serverRecordingStatements();
    try {
      const created = await server.request("POST", "/v1/runs", { body: { assistant_id: "echo", input: { message: "hi" } } });
      const joined = await server.request("GET", `/v1/runs/${created.body.run_id}/join?timeout=20`);
      assert.equal(joined.body.status, "succeeded");
      const gate = sent.findIndex((statement) => statement.sql.includes("set steering_closed = true"));
      assert.ok(gate >= 0, "the gate closed admission");
      const settle = sent.findIndex((statement, index) => index > gate && statement.sql.includes("settled as ("));
      assert.ok(settle > gate, "then the settle ran");
      assert.equal(sent[settle]!.inTransaction, false, "on its own, not inside a begin … commit");
      const events = (await server.request("GET", `/v1/runs/${created.body.run_id}/events`)).body as { sequence: number; kind: string }[];
      assert.deepEqual(
        events.map((event) => event.sequence),
        events.map((_, index) => index + 1),
      );
      assert.equal(events[0]?.kind, "run_started");
      assert.equal(events.at(-1)?.kind, "run_succeeded");
    } finally {
      await server.close();
    }
  });
});
