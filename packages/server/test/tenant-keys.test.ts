import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { createTestDatabase } from "./support/db.ts";
import { startTestServer } from "./support/server.ts";
import { recordingDb, tableReferences, TENANT_TABLES } from "./support/tenant-audit.ts";

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));

/**
 * Statements that scan every tenant on purpose: the queue's metric and the lease sweep at start
 * (docs/architecture.md, "Distributing by tenant"). Each is matched whole, so a tenant-scoped
 * statement cannot hide behind it.
 */
const CROSS_TENANT = [
  /^select count\(\*\)::int as pending, count\(\*\) filter \(where available_at <= now\(\)\)::int as ready,.* from runs where status = 'pending'$/,
  /^update runs set lease_expires_at = now\(\) where status in \('running', 'cancelling'\) and lease_expires_at > now\(\) returning run_id$/,
];

/**
 * Scans inside a statement that cross tenants on purpose: the claim reads one queue (its candidates
 * and its threads' heads) across tenants, joining all else on (tenant_id, id) (docs/database.md).
 */
const CROSS_TENANT_SCANS = [{ statement: /^with candidate as \(/, table: "runs", alias: "h" }];

const flat = (sql: string) => sql.replace(/\s+/g, " ").trim();

describe("tenant-leading keys", () => {
  test("the audit flags statements that do not name the tenant (the shapes Rudder used before revision 12)", () => {
    const before = [
      "update runs set status = $2, error = $3::jsonb, updated_at = now() where run_id = $1 returning run_id",
      "delete from checkpoint_writes where thread_id = $1",
      "select run_id::text as run_id, tenant_id, status from runs where run_id = $1",
      "insert into run_events (run_id, sequence, kind, data) select $1, 1, 'k', '{}'",
      "select 1 from runs r where exists (select 1 from threads t where t.thread_id = r.thread_id for update skip locked) and r.tenant_id = $1",
      `with settled as (update runs set status = $4 where tenant_id = $1 and run_id = $2 returning thread_id)
       update threads t set status = 'idle' from settled where t.thread_id = settled.thread_id`,
    ];
    for (const sql of before) {
      assert.ok(
        tableReferences(sql).some((reference) => reference.problem !== undefined),
        `not flagged: ${sql}`,
      );
    }
    const scoped = [
      "update runs set status = $3 where tenant_id = $1 and run_id = $2",
      "insert into run_events (tenant_id, run_id, sequence, kind, data) select $1, $2, 1, 'k', '{}'",
      "select 1 from runs r where exists (select 1 from threads t where t.tenant_id = r.tenant_id and t.thread_id = r.thread_id)",
    ];
    for (const sql of scoped)
      assert.deepEqual(
        tableReferences(sql).filter((reference) => reference.problem),
        [],
        sql,
      );
  });

  test("every statement of a run lifecycle on tenant-owned tables names the tenant", async () => {
    const database = await createTestDatabase();
    const seen: string[] = [];
    const server = await startTestServer({
      configFile: TESTING_CONFIG,
      database: { ...database, db: recordingDb(database.db, seen) },
      worker: { pollMs: 100, steeringPollMs: 100 },
    });
    const tenant = "audit";
    const call = (method: string, path: string, body?: unknown) => server.request(method, path, { tenant, body });
    try {
      // A thread: a run pauses at an interrupt, its state is read, it is resumed and forked.
      const threadId = (await call("POST", "/v1/threads", {})).body.thread_id as string;
      const paused = (await call("POST", `/v1/threads/${threadId}/runs`, { assistant_id: "approval", input: { request: "x" } })).body;
      assert.equal((await call("GET", `/v1/runs/${paused.run_id}/join?timeout=30`)).body.status, "paused");
      assert.equal((await call("GET", `/v1/threads/${threadId}/state`)).status, 200);
      const resumed = (await call("POST", `/v1/runs/${paused.run_id}/resume`, { resume: { approved: true } })).body;
      assert.equal((await call("GET", `/v1/runs/${resumed.run_id}/join?timeout=30`)).body.status, "succeeded");
      assert.equal((await call("GET", `/v1/threads/${threadId}/history?limit=5`)).status, 200);
      assert.equal((await call("POST", `/v1/threads/${threadId}/fork`, { values: { request: "y" }, as_node: "plan" })).status, 200);
      assert.equal((await call("GET", `/v1/threads/${threadId}/runs`)).body.length, 2);
      assert.ok((await call("GET", `/v1/runs/${paused.run_id}/events`)).body.length > 0);

      // A stateless run that pauses and resumes: its checkpoints move to the run that continues it.
      const solo = (await call("POST", "/v1/runs", { assistant_id: "approval", input: { request: "s" } })).body;
      assert.equal((await call("GET", `/v1/runs/${solo.run_id}/join?timeout=30`)).body.status, "paused");
      const soloNext = (await call("POST", `/v1/runs/${solo.run_id}/resume`, { resume: { approved: false } })).body;
      assert.equal((await call("GET", `/v1/runs/${soloNext.run_id}/join?timeout=30`)).body.output.outcome, "rejected");

      // Steering into a running run, a second run queued behind it on the thread and cancelled.
      const steered = (
        await call("POST", `/v1/threads/${threadId}/runs`, { assistant_id: "steerable", input: { rounds: 1, waitMs: 3000 } })
      ).body;
      const queued = (await call("POST", `/v1/threads/${threadId}/runs`, { assistant_id: "echo", input: { message: "later" } })).body;
      await waitFor(async () => (await call("GET", `/v1/runs/${steered.run_id}`)).body.status === "running");
      assert.equal((await call("POST", `/v1/runs/${steered.run_id}/steer`, { kind: "note", payload: "hi" })).status, 202);
      assert.equal((await call("POST", `/v1/runs/${queued.run_id}/cancel`)).body.status, "cancelled");
      assert.equal((await call("GET", `/v1/runs/${steered.run_id}/join?timeout=30`)).body.status, "succeeded");

      // A failed run, redriven; then the thread goes with its runs.
      const failing = (await call("POST", "/v1/runs", { assistant_id: "failing", input: { mode: "plain" } })).body;
      await waitFor(async () => ["failed", "dead_letter"].includes((await call("GET", `/v1/runs/${failing.run_id}`)).body.status));
      assert.equal((await call("POST", `/v1/runs/${failing.run_id}/redrive`)).status, 202);
      await call("GET", `/v1/runs/${failing.run_id}/join?timeout=30`);
      assert.equal((await call("GET", "/v1/runs?limit=10")).status, 200);
      assert.equal((await call("DELETE", `/v1/threads/${threadId}`)).status, 204);
    } finally {
      await server.close();
      await database.drop().catch(() => {}); // the server closed its connection; on PostgreSQL this drops the database
    }

    const statements = [...new Set(seen.map(flat))];
    const touched = new Set<string>();
    const problems: string[] = [];
    for (const sql of statements) {
      const references = tableReferences(sql);
      for (const reference of references) touched.add(reference.table);
      if (CROSS_TENANT.some((allowed) => allowed.test(sql))) continue;
      for (const reference of references) {
        const deliberate = CROSS_TENANT_SCANS.some(
          (scan) => scan.statement.test(sql) && scan.alias === reference.alias && scan.table === reference.table,
        );
        if (reference.problem && !deliberate) problems.push(`${reference.problem}:\n  ${sql}`);
      }
    }
    assert.deepEqual(problems, [], "statements on tenant-owned rows that do not name the tenant");
    assert.deepEqual([...touched].sort(), [...TENANT_TABLES].sort(), "the lifecycle reaches every tenant-owned table");
    assert.ok(statements.length > 40, `only ${statements.length} distinct statements were seen`);
  });
});

test("a run's own config cannot name another tenant for its checkpoints", async () => {
  const server = await startTestServer({ configFile: TESTING_CONFIG, worker: { pollMs: 100 } });
  try {
    // Refused at the door (a reserved key); the worker also sets the tenant after the run's own
    // configurable (executor.ts runConfig), so a run that got past it would still write its own.
    const created = await server.request("POST", "/v1/runs", {
      tenant: "mallory",
      body: { assistant_id: "approval", input: { request: "x" }, config: { configurable: { __rudder_tenant_id: "victim" } } },
    });
    assert.equal(created.status, 422, JSON.stringify(created.body));
    assert.equal(created.body.code, "validation_error");
    assert.match(created.body.detail, /__rudder_tenant_id is reserved/);
    const rows = await server.database.db.query<{ tenant_id: string }>("select distinct tenant_id from checkpoints");
    assert.ok(!rows.some((row) => row.tenant_id === "victim"), "nothing was written under the other tenant");
  } finally {
    await server.close();
  }
});

test("a thread that passes between graphs: a steerable run after a failed run of another graph names its tenant to every checkpoint read", async () => {
  // The failed run's checkpoints keep the versions of steerable's reducer channels but not their
  // values (its graph has none), so the next steerable run rebuilds them by walking the thread's
  // parent checkpoints, with the configs the saver handed back.
  const server = await startTestServer({ configFile: TESTING_CONFIG, worker: { pollMs: 100 } });
  try {
    const threadId = (await server.request("POST", "/v1/threads", { body: {} })).body.thread_id as string;
    const run = async (assistant: string, input: unknown) => {
      const created = await server.request("POST", `/v1/threads/${threadId}/runs`, { body: { assistant_id: assistant, input } });
      assert.equal(created.status, 202, JSON.stringify(created.body));
      return (await server.request("GET", `/v1/runs/${created.body.run_id}/join?timeout=30`)).body;
    };
    assert.equal((await run("steerable", { rounds: 1, waitMs: 10 })).status, "succeeded");
    assert.equal((await run("failing", { mode: "plain" })).status, "failed");
    const again = await run("steerable", { rounds: 1, waitMs: 10 });
    assert.deepEqual([again.status, again.error], ["succeeded", null]);
    assert.equal(again.output.round, 2, "the round counted by the first steerable run was rebuilt");
    const state = await server.request("GET", `/v1/threads/${threadId}/state`);
    assert.equal(state.status, 200, JSON.stringify(state.body));
    assert.equal(state.body.values.round, 2);
    // History reads every checkpoint with the newest one's graph (steerable), the failed run's too.
    const history = await server.request("GET", `/v1/threads/${threadId}/history?limit=50`);
    assert.equal(history.status, 200, JSON.stringify(history.body));
  } finally {
    await server.close();
  }
});

async function waitFor(condition: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error("timed out waiting");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
