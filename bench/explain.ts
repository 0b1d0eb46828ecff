/**
 * The plans of the hot queries on PostgreSQL, over a database filled with many tenants' rows, to
 * check that the tenant-leading keys of migration 000012 serve them: the claim, the worker's event
 * flush, steering gates and settles of many runs, a run by id, a cancel of a running run, a run's events, a thread by id, a thread's runs, a thread's latest checkpoint. Each statement is
 * the one Rudder issues (recorded from the storage functions, not copied), run under
 * `EXPLAIN (ANALYZE, COSTS OFF)` inside a transaction that rolls back, so the claim's update
 * leaves the data as it was, twice: the custom plan of a statement's first executions, and the
 * generic plan PostgreSQL's plan cache settles on for a named prepared statement.
 *
 *   RUDDER_BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/explain.ts
 *   [--tenants 20] [--threads 100] [--runs 5] [--events 10]
 *
 * It creates and drops its own database. It prints each plan and, per statement, the indexes the
 * plan names; it measures nothing else.
 */
import { parseArgs } from "node:util";
import type { Db } from "../packages/server/src/storage/db.ts";
import { migrate } from "../packages/server/src/storage/migrate.ts";
import { rowOnlyMoves } from "../packages/server/src/domain/run-lifecycle.ts";
import { claimRuns, getRun, listRunsOfThread, moveRunStatus, settleAttempts } from "../packages/server/src/storage/runs.ts";
import { SteeringRepository } from "../packages/server/src/storage/steering.ts";
import { findThread } from "../packages/server/src/storage/threads.ts";
import { appendEventBatches, readEvents } from "../packages/server/src/storage/events.ts";
import { RudderCheckpointSaver, TENANT_KEY } from "../packages/server/src/storage/checkpointer.ts";
import { succeededSettle } from "../packages/server/test/support/runs.ts";
import { explainRolledBack, firstStatement, privateDatabase } from "./common.ts";

const { values: args } = parseArgs({
  options: {
    tenants: { type: "string", default: "20" },
    threads: { type: "string", default: "100" },
    runs: { type: "string", default: "5" },
    events: { type: "string", default: "10" },
  },
});
const [tenants, threadsPer, runsPer, eventsPer] = [args.tenants, args.threads, args.runs, args.events].map(Number) as [
  number,
  number,
  number,
  number,
];

const base = process.env.RUDDER_BENCH_DATABASE_URL ?? process.env.RUDDER_TEST_DATABASE_URL;
if (!base) {
  console.log("explain: set RUDDER_BENCH_DATABASE_URL (a PostgreSQL server) to run; PGlite plans are not what a deployment sees");
  process.exit(0);
}

const { db, drop } = await privateDatabase(base, "rudder_explain");

try {
  await migrate(db);
  const started = performance.now();
  await fill(db);
  console.log(
    `filled: ${tenants} tenants × ${threadsPer} threads × ${runsPer} runs × ${eventsPer} events, in ${Math.round(performance.now() - started)} ms`,
  );
  // A tenant from the middle of the fill (tenant-1 … tenant-N), so its rows are neither first nor last.
  const [sample] = await db.query<{ tenant_id: string; thread_id: string; run_id: string }>(
    `select tenant_id, thread_id::text as thread_id, run_id::text as run_id from runs
      where tenant_id = $1 and thread_id is not null order by created_at desc limit 1`,
    [`tenant-${Math.ceil(tenants / 2)}`],
  );
  const { tenant_id: tenant, thread_id: thread, run_id: run } = sample!;

  // The worker's flush: 100 runs of the tenant (their leases do not match, so the plan's probes find nothing to lock).
  const flushed = await db.query<{ run_id: string }>(`select run_id::text as run_id from runs where tenant_id = $1 limit 100`, [tenant]);
  const batches = flushed.map(({ run_id: runId }) => ({
    lease: { tenantId: tenant, runId, attempt: 1, owner: "explain" },
    events: [{ kind: "run_started" as const, data: { attempt: 1, worker: "explain" } }],
  }));
  const hot: [label: string, call: (db: Db) => Promise<unknown>][] = [
    ["claim (one run)", (d) => claimRuns(d, "explain", 30_000, 1, { to: "running", thread: "busy" })],
    ["event flush (100 runs)", (d) => appendEventBatches(d, batches)],
    ["steering gates (100 runs)", (d) => new SteeringRepository(d).closeAdmissions(batches.map(({ lease }) => lease))],
    [
      "settles (100 runs)",
      (d) =>
        settleAttempts(
          d,
          batches.map(({ lease, events }) => ({ lease, fields: succeededSettle(events) })),
        ),
    ],
    ["run by id", (d) => getRun(d, tenant, run)],
    ["cancel of a running run (row-only move)", (d) => moveRunStatus(d, tenant, run, rowOnlyMoves("cancel"))],
    ["event list", (d) => readEvents(d, tenant, run, 0, 100)],
    ["thread by id", (d) => findThread(d, tenant, thread)],
    ["runs of a thread", (d) => listRunsOfThread(d, tenant, thread, { limit: 10, offset: 0 })],
    [
      "latest checkpoint",
      (d) => new RudderCheckpointSaver(d, { tenantId: null }).getTuple({ configurable: { thread_id: thread, [TENANT_KEY]: tenant } }),
    ],
  ];
  for (const [label, call] of hot) {
    const statement = await firstStatement(db, call);
    const custom = await explainRolledBack(db, "analyze, costs off, timing off, summary off", statement.sql, statement.params);
    const generic = await explainGenericRolledBack(db, statement.sql, statement.params);
    for (const [kind, plan] of [
      ["custom plan (its first executions)", custom],
      ["generic plan (prepared, once PostgreSQL's plan cache settles on it)", generic],
    ] as const) {
      const indexes = [
        ...new Set(
          [...plan.matchAll(/Index (?:Only )?Scan(?: Backward)? using (\w+)|Bitmap Index Scan on (\w+)/g)].map((m) => m[1] ?? m[2]),
        ),
      ];
      console.log(
        `\n## ${label}, ${kind}: ${indexes.length ? `indexes ${indexes.join(", ")}` : "no index"}${/Seq Scan/.test(plan) ? "; has a Seq Scan" : ""}`,
      );
      console.log(plan);
    }
  }
} finally {
  await drop();
}

/**
 * The plan a named prepared statement runs with once PostgreSQL settles on a generic plan (Rudder
 * names its hot statements, docs/database.md "Prepared statements"): the statement prepared, then
 * explained under `plan_cache_mode = force_generic_plan`, in a transaction that rolls back.
 */
async function explainGenericRolledBack(on: Db, sql: string, params: readonly unknown[]): Promise<string> {
  let plan = "";
  const rollback = new Error("rollback");
  await on
    .transaction(async (tx) => {
      await tx.query("set local plan_cache_mode = force_generic_plan");
      await tx.query(`prepare explained as ${sql}`);
      const literals = params.map((value) => (value === null || value === undefined ? "null" : `'${textOf(value).replaceAll("'", "''")}'`));
      const rows = await tx.query<{ "QUERY PLAN": string }>(
        `explain (analyze, costs off, timing off, summary off) execute explained${literals.length ? `(${literals.join(", ")})` : ""}`,
      );
      plan = rows.map((row) => row["QUERY PLAN"]).join("\n");
      // A prepared statement outlives a rollback.
      await tx.query("deallocate explained");
      throw rollback;
    })
    .catch((error: unknown) => {
      if (error !== rollback) throw error;
    });
  return plan;
}

/** A parameter as PostgreSQL's text input reads it (the hot statements take text, numbers, booleans, dates and arrays of text or numbers). */
function textOf(value: unknown): string {
  if (Array.isArray(value))
    return `{${value.map((item) => (item === null ? "NULL" : `"${textOf(item).replace(/["\\]/g, "\\$&")}"`)).join(",")}}`;
  if (value instanceof Date) return value.toISOString();
  return String(value);
}

/** Many tenants' threads, runs (a few pending per tenant), events, checkpoints and writes, in set-based statements. */
async function fill(on: Db): Promise<void> {
  await on.query(
    `insert into threads (tenant_id, thread_id, status)
     select 'tenant-' || t, gen_random_uuid(), 'idle' from generate_series(1, $1) t, generate_series(1, $2) n`,
    [tenants, threadsPer],
  );
  await on.query(
    `insert into runs (tenant_id, run_id, thread_id, assistant_id, graph_id, status, created_at, last_event_sequence)
     select th.tenant_id, gen_random_uuid(), th.thread_id, 'echo', 'echo',
            case when r = $1 and random() < 0.05 then 'pending' else 'succeeded' end,
            now() - (($1 - r) || ' minutes')::interval - (random() * interval '1 day'), $2
       from threads th, generate_series(1, $1) r`,
    [runsPer, eventsPer],
  );
  await on.query(
    `insert into run_events (tenant_id, run_id, sequence, kind, data)
     select r.tenant_id, r.run_id, s, 'custom', '{}'::jsonb from runs r, generate_series(1, $1) s`,
    [eventsPer],
  );
  await on.query(
    `insert into checkpoints (tenant_id, thread_id, checkpoint_id, checkpoint_type, checkpoint)
     select tenant_id, thread_id::text, lpad(c::text, 8, '0'), 'json', '\\x7b7d'::bytea from threads, generate_series(1, 3) c`,
  );
  await on.query(
    `insert into checkpoint_writes (tenant_id, thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, value_type, value)
     select tenant_id, thread_id, checkpoint_ns, checkpoint_id, 'task', w, 'channel', 'json', '\\x7b7d'::bytea
       from checkpoints, generate_series(0, 1) w`,
  );
  await on.query("analyze");
}
