import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { loadMigrations, migrate, migrationStatus } from "../src/storage/migrate.ts";
import { createTestDatabase } from "./support/db.ts";
import { startTestServer } from "./support/server.ts";

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));
/** The last revision before steering's four additive ones (lineage, table, source id, gate). */
const BEFORE_STEERING = 2;

test("upgrading a database that holds threads, runs and events to the steering schema", async () => {
  const database = await createTestDatabase({ migrated: false });
  const { db } = database;
  await migrate(db, { to: BEFORE_STEERING });
  const threadId = randomUUID();
  const pausedRun = randomUUID();
  const doneRun = randomUUID();
  await db.query("insert into threads (thread_id, tenant_id, metadata, status) values ($1, 't1', '{}', 'paused')", [threadId]);
  // An older run whose user metadata happens to hold a key named superseded_by_run_id.
  await db.query(
    `insert into runs (run_id, tenant_id, thread_id, assistant_id, graph_id, status, metadata, last_event_sequence, attempt)
     values ($1, 't1', $2, 'approval', 'approval', 'paused', $3::jsonb, 2, 1),
            ($4, 't1', $2, 'approval', 'approval', 'succeeded', '{}', 1, 1)`,
    [pausedRun, threadId, JSON.stringify({ superseded_by_run_id: randomUUID() }), doneRun],
  );
  await db.query(
    `insert into run_events (run_id, sequence, kind, data) values ($1, 1, 'run_started', '{}'), ($1, 2, 'run_paused', '{}'), ($2, 1, 'run_succeeded', '{}')`,
    [pausedRun, doneRun],
  );

  const applied = await migrate(db);
  assert.deepEqual(
    applied,
    loadMigrations()
      .map((m) => m.id)
      .filter((id) => id > BEFORE_STEERING),
  );
  const [row] = await db.query<{ steering_closed: boolean; superseded_by_run_id: string | null; last_steering_sequence: number }>(
    "select steering_closed, superseded_by_run_id, last_steering_sequence from runs where run_id = $1",
    [pausedRun],
  );
  assert.deepEqual(
    row,
    { steering_closed: false, superseded_by_run_id: null, last_steering_sequence: 0 },
    "new columns start false/null/0",
  );
  assert.equal((await migrationStatus(db)).pending.length, 0);

  const server = await startTestServer({ configFile: TESTING_CONFIG, database, worker: false });
  try {
    const run = (await server.request("GET", `/v1/runs/${pausedRun}`)).body;
    assert.deepEqual([run.status, run.superseded_by_run_id, run.steering_closed], ["paused", null, false]);
    assert.ok(run.metadata.superseded_by_run_id, "user metadata is kept as plain metadata");
    const steered = await server.request("POST", `/v1/runs/${pausedRun}/steer`, { body: { kind: "k", payload: 1 } });
    assert.deepEqual([steered.status, steered.body.sequence], [202, 1], "not treated as superseded");
    const events = (await server.request("GET", `/v1/runs/${pausedRun}/events`)).body;
    assert.deepEqual(
      events.map((e: { sequence: number; kind: string }) => [e.sequence, e.kind]),
      [
        [1, "run_started"],
        [2, "run_paused"],
        [3, "run.steer.accepted"],
      ],
    );
    const cancelled = await server.request("POST", `/v1/runs/${pausedRun}/cancel`);
    assert.equal(cancelled.body.status, "cancelled", "cancel decides on the typed column, not metadata");
    assert.equal(
      (await server.request("POST", `/v1/runs/${doneRun}/steer`, { body: { kind: "k", payload: 1 } })).body.code,
      "run_terminal",
    );
  } finally {
    await server.close();
  }
});

/** The last revision before steering consumption moved to the drain (rows could be left `delivered`). */
const BEFORE_CONSUMPTION_AT_DRAIN = 6;

test("upgrading from delivered-until-checkpoint steering: rows an older binary left delivered are consumed by the next drain, once", async () => {
  const database = await createTestDatabase({ migrated: false });
  const { db } = database;
  await migrate(db, { to: BEFORE_CONSUMPTION_AT_DRAIN });
  // A run an older worker was executing when it stopped: one row delivered to its task, one pending.
  const runId = randomUUID();
  const [delivered, pending] = [randomUUID(), randomUUID()];
  await db.query(
    `insert into runs (run_id, tenant_id, assistant_id, graph_id, status, input, attempt, last_steering_sequence)
     values ($1, 't1', 'steerable', 'steerable', 'pending', '{"rounds": 1, "waitMs": 100}', 1, 2)`,
    [runId],
  );
  await db.query(
    `insert into steering_events (id, tenant_id, run_id, sequence, kind, payload, status, delivered_attempt, delivered_task_id, delivered_node, delivered_ns)
     values ($2, 't1', $1, 1, 'old', '"a"', 'delivered', 1, 'a-task-of-the-old-binary', 'listen', ''),
            ($3, 't1', $1, 2, 'old', '"b"', 'pending', null, null, null, null)`,
    [runId, delivered, pending],
  );
  assert.deepEqual(
    await migrate(db),
    loadMigrations()
      .map((m) => m.id)
      .filter((id) => id > BEFORE_CONSUMPTION_AT_DRAIN),
  );

  const server = await startTestServer({ configFile: TESTING_CONFIG, database });
  try {
    const done = (await server.request("GET", `/v1/runs/${runId}/join?timeout=30`)).body;
    assert.deepEqual([done.status, done.attempt], ["succeeded", 2]);
    assert.deepEqual(
      done.output.received.map((m: { payload: unknown }) => m.payload),
      ["a", "b"],
    );
    const events = (await server.request("GET", `/v1/runs/${runId}/events`)).body as {
      kind: string;
      data: { steering_event_id: string };
    }[];
    assert.deepEqual(
      events.filter((e) => e.kind === "run.steer.consumed").map((e) => e.data.steering_event_id),
      [delivered, pending],
    );
  } finally {
    await server.close();
  }
});
