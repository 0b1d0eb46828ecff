/**
 * The LangGraph side-by-side (issue 20): a one-node graph through `@langchain/langgraph-sdk`'s
 * `runs.wait` (stateless: `runs.wait(null, "echo", {input})`, one HTTP request per run) against
 *
 *   - Rudder, `rudder dev` on PGlite (one process: API, worker, scheduler; on-disk data dir),
 *   - Rudder, `rudder serve` + `rudder worker` on PostgreSQL (two processes, a private database),
 *   - the LangGraph.js dev server (`@langchain/langgraph-cli dev` 1.5.1, in memory, 10 workers),
 *
 * at client concurrency 1, 10 and 50, plus in-process `graph.invoke` (no server, no persistence)
 * as a reference row. Every server is a child process with its defaults; the client (the SDK)
 * runs in this process. Reports runs/s and p50/p95 latency of a wait, the 1-minute load average
 * when the measurement ended (the machine may be shared), and each Rudder row against the dev
 * server's at the same concurrency.
 *
 * Usage (from the repository root):
 *
 *   node --import tsx bench/langgraph-side-by-side.ts [--runs N] [--concurrency 1,10,50]
 *        [--targets reference,rudder-pglite,rudder-postgres,langgraph] [--database-url URL]
 *
 *   --runs N          timed waits per (target, concurrency) (default 300), after 2 × concurrency
 *                     untimed ones
 *   --database-url    the PostgreSQL server for serve + worker (default $RUDDER_BENCH_DATABASE_URL
 *                     or postgres://postgres@127.0.0.1:5432/test); a private database
 *                     rudder_bench_<uuid> is created on it and dropped after
 *
 * Figures and the machine they were measured on: docs/benchmarks.md ("LangGraph side-by-side").
 */
import type { ChildProcessWithoutNullStreams } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { randomUUID } from "node:crypto";
import os from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Client } from "@langchain/langgraph-sdk";
import { mintToken } from "../packages/server/src/auth/authenticator.ts";
import { createPostgresDb } from "../packages/server/src/storage/db.ts";
import { runRudder, startRudder, waitForOutput } from "../packages/server/test/support/cli.ts";
import { startLangGraphDev } from "../packages/server/test/support/langgraph-dev.ts";
import { echo } from "../packages/server/test/fixtures/graphs/clients.ts";

const CONFIG = fileURLToPath(new URL("../packages/server/test/fixtures/clients.rudder.json", import.meta.url));
const GRAPHS = fileURLToPath(new URL("../packages/server/test/fixtures/graphs/clients.ts", import.meta.url));
const SECRET = "rudder-bench-secret-rudder-bench-secret";

const { values: args } = parseArgs({
  options: {
    runs: { type: "string", default: "300" },
    concurrency: { type: "string", default: "1,10,50" },
    targets: { type: "string", default: "reference,rudder-pglite,rudder-postgres,langgraph" },
    "database-url": { type: "string", default: process.env.RUDDER_BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test" },
  },
});
const RUNS = Number(args.runs);
const CONCURRENCY = args.concurrency.split(",").map(Number);
const TARGETS = new Set(args.targets.split(","));

interface Row {
  target: string;
  concurrency: number;
  runs: number;
  runsPerSecond: number;
  p50: number;
  p95: number;
  errors: number;
  load: number;
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

/** `runs` calls of `call`, `concurrency` at a time; a call that throws or answers wrongly counts as an error. */
async function measure(target: string, call: (i: number) => Promise<boolean>, concurrency: number): Promise<Row> {
  let warm = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (warm < 2 * concurrency) await call(warm++);
    }),
  );
  const latencies: number[] = [];
  let next = 0;
  let errors = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < RUNS) {
        const i = next++;
        const begin = performance.now();
        const ok = await call(i).catch(() => false);
        latencies.push(performance.now() - begin);
        if (!ok) errors++;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const row = {
    target,
    concurrency,
    runs: RUNS,
    runsPerSecond: RUNS / seconds,
    p50: percentile(latencies, 50),
    p95: percentile(latencies, 95),
    errors,
    load: os.loadavg()[0]!,
  };
  console.error(
    `${target} c=${concurrency}: ${row.runsPerSecond.toFixed(1)} runs/s, p50 ${row.p50.toFixed(1)} ms, p95 ${row.p95.toFixed(1)} ms`,
  );
  return row;
}

/** Waits through the SDK: `runs.wait(null, "echo", {input: {message}})` must answer `{message, reply: message}`. */
function sdkCall(client: Client) {
  return async (i: number) => {
    const message = `m${i}`;
    const values = (await client.runs.wait(null, "echo", { input: { message } })) as { reply?: string };
    return values.reply === message;
  };
}

const sdkClient = (url: string, token?: string) =>
  new Client({ apiUrl: url, callerOptions: { maxRetries: 0 }, ...(token ? { defaultHeaders: { authorization: `Bearer ${token}` } } : {}) });

async function stopChild(child: ChildProcessWithoutNullStreams): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGTERM");
  await once(child, "close");
}

async function sweep(target: string, call: (i: number) => Promise<boolean>): Promise<Row[]> {
  const rows: Row[] = [];
  for (const concurrency of CONCURRENCY) rows.push(await measure(target, call, concurrency));
  return rows;
}

async function rudderPglite(): Promise<Row[]> {
  const dataDir = mkdtempSync(join(os.tmpdir(), "rudder-bench-"));
  const child = startRudder(["dev", "--config", CONFIG, "--port", "0", "--data-dir", dataDir], {
    DATABASE_URL: undefined,
    RUDDER_JWT_SECRET: SECRET,
  });
  try {
    const banner = await waitForOutput(child, /ready at (http:\/\/127\.0\.0\.1:\d+)/, 180_000);
    const url = /ready at (http:\/\/127\.0\.0\.1:\d+)/.exec(banner)![1]!;
    const token = await mintToken(SECRET, { tenantId: "default", roles: ["admin"] });
    return await sweep("Rudder, rudder dev (PGlite)", sdkCall(sdkClient(url, token)));
  } finally {
    await stopChild(child);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function rudderPostgres(): Promise<Row[]> {
  const name = `rudder_bench_${randomUUID().replaceAll("-", "")}`;
  const admin = createPostgresDb(args["database-url"], { max: 1 });
  await admin.query(`create database ${name}`);
  const url = new URL(args["database-url"]);
  url.pathname = `/${name}`;
  const env = { DATABASE_URL: url.toString(), RUDDER_JWT_SECRET: SECRET };
  const children: ChildProcessWithoutNullStreams[] = [];
  try {
    const migrated = await runRudder(["migrate"], env, 120_000);
    if (migrated.code !== 0) throw new Error(`rudder migrate failed:\n${migrated.stdout}\n${migrated.stderr}`);
    const serve = startRudder(["serve", "--config", CONFIG, "--port", "0"], env);
    children.push(serve);
    const banner = await waitForOutput(serve, /listening at (http:\/\/\S+)/, 180_000);
    const apiUrl = /listening at (http:\/\/\S+)/.exec(banner)![1]!;
    const worker = startRudder(["worker", "--config", CONFIG], env);
    children.push(worker);
    await waitForOutput(worker, /rudder worker: \S+ executing/, 180_000);
    const token = await mintToken(SECRET, { tenantId: "default", roles: ["admin"] });
    return await sweep("Rudder, serve + worker (PostgreSQL)", sdkCall(sdkClient(apiUrl, token)));
  } finally {
    await Promise.all(children.map(stopChild));
    await admin.query(`drop database if exists ${name} with (force)`);
    await admin.close();
  }
}

async function langGraphDev(): Promise<Row[]> {
  const server = await startLangGraphDev(GRAPHS, { echo: "echo" }, 180_000);
  try {
    return await sweep("LangGraph.js dev server 1.5.1 (in memory)", sdkCall(sdkClient(server.url)));
  } finally {
    await server.stop();
  }
}

async function reference(): Promise<Row[]> {
  return sweep("in-process graph.invoke (reference)", async (i) => {
    const message = `m${i}`;
    return (await echo.invoke({ message })).reply === message;
  });
}

const rows: Row[] = [];
if (TARGETS.has("reference")) rows.push(...(await reference()));
if (TARGETS.has("langgraph")) rows.push(...(await langGraphDev()));
if (TARGETS.has("rudder-pglite")) rows.push(...(await rudderPglite()));
if (TARGETS.has("rudder-postgres")) rows.push(...(await rudderPostgres()));

const dev = (concurrency: number) => rows.find((row) => row.target.startsWith("LangGraph") && row.concurrency === concurrency);
console.log(`\nLangGraph side-by-side: one-node graph, SDK runs.wait (stateless), ${RUNS} timed waits per row`);
console.log(`${new Date().toISOString()}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? "?"}), Node ${process.version}\n`);
console.log(
  "| target | concurrency | runs/s | p50 ms | p95 ms | errors | load (1 min) | runs/s: this / dev server | p50: dev server / this |",
);
console.log("|---|---|---|---|---|---|---|---|---|");
for (const row of rows) {
  const reference = dev(row.concurrency);
  const vs =
    reference && row !== reference
      ? `${(row.runsPerSecond / reference.runsPerSecond).toFixed(2)}× | ${(reference.p50 / row.p50).toFixed(2)}×`
      : "— | —";
  console.log(
    `| ${row.target} | ${row.concurrency} | ${row.runsPerSecond.toFixed(1)} | ${row.p50.toFixed(1)} | ${row.p95.toFixed(1)} | ${row.errors} | ${row.load.toFixed(1)} | ${vs} |`,
  );
}
console.log("\nTarget (issue 20 / docs/benchmarks.md): Rudder 10× the dev server; the last two columns are the measured gap.");
process.exit(0);
