import { randomUUID } from "node:crypto";
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { NO_USAGE } from "../src/domain/budget.ts";
import { freesThread, type RunStatus } from "../src/domain/runs.ts";
import type { Db } from "../src/storage/db.ts";
import { claimRuns, insertRun, settleAttempt } from "../src/storage/runs.ts";
import { insertThread, lockThread } from "../src/storage/threads.ts";
import { createTestDatabase, TEST_DRIVER } from "./support/db.ts";
import { firstStatement } from "./support/intercepted-db.ts";
import { stateless } from "./support/runs.ts";
import { startTestServer, type TestServer } from "./support/server.ts";

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));
/** A run that holds its thread until it is steered "stop" or cancelled (20 rounds of 5 s: under LangGraph's recursion limit). */
const HOLD = { rounds: 20, waitMs: 5000 };

/**
 * Runs queued behind a busy thread are `blocked` (out of the claim's scan) and released, in
 * creation order, by whatever lets go of the thread (docs/runs.md, "Who releases a thread's next run").
 */
describe(`runs queued behind a busy thread on ${TEST_DRIVER}`, () => {
  const baseHelpers = (server: TestServer) => ({
    newThread: async () => (await server.request("POST", "/v1/threads", { body: {} })).body.thread_id as string,
    create: async (threadId: string, assistant: string, input: unknown, extra: Record<string, unknown> = {}) => {
      const created = await server.request("POST", `/v1/threads/${threadId}/runs`, { body: { assistant_id: assistant, input, ...extra } });
      assert.equal(created.status, 202, JSON.stringify(created.body));
      return created.body.run_id as string;
    },
    get: async (runId: string) => (await server.request("GET", `/v1/runs/${runId}`)).body,
    join: async (runId: string) => (await server.request("GET", `/v1/runs/${runId}/join?timeout=60`)).body,
    /** [status, blocked] of each run, read from the row. */
    states: async (runIds: string[]) => {
      const rows = await server.database.db.query<{ run_id: string; status: string; blocked: boolean }>(
        "select run_id::text as run_id, status, blocked from runs where tenant_id = 't1' and run_id = any($1::uuid[])",
        [runIds],
      );
      return runIds.map((id) => {
        const row = rows.find((r) => r.run_id === id)!;
        return [row.status, row.blocked];
      });
    },
    waitForStatus: async (runId: string, status: string) => {
      for (let i = 0; i < 400; i++) {
        if ((await server.request("GET", `/v1/runs/${runId}`)).body.status === status) return;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      const rows = await server.database.db.query(
        "select run_id, status, blocked, attempt, error, created_at from runs where tenant_id = 't1' order by created_at",
      );
      assert.fail(`run ${runId} never became ${status}: ${JSON.stringify(rows)}`);
    },
  });
  const helpers = (server: TestServer) => {
    const base = baseHelpers(server);
    return {
      ...base,
      /** A new thread held by a `steerable` run, running and waiting until it is steered or cancelled. */
      busyThread: async () => {
        const threadId = await base.newThread();
        const holder = await base.create(threadId, "steerable", HOLD);
        await base.waitForStatus(holder, "running");
        return { threadId, holder };
      },
    };
  };

  /** Each run started after the one before it ended, and was claimed once (or `attempts` times). */
  function assertOneAfterAnother(runs: { run_id: string; attempt: number; started_at: string; finished_at: string | null }[]) {
    for (let i = 1; i < runs.length; i++) {
      const [before, after] = [runs[i - 1]!, runs[i]!];
      assert.ok(before.finished_at !== null && after.started_at >= before.finished_at, `run ${i} started before run ${i - 1} ended`);
    }
  }

  test("they start in creation order, each once, as the thread frees: success, failure, retries, cancel", async () => {
    // No poll within the test: only the notices of the settles and cancels may wake a claim.
    const server = await startTestServer({
      configFile: TESTING_CONFIG,
      worker: { concurrency: 4, pollMs: 600_000, maxAttempts: 2, retryBaseMs: 20 },
    });
    const { busyThread, create, get, join, states, waitForStatus } = helpers(server);
    try {
      await server.request("GET", "/health");
      const { threadId, holder } = await busyThread();
      const queued = [
        await create(threadId, "steerable", HOLD),
        await create(threadId, "failing", { mode: "plain" }),
        await create(threadId, "failing", { mode: "retryable" }),
        await create(threadId, "echo", { message: "after the failures" }),
      ];
      assert.deepEqual(await states([holder, ...queued]), [["running", false], ...queued.map(() => ["pending", true])]);

      await server.request("POST", `/v1/runs/${holder}/steer`, { body: { kind: "stop", payload: null } });
      assert.equal((await join(holder)).status, "succeeded");
      await waitForStatus(queued[0]!, "running");
      assert.deepEqual(await states(queued.slice(1)), [
        ["pending", true],
        ["pending", true],
        ["pending", true],
      ]);
      await server.request("POST", `/v1/runs/${queued[0]}/cancel`);
      assert.equal((await join(queued[0]!)).status, "cancelled");
      assert.equal((await join(queued[1]!)).status, "failed");
      const retried = await join(queued[2]!);
      assert.deepEqual([retried.status, retried.attempt], ["dead_letter", 2], "retried while the run behind it waited");
      assert.equal((await join(queued[3]!)).status, "succeeded");

      const runs = await Promise.all([holder, ...queued].map(get));
      assert.deepEqual(
        runs.map((run) => run.attempt),
        [1, 1, 1, 2, 1],
      );
      assertOneAfterAnother(runs);
    } finally {
      await server.close();
    }
  });

  test("cancel_previous (LangGraph's interrupt and rollback) cancels the queue and starts once the active run stopped", async () => {
    const server = await startTestServer({ configFile: TESTING_CONFIG, worker: { concurrency: 4, pollMs: 600_000 } });
    const { busyThread, create, get, join, states } = helpers(server);
    try {
      await server.request("GET", "/health");
      const { threadId, holder } = await busyThread();
      const queued = [await create(threadId, "echo", { message: "q1" }), await create(threadId, "echo", { message: "q2" })];
      const interrupting = await create(threadId, "echo", { message: "now" }, { multitask_strategy: "cancel_previous" });
      assert.deepEqual(
        (await states(queued)).map(([status]) => status),
        ["cancelled", "cancelled"],
      );
      assert.equal((await join(interrupting)).status, "succeeded");
      const [held, interrupted] = await Promise.all([holder, interrupting].map(get));
      assert.equal(held.status, "cancelled");
      assert.equal(interrupted.attempt, 1);
      assertOneAfterAnother([held, interrupted]);
    } finally {
      await server.close();
    }
  });

  test("a cancelling run whose worker died is reaped and the run behind it starts", async () => {
    const server = await startTestServer({ configFile: TESTING_CONFIG, worker: { pollMs: 200 } });
    const { busyThread, create, join, states } = helpers(server);
    try {
      const { threadId, holder } = await busyThread();
      const next = await create(threadId, "echo", { message: "after the reaper" });
      // As a worker leaves it when it dies after a cancel request reached the run: its attempt
      // moves on, so the live worker's own settle is fenced out and only the reaper can end it.
      await server.database.db.query(
        `update runs set status = 'cancelling', attempt = attempt + 1, lease_owner = 'dead-worker', lease_expires_at = now() - interval '1 second'
          where tenant_id = 't1' and run_id = $1`,
        [holder],
      );
      assert.deepEqual(await states([next]), [["pending", true]]);
      assert.equal((await join(holder)).status, "cancelled");
      const done = await join(next);
      assert.deepEqual([done.status, done.attempt], ["succeeded", 1]);
    } finally {
      await server.close();
    }
  });

  test("claims by hand: an expired lease, a settle, a redrive, a cancel of a blocked run and of the head; nothing claimed twice or skipped", async () => {
    const server = await startTestServer({ configFile: TESTING_CONFIG, worker: false });
    const { newThread, create, states } = helpers(server);
    const db = server.database.db;
    const claimed: string[] = [];
    const claim = async () => {
      const runs = await claimRuns(db, "hand", 60_000, 100, { to: "running", thread: "busy" });
      claimed.push(...runs.map((run) => run.run_id));
      return runs;
    };
    try {
      const threadId = await newThread();
      const [a, b, c] = [await create(threadId, "echo", {}), await create(threadId, "echo", {}), await create(threadId, "echo", {})];
      assert.deepEqual(await states([a!, b!, c!]), [
        ["pending", false],
        ["pending", true],
        ["pending", true],
      ]);
      let [first] = await claim();
      assert.equal(first?.run_id, a);
      assert.deepEqual(await claim(), []);

      // Its worker died: the run is claimed again, and the runs behind it still wait.
      await db.query("update runs set lease_expires_at = now() - interval '1 second' where tenant_id = 't1' and run_id = $1", [a]);
      [first] = await claim();
      assert.deepEqual([first?.run_id, first?.attempt], [a, 2]);
      assert.deepEqual(await states([b!, c!]), [
        ["pending", true],
        ["pending", true],
      ]);

      await settle(db, first!.run_id, first!.attempt, "failed");
      const [second] = await claim();
      assert.equal(second?.run_id, b, "the failure released the next run");

      // Redriven while the thread is busy: it waits, and as the oldest it goes first.
      assert.equal((await server.request("POST", `/v1/runs/${a}/redrive`)).body.status, "pending");
      assert.deepEqual(await states([a!, c!]), [
        ["pending", true],
        ["pending", true],
      ]);
      assert.deepEqual(await claim(), []);
      // Cancelling a blocked run releases nothing.
      assert.equal((await server.request("POST", `/v1/runs/${c}/cancel`)).body.status, "cancelled");
      assert.deepEqual(await claim(), []);

      await settle(db, second!.run_id, second!.attempt, "succeeded");
      const [third] = await claim();
      assert.deepEqual([third?.run_id, third?.attempt], [a, 1]);
      await settle(db, third!.run_id, third!.attempt, "succeeded");
      assert.deepEqual(await claim(), []);

      // A pending head cancelled before any claim releases the run behind it.
      const [d, e] = [await create(threadId, "echo", {}), await create(threadId, "echo", {})];
      assert.equal((await server.request("POST", `/v1/runs/${d}/cancel`)).body.status, "cancelled");
      assert.deepEqual(await states([e!]), [["pending", false]]);
      const [fourth] = await claim();
      assert.equal(fourth?.run_id, e);
      assert.deepEqual(claimed, [a, a, b, a, e], "each claim took the thread's next run, none twice at once");
    } finally {
      await server.close();
    }
  });
});

/**
 * The claim finds each thread's oldest claimable run once per claim, whatever the statistics say:
 * in a generic plan cached once a queue drained (a named statement's plan, made when no run was
 * claimable) and on a table never analyzed since runs joined it (a new deployment's first minute
 * under load, before autovacuum). It used to probe, per candidate, for an older claimable run of
 * the thread, and such plans read that probe from an index of the tenant's or the whole queue's
 * pending runs: O(claimable) per candidate, 1.5 s a claim at 1,000 freed threads with 10,000 runs
 * behind them, and a run that waited over a minute to start under the standing-load bench.
 */
test(`the claim finds the threads' heads once per claim, in a generic plan and with no statistics, on ${TEST_DRIVER}`, async () => {
  const database = await createTestDatabase();
  const db = database.db;
  const statement = await firstStatement(db, (recorder) => claimRuns(recorder, "probe", 60_000, 10, { to: "running", thread: "busy" }));
  /** The heads' subquery (over `runs h`) runs once per claim: a hashed subplan, looked up per candidate. */
  const assertHeadsOnce = (plan: string) => {
    const heads = /SubPlan (\d+)\n(?:(?!\s*SubPlan).*\n)*?.*\bon runs h\b/.exec(plan);
    assert.ok(heads, `the heads' subquery is in the plan:\n${plan}`);
    assert.match(plan, new RegExp(`\\(hashed SubPlan ${heads[1]}\\)`), `the heads are found once, not per candidate:\n${plan}`);
  };
  const explainCustom = (sql: string, params: readonly unknown[]) =>
    db.transaction(async (tx) => {
      await tx.query("set local plan_cache_mode = force_custom_plan");
      const rows = await tx.query<{ "QUERY PLAN": string }>(`explain (costs off) ${sql}`, params);
      return rows.map((row) => row["QUERY PLAN"]).join("\n");
    });
  try {
    // Generic, made once a queue drained and autovacuum analyzed it: many runs, none claimable.
    const fill = async (threadCount: number, perThread: number) => {
      const threads = Array.from({ length: threadCount }, () => randomUUID());
      for (const threadId of threads) await insertThread(db, "t1", threadId, {});
      for (let round = 0; round < perThread; round++)
        for (const threadId of threads)
          await insertRun(db, { ...stateless("t1"), threadId, requestHash: "probe" }, Number.MAX_SAFE_INTEGER);
    };
    await fill(50, 4);
    await db.query("update runs set status = 'succeeded', blocked = false, finished_at = now() where tenant_id = 't1'");
    await db.query("analyze runs");
    const generic = await db.transaction(async (tx) => {
      await tx.query(`prepare probe_claim as ${statement.sql}`);
      await tx.query("set local plan_cache_mode = force_generic_plan");
      const rows = await tx.query<{ "QUERY PLAN": string }>(
        `explain (costs off) execute probe_claim(${statement.params.map((value) => `'${String(value)}'`).join(", ")})`,
      );
      await tx.query("deallocate probe_claim");
      return rows.map((row) => row["QUERY PLAN"]).join("\n");
    });
    assertHeadsOnce(generic);

    // Custom, on a table never analyzed since runs joined it, each thread's head claimable.
    await fill(50, 4);
    const custom = await explainCustom(statement.sql, statement.params);
    assertHeadsOnce(custom);
  } finally {
    await database.drop();
  }
});

/** An attempt's end as the worker writes it: the thread locked first, then the fenced settle. */
async function settle(db: Db, runId: string, attempt: number, status: RunStatus): Promise<void> {
  await db.transaction(async (tx) => {
    const [{ thread_id: threadId } = { thread_id: null }] = await tx.query<{ thread_id: string | null }>(
      "select thread_id::text as thread_id from runs where tenant_id = 't1' and run_id = $1",
      [runId],
    );
    if (threadId !== null) await lockThread(tx, "t1", threadId);
    const settled = await settleAttempt(
      tx,
      { tenantId: "t1", runId, attempt, owner: "hand" },
      {
        status,
        output: null,
        error: null,
        finishes: true,
        retryDelayMs: 0,
        threadStatus: "idle",
        usage: NO_USAGE,
        freesThread: freesThread("running", status),
        events: [],
      },
    );
    assert.ok(settled, "the lease held");
  });
}
