/**
 * Rudder run-engine benchmark: throughput and latency of trivial runs, event-to-SSE latency, and
 * database round trips / commits per run, on PGlite and on PostgreSQL.
 *
 * Usage (from the repository root; no npm script needed):
 *
 *   node --import tsx bench/runs.ts [--driver pglite|postgres|both] [--runs N]
 *        [--worker-concurrency 10,25] [--count-runs N] [--database-url URL] [--skip reference,throughput,sse,count] [--quiet-wait S]
 *        [--cpu-prof DIR] [--cpu-prof-concurrency N] [--client-concurrency 1,10,100] [--statements]
 *
 *   --driver              which database driver(s) to measure (default both)
 *   --runs N              runs per throughput measurement at client concurrency 10 and 100 and for
 *                         thread runs (default 500); concurrency 1 uses 0.4 N (default 200)
 *   --worker-concurrency  the in-process worker's slot counts to try, comma-separated (default 10,25);
 *                         the first is used for the SSE and counting sections
 *   --count-runs N        sequential runs per statement/commit counting scenario (default 200)
 *   --quiet-wait S        before each timed measurement, wait up to S seconds (default 60; 0: never)
 *                         until other processes use under 0.3 of a core: the machine is shared
 *   --database-url URL    the PostgreSQL server (default $RUDDER_BENCH_DATABASE_URL or
 *                         postgres://postgres@127.0.0.1:5432/test); a private database
 *                         rudder_bench_<uuid> is created on it per measurement and dropped after
 *                         (also on Ctrl-C)
 *   --skip LIST           sections to leave out: reference, throughput, sse, count, thread (the
 *                         throughput section's runs on threads)
 *   --client-concurrency  the throughput section's stateless client concurrencies (default 1,10,100)
 *   --statements          after each throughput measurement, its statements per run by SQL
 *   --cpu-prof DIR        write a V8 CPU profile of the server (this process) during each timed stateless
 *                         measurement at --cpu-prof-concurrency (default 10) only (not start-up, schema
 *                         compilation or warm-up) to DIR/runs-<driver>-w<worker concurrency>-c<client
 *                         concurrency>.cpuprofile; summarise one with `node bench/profile-summary.mjs FILE`
 *   --heap-prof DIR       the same measurement's allocations instead (V8's sampling heap profiler, objects the
 *                         collector freed included): DIR/runs-<driver>-w<worker concurrency>-c<client
 *                         concurrency>.heapprofile; `node bench/heap-summary.mjs FILE RUNS` prints bytes
 *                         allocated per run by package and by function (what the garbage collector pays for)
 *
 * What each section measures, and the figures of a full run, are in docs/benchmarks.md.
 *
 * The server is the real one (startServer: Fastify API + in-process worker, default worker options
 * but the concurrency) over a private database (PGlite in memory, or the fresh PostgreSQL database),
 * with its `Db` wrapped in a counting proxy (bench/counting.ts). The HTTP client runs in a forked
 * child process (bench/client.ts) so it does not share the server's event loop. Nothing is written
 * to disk; results go to stdout.
 */
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import os from "node:os";
import path from "node:path";
import { performance, type EventLoopUtilization } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { mintToken } from "../packages/server/src/auth/authenticator.ts";
import { pgliteThread, resolveConfig, type RudderConfig } from "../packages/server/src/config/config.ts";
import { startServer, type RunningServer } from "../packages/server/src/server.ts";
import { RudderCheckpointSaver } from "../packages/server/src/storage/checkpointer.ts";
import { createPgliteDb, createPostgresDb, type Db } from "../packages/server/src/storage/db.ts";
import { migrate } from "../packages/server/src/storage/migrate.ts";
import { DEFAULT_WORKER_OPTIONS, type WorkerOptions } from "../packages/server/src/worker/worker.ts";
import type { RunsResult, SseResult } from "./client.ts";
import { Client } from "./client-process.ts";
import {
  DEFAULT_DATABASE_URL,
  drivers,
  exitWithUsage,
  fixed,
  machineJiffies,
  percentile,
  postgresCpuMs,
  processCpuMs,
  positive,
  positiveList,
  queryOnce,
  sleep,
  table,
  type Driver,
} from "./common.ts";
import { countingDb, DbCounter, now, tracing, WireCounter, type DbCounts, type TraceEntry, type WireCounts } from "./counting.ts";
import { oneNodeGraph } from "./graphs.ts";

const { values: args } = parseArgs({
  options: {
    driver: { type: "string", default: "both" },
    runs: { type: "string", default: "500" },
    "worker-concurrency": { type: "string", default: "10,25" },
    "count-runs": { type: "string", default: "200" },
    "database-url": { type: "string", default: DEFAULT_DATABASE_URL },
    skip: { type: "string", default: "" },
    "quiet-wait": { type: "string", default: "60" },
    "cpu-prof": { type: "string" },
    "cpu-prof-concurrency": { type: "string", default: "10" },
    "heap-prof": { type: "string" },
    statements: { type: "boolean", default: false },
    "client-concurrency": { type: "string", default: "1,10,100" },
    help: { type: "boolean", default: false },
  },
});
exitWithUsage(
  args.help,
  "node --import tsx bench/runs.ts [--driver pglite|postgres|both] [--runs N] [--worker-concurrency 10,25] [--count-runs N] [--database-url URL] [--skip reference,throughput,sse,count,thread] [--quiet-wait S] [--cpu-prof DIR] [--heap-prof DIR] [--cpu-prof-concurrency 10] [--client-concurrency 1,10,100] [--statements]",
);
const DRIVERS = drivers(args.driver);
const RUNS = positive(args.runs, "--runs");
const RUNS_C1 = Math.max(1, Math.round(RUNS * 0.4));
const WORKER_CONCURRENCIES = args["worker-concurrency"].split(",").map((value) => positive(value, "--worker-concurrency"));
const COUNT_RUNS = positive(args["count-runs"], "--count-runs");
const DATABASE_URL = args["database-url"];
const SKIP = new Set(args.skip.split(",").filter(Boolean));
const QUIET_WAIT_S = Number(args["quiet-wait"]);
const CPU_PROF_DIR = args["cpu-prof"];
const HEAP_PROF_DIR = args["heap-prof"];
const CPU_PROF_CONCURRENCY = positive(args["cpu-prof-concurrency"], "--cpu-prof-concurrency");
const STATEMENTS = args.statements;
const CLIENT_CONCURRENCIES = positiveList(args["client-concurrency"], "--client-concurrency");

const SECRET = "rudder-bench-secret-rudder-bench-secret";
const ROOT = fileURLToPath(new URL("../", import.meta.url));
const ECHO = { assistant_id: "echo", input: { message: "hi" } };
const TICKER_INPUT = { count: 10, interval_ms: 30, delay_ms: 150 };
/** PostgreSQL backends flush their statistics at most every second, or after 10 s idle. */
const PG_STATS_SETTLE_MS = 11_000;

// ---------------------------------------------------------------------------------------------
// CPU: the machine is shared (other users' test suites run on the same cores and PostgreSQL)

interface CpuMark {
  at: number;
  /** Busy and total jiffies of the whole machine (/proc/stat). */
  busy: number;
  total: number;
  /** This process's CPU time, µs. */
  own: number;
  /** The load generator's process and its CPU time, and the local PostgreSQL server's, ms (NaN where /proc cannot tell). */
  clientPid: number | undefined;
  client: number;
  postgres: number;
  /** This thread's event loop: busy against idle since start-up (`performance.eventLoopUtilization`). */
  loop: EventLoopUtilization;
}

function cpuMark(clientPid?: number): CpuMark {
  const own = process.cpuUsage();
  return {
    at: now(),
    ...machineJiffies(),
    own: own.user + own.system,
    clientPid,
    client: clientPid === undefined ? Number.NaN : processCpuMs(clientPid),
    postgres: postgresCpuMs(),
    loop: performance.eventLoopUtilization(),
  };
}

/**
 * Cores busy on the whole machine, and in this process (the server), since `from`; the CPU time
 * of the server, of the load generator `from` names and of PostgreSQL, ms.
 */
function cpuSince(from: CpuMark): {
  machine: number;
  server: number;
  serverMs: number;
  clientMs: number;
  postgresMs: number;
  loop: number;
} {
  const to = cpuMark(from.clientPid);
  const cores = os.availableParallelism();
  return {
    machine: to.total > from.total ? ((to.busy - from.busy) / (to.total - from.total)) * cores : Number.NaN,
    server: (to.own - from.own) / 1000 / (to.at - from.at),
    serverMs: (to.own - from.own) / 1000,
    clientMs: to.client - from.client,
    postgresMs: to.postgres - from.postgres,
    loop: performance.eventLoopUtilization(to.loop, from.loop).utilization,
  };
}

/** What to profile over one measurement: this process's CPU, its allocations, or neither. */
type ProfileTarget = { kind: "cpu" | "heap"; file: string } | undefined;

/**
 * A V8 profile of this process (the server; the client is a child process) while `action` runs,
 * written to `target.file`: only the steady state, unlike `node --cpu-prof`, whose profile is
 * dominated by start-up (schema compilation, module loading) when the measured window is short.
 * A CPU profile samples every 200 µs; a heap profile samples one allocation per 4 KB, including
 * the objects the collector freed meanwhile (V8 leaves those out unless asked), so it shows what
 * each run allocates rather than what it keeps.
 */
async function profiled<T>(target: ProfileTarget, action: () => Promise<T>): Promise<T> {
  if (!target) return action();
  const session = new Session();
  session.connect();
  const cpu = target.kind === "cpu";
  try {
    if (cpu) {
      await session.post("Profiler.enable");
      await session.post("Profiler.setSamplingInterval", { interval: 200 });
      await session.post("Profiler.start");
    } else {
      await session.post("HeapProfiler.enable");
      // Node's bundled protocol types predate the two include flags; V8 11 honours them.
      const freedToo = { includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true };
      await session.post("HeapProfiler.startSampling", { samplingInterval: 4096, ...freedToo });
    }
    let stopped = false;
    try {
      const result = await action();
      const { profile } = cpu ? await session.post("Profiler.stop") : await session.post("HeapProfiler.stopSampling");
      stopped = true;
      mkdirSync(path.dirname(target.file), { recursive: true });
      writeFileSync(target.file, JSON.stringify(profile));
      console.log(`  ${cpu ? "CPU" : "heap"} profile written to ${target.file}`);
      return result;
    } finally {
      if (!stopped) await session.post(cpu ? "Profiler.stop" : "HeapProfiler.stopSampling").catch(() => undefined);
    }
  } finally {
    session.disconnect();
  }
}

/** The profile `--cpu-prof` or `--heap-prof` asks for of a measurement, when `chosen`. */
function profileTarget(chosen: boolean, name: string): ProfileTarget {
  if (!chosen) return undefined;
  if (CPU_PROF_DIR) return { kind: "cpu", file: path.join(CPU_PROF_DIR, `${name}.cpuprofile`) };
  if (HEAP_PROF_DIR) return { kind: "heap", file: path.join(HEAP_PROF_DIR, `${name}.heapprofile`) };
  return undefined;
}

/** Waits (up to --quiet-wait) until the machine is nearly idle; our own server idles meanwhile. */
async function waitForQuiet(what: string): Promise<void> {
  if (!(QUIET_WAIT_S > 0)) return;
  const started = now();
  let busy = Number.NaN;
  while (now() - started < QUIET_WAIT_S * 1000) {
    const mark = cpuMark();
    await sleep(1000);
    busy = cpuSince(mark).machine;
    if (!(busy >= 0.3)) {
      if (now() - started > 1500) console.log(`  (waited ${fixed((now() - started) / 1000, 0)} s for a quiet machine before ${what})`);
      return;
    }
  }
  console.log(`  (machine still busy, ${fixed(busy, 2)} cores used by others, after ${QUIET_WAIT_S} s; measuring ${what} anyway)`);
}

// ---------------------------------------------------------------------------------------------
// Output

function section(title: string): void {
  console.log(`\n=== ${title} ===`);
}

const pair = ([a, b]: [number, number]) => `${fixed(a, 0)} / ${fixed(b, 0)}`;

/**
 * Issue 22 item 1: each stateless row against in-process `graph.invoke` at the same client
 * concurrency, and what the target ratio leaves of the machine's cores per run, beside what the
 * run took from them (the server, PostgreSQL and the load generator, which the in-process
 * reference does not have to pay for).
 */
function printInvokeRatios(reference: InvokeFigures[], rows: ThroughputRow[]): void {
  const lines: string[] = [];
  const cores = os.availableParallelism();
  for (const row of rows) {
    const invoke = reference.find((figures) => figures.concurrency === row.concurrency);
    // One client at a time leaves the machine mostly idle: the budget below is about saturation.
    if (!invoke || row.kind !== "stateless" || row.concurrency === 1) continue;
    const target = invoke.perSecond / 2;
    const budgetMs = (cores / target) * 1000;
    const usedMs = row.cpuMsPerRun + row.postgresCpuMsPerRun + row.clientCpuMsPerRun;
    lines.push(
      `${row.driver} c=${row.concurrency}: ${fixed(row.perSecond, 0)} / ${fixed(invoke.perSecond, 0)} invokes/s = ${fixed(row.perSecond / invoke.perSecond, 2)}x; ` +
        `0.5x is ${fixed(target, 0)} runs/s, which leaves ${fixed(budgetMs, 2)} ms of CPU per run on ${cores} cores for everything; ` +
        `this run took ${fixed(usedMs, 2)} (server ${fixed(row.cpuMsPerRun, 2)}, PostgreSQL ${fixed(row.postgresCpuMsPerRun, 2)}, load generator ${fixed(row.clientCpuMsPerRun, 2)})`,
    );
  }
  if (!lines.length) return;
  section("summary: against in-process graph.invoke at the same concurrency (issue 22 item 1)");
  console.log(lines.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Private databases and servers

interface PrivateDb {
  readonly driver: Driver;
  /** The PostgreSQL database name. */
  readonly name: string | undefined;
  /** The driver's own Db; `db` is it behind the counting proxy. */
  readonly raw: Db;
  readonly db: Db;
  readonly counter: DbCounter;
  /** Closes the driver (idempotent); on PostgreSQL the backends exit, which flushes their statistics. */
  close(): Promise<void>;
  drop(): Promise<void>;
}

const wire = WireCounter.install();

async function adminQuery<Row>(sql: string, params: unknown[] = []): Promise<Row[]> {
  return queryOnce<Row>(DATABASE_URL, sql, params);
}

/** PostgreSQL databases to drop if the bench is interrupted. */
const openDatabases = new Set<string>();
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    console.log(`\n${signal}: dropping ${openDatabases.size} private database(s)`);
    void Promise.allSettled([...openDatabases].map((name) => adminQuery(`drop database if exists ${name} with (force)`))).then(() =>
      process.exit(130),
    );
  });
}

function once(action: () => Promise<void>): () => Promise<void> {
  let done: Promise<void> | undefined;
  return () => (done ??= action());
}

async function openPrivateDb(driver: Driver): Promise<PrivateDb> {
  const counter = new DbCounter();
  if (driver === "pglite") {
    // Where `rudder dev` runs it: on its worker thread unless RUDDER_PGLITE_THREAD says otherwise.
    const raw = await createPgliteDb({ thread: pgliteThread() });
    const close = once(() => raw.close());
    return { driver, name: undefined, raw, db: countingDb(raw, counter), counter, close, drop: close };
  }
  const name = `rudder_bench_${randomUUID().replaceAll("-", "")}`;
  await adminQuery(`create database ${name}`);
  openDatabases.add(name);
  const url = new URL(DATABASE_URL);
  url.pathname = `/${name}`;
  wire.databases.add(name);
  const raw = createPostgresDb(url.toString());
  const close = once(() => raw.close());
  return {
    driver,
    name,
    raw,
    db: countingDb(raw, counter),
    counter,
    close,
    async drop() {
      await close();
      await adminQuery(`drop database if exists ${name} with (force)`);
      wire.databases.delete(name);
      openDatabases.delete(name);
    },
  };
}

interface Bench {
  readonly server: RunningServer;
  readonly url: string;
  readonly token: string;
}

async function startBench(pdb: PrivateDb, worker: Partial<WorkerOptions> & { concurrency: number }): Promise<Bench> {
  const base = resolveConfig({ config: `${ROOT}examples/rudder.json`, port: 0 }, {});
  const config: RudderConfig = {
    ...base,
    graphs: [...base.graphs, { graphId: "ticker", file: `${ROOT}bench/graphs.ts`, exportName: "ticker" }],
    auth: { ...base.auth, jwtSecret: SECRET },
    workerConcurrency: worker.concurrency,
  };
  const server = await startServer({
    config,
    db: pdb.db,
    schema: "migrate",
    logger: false,
    worker: { ...DEFAULT_WORKER_OPTIONS, ...worker },
  });
  return { server, url: server.url!, token: await mintToken(SECRET, { tenantId: "bench", roles: ["admin"] }) };
}

async function pgStat(name: string): Promise<{ commits: number; rollbacks: number }> {
  const [row] = await adminQuery<{ commits: string; rollbacks: string }>(
    "select xact_commit::text as commits, xact_rollback::text as rollbacks from pg_stat_database where datname = $1",
    [name],
  );
  return { commits: Number(row?.commits ?? 0), rollbacks: Number(row?.rollbacks ?? 0) };
}

// ---------------------------------------------------------------------------------------------
// 0. Reference: in-process graph.invoke of a 1-node graph

interface InvokeFigures {
  label: string;
  invokes: number;
  concurrency: number;
  perSecond: number;
  p50: number;
  p99: number;
  statements?: number;
  roundTrips?: number;
}

async function invokeLoop(label: string, invoke: () => Promise<unknown>, invokes: number, concurrency: number): Promise<InvokeFigures> {
  if (label !== "warm-up") await waitForQuiet(label);
  const latencies: number[] = [];
  let next = 0;
  const started = now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < invokes) {
        const t = now();
        await invoke();
        latencies.push(now() - t);
      }
    }),
  );
  const elapsed = now() - started;
  return {
    label,
    invokes,
    concurrency,
    perSecond: (invokes / elapsed) * 1000,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
  };
}

async function referenceRaw(): Promise<InvokeFigures[]> {
  const graph = oneNodeGraph().compile();
  const invoke = () => graph.invoke({ message: "hi" });
  await invokeLoop("warm-up", invoke, 100, 1);
  return [
    await invokeLoop("graph.invoke, no checkpointer", invoke, 500, 1),
    await invokeLoop("graph.invoke, no checkpointer", invoke, 1000, 50),
  ];
}

async function referenceSaver(driver: Driver): Promise<InvokeFigures[]> {
  const pdb = await openPrivateDb(driver);
  try {
    await migrate(pdb.raw);
    const graph = oneNodeGraph().compile({ checkpointer: new RudderCheckpointSaver(pdb.db) });
    const figures: InvokeFigures[] = [];
    for (const durability of ["sync", "exit"] as const) {
      const invoke = () => graph.invoke({ message: "hi" }, { configurable: { thread_id: randomUUID() }, durability });
      await invokeLoop("warm-up", invoke, 20, 1);
      for (const [invokes, concurrency] of [
        [200, 1],
        [500, 50],
      ] as const) {
        pdb.counter.reset();
        wire.take();
        const result = await invokeLoop(`graph.invoke + RudderCheckpointSaver, durability ${durability}`, invoke, invokes, concurrency);
        const counts = pdb.counter.take();
        const wired = wire.take();
        figures.push({
          ...result,
          statements: sumStatements(counts) / invokes,
          ...(driver === "postgres" ? { roundTrips: wired.roundTrips / invokes } : {}),
        });
      }
    }
    return figures;
  } finally {
    await pdb.drop();
  }
}

function printInvokes(title: string, figures: InvokeFigures[]): void {
  section(title);
  console.log(
    table(
      ["in-process", "invokes", "concurrency", "invokes/s", "p50 ms", "p99 ms", "Db statements/invoke", "wire round trips/invoke"],
      figures.map((f) => [
        f.label,
        f.invokes,
        f.concurrency,
        fixed(f.perSecond, 0),
        fixed(f.p50, 2),
        fixed(f.p99, 2),
        f.statements === undefined ? "-" : fixed(f.statements, 2),
        f.roundTrips === undefined ? "-" : fixed(f.roundTrips, 2),
      ]),
    ),
  );
}

// ---------------------------------------------------------------------------------------------
// 1. Throughput and latency of trivial runs; 2. event-to-SSE latency

interface ThroughputRow {
  /** Cores busy during the measurement: the whole machine, and the server process. */
  machineCores: number;
  serverCores: number;
  driver: Driver;
  workerConcurrency: number;
  kind: string;
  concurrency: number;
  runs: number;
  perSecond: number;
  p50: number;
  p99: number;
  /** p50 / p99 of: create sent -> the run's created_at; created_at -> started_at; started_at -> finished_at; finished_at -> join answered. */
  create: [number, number];
  queued: [number, number];
  executed: [number, number];
  joinLag: [number, number];
  errors: number;
  /** Server process CPU time (user + system, API and worker) per run, ms. */
  cpuMsPerRun: number;
  /** The load generator's and PostgreSQL's CPU time per run, ms (PostgreSQL's on PGlite: other users' only). */
  clientCpuMsPerRun: number;
  postgresCpuMsPerRun: number;
  /** Per run, while this measurement ran: statements through the Db seam, and commits (wire on PostgreSQL, Db seam on PGlite). */
  statementsPerRun: number;
  commitsPerRun: number;
  writingCommitsPerRun: number;
  /** Of the writing commits, the notifier's notify-only ones (no wait for the disk); 0 on PGlite. */
  notifyOnlyCommitsPerRun: number;
}

async function throughput(
  client: Client,
  driver: Driver,
  workerConcurrency: number,
  withSse: boolean,
): Promise<{ rows: ThroughputRow[]; sse: SseRow[] }> {
  const pdb = await openPrivateDb(driver);
  const bench = await startBench(pdb, { concurrency: workerConcurrency });
  const rows: ThroughputRow[] = [];
  const sseRows: SseRow[] = [];
  try {
    const base = { url: bench.url, token: bench.token };
    await client.request<RunsResult>({ kind: "runs", ...base, concurrency: 5, runs: 30, body: ECHO });
    const measure = async (kind: string, concurrency: number, runs: number, threadIds?: string[]) => {
      await waitForQuiet(`${kind} c=${concurrency}`);
      const profile = profileTarget(
        kind === "stateless" && concurrency === CPU_PROF_CONCURRENCY,
        `runs-${driver}-w${workerConcurrency}-c${concurrency}`,
      );
      const mark = cpuMark(client.pid);
      pdb.counter.reset();
      wire.take();
      const result = await profiled(profile, () =>
        client.request<RunsResult>({
          kind: "runs",
          ...base,
          concurrency,
          runs,
          body: ECHO,
          ...(threadIds ? { threadIds } : {}),
        }),
      );
      const cpu = cpuSince(mark);
      const counted = pdb.counter.take();
      const wired = driver === "postgres" ? wire.take() : undefined;
      const done = Math.max(1, result.latencies.length);
      if (result.firstError) console.log(`  ! ${result.errors} failed runs; first: ${result.firstError}`);
      const row: ThroughputRow = {
        machineCores: cpu.machine,
        serverCores: cpu.server,
        driver,
        workerConcurrency,
        kind,
        concurrency,
        runs: result.latencies.length,
        perSecond: (result.latencies.length / result.elapsedMs) * 1000,
        p50: percentile(result.latencies, 50),
        p99: percentile(result.latencies, 99),
        create: [percentile(result.createMs, 50), percentile(result.createMs, 99)],
        queued: [percentile(result.queuedMs, 50), percentile(result.queuedMs, 99)],
        executed: [percentile(result.executedMs, 50), percentile(result.executedMs, 99)],
        joinLag: [percentile(result.joinLagMs, 50), percentile(result.joinLagMs, 99)],
        errors: result.errors,
        cpuMsPerRun: cpu.serverMs / done,
        clientCpuMsPerRun: cpu.clientMs / done,
        postgresCpuMsPerRun: cpu.postgresMs / done,
        statementsPerRun: sumStatements(counted) / done,
        commitsPerRun: (wired ? wired.commits + wired.autocommits : counted.committedTransactions + counted.autocommitStatements) / done,
        writingCommitsPerRun: (wired ? wired.writingCommits : counted.writingCommits) / done,
        notifyOnlyCommitsPerRun: (wired?.notifyOnlyCommits ?? 0) / done,
      };
      console.log(
        `  ${driver} worker=${workerConcurrency} ${kind} c=${concurrency}: ${fixed(row.perSecond, 0)} runs/s, p50 ${fixed(row.p50)} ms, p99 ${fixed(row.p99)} ms (sent->created ${pair(row.create)}, queued ${pair(row.queued)}, executing ${pair(row.executed)}, finish->join ${pair(row.joinLag)}); cores busy: machine ${fixed(cpu.machine, 2)}, server process ${fixed(cpu.server, 2)} (${fixed(row.cpuMsPerRun, 2)} ms CPU/run, event loop ${fixed(cpu.loop * 100, 0)} % busy); CPU ms/run of PostgreSQL ${fixed(row.postgresCpuMsPerRun, 2)}, load generator ${fixed(row.clientCpuMsPerRun, 2)}${profile ? ", profiled" : ""}; ${fixed(row.statementsPerRun, 2)} Db statements/run`,
      );
      if (STATEMENTS) console.log(statementTable(counted, done));
      rows.push(row);
    };
    if (withSse) await traceOneRun(client, base, driver, workerConcurrency);
    for (const concurrency of CLIENT_CONCURRENCIES) await measure("stateless", concurrency, concurrency === 1 ? RUNS_C1 : RUNS);
    if (!SKIP.has("thread")) {
      const threadIds = await client.request<string[]>({ kind: "threads", ...base, count: RUNS });
      await measure("thread (one per run)", 10, RUNS, threadIds);
    }
    if (withSse) {
      pdb.counter.stampEvents = true;
      for (const concurrency of [1, 10]) sseRows.push(...(await sseLatency(client, base, pdb, concurrency)));
      pdb.counter.stampEvents = false;
    }
  } finally {
    await bench.server.close();
    await pdb.drop();
  }
  return { rows, sse: sseRows };
}

/**
 * The anatomy of one trivial run at client concurrency 1: every statement the server sent (on
 * PostgreSQL every round trip on the wire, notifier included) between the create request and the
 * join's answer, of the median of 7 sequential runs.
 */
async function traceOneRun(client: Client, base: { url: string; token: string }, driver: Driver, workerConcurrency: number): Promise<void> {
  await waitForQuiet("the traced runs");
  const clock = await client.calibrate();
  console.log(`  client clock offset ${fixed(clock.offsetMs, 3)} ms (ping round trip ${fixed(clock.rttMs, 3)} ms)`);
  const entries: TraceEntry[] = [];
  Object.assign(tracing, { source: driver === "postgres" ? "wire" : "db", entries });
  let result: RunsResult;
  try {
    result = await client.request<RunsResult>({ kind: "runs", ...base, concurrency: 1, runs: 7, body: ECHO });
  } finally {
    Object.assign(tracing, { source: undefined, entries: [] });
  }
  const runs = result.stamps
    .map((stamp) => stamp.map((t) => t - client.offset) as [number, number, number])
    .sort((a, b) => a[2] - a[0] - (b[2] - b[0]));
  const median = runs[Math.floor(runs.length / 2)];
  if (!median) return;
  const [sent, created, joined] = median;
  const rows: (string | number)[][] = [[fixed(0), "", "client: POST /v1/runs sent"]];
  const marks = [
    { at: created, label: "client: 202 received, GET /join sent" },
    { at: joined, label: "client: join answered (succeeded)" },
  ];
  for (const entry of entries.filter((e) => e.start >= sent && e.start <= joined).sort((a, b) => a.start - b.start)) {
    for (let mark = marks[0]; mark && mark.at <= entry.start; mark = marks[0]) {
      marks.shift();
      rows.push([fixed(mark.at - sent), "", mark.label]);
    }
    rows.push([fixed(entry.start - sent), fixed(entry.end - entry.start), entry.label]);
  }
  for (const mark of marks) rows.push([fixed(mark.at - sent), "", mark.label]);
  section(
    `${driver}, worker concurrency ${workerConcurrency}: anatomy of one trivial run (median of 7 sequential, ${fixed(joined - sent)} ms)`,
  );
  console.log(
    table(["at ms", "took ms", driver === "postgres" ? "round trip (every pg connection to the database)" : "statement (Db seam)"], rows, [
      "r",
      "r",
      "l",
    ]),
  );
}

interface SseRow {
  concurrency: number;
  what: string;
  samples: number;
  p50: number;
  p99: number;
  max: number;
}

async function sseLatency(client: Client, base: { url: string; token: string }, pdb: PrivateDb, concurrency: number): Promise<SseRow[]> {
  pdb.counter.eventCommits.clear();
  const runs = concurrency === 1 ? 15 : 50;
  await waitForQuiet(`SSE c=${concurrency}`);
  const result = await client.request<SseResult>({
    kind: "sse",
    ...base,
    concurrency,
    runs,
    body: { assistant_id: "ticker", input: TICKER_INPUT },
  });
  if (result.firstError) console.log(`  ! ${result.errors} failed streams; first: ${result.firstError}`);
  const local = (clientTime: number) => clientTime - client.offset;
  const emitToSse: number[] = [];
  const commitToSseCustom: number[] = [];
  const createdToSseCustom: number[] = [];
  const commitToSseFinal: number[] = [];
  const emitToCommit: number[] = [];
  for (const event of result.events) {
    const received = local(event.receivedAt);
    const committed = pdb.counter.eventCommits.get(`${event.runId}:${event.sequence}`);
    if (event.kind === "custom" && event.emittedAt !== undefined) {
      if (event.emittedAt < local(event.openedAt)) continue; // emitted before the stream was open: a replay, not live
      emitToSse.push(received - event.emittedAt);
      createdToSseCustom.push(received - Date.parse(event.createdAt));
      if (committed !== undefined) {
        commitToSseCustom.push(received - committed);
        emitToCommit.push(committed - event.emittedAt);
      }
    } else if (event.kind === "run_succeeded" && committed !== undefined) {
      commitToSseFinal.push(received - committed);
    }
  }
  const row = (what: string, values: number[]): SseRow => ({
    concurrency,
    what,
    samples: values.length,
    p50: percentile(values, 50),
    p99: percentile(values, 99),
    max: Math.max(...values),
  });
  const rows = [
    row("custom event: graph emit -> SSE client", emitToSse),
    row("custom event: graph emit -> append commit", emitToCommit),
    row("custom event: append commit -> SSE client", commitToSseCustom),
    row("custom event: created_at (db now()) -> SSE client", createdToSseCustom),
    row("run_succeeded: settle commit -> SSE client", commitToSseFinal),
  ];
  for (const r of rows)
    console.log(`  ${pdb.driver} c=${concurrency} ${r.what}: p50 ${fixed(r.p50)} ms, p99 ${fixed(r.p99)} ms (n=${r.samples})`);
  return rows;
}

// ---------------------------------------------------------------------------------------------
// 3. Statements, round trips and commits per trivial run

interface Scenario {
  name: string;
  workerConcurrency: number;
  thread: boolean;
  durability: "sync" | "exit";
}

interface CountResult {
  driver: Driver;
  scenario: Scenario;
  runs: number;
  db: DbCounts;
  wire: WireCounts | undefined;
  pgStat: { commits: number; rollbacks: number } | undefined;
  errors: number;
}

function sumStatements(counts: DbCounts): number {
  let total = 0;
  for (const stat of counts.statements.values()) total += stat.count;
  return total;
}

async function countScenario(client: Client, driver: Driver, scenario: Scenario): Promise<CountResult> {
  const pdb = await openPrivateDb(driver);
  // No idle polling: only what the runs cause is counted (notices still wake every idle slot).
  const bench = await startBench(pdb, { concurrency: scenario.workerConcurrency, pollMs: 3_600_000 });
  let closed = false;
  try {
    const base = { url: bench.url, token: bench.token };
    const body = scenario.durability === "sync" ? ECHO : { ...ECHO, durability: "exit" };
    const threadIds = scenario.thread ? await client.request<string[]>({ kind: "threads", ...base, count: COUNT_RUNS + 5 }) : undefined;
    await client.request<RunsResult>({
      kind: "runs",
      ...base,
      concurrency: 1,
      runs: 5,
      body,
      ...(threadIds ? { threadIds: threadIds.slice(COUNT_RUNS) } : {}),
    });
    await sleep(driver === "postgres" ? PG_STATS_SETTLE_MS : 300);
    const before = pdb.name ? await pgStat(pdb.name) : undefined;
    pdb.counter.reset();
    wire.take();
    const result = await client.request<RunsResult>({
      kind: "runs",
      ...base,
      concurrency: 1,
      runs: COUNT_RUNS,
      body,
      ...(threadIds ? { threadIds } : {}),
    });
    await sleep(300); // the last run's trailing notices and checkpoint cleanup
    const db = pdb.counter.take();
    await bench.server.close();
    await pdb.close(); // backends exit, which flushes their statistics
    closed = true;
    await sleep(1000);
    const after = pdb.name ? await pgStat(pdb.name) : undefined;
    const wired = driver === "postgres" ? wire.take() : undefined;
    if (result.firstError) console.log(`  ! ${result.errors} failed runs; first: ${result.firstError}`);
    return {
      driver,
      scenario,
      runs: result.latencies.length,
      db,
      wire: wired,
      pgStat: before && after ? { commits: after.commits - before.commits, rollbacks: after.rollbacks - before.rollbacks } : undefined,
      errors: result.errors,
    };
  } finally {
    if (!closed) await bench.server.close();
    await pdb.drop();
  }
}

function printCounts(results: CountResult[]): void {
  const per = (value: number, r: CountResult) => fixed(value / r.runs, 2);
  console.log(
    table(
      [
        "scenario",
        "worker",
        "runs",
        "Db stmts/run",
        "Db tx/run",
        "autocommit/run",
        "Db commits/run",
        "writing (heur.)",
        "wire round trips/run",
        "pg_notify/run",
        "wire commits/run",
        "writing commits/run",
        "of them notify-only",
        "pg_stat xact_commit/run",
      ],
      results.map((r) => {
        const statements = sumStatements(r.db);
        const commits = r.db.committedTransactions + r.db.autocommitStatements;
        return [
          r.scenario.name,
          r.scenario.workerConcurrency,
          r.runs,
          per(statements, r),
          per(r.db.committedTransactions, r),
          per(r.db.autocommitStatements, r),
          per(commits, r),
          per(r.db.writingCommits, r),
          r.wire ? per(r.wire.roundTrips, r) : "-",
          r.wire ? per(r.wire.notifies, r) : "-",
          r.wire ? per(r.wire.commits + r.wire.autocommits, r) : "-",
          r.wire ? per(r.wire.writingCommits, r) : "-",
          r.wire ? per(r.wire.notifyOnlyCommits, r) : "-",
          r.pgStat ? per(r.pgStat.commits, r) : "-",
        ];
      }),
    ),
  );
  for (const r of results) {
    console.log(
      `\n  ${r.driver} — ${r.scenario.name}, worker concurrency ${r.scenario.workerConcurrency}: statements per run by SQL (first 64 chars)`,
    );
    console.log(statementTable(r.db, r.runs));
    console.log(`  transactions per run by shape (statements inside, first 40 chars each):`);
    console.log(
      indent(
        table(
          ["transaction", "per run"],
          [...r.db.transactions.entries()].sort((a, b) => b[1] - a[1]).map(([shape, count]) => [shape, per(count, r)]),
        ),
      ),
    );
    if (r.wire) {
      const w = r.wire;
      const clientCommits = w.commits + w.autocommits + w.connections;
      console.log(
        `  wire (every pg connection to the database, incl. the notifier's): ${per(w.roundTrips, r)} round trips/run = ${per(w.roundTrips - w.begins - w.commits - w.rollbacks, r)} statements + ${per(w.begins, r)} begin + ${per(w.commits + w.rollbacks, r)} commit/rollback; ` +
          `${per(w.commits, r)} transaction commits + ${per(w.autocommits, r)} autocommit statements (${per(w.notifies, r)} of them pg_notify); ${w.connections} new connections in the window`,
      );
      console.log(
        `  pg_stat_database: ${r.pgStat?.commits} commits, ${r.pgStat?.rollbacks} rollbacks over ${r.runs} runs; ${(r.pgStat?.commits ?? 0) - clientCommits} more than the client sent ` +
          `(connection start-ups counted in): the LISTEN backend runs one transaction per notification it receives, plus autovacuum/autoanalyze`,
      );
      console.log(`  autocommit statements per run on the wire, and how many wrote (assigned a transaction id, so a WAL flush at commit):`);
      const byLabel = [...w.autocommitByLabel.entries()].sort((a, b) => b[1].count - a[1].count);
      console.log(
        indent(
          table(
            ["autocommit statement", "per run", "writing/run"],
            [
              ...byLabel.map(([label, stat]) => [label, per(stat.count, r), per(stat.writing, r)]),
              ["(explicit transactions, begin ... commit)", per(w.commits, r), per(w.writingCommits - sumWriting(byLabel), r)],
            ],
          ),
        ),
      );
    }
  }
}

const sumWriting = (rows: [string, { writing: number }][]) => rows.reduce((total, [, stat]) => total + stat.writing, 0);

const indent = (text: string) => text.replace(/^/gm, "    ");

/** Statements per run by SQL (first 64 characters), most frequent first, indented. */
function statementTable(counts: DbCounts, runs: number): string {
  const per = (value: number) => fixed(value / runs, 2);
  const rows = [...counts.statements.entries()].sort((a, b) => b[1].count - a[1].count);
  return indent(
    table(
      ["statement", "per run", "in tx", "no rows", "mean ms"],
      rows.map(([label, stat]) => [label, per(stat.count), per(stat.inTransaction), per(stat.noRows), fixed(stat.totalMs / stat.count, 2)]),
    ),
  );
}

// ---------------------------------------------------------------------------------------------

/** The commit measured, and the server files changed on top of it (the work tree moves while others edit). */
function sourceState(): string {
  try {
    const git = (...gitArgs: string[]) =>
      execFileSync("git", ["-C", ROOT, ...gitArgs], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    const dirty = git("status", "--porcelain", "--", "packages/server/src").split("\n").filter(Boolean).length;
    return `${git("log", "-1", "--format=%h %s")}${dirty ? ` + ${dirty} uncommitted change(s) in packages/server/src` : ""}`;
  } catch {
    return "unknown (no git)";
  }
}

async function machine(): Promise<void> {
  section("machine");
  const lines = [
    `date          ${new Date().toISOString()}`,
    `cpus          ${os.availableParallelism()} x ${os.cpus()[0]?.model ?? "?"}`,
    `memory        ${fixed(os.totalmem() / 2 ** 30, 1)} GiB`,
    `node          ${process.version}`,
    `load average  ${os
      .loadavg()
      .map((value) => value.toFixed(2))
      .join(" ")}`,
    `source        ${sourceState()}`,
  ];
  if (DRIVERS.includes("postgres")) {
    const [version] = await adminQuery<{ version: string }>("select version()");
    const [others] = await adminQuery<{ n: number }>(
      "select count(*)::int as n from pg_stat_activity where backend_type = 'client backend' and pid <> pg_backend_pid()",
    );
    const settings = await adminQuery<{ name: string; setting: string }>(
      "select name, setting from pg_settings where name in ('synchronous_commit', 'fsync', 'shared_buffers', 'max_connections') order by name",
    );
    lines.push(`postgresql    ${version?.version}`);
    lines.push(`pg settings   ${settings.map((s) => `${s.name}=${s.setting}`).join(", ")}`);
    lines.push(`pg others     ${others?.n ?? 0} other client connections at start (other users of the server skew the figures)`);
  }
  if (DRIVERS.includes("pglite")) {
    const lite = await createPgliteDb();
    const [version] = await lite.query<{ version: string }>("select version()");
    await lite.close();
    lines.push(
      `pglite        ${version?.version}; on the ${pgliteThread() === "worker" ? "worker" : "server's"} thread (RUDDER_PGLITE_THREAD)`,
    );
  }
  console.log(lines.join("\n"));
}

async function main(): Promise<void> {
  const began = now();
  await machine();
  console.log(
    `settings      runs: ${RUNS_C1} at c=1, ${RUNS} at c=10/100 and for thread runs; worker concurrency ${WORKER_CONCURRENCIES.join(", ")}; ${COUNT_RUNS} runs per counting scenario`,
  );
  const client = new Client();
  const throughputRows: ThroughputRow[] = [];
  const sseRows: { driver: Driver; rows: SseRow[] }[] = [];
  const counts: CountResult[] = [];
  let reference: InvokeFigures[] = [];
  try {
    if (!SKIP.has("reference")) {
      reference = await referenceRaw();
      printInvokes("reference: in-process graph.invoke of a 1-node graph, no server", reference);
      for (const driver of DRIVERS)
        printInvokes(`reference: in-process graph.invoke with RudderCheckpointSaver on ${driver}`, await referenceSaver(driver));
    }
    for (const driver of DRIVERS) {
      if (!SKIP.has("throughput")) {
        section(`${driver}: trivial runs (echo), create + join, per worker concurrency`);
        for (const [index, workerConcurrency] of WORKER_CONCURRENCIES.entries()) {
          const { rows, sse } = await throughput(client, driver, workerConcurrency, index === 0 && !SKIP.has("sse"));
          throughputRows.push(...rows);
          if (sse.length) sseRows.push({ driver, rows: sse });
        }
      }
      if (!SKIP.has("count")) {
        section(`${driver}: statements and commits per trivial run (${COUNT_RUNS} sequential runs per scenario)`);
        const primary = WORKER_CONCURRENCIES[0]!;
        const scenarios: Scenario[] = [
          { name: "stateless, durability sync", workerConcurrency: primary, thread: false, durability: "sync" },
          { name: "stateless, durability exit", workerConcurrency: primary, thread: false, durability: "exit" },
          { name: "thread, durability sync", workerConcurrency: primary, thread: true, durability: "sync" },
          { name: "thread, durability exit", workerConcurrency: primary, thread: true, durability: "exit" },
          ...(primary === 1
            ? []
            : [{ name: "stateless, durability sync", workerConcurrency: 1, thread: false, durability: "sync" } as Scenario]),
        ];
        const results: CountResult[] = [];
        for (const scenario of scenarios) {
          const result = await countScenario(client, driver, scenario);
          console.log(
            `  counted ${driver} ${scenario.name}, worker ${scenario.workerConcurrency}: ${fixed(sumStatements(result.db) / result.runs, 2)} Db statements/run`,
          );
          results.push(result);
        }
        printCounts(results);
        counts.push(...results);
      }
    }
  } finally {
    client.close();
  }

  if (throughputRows.length) section("summary: trivial-run throughput (create + join over HTTP)");
  if (throughputRows.length)
    console.log(
      table(
        [
          "driver",
          "worker",
          "runs",
          "client c",
          "runs",
          "runs/s",
          "p50 ms",
          "p99 ms",
          "sent->created p50/p99",
          "queued p50/p99",
          "executing p50/p99",
          "finish->join p50/p99",
          "errors",
          "machine cores busy",
          "server process cores",
          "server CPU ms/run",
          "PostgreSQL CPU ms/run",
          "client CPU ms/run",
          "Db stmts/run",
          "commits/run",
          "writing/run",
        ],
        throughputRows.map((r) => [
          r.driver,
          r.workerConcurrency,
          r.kind,
          r.concurrency,
          r.runs,
          fixed(r.perSecond, 0),
          fixed(r.p50),
          fixed(r.p99),
          pair(r.create),
          pair(r.queued),
          pair(r.executed),
          pair(r.joinLag),
          r.errors,
          fixed(r.machineCores, 2),
          fixed(r.serverCores, 2),
          fixed(r.cpuMsPerRun, 2),
          fixed(r.postgresCpuMsPerRun, 2),
          fixed(r.clientCpuMsPerRun, 2),
          fixed(r.statementsPerRun, 1),
          fixed(r.commitsPerRun, 1),
          `${fixed(r.writingCommitsPerRun, 1)} (${fixed(r.notifyOnlyCommitsPerRun, 1)} notify-only)`,
        ]),
        ["l", "r", "l"],
      ),
    );
  printInvokeRatios(reference, throughputRows);
  for (const { driver, rows } of sseRows) {
    section(
      `summary: event-to-SSE latency, ${driver} (ticker graph: ${TICKER_INPUT.count} custom events ${TICKER_INPUT.interval_ms} ms apart)`,
    );
    console.log(
      table(
        ["client c", "measure", "n", "p50 ms", "p99 ms", "max ms"],
        rows.map((r) => [r.concurrency, r.what, r.samples, fixed(r.p50), fixed(r.p99), fixed(r.max)]),
        ["r", "l"],
      ),
    );
  }
  if (counts.length) {
    section("summary: statements and commits per trivial run");
    console.log(
      table(
        [
          "driver",
          "scenario",
          "worker",
          "Db stmts/run",
          "Db commits/run",
          "wire round trips/run",
          "wire commits/run",
          "writing commits/run",
          "of them notify-only",
          "pg_stat xact_commit/run",
        ],
        counts.map((r) => [
          r.driver,
          r.scenario.name,
          r.scenario.workerConcurrency,
          fixed(sumStatements(r.db) / r.runs, 2),
          fixed((r.db.committedTransactions + r.db.autocommitStatements) / r.runs, 2),
          r.wire ? fixed(r.wire.roundTrips / r.runs, 2) : "-",
          r.wire ? fixed((r.wire.commits + r.wire.autocommits) / r.runs, 2) : "-",
          `${fixed((r.wire?.writingCommits ?? r.db.writingCommits) / r.runs, 2)}${r.wire ? "" : " (heur.)"}`,
          r.wire ? fixed(r.wire.notifyOnlyCommits / r.runs, 2) : "-",
          r.pgStat ? fixed(r.pgStat.commits / r.runs, 2) : "-",
        ]),
        ["l", "l"],
      ),
    );
  }
  console.log(
    `\ntotal time ${fixed((now() - began) / 1000, 0)} s; load average at end ${os
      .loadavg()
      .map((value) => value.toFixed(2))
      .join(" ")}`,
  );
}

await main();
