/**
 * Scale-out on one PostgreSQL (issue 22, item 8): real `rudder serve` and `rudder worker`
 * processes over one private database, and what that PostgreSQL sustains on its own.
 *
 * - Queue drain: one API fills the queue with trivial runs (echo) while no worker runs; then N
 *   workers start and the bench times from their start until the queue is empty and every run
 *   succeeded: runs/s for each N of --workers.
 * - API-driven: client concurrency C (POST /v1/runs, then GET /v1/runs/{id}/join), spread round
 *   robin over A API processes, one worker behind them: runs/s for each A of --apis, with the
 *   database's commits per run (pg_stat_database) over the same window.
 * - pgbench: the commit rate this PostgreSQL sustains with pgbench's simple-update transaction
 *   (`-N`: three writes and a read per commit) at 1 and 16 clients, on a private database.
 *
 * On a machine with few cores the process counts show the overhead of a process, not a speed-up:
 * every process shares the same cores with PostgreSQL (and, on a shared machine, with others).
 * docs/architecture.md ("Sizing one PostgreSQL") turns commits per run and the pgbench rate into
 * the runs/s where one PostgreSQL saturates.
 *
 *   node --import tsx bench/scale-out.ts [--runs N] [--workers 1,2] [--apis 1,2] [--concurrency C]
 *        [--worker-concurrency N] [--seconds S] [--database-url URL] [--skip drain,api,pgbench]
 *
 *   --runs N                runs per queue-drain measurement (default 2000)
 *   --workers LIST          worker process counts for the drain (default 1,2)
 *   --apis LIST             API process counts for the API-driven figure (default 1,2)
 *   --concurrency C         client concurrency of the API-driven figure (default 32)
 *   --worker-concurrency N  RUDDER_WORKER_CONCURRENCY of each worker (default 25)
 *   --seconds S             length of each API-driven measurement and pgbench run (default 15)
 *   --database-url URL      the PostgreSQL server (default $RUDDER_BENCH_DATABASE_URL or
 *                           postgres://postgres@127.0.0.1:5432/test); private databases
 *                           rudder_scale_<uuid> are created on it and dropped after (also on Ctrl-C)
 *   --skip LIST             sections to leave out: drain, api, pgbench
 */
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs, promisify } from "node:util";
import type { ChildProcessWithoutNullStreams } from "node:child_process";
import { mintToken } from "../packages/server/src/auth/authenticator.ts";
import { runRudder, startRudder, waitForOutput } from "../packages/server/test/support/cli.ts";
import { DEFAULT_DATABASE_URL, exitWithUsage, fixed, positive, queryOnce, sleep } from "./common.ts";
import { now } from "./counting.ts";

const { values: args } = parseArgs({
  options: {
    runs: { type: "string", default: "2000" },
    workers: { type: "string", default: "1,2" },
    apis: { type: "string", default: "1,2" },
    concurrency: { type: "string", default: "32" },
    "worker-concurrency": { type: "string", default: "25" },
    seconds: { type: "string", default: "15" },
    "database-url": { type: "string", default: DEFAULT_DATABASE_URL },
    skip: { type: "string", default: "" },
    help: { type: "boolean", default: false },
  },
});
exitWithUsage(
  args.help,
  "node --import tsx bench/scale-out.ts [--runs N] [--workers 1,2] [--apis 1,2] [--concurrency C] [--worker-concurrency N] [--seconds S] [--database-url URL] [--skip drain,api,pgbench]",
);
const RUNS = positive(args.runs, "--runs");
const WORKER_COUNTS = args.workers.split(",").map((value) => positive(value, "--workers"));
const API_COUNTS = args.apis.split(",").map((value) => positive(value, "--apis"));
const CONCURRENCY = positive(args.concurrency, "--concurrency");
const WORKER_CONCURRENCY = positive(args["worker-concurrency"], "--worker-concurrency");
const SECONDS = positive(args.seconds, "--seconds");
const DATABASE_URL = args["database-url"];
const SKIP = new Set(args.skip.split(",").filter(Boolean));

const SECRET = "rudder-scale-secret-rudder-scale-secret-rudder";
const ROOT = fileURLToPath(new URL("../", import.meta.url));
const ECHO = { assistant_id: "echo", input: { message: "hi" } };

async function pool<T>(items: readonly T[], concurrency: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
}

// ---------------------------------------------------------------------------------------------
// Databases and processes

async function adminQuery<Row>(sql: string, params: unknown[] = [], database?: string): Promise<Row[]> {
  const url = new URL(DATABASE_URL);
  if (database) url.pathname = `/${database}`;
  return queryOnce<Row>(url.toString(), sql, params);
}

const children = new Set<ChildProcessWithoutNullStreams>();
const databases = new Set<string>();
async function cleanUp(): Promise<void> {
  await Promise.allSettled([...children].map((child) => stopProcess(child)));
  await Promise.allSettled([...databases].map((name) => adminQuery(`drop database if exists ${name} with (force)`)));
}
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    console.log(`\n${signal}: stopping processes and dropping private databases`);
    void cleanUp().then(() => process.exit(130));
  });
}

async function privateDatabase(): Promise<{ name: string; url: string }> {
  const name = `rudder_scale_${randomUUID().replaceAll("-", "")}`;
  await adminQuery(`create database ${name}`);
  databases.add(name);
  const url = new URL(DATABASE_URL);
  url.pathname = `/${name}`;
  return { name, url: url.toString() };
}

async function dropDatabase(name: string): Promise<void> {
  await adminQuery(`drop database if exists ${name} with (force)`);
  databases.delete(name);
}

function spawnRudder(name: string, argv: string[], env: Record<string, string>): ChildProcessWithoutNullStreams {
  const child = startRudder(argv, env);
  children.add(child);
  child.once("exit", () => children.delete(child));
  child.stdout.on("data", (chunk: Buffer) => {
    for (const line of chunk.toString().split("\n"))
      if (/"level":"(warn|error|fatal)"|Warning/.test(line)) console.log(`  [${name}] ${line.slice(0, 300)}`);
  });
  child.stderr.on("data", (chunk: Buffer) => {
    const text = chunk.toString().trim();
    if (text) console.log(`  [${name} stderr] ${text.slice(0, 500)}`);
  });
  return child;
}

async function stopProcess(child: ChildProcessWithoutNullStreams): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
  await exited;
  clearTimeout(timer);
}

interface Deployment {
  readonly databaseName: string;
  readonly env: Record<string, string>;
  readonly config: string;
  readonly dir: string;
}

async function deployment(): Promise<Deployment> {
  const dir = mkdtempSync(join(os.tmpdir(), "rudder-scale-"));
  const config = join(dir, "rudder.json");
  writeFileSync(config, JSON.stringify({ graphs: { echo: `${ROOT}examples/graphs/echo.ts:graph` } }));
  const database = await privateDatabase();
  const env = {
    DATABASE_URL: database.url,
    RUDDER_JWT_SECRET: SECRET,
    RUDDER_LOG_LEVEL: "warn",
    RUDDER_LOG_FORMAT: "json",
    RUDDER_WORKER_CONCURRENCY: String(WORKER_CONCURRENCY),
    RUDDER_QUEUED_RUN_QUOTA: String(RUNS + 1000),
    RUDDER_CRON_ENABLED: "false",
  };
  const migrated = await runRudder(["migrate", "--config", config], env, 120_000);
  if (migrated.code !== 0) throw new Error(`rudder migrate failed: ${migrated.stderr}`);
  return { databaseName: database.name, env, config, dir };
}

async function startApis(target: Deployment, count: number): Promise<{ urls: string[]; processes: ChildProcessWithoutNullStreams[] }> {
  const processes = Array.from({ length: count }, (_, index) =>
    spawnRudder(`serve-${index + 1}`, ["serve", "--config", target.config, "--port", "0"], target.env),
  );
  const banners = await Promise.all(processes.map((child) => waitForOutput(child, /listening at http:\/\/\S+/, 180_000)));
  return { urls: banners.map((banner) => /listening at (http:\/\/\S+)/.exec(banner)![1]!), processes };
}

async function startWorkers(target: Deployment, count: number): Promise<ChildProcessWithoutNullStreams[]> {
  const processes = Array.from({ length: count }, (_, index) =>
    spawnRudder(`worker-${index + 1}`, ["worker", "--config", target.config], target.env),
  );
  await Promise.all(processes.map((child) => waitForOutput(child, /rudder worker: \S+ executing/, 180_000)));
  return processes;
}

async function call<T>(url: string, token: string, method: string, path: string, body?: unknown): Promise<T> {
  const response = await fetch(url + path, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${text.slice(0, 300)}`);
  return JSON.parse(text) as T;
}

async function statusCounts(databaseName: string): Promise<Record<string, number>> {
  const rows = await adminQuery<{ status: string; count: string }>(
    "select status, count(*)::text as count from runs group by status",
    [],
    databaseName,
  );
  return Object.fromEntries(rows.map((row) => [row.status, Number(row.count)]));
}

async function commits(databaseName: string): Promise<number> {
  const [row] = await adminQuery<{ commits: string }>("select xact_commit::text as commits from pg_stat_database where datname = $1", [
    databaseName,
  ]);
  return Number(row?.commits ?? 0);
}

// ---------------------------------------------------------------------------------------------
// Sections

async function drain(workers: number, token: string): Promise<{ runsPerSecond: number; seconds: number }> {
  const target = await deployment();
  try {
    const { urls, processes: apis } = await startApis(target, 1);
    await pool(
      Array.from({ length: RUNS }, (_, index) => index),
      16,
      async () => {
        await call(urls[0]!, token, "POST", "/v1/runs", ECHO);
      },
    );
    await stopProcess(apis[0]!);
    const started = now();
    const processes = await startWorkers(target, workers);
    const ready = now();
    let counts = await statusCounts(target.databaseName);
    while ((counts.succeeded ?? 0) + (counts.failed ?? 0) + (counts.dead_letter ?? 0) < RUNS) {
      await sleep(200);
      counts = await statusCounts(target.databaseName);
    }
    const seconds = (now() - ready) / 1000;
    console.log(
      `  ${workers} worker(s): ${RUNS} queued runs drained in ${fixed(seconds, 2)} s after the workers were ready (startup ${fixed((ready - started) / 1000, 1)} s): ${fixed(RUNS / seconds)} runs/s; statuses ${JSON.stringify(counts)}`,
    );
    await Promise.all(processes.map((child) => stopProcess(child)));
    return { runsPerSecond: RUNS / seconds, seconds };
  } finally {
    await dropDatabase(target.databaseName);
    rmSync(target.dir, { recursive: true, force: true });
  }
}

async function apiDriven(apiCount: number, token: string): Promise<{ runsPerSecond: number; commitsPerRun: number; p50: number }> {
  const target = await deployment();
  try {
    const { urls, processes: apis } = await startApis(target, apiCount);
    const workers = await startWorkers(target, 1);
    // Warm-up: every API process compiles its routes and opens its pool.
    await pool(
      Array.from({ length: 20 * apiCount }, (_, index) => index),
      4,
      async (index) => {
        const run = await call<{ run_id: string }>(urls[index % urls.length]!, token, "POST", "/v1/runs", ECHO);
        await call(urls[index % urls.length]!, token, "GET", `/v1/runs/${run.run_id}/join?timeout=60`);
      },
    );
    const commitsBefore = await commits(target.databaseName);
    const latencies: number[] = [];
    const started = now();
    const deadline = started + SECONDS * 1000;
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (now() < deadline) {
          const url = urls[next++ % urls.length]!;
          const sent = now();
          const run = await call<{ run_id: string }>(url, token, "POST", "/v1/runs", ECHO);
          const done = await call<{ status: string }>(url, token, "GET", `/v1/runs/${run.run_id}/join?timeout=60`);
          if (done.status !== "succeeded") throw new Error(`run ${run.run_id} ended ${done.status}`);
          latencies.push(now() - sent);
        }
      }),
    );
    const seconds = (now() - started) / 1000;
    // PostgreSQL backends report their statistics at most once a second (and on exit).
    await Promise.all([...apis, ...workers].map((child) => stopProcess(child)));
    await sleep(1500);
    const commitCount = (await commits(target.databaseName)) - commitsBefore;
    latencies.sort((a, b) => a - b);
    const p50 = latencies[Math.floor(latencies.length / 2)] ?? Number.NaN;
    const runsPerSecond = latencies.length / seconds;
    console.log(
      `  ${apiCount} API process(es), 1 worker, client concurrency ${CONCURRENCY}: ${latencies.length} runs in ${fixed(seconds, 1)} s = ${fixed(runsPerSecond)} runs/s, p50 ${fixed(p50)} ms; ${fixed(commitCount / latencies.length, 2)} commits per run (every commit of the database, reads included)`,
    );
    return { runsPerSecond, commitsPerRun: commitCount / latencies.length, p50 };
  } finally {
    await dropDatabase(target.databaseName);
    rmSync(target.dir, { recursive: true, force: true });
  }
}

async function pgbench(): Promise<{ clients: number; tps: number }[]> {
  const binary = [
    "pgbench",
    "/usr/lib/postgresql/15/bin/pgbench",
    "/usr/lib/postgresql/16/bin/pgbench",
    "/usr/lib/postgresql/17/bin/pgbench",
  ];
  const run = promisify(execFile);
  let found: string | undefined;
  for (const candidate of binary) {
    try {
      await run(candidate, ["--version"]);
      found = candidate;
      break;
    } catch {
      // not this one
    }
  }
  if (!found) {
    console.log("  pgbench not found (install postgresql-contrib / the PostgreSQL client package): skipped");
    return [];
  }
  const database = await privateDatabase();
  try {
    await run(found, ["-i", "-s", "1", "-q", database.url]);
    const results: { clients: number; tps: number }[] = [];
    for (const clients of [1, 16]) {
      const { stdout } = await run(found, [
        "-N",
        "-c",
        String(clients),
        "-j",
        String(Math.min(clients, 2)),
        "-T",
        String(SECONDS),
        "-n",
        database.url,
      ]);
      const tps = Number(/tps = ([\d.]+)/.exec(stdout)?.[1]);
      console.log(
        `  pgbench -N (simple update: 3 writes + 1 read per commit), ${clients} client(s), ${SECONDS} s: ${fixed(tps, 0)} commits/s`,
      );
      results.push({ clients, tps });
    }
    return results;
  } finally {
    await dropDatabase(database.name);
  }
}

// ---------------------------------------------------------------------------------------------

console.log(
  `scale-out on one PostgreSQL (${DATABASE_URL.replace(/\/\/[^@]*@/, "//")}): ${os.availableParallelism()} cores, node ${process.version}; worker concurrency ${WORKER_CONCURRENCY}`,
);
try {
  const token = await mintToken(SECRET, { tenantId: "bench", roles: ["admin"] });
  const drains: { workers: number; runsPerSecond: number }[] = [];
  if (!SKIP.has("drain")) {
    console.log(`\n=== queue drain: ${RUNS} trivial runs queued, then N worker processes ===`);
    for (const workers of WORKER_COUNTS) drains.push({ workers, ...(await drain(workers, token)) });
  }
  const driven: { apis: number; runsPerSecond: number; commitsPerRun: number }[] = [];
  if (!SKIP.has("api")) {
    console.log(`\n=== API-driven: create + join at client concurrency ${CONCURRENCY} over A API processes, one worker ===`);
    for (const apis of API_COUNTS) driven.push({ apis, ...(await apiDriven(apis, token)) });
  }
  const bench = SKIP.has("pgbench") ? [] : (console.log("\n=== pgbench: what this PostgreSQL commits per second ==="), await pgbench());

  console.log("\n=== summary ===");
  const base = drains[0];
  for (const { workers, runsPerSecond } of drains)
    console.log(
      `  drain, ${workers} worker(s): ${fixed(runsPerSecond)} runs/s${base && workers !== base.workers ? ` (${fixed(runsPerSecond / base.runsPerSecond, 2)}× ${base.workers})` : ""}`,
    );
  const first = driven[0];
  for (const { apis, runsPerSecond, commitsPerRun } of driven)
    console.log(
      `  API-driven, ${apis} API(s): ${fixed(runsPerSecond)} runs/s, ${fixed(commitsPerRun, 2)} commits/run${first && apis !== first.apis ? ` (${fixed(runsPerSecond / first.runsPerSecond, 2)}× ${first.apis})` : ""}`,
    );
  const best = bench.reduce((max, row) => Math.max(max, row.tps), 0);
  if (best > 0 && first) {
    console.log(
      `  sizing: this PostgreSQL commits up to ${fixed(best, 0)} pgbench transactions/s; at ${fixed(first.commitsPerRun, 2)} commits per run it saturates near ${fixed(best / first.commitsPerRun, 0)} trivial runs/s (measured here: ${fixed(first.runsPerSecond)} runs/s, limited by ${os.availableParallelism()} shared cores)`,
    );
  }
} finally {
  await cleanUp();
}
