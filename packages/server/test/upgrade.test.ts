import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { graph as approvalGraph } from "../../../examples/graphs/approval.ts";
import { RudderCheckpointSaver } from "../src/storage/checkpointer.ts";
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

/** The last revision before tenant_id led every key (000012_tenant_leading_keys). */
const BEFORE_TENANT_KEYS = 10;

test("upgrading to tenant-leading keys: every table's rows get their tenant, and a paused run on a thread and a stateless one resume", async () => {
  // Real checkpoints, written by the saver into a scratch database, then copied into the old schema.
  const scratch = await createTestDatabase();
  const threadId = randomUUID();
  const statelessId = randomUUID();
  const checkpointRows: Record<string, unknown>[] = [];
  const writeRows: Record<string, unknown>[] = [];
  try {
    const graph = approvalGraph.compile({ checkpointer: new RudderCheckpointSaver(scratch.db) });
    for (const [id, request] of [
      [threadId, "on a thread"],
      [statelessId, "stateless"],
    ] as const) {
      await graph.invoke({ request }, { configurable: { thread_id: id }, metadata: { graph_id: "approval" } });
    }
    checkpointRows.push(
      ...(await scratch.db.query(
        `select thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint_type,
                encode(checkpoint, 'base64') as checkpoint, metadata::text as metadata from checkpoints`,
      )),
    );
    writeRows.push(
      ...(await scratch.db.query(
        `select thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, value_type, encode(value, 'base64') as value, task_path
           from checkpoint_writes`,
      )),
    );
  } finally {
    await scratch.drop();
  }
  assert.ok(checkpointRows.length >= 4 && writeRows.length > 0);

  const database = await createTestDatabase({ migrated: false });
  const { db } = database;
  await migrate(db, { to: BEFORE_TENANT_KEYS });
  const [pausedRun, otherThread, otherRun] = [randomUUID(), randomUUID(), randomUUID()];
  await db.query(`insert into threads (thread_id, tenant_id, status) values ($1, 't1', 'paused'), ($2, 't2', 'idle')`, [
    threadId,
    otherThread,
  ]);
  await db.query(
    `insert into runs (run_id, tenant_id, thread_id, assistant_id, graph_id, status, input, attempt, last_event_sequence, last_steering_sequence)
     values ($1, 't1', $2, 'approval', 'approval', 'paused', '{"request": "on a thread"}', 1, 2, 1),
            ($3, 't2', null, 'approval', 'approval', 'paused', '{"request": "stateless"}', 1, 2, 0),
            ($4, 't2', $5, 'echo', 'echo', 'succeeded', '{"message": "m"}', 1, 1, 0)`,
    [pausedRun, threadId, statelessId, otherRun, otherThread],
  );
  await db.query(
    `insert into run_events (run_id, sequence, kind, data)
     values ($1, 1, 'run_started', '{}'), ($1, 2, 'run_paused', '{}'), ($2, 1, 'run_started', '{}'), ($2, 2, 'run_paused', '{}'),
            ($3, 1, 'run_succeeded', '{}')`,
    [pausedRun, statelessId, otherRun],
  );
  const steeringId = randomUUID();
  await db.query(
    `insert into steering_events (id, tenant_id, run_id, sequence, kind, payload, status) values ($1, 't1', $2, 1, 'note', '"kept"', 'pending')`,
    [steeringId, pausedRun],
  );
  for (const row of checkpointRows) {
    await db.query(
      `insert into checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint_type, checkpoint, metadata)
       values ($1, $2, $3, $4, $5, decode($6, 'base64'), $7::jsonb)`,
      [row.thread_id, row.checkpoint_ns, row.checkpoint_id, row.parent_checkpoint_id, row.checkpoint_type, row.checkpoint, row.metadata],
    );
  }
  for (const row of writeRows) {
    await db.query(
      `insert into checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, value_type, value, task_path)
       values ($1, $2, $3, $4, $5, $6, $7, decode($8, 'base64'), $9)`,
      [row.thread_id, row.checkpoint_ns, row.checkpoint_id, row.task_id, row.idx, row.channel, row.value_type, row.value, row.task_path],
    );
  }
  // A checkpoint no thread or run owns: a saver used on its own wrote it.
  await db.query(
    `insert into checkpoints (thread_id, checkpoint_id, checkpoint_type, checkpoint) values ('standalone', 'c1', 'json', '\\x7b7d')`,
  );

  assert.deepEqual(
    await migrate(db),
    loadMigrations()
      .map((m) => m.id)
      .filter((id) => id > BEFORE_TENANT_KEYS),
  );
  const tenants = async (sql: string) =>
    (await db.query<{ tenant_id: string; n: number }>(`${sql} group by tenant_id order by tenant_id`)).map((r) => `${r.tenant_id}:${r.n}`);
  const perThread = await db.query<{ thread_id: string; tenant_id: string }>(
    "select distinct thread_id, tenant_id from checkpoints union select distinct thread_id, tenant_id from checkpoint_writes order by 1",
  );
  assert.deepEqual(
    perThread.map((row) => [row.thread_id, row.tenant_id]),
    [
      [threadId, "t1"],
      [statelessId, "t2"],
      ["standalone", ""],
    ].sort((a, b) => (a[0]! < b[0]! ? -1 : 1)),
    "a checkpoint goes with its thread's tenant, a stateless run's with the run's, an orphan to tenant ''",
  );
  assert.deepEqual(await tenants("select tenant_id, count(*)::int as n from run_events"), ["t1:2", "t2:3"]);
  // The keys at the latest revision: run_events' foreign key was dropped by 000015 (its appends name an existing run by construction).
  const keys = await db.query<{ table: string; def: string }>(
    `select conrelid::regclass::text as table, pg_get_constraintdef(oid) as def from pg_constraint
      where contype in ('p', 'u', 'f') and conrelid::regclass::text = any($1::text[]) order by 1, 2`,
    [["threads", "runs", "run_events", "steering_events", "checkpoints", "checkpoint_writes"]],
  );
  assert.deepEqual(
    keys.map((key) => `${key.table}: ${key.def}`),
    [
      "checkpoint_writes: PRIMARY KEY (tenant_id, thread_id, checkpoint_ns, checkpoint_id, task_id, idx)",
      "checkpoints: PRIMARY KEY (tenant_id, thread_id, checkpoint_ns, checkpoint_id)",
      "run_events: PRIMARY KEY (tenant_id, run_id, sequence)",
      "runs: FOREIGN KEY (tenant_id, thread_id) REFERENCES threads(tenant_id, thread_id) ON DELETE CASCADE",
      "runs: PRIMARY KEY (tenant_id, run_id)",
      "steering_events: FOREIGN KEY (tenant_id, run_id) REFERENCES runs(tenant_id, run_id) ON DELETE CASCADE",
      "steering_events: PRIMARY KEY (tenant_id, id)",
      "steering_events: UNIQUE (tenant_id, run_id, sequence)",
      "threads: PRIMARY KEY (tenant_id, thread_id)",
    ],
  );

  const server = await startTestServer({ configFile: TESTING_CONFIG, database });
  try {
    const state = (await server.request("GET", `/v1/threads/${threadId}/state`, { tenant: "t1" })).body;
    assert.deepEqual(
      [state.values.request, state.next],
      ["on a thread", ["review"]],
      "the thread's checkpoints are found under its tenant",
    );
    assert.equal((await server.request("GET", `/v1/threads/${threadId}/state`, { tenant: "t2" })).status, 404);

    const next = (await server.request("POST", `/v1/runs/${pausedRun}/resume`, { tenant: "t1", body: { resume: { approved: true } } }))
      .body;
    const done = (await server.request("GET", `/v1/runs/${next.run_id}/join?timeout=30`, { tenant: "t1" })).body;
    assert.deepEqual([done.status, done.output.outcome], ["succeeded", "done: Plan for: on a thread"]);
    const oldEvents = (await server.request("GET", `/v1/runs/${pausedRun}/events`, { tenant: "t1" })).body as {
      sequence: number;
      kind: string;
    }[];
    assert.deepEqual(
      oldEvents.map((e) => [e.sequence, e.kind]),
      [
        [1, "run_started"],
        [2, "run_paused"],
        [3, "run.steer.superseded"],
      ],
      "the old run's log goes on; its pending steering moved to the successor",
    );
    const moved = (await server.request("GET", `/v1/runs/${next.run_id}/events`, { tenant: "t1" })).body as {
      kind: string;
      data: { source_event_id?: string };
    }[];
    assert.equal(moved.find((e) => e.kind === "run.steer.accepted")?.data.source_event_id, steeringId);

    const solo = (await server.request("POST", `/v1/runs/${statelessId}/resume`, { tenant: "t2", body: { resume: { approved: false } } }))
      .body;
    const soloDone = (await server.request("GET", `/v1/runs/${solo.run_id}/join?timeout=30`, { tenant: "t2" })).body;
    assert.deepEqual(
      [soloDone.status, soloDone.output.outcome],
      ["succeeded", "rejected"],
      "the stateless run's checkpoints moved with it",
    );
    assert.equal((await server.request("GET", `/v1/runs/${otherRun}/events`, { tenant: "t2" })).body.length, 1);

    assert.equal((await server.request("DELETE", `/v1/threads/${threadId}`, { tenant: "t1" })).status, 204);
    const [left] = await db.query<{ runs: number; events: number; checkpoints: number }>(
      `select (select count(*)::int from runs where tenant_id = 't1') as runs,
              (select count(*)::int from run_events where tenant_id = 't1') as events,
              (select count(*)::int from checkpoints where tenant_id = 't1') as checkpoints`,
    );
    assert.deepEqual(left, { runs: 0, events: 0, checkpoints: 0 }, "deleting the thread deletes its runs, their events and checkpoints");
    assert.equal(
      (await server.request("GET", `/v1/runs/${otherRun}/events`, { tenant: "t2" })).body.length,
      1,
      "another tenant's events stay",
    );
  } finally {
    await server.close();
  }
});

/** The last revision before runs queued behind a busy thread were marked blocked (000013_run_blocked). */
const BEFORE_BLOCKED = 12;

test("upgrading to blocked runs: a pending run behind its thread's active or older pending run is blocked, the thread's head is not", async () => {
  const database = await createTestDatabase({ migrated: false });
  const { db } = database;
  await migrate(db, { to: BEFORE_BLOCKED });
  const [busyThread, idleThread] = [randomUUID(), randomUUID()];
  await db.query("insert into threads (tenant_id, thread_id, status) values ('t1', $1, 'busy'), ('t1', $2, 'idle')", [
    busyThread,
    idleThread,
  ]);
  const runs: [name: string, thread: string | null, status: string, minutesAgo: number][] = [
    ["active", busyThread, "running", 5],
    ["behindActive", busyThread, "pending", 4],
    ["behindActive2", busyThread, "pending", 3],
    ["done", idleThread, "succeeded", 5],
    ["head", idleThread, "pending", 4],
    ["behindHead", idleThread, "pending", 3],
    ["stateless", null, "pending", 2],
  ];
  const ids = new Map(runs.map(([name]) => [name, randomUUID()]));
  for (const [name, thread, status, minutesAgo] of runs) {
    await db.query(
      `insert into runs (tenant_id, run_id, thread_id, assistant_id, graph_id, status, created_at)
       values ('t1', $1, $2, 'echo', 'echo', $3, now() - $4 * interval '1 minute')`,
      [ids.get(name), thread, status, minutesAgo],
    );
  }
  await migrate(db);
  const rows = await db.query<{ run_id: string; blocked: boolean }>("select run_id::text as run_id, blocked from runs");
  const blocked = Object.fromEntries(runs.map(([name]) => [name, rows.find((row) => row.run_id === ids.get(name))!.blocked]));
  assert.deepEqual(blocked, {
    active: false,
    behindActive: true,
    behindActive2: true,
    done: false,
    head: false,
    behindHead: true,
    stateless: false,
  });
  await database.drop();
});
