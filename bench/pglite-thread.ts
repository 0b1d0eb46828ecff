/**
 * PGlite on a worker thread against PGlite on the server's thread against PostgreSQL: trivial-run
 * throughput at one client concurrency, the three measured back to back and repeated in rounds,
 * so that load from other users of the machine falls on all of them alike.
 *
 * Usage (from the repository root):
 *
 *   node --import tsx bench/pglite-thread.ts [--runs N] [--concurrency 50] [--rounds 3]
 *        [--worker-concurrency 25] [--variants pglite-worker,pglite-main,postgres] [--database-url URL]
 *
 *   --runs N              runs per measurement (default 300), after 30 warm-up runs
 *   --concurrency LIST    client concurrencies, comma-separated (default 50)
 *   --rounds R            times each variant is measured, interleaved (default 3)
 *   --worker-concurrency  the in-process worker's slots (default 25)
 *   --variants LIST       pglite-worker (RUDDER_PGLITE_THREAD=worker), pglite-main (=main, the
 *                         default), postgres (a private database rudder_bench_<uuid> on --database-url)
 *
 * Per measurement: runs/s, p50/p99 create → join, the server process's CPU per run (all threads,
 * so PGlite's thread counts too) and its main thread's alone (/proc/self/task/<pid>/stat: the
 * event loop that answers HTTP and runs graphs), the cores the whole machine was busy, and the
 * load average. Figures and reading: docs/benchmarks.md, "PGlite on a worker thread".
 */
import { randomUUID } from "node:crypto";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { mintToken } from "../packages/server/src/auth/authenticator.ts";
import { resolveConfig, type RudderConfig } from "../packages/server/src/config/config.ts";
import { startServer } from "../packages/server/src/server.ts";
import { createPgliteDb, createPostgresDb, type Db } from "../packages/server/src/storage/db.ts";
import { DEFAULT_WORKER_OPTIONS } from "../packages/server/src/worker/worker.ts";
import type { RunsResult } from "./client.ts";
import { Client } from "./client-process.ts";
import {
  DEFAULT_DATABASE_URL,
  exitWithUsage,
  fixed,
  machineJiffies,
  mainThreadCpuMs,
  percentile,
  positive,
  positiveList,
  queryOnce,
  table,
} from "./common.ts";

const VARIANTS = ["pglite-worker", "pglite-main", "postgres"] as const;
type Variant = (typeof VARIANTS)[number];

const { values: args } = parseArgs({
  options: {
    runs: { type: "string", default: "300" },
    concurrency: { type: "string", default: "50" },
    rounds: { type: "string", default: "3" },
    "worker-concurrency": { type: "string", default: "25" },
    variants: { type: "string", default: VARIANTS.join(",") },
    "database-url": { type: "string", default: DEFAULT_DATABASE_URL },
    help: { type: "boolean", default: false },
  },
});
exitWithUsage(
  args.help,
  "node --import tsx bench/pglite-thread.ts [--runs N] [--concurrency 50] [--rounds 3] [--worker-concurrency 25] [--variants pglite-worker,pglite-main,postgres] [--database-url URL]",
);
const RUNS = positive(args.runs, "--runs");
const CONCURRENCIES = positiveList(args.concurrency, "--concurrency");
const ROUNDS = positive(args.rounds, "--rounds");
const WORKER_CONCURRENCY = positive(args["worker-concurrency"], "--worker-concurrency");
const DATABASE_URL = args["database-url"];
const CHOSEN = args.variants.split(",").map((name) => {
  if (!(VARIANTS as readonly string[]).includes(name)) throw new Error(`--variants: unknown ${name}; one of ${VARIANTS.join(", ")}`);
  return name as Variant;
});

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const SECRET = "rudder-bench-secret-rudder-bench-secret";
const ECHO = { assistant_id: "echo", input: { message: "hi" } };
/** CPU time of this process's main thread, µs. */
const mainThreadCpuUs = () => mainThreadCpuMs() * 1000;

interface Opened {
  readonly db: Db;
  drop(): Promise<void>;
}

async function open(variant: Variant): Promise<Opened> {
  if (variant !== "postgres") {
    const db = await createPgliteDb({ thread: variant === "pglite-worker" ? "worker" : "main" });
    return { db, drop: () => db.close() };
  }
  const name = `rudder_bench_${randomUUID().replaceAll("-", "")}`;
  await queryOnce(DATABASE_URL, `create database ${name}`);
  const url = new URL(DATABASE_URL);
  url.pathname = `/${name}`;
  const db = createPostgresDb(url.toString());
  return {
    db,
    async drop() {
      await db.close();
      await queryOnce(DATABASE_URL, `drop database if exists ${name} with (force)`);
    },
  };
}

interface Row {
  round: number;
  variant: Variant;
  concurrency: number;
  runs: number;
  errors: number;
  perSecond: number;
  p50: number;
  p99: number;
  /** Server process CPU per run (all its threads), and its main thread's, ms. */
  processMsPerRun: number;
  mainMsPerRun: number;
  machineCores: number;
  load1: number;
}

async function measure(client: Client, round: number, variant: Variant): Promise<Row[]> {
  const opened = await open(variant);
  const base = resolveConfig({ config: `${ROOT}examples/rudder.json`, port: 0 }, {});
  const config: RudderConfig = { ...base, auth: { ...base.auth, jwtSecret: SECRET }, workerConcurrency: WORKER_CONCURRENCY };
  const server = await startServer({
    config,
    db: opened.db,
    schema: "migrate",
    logger: false,
    worker: { ...DEFAULT_WORKER_OPTIONS, concurrency: WORKER_CONCURRENCY },
  });
  const rows: Row[] = [];
  try {
    const target = { url: server.url!, token: await mintToken(SECRET, { tenantId: "bench", roles: ["admin"] }) };
    await client.request<RunsResult>({ kind: "runs", ...target, concurrency: 5, runs: 30, body: ECHO });
    for (const concurrency of CONCURRENCIES) {
      const process0 = process.cpuUsage();
      const main0 = mainThreadCpuUs();
      const machine0 = machineJiffies();
      const result = await client.request<RunsResult>({ kind: "runs", ...target, concurrency, runs: RUNS, body: ECHO });
      const processUsage = process.cpuUsage(process0);
      const machine1 = machineJiffies();
      const done = Math.max(1, result.latencies.length);
      const row: Row = {
        round,
        variant,
        concurrency,
        runs: result.latencies.length,
        errors: result.errors,
        perSecond: (result.latencies.length / result.elapsedMs) * 1000,
        p50: percentile(result.latencies, 50),
        p99: percentile(result.latencies, 99),
        processMsPerRun: (processUsage.user + processUsage.system) / 1000 / done,
        mainMsPerRun: (mainThreadCpuUs() - main0) / 1000 / done,
        machineCores: ((machine1.busy - machine0.busy) / Math.max(1, machine1.total - machine0.total)) * os.availableParallelism(),
        load1: os.loadavg()[0]!,
      };
      if (result.firstError) console.log(`  ! ${result.errors} failed runs; first: ${result.firstError}`);
      console.log(
        `  round ${round} ${variant} c=${concurrency}: ${fixed(row.perSecond, 0)} runs/s, p50 ${fixed(row.p50)} ms, p99 ${fixed(row.p99)} ms, server CPU ${fixed(row.processMsPerRun, 2)} ms/run (main thread ${fixed(row.mainMsPerRun, 2)}), machine ${fixed(row.machineCores, 2)} cores busy, load ${fixed(row.load1, 2)}`,
      );
      rows.push(row);
    }
  } finally {
    await server.close();
    await opened.drop();
  }
  return rows;
}

const median = (values: number[]) => percentile(values, 50);

async function main(): Promise<void> {
  console.log(
    `pglite-thread bench: ${RUNS} runs per measurement, client concurrency ${CONCURRENCIES.join(", ")}, worker concurrency ${WORKER_CONCURRENCY}, ${ROUNDS} rounds of ${CHOSEN.join(", ")}; ${os.cpus().length} cores, ${new Date().toISOString()}`,
  );
  const client = new Client();
  const rows: Row[] = [];
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      // Each round starts with another variant, so none is always measured first or last.
      const order = CHOSEN.map((_, index) => CHOSEN[(index + round - 1) % CHOSEN.length]!);
      for (const variant of order) rows.push(...(await measure(client, round, variant)));
    }
  } finally {
    client.close();
  }
  console.log(
    "\n" +
      table(
        [
          "variant",
          "client c",
          "rounds",
          "runs/s median (min–max)",
          "p50 ms",
          "p99 ms",
          "server CPU ms/run",
          "main thread ms/run",
          "machine cores",
          "load",
        ],
        CHOSEN.flatMap((variant) =>
          CONCURRENCIES.map((concurrency) => {
            const own = rows.filter((row) => row.variant === variant && row.concurrency === concurrency);
            const rates = own.map((row) => row.perSecond);
            return [
              variant,
              concurrency,
              own.length,
              `${fixed(median(rates), 0)} (${fixed(Math.min(...rates), 0)}–${fixed(Math.max(...rates), 0)})`,
              fixed(median(own.map((row) => row.p50))),
              fixed(median(own.map((row) => row.p99))),
              fixed(median(own.map((row) => row.processMsPerRun)), 2),
              fixed(median(own.map((row) => row.mainMsPerRun)), 2),
              fixed(median(own.map((row) => row.machineCores)), 2),
              fixed(median(own.map((row) => row.load1)), 2),
            ];
          }),
        ),
        ["l", "r", "r", "r"],
      ),
  );
  if (CHOSEN.includes("postgres"))
    for (const variant of CHOSEN.filter((name) => name !== "postgres"))
      for (const concurrency of CONCURRENCIES) {
        const ratios = [...Array(ROUNDS).keys()].map((index) => {
          const of = (name: Variant) =>
            rows.find((row) => row.round === index + 1 && row.variant === name && row.concurrency === concurrency);
          return (of(variant)?.perSecond ?? Number.NaN) / (of("postgres")?.perSecond ?? Number.NaN);
        });
        console.log(`${variant} / postgres at c=${concurrency}, per round: ${ratios.map((ratio) => fixed(ratio, 2)).join(", ")}`);
      }
}

await main();
