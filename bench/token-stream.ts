/**
 * Streaming at token rate (issue 22, item 10): K runs at once, each a graph that emits a custom
 * event every 20 ms (200 of them, like an LLM streaming tokens), one SSE reader per run on
 * `GET /v1/runs/{id}/stream`.
 *
 * Usage (from the repository root):
 *
 *   node --import tsx bench/token-stream.ts [--driver pglite|postgres|both] [--k-postgres 10,50,200] [--k-pglite 10,50]
 *        [--events 200] [--interval-ms 20] [--database-url URL] [--skip-reference] [--cpu-prof DIR] [--flush-ms N]
 *
 * Per K it reports:
 *
 * - events/s delivered and offered: every run ticks from the same moment (`start_at`), each tick due
 *   on its own time (bench/graphs.ts), so K runs offer K x 1000 / interval events/s; delivered is the
 *   rate the readers got them at, offered the rate the graphs sent them at, both over the intervals
 *   the events span (`rates`, below), and "window" the earlier passes' events / (last read - first
 *   emitted); "steady" the rate the readers got events at while every stream ran (1 s after the
 *   first tick was due to 1 s before the last, `steadyRate`); emit lag p95 says how late the graphs'
 *   timers fired (a busy server's event loop); "last tick lag max" how late the latest last tick
 *   left: K runs that end together run LangGraph's end-of-run work one after another on the event
 *   loop, each before the next run's last timer fires, so the last one's tick waits for K - 1 of
 *   them; that stretches the span of the emits, so the offered and whole-span rates fall short of
 *   K x 1000 / interval however fast the events travel (docs/benchmarks.md, fifteenth pass);
 * - emit -> SSE p50/p95/max: the graph stamps each event with its process's clock (`t`), the client
 *   (a forked child process, bench/client.ts) its read time, corrected by the measured clock offset;
 * - commits per event, reads included: PostgreSQL `pg_stat_database.xact_commit` of the private
 *   database over the measurement (creates, claims, appends, stream reads, settles, NOTIFY), and
 *   on PGlite the transactions and autocommit statements counted through the driver
 *   (bench/counting.ts); Db statements per event on both;
 * - completeness: every run's custom events arrive exactly once and in order (ticks 0..n-1 at
 *   increasing sequences), the stream's sequences are exactly the run's durable log afterwards,
 *   and every run succeeded.
 *
 * `--flush-ms N` sets the worker's event flush interval (default: the worker's, 20 ms).
 *
 * With `--cpu-prof DIR` the server process's CPU is profiled over each measurement only (not
 * start-up, schema compilation or the warm-up): `DIR/token-stream-<driver>-k<K>.cpuprofile`, to
 * open in Chrome DevTools or summarise with `node bench/profile-summary.mjs FILE`.
 *
 * The reference row streams the same graph from the LangGraph.js dev server (`/runs/stream`,
 * stream_mode custom) when `@langchain/langgraph-cli` is installed; otherwise it says why not.
 * The gap to the target (K=200 on PostgreSQL: 10,000 events/s, p95 <= 100 ms, <= 0.05 commits per
 * event) is printed from what was measured. Figures and machine are in docs/benchmarks.md.
 */
import { randomUUID } from "node:crypto";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import path from "node:path";
import { mintToken } from "../packages/server/src/auth/authenticator.ts";
import { pgliteThread, resolveConfig, type RudderConfig } from "../packages/server/src/config/config.ts";
import { startServer } from "../packages/server/src/server.ts";
import { createPgliteDb, createPostgresDb, type Db } from "../packages/server/src/storage/db.ts";
import { DEFAULT_WORKER_OPTIONS } from "../packages/server/src/worker/worker.ts";
import type { SseEvent, SseResult } from "./client.ts";
import { Client } from "./client-process.ts";
import {
  DEFAULT_DATABASE_URL,
  drivers,
  exitWithUsage,
  fixed,
  percentile,
  positive,
  queryOnce,
  positiveList,
  sleep,
  table,
  type Driver,
} from "./common.ts";
import { countingDb, DbCounter, now, type DbCounts } from "./counting.ts";
import { startLangGraphDev, type LangGraphDev } from "../packages/server/test/support/langgraph-dev.ts";

const { values: args } = parseArgs({
  options: {
    driver: { type: "string", default: "both" },
    "k-postgres": { type: "string", default: "10,50,200" },
    "k-pglite": { type: "string", default: "10,50" },
    events: { type: "string", default: "200" },
    "interval-ms": { type: "string", default: "20" },
    "database-url": { type: "string", default: DEFAULT_DATABASE_URL },
    "skip-reference": { type: "boolean", default: false },
    "cpu-prof": { type: "string" },
    "flush-ms": { type: "string", default: String(DEFAULT_WORKER_OPTIONS.eventFlushMs) },
    help: { type: "boolean", default: false },
  },
});
exitWithUsage(
  args.help,
  "node --import tsx bench/token-stream.ts [--driver pglite|postgres|both] [--k-postgres 10,50,200] [--k-pglite 10,50] [--events 200] [--interval-ms 20] [--database-url URL] [--skip-reference] [--cpu-prof DIR] [--flush-ms N]",
);
const DRIVERS = drivers(args.driver, ["postgres", "pglite"]);
const KS: Record<Driver, number[]> = {
  postgres: positiveList(args["k-postgres"], "--k-postgres"),
  pglite: positiveList(args["k-pglite"], "--k-pglite"),
};
const EVENTS = positive(args.events, "--events");
const INTERVAL_MS = positive(args["interval-ms"], "--interval-ms");
const DATABASE_URL = args["database-url"];
const SECRET = "rudder-bench-secret-rudder-bench-secret";
const ROOT = fileURLToPath(new URL("../", import.meta.url));
/** The ticker waits this long before its first tick, so every reader is connected by then. */
const DELAY_MS = 500;
/** K runs tick together this long (plus 15 ms per run) after the measurement starts. */
const START_LEAD_MS = 1000;
/** The target of issue 22 item 10, at K=200 on PostgreSQL. */
const TARGET = { k: 200, eventsPerSecond: 10_000, p95Ms: 100, commitsPerEvent: 0.05 };
const PROFILE_DIR = args["cpu-prof"];
/** The worker's event flush interval (`eventFlushMs`), to see what batching more per flush buys. */
const FLUSH_MS = positive(args["flush-ms"], "--flush-ms");

/** Profiles this process's CPU from now until the returned function writes the profile to `file`. */
async function startProfile(): Promise<(file: string) => Promise<void>> {
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 200 });
  await session.post("Profiler.start");
  return async (file) => {
    const { profile } = await session.post("Profiler.stop");
    session.disconnect();
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, JSON.stringify(profile));
    console.log(`  cpu profile   ${file}`);
  };
}

// ---------------------------------------------------------------------------------------------
// Private databases

async function adminQuery<Row>(sql: string, params: unknown[] = [], url = DATABASE_URL): Promise<Row[]> {
  return queryOnce<Row>(url, sql, params);
}

const openDatabases = new Set<string>();
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    void Promise.allSettled([...openDatabases].map((name) => adminQuery(`drop database if exists ${name} with (force)`))).then(() =>
      process.exit(130),
    );
  });
}

async function xactCommits(name: string): Promise<number> {
  const [row] = await adminQuery<{ commits: string }>("select xact_commit::text as commits from pg_stat_database where datname = $1", [
    name,
  ]);
  return Number(row?.commits ?? 0);
}

interface LogRow {
  run_id: string;
  sequence: number;
  kind: string;
}

const LOG_SQL = "select run_id::text as run_id, sequence, kind from run_events where run_id::text = any($1) order by run_id, sequence";

// ---------------------------------------------------------------------------------------------
// One measurement

interface Row {
  system: string;
  k: number;
  events: number;
  seconds: number;
  /** Delivered: K × (count - 1) intervals over the span of the reads (rates(), below). */
  eventsPerSecond: number;
  /** Offered: the same intervals over the span of the emits. */
  offeredPerSecond: number;
  /** Earlier passes' figure: events over first emitted → last read. */
  windowPerSecond: number;
  /**
   * Steady: events read per second between 1 s after the first tick was due and 1 s before the
   * last (`steadyRate`), what the readers get while every stream runs, without the start and end.
   */
  steadyPerSecond: number;
  /** p95 of emitted - scheduled: how late the graphs' timers fired. */
  lagP95: number;
  /** The latest any run's last tick left (emitted - scheduled): K runs ending at once finish one after another. */
  lastTickLagMax: number;
  p50: number;
  p95: number;
  max: number;
  commitsPerEvent: number;
  statementsPerEvent: number;
  complete: string;
  serverCores: number;
  /** Server process CPU (user + system) over the measurement per event delivered. */
  serverCpuUsPerEvent: number;
}

function latencies(result: SseResult, offset: number): number[] {
  const values: number[] = [];
  for (const event of result.events) {
    if (event.emittedAt === undefined) continue;
    values.push(event.receivedAt - offset - event.emittedAt);
  }
  return values;
}

// Spreading 200,000 values into Math.max overflows the stack.
const largest = (values: readonly number[]) => values.reduce((a, b) => Math.max(a, b), -Infinity);
const smallest = (values: readonly number[]) => values.reduce((a, b) => Math.min(a, b), Infinity);

/**
 * Rates of the custom events, each over the span it covers: `n` events of a stream span `n - 1`
 * intervals, so K streams of `count` ticks hold K × (count - 1) intervals' worth.
 * - delivered: K × (count - 1) / (last read - first read), what the readers got per second;
 * - offered: the same on the emitting side (last emitted - first emitted), what the graphs sent;
 * - window: events / (last read - first emitted), the figure of earlier passes (it can never reach
 *   the offered rate: the window holds the last event's latency and one interval per stream less).
 * A server that falls behind stretches the reads (delivered falls); a busy event loop that fires the
 * graphs' timers late shows as emit lag (emitted - scheduled), since each tick is due on its own time.
 */
function rates(
  result: SseResult,
  offset: number,
): Pick<Row, "events" | "seconds" | "eventsPerSecond" | "offeredPerSecond" | "windowPerSecond" | "steadyPerSecond"> {
  const custom = result.events.filter((event) => event.emittedAt !== undefined);
  if (custom.length === 0)
    return { events: 0, seconds: Number.NaN, eventsPerSecond: 0, offeredPerSecond: 0, windowPerSecond: 0, steadyPerSecond: 0 };
  const streams = new Set(custom.map((event) => event.runId)).size;
  const emitted = custom.map((event) => event.emittedAt!);
  const read = custom.map((event) => event.receivedAt - offset);
  const span = (times: number[]) => (largest(times) - smallest(times)) / 1000;
  const intervals = custom.length - streams;
  const seconds = span(read);
  return {
    events: custom.length,
    seconds,
    eventsPerSecond: intervals / seconds,
    offeredPerSecond: intervals / span(emitted),
    windowPerSecond: custom.length / ((largest(read) - smallest(emitted)) / 1000),
    steadyPerSecond: steadyRate(custom, offset),
  };
}

/**
 * Events read per second while every stream runs: from 1 s after the first tick was due to 1 s
 * before the last one was (the ticks of all runs are due at the same moments). The whole-span
 * rate above is K × (count - 1) over first read → last read, so the last event's latency and the
 * first one's stretch it: in a 4-second stream, 100 ms of either costs 2.5 % of the rate however
 * well the server keeps up. This one counts what arrives in the middle, as the offered rate goes
 * on; NaN when the stream is too short to have a middle.
 */
function steadyRate(custom: readonly SseEvent[], offset: number): number {
  const scheduled = custom.flatMap((event) => (event.scheduledAt === undefined ? [] : [event.scheduledAt]));
  const from = smallest(scheduled) + 1000;
  const to = largest(scheduled) - 1000;
  if (!(to > from)) return Number.NaN;
  const inside = custom.filter((event) => event.receivedAt - offset >= from && event.receivedAt - offset < to).length;
  return inside / ((to - from) / 1000);
}

/** Events delivered, at what rates, and the emit -> SSE latencies and emit lag of one measurement. */
function delivery(
  result: SseResult,
  offset: number,
): Pick<
  Row,
  | "events"
  | "seconds"
  | "eventsPerSecond"
  | "offeredPerSecond"
  | "windowPerSecond"
  | "steadyPerSecond"
  | "p50"
  | "p95"
  | "max"
  | "lagP95"
  | "lastTickLagMax"
> {
  const emitToSse = latencies(result, offset);
  const lag = result.events.flatMap((event) =>
    event.emittedAt !== undefined && event.scheduledAt !== undefined ? [event.emittedAt - event.scheduledAt] : [],
  );
  return {
    ...rates(result, offset),
    p50: percentile(emitToSse, 50),
    p95: percentile(emitToSse, 95),
    max: largest(emitToSse),
    lagP95: percentile(lag, 95),
    lastTickLagMax: largest(
      result.events.flatMap((event) =>
        event.index === EVENTS - 1 && event.emittedAt !== undefined && event.scheduledAt !== undefined
          ? [event.emittedAt - event.scheduledAt]
          : [],
      ),
    ),
  };
}

/** What is wrong with what the readers got, checked against each run's durable log; "" when nothing. */
function completeness(result: SseResult, log: readonly LogRow[], runs: number): string {
  const problems: string[] = [];
  const byRun = new Map<string, SseEvent[]>();
  for (const event of result.events) byRun.set(event.runId, [...(byRun.get(event.runId) ?? []), event]);
  const logByRun = new Map<string, LogRow[]>();
  for (const row of log) logByRun.set(row.run_id, [...(logByRun.get(row.run_id) ?? []), row]);
  if (byRun.size !== runs) problems.push(`${runs - byRun.size} of ${runs} streams got nothing`);
  let misordered = 0;
  let missing = 0;
  let notDurable = 0;
  let unsucceeded = 0;
  for (const [runId, events] of byRun) {
    const ticks = events.filter((event) => event.index !== undefined).map((event) => event.index!);
    if (ticks.length !== EVENTS || ticks.some((tick, index) => tick !== index)) missing++;
    if (events.some((event, index) => index > 0 && event.sequence <= events[index - 1]!.sequence)) misordered++;
    const durable = logByRun.get(runId) ?? [];
    const sent = events.map((event) => `${event.sequence}:${event.kind}`).join(",");
    if (sent !== durable.map((row) => `${row.sequence}:${row.kind}`).join(",")) notDurable++;
    if (events.at(-1)?.kind !== "run_succeeded") unsucceeded++;
  }
  if (missing) problems.push(`${missing} streams without ticks 0..${EVENTS - 1} exactly once in order`);
  if (misordered) problems.push(`${misordered} streams with sequences out of order or repeated`);
  if (notDurable) problems.push(`${notDurable} streams differ from their durable log`);
  if (unsucceeded) problems.push(`${unsucceeded} streams did not end with run_succeeded`);
  if (result.errors) problems.push(`${result.errors} failed streams (first: ${result.firstError})`);
  return problems.join("; ");
}

function sum(counts: DbCounts): { statements: number; commits: number } {
  let statements = 0;
  for (const stat of counts.statements.values()) statements += stat.count;
  return { statements, commits: counts.committedTransactions + counts.autocommitStatements };
}

async function measureRudder(client: Client, driver: Driver, k: number): Promise<Row> {
  const counter = new DbCounter();
  let raw: Db;
  let name: string | undefined;
  let url: string | undefined;
  // Where `rudder dev` runs it: on its worker thread unless RUDDER_PGLITE_THREAD says otherwise.
  if (driver === "pglite") raw = await createPgliteDb({ thread: pgliteThread() });
  else {
    name = `rudder_bench_${randomUUID().replaceAll("-", "")}`;
    await adminQuery(`create database ${name}`);
    openDatabases.add(name);
    const parsed = new URL(DATABASE_URL);
    parsed.pathname = `/${name}`;
    url = parsed.toString();
    raw = createPostgresDb(url);
  }
  const base = resolveConfig({ config: `${ROOT}examples/rudder.json`, port: 0 }, {});
  const config: RudderConfig = {
    ...base,
    graphs: [...base.graphs, { graphId: "ticker", file: `${ROOT}bench/graphs.ts`, exportName: "ticker" }],
    auth: { ...base.auth, jwtSecret: SECRET },
    workerConcurrency: k,
  };
  const server = await startServer({
    config,
    db: countingDb(raw, counter),
    schema: "migrate",
    logger: false,
    worker: { ...DEFAULT_WORKER_OPTIONS, concurrency: k, eventFlushMs: FLUSH_MS },
  });
  let closed = false;
  try {
    const task = {
      kind: "sse" as const,
      url: server.url!,
      token: await mintToken(SECRET, { tenantId: "bench", roles: ["admin"] }),
      concurrency: k,
      runs: k,
      body: { assistant_id: "ticker", input: { count: EVENTS, interval_ms: INTERVAL_MS, delay_ms: DELAY_MS } },
    };
    // Warm-up (graph loaded, connections open), then let PostgreSQL publish its statistics.
    await client.request<SseResult>({
      ...task,
      concurrency: 2,
      runs: 2,
      body: { ...task.body, input: { count: 5, interval_ms: 5, delay_ms: 50 } },
    });
    if (name) await sleep(11_000);
    const commitsBefore = name ? await xactCommits(name) : 0;
    counter.reset();
    const stopProfile = PROFILE_DIR === undefined ? undefined : await startProfile();
    const cpuBefore = process.cpuUsage();
    const started = now();
    // Every run ticks from the same moment, once all K are created, claimed and read.
    const startAt = now() + START_LEAD_MS + k * 15;
    const result = await client.request<SseResult>({ ...task, body: { ...task.body, input: { ...task.body.input, start_at: startAt } } });
    const cpu = process.cpuUsage(cpuBefore);
    const elapsed = now() - started;
    await stopProfile?.(path.join(PROFILE_DIR ?? "", `token-stream-${driver}-k${k}.cpuprofile`));
    await sleep(300); // trailing notices and checkpoint clean-up belong to these runs
    const counts = sum(counter.take());
    const runIds = [...new Set(result.events.map((event) => event.runId))];
    let log: LogRow[];
    let commits = counts.commits;
    if (name) {
      await server.close();
      await raw.close(); // the backends exit, which publishes their statistics
      closed = true;
      await sleep(1000);
      commits = (await xactCommits(name)) - commitsBefore;
      log = await adminQuery<LogRow>(LOG_SQL, [runIds], url);
    } else {
      log = await raw.query<LogRow>(LOG_SQL, [runIds]);
    }
    const figures = delivery(result, client.offset);
    return {
      system: `Rudder, ${driver === "postgres" ? "PostgreSQL" : "PGlite"}`,
      k,
      ...figures,
      commitsPerEvent: commits / figures.events,
      statementsPerEvent: counts.statements / figures.events,
      complete: completeness(result, log, k) || "yes",
      serverCores: (cpu.user + cpu.system) / 1000 / elapsed,
      serverCpuUsPerEvent: (cpu.user + cpu.system) / figures.events,
    };
  } finally {
    if (!closed) {
      await server.close();
      await raw.close();
    }
    if (name) {
      await adminQuery(`drop database if exists ${name} with (force)`);
      openDatabases.delete(name);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Reference: the LangGraph.js dev server (in memory) streaming the same graph

async function measureLangGraph(client: Client, k: number): Promise<Row | string> {
  let server: LangGraphDev;
  try {
    server = await startLangGraphDev(fileURLToPath(new URL("./graphs.ts", import.meta.url)), { ticker: "ticker" }, 180_000);
  } catch (error) {
    return `the LangGraph.js dev server could not be started: ${String(error).slice(0, 400)}`;
  }
  const { url } = server;
  try {
    const body = {
      assistant_id: "ticker",
      input: { count: EVENTS, interval_ms: INTERVAL_MS, delay_ms: DELAY_MS },
      stream_mode: ["custom"],
    };
    await client.request<SseResult>({
      kind: "lg-stream",
      url,
      runs: 2,
      body: { ...body, input: { count: 5, interval_ms: 5, delay_ms: 50 } },
    });
    const startAt = now() + START_LEAD_MS + k * 15;
    const result = await client.request<SseResult>({
      kind: "lg-stream",
      url,
      runs: k,
      body: { ...body, input: { ...body.input, start_at: startAt } },
    });
    const byRun = new Map<string, number[]>();
    for (const event of result.events) byRun.set(event.runId, [...(byRun.get(event.runId) ?? []), event.index ?? -1]);
    const whole = [...byRun.values()].filter((ticks) => ticks.length === EVENTS && ticks.every((tick, index) => tick === index)).length;
    return {
      system: "LangGraph.js dev server (in memory)",
      k,
      ...delivery(result, client.offset),
      commitsPerEvent: Number.NaN,
      statementsPerEvent: Number.NaN,
      complete: whole === k && !result.errors ? "yes (no durable log)" : `${whole} of ${k} streams whole; ${result.errors} failed`,
      serverCores: Number.NaN,
      serverCpuUsPerEvent: Number.NaN,
    };
  } finally {
    await server.stop();
  }
}

// ---------------------------------------------------------------------------------------------

function sourceState(): string {
  try {
    const git = (...gitArgs: string[]) =>
      execFileSync("git", ["-C", ROOT, ...gitArgs], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    const dirty = git("status", "--porcelain", "--", "packages/server/src").split("\n").filter(Boolean).length;
    return `${git("log", "-1", "--format=%h %s").slice(0, 100)}${dirty ? ` + ${dirty} uncommitted change(s) in packages/server/src` : ""}`;
  } catch {
    return "unknown (no git)";
  }
}

async function main(): Promise<void> {
  console.log(`date          ${new Date().toISOString()}`);
  console.log(`cpus          ${os.availableParallelism()} x ${os.cpus()[0]?.model ?? "?"}`);
  console.log(`node          ${process.version}`);
  console.log(
    `load average  ${os
      .loadavg()
      .map((value) => value.toFixed(2))
      .join(" ")} (at start)`,
  );
  console.log(`source        ${sourceState()}`);
  console.log(
    `load          K runs of ticker: ${EVENTS} custom events ${INTERVAL_MS} ms apart after ${DELAY_MS} ms; one SSE reader per run; event flush every ${FLUSH_MS} ms`,
  );
  const client = new Client();
  const rows: Row[] = [];
  try {
    await client.calibrate();
    for (const driver of DRIVERS) {
      for (const k of KS[driver]) {
        const row = await measureRudder(client, driver, k);
        console.log(
          `  ${row.system} K=${k}: ${fixed(row.eventsPerSecond, 0)} events/s delivered (offered ${fixed(row.offeredPerSecond, 0)}, steady ${fixed(row.steadyPerSecond, 0)}), emit->SSE p50 ${fixed(row.p50)} ms p95 ${fixed(row.p95)} ms, ${fixed(row.commitsPerEvent, 3)} commits/event, ${fixed(row.serverCpuUsPerEvent, 0)} µs server CPU/event, complete: ${row.complete}`,
        );
        rows.push(row);
      }
    }
    if (args["skip-reference"]) console.log("  reference row skipped (--skip-reference)");
    else {
      for (const k of [10, 50]) {
        const row = await measureLangGraph(client, k);
        if (typeof row === "string") {
          console.log(`  reference row skipped: ${row}`);
          break;
        }
        console.log(`  ${row.system} K=${k}: ${fixed(row.eventsPerSecond, 0)} events/s, emit->SSE p95 ${fixed(row.p95)} ms`);
        rows.push(row);
      }
    }
  } finally {
    client.close();
  }
  console.log(
    `\nload average  ${os
      .loadavg()
      .map((value) => value.toFixed(2))
      .join(" ")} (at end)\n`,
  );
  console.log(
    table(
      [
        "system",
        "K",
        "events",
        "events/s delivered",
        "offered",
        "window",
        "steady",
        "emit lag p95 ms",
        "last tick lag max ms",
        "emit->SSE p50 ms",
        "p95 ms",
        "max ms",
        "commits/event",
        "Db statements/event",
        "server cores",
        "server CPU µs/event",
        "complete",
      ],
      rows.map((row) => [
        row.system,
        row.k,
        row.events,
        fixed(row.eventsPerSecond, 0),
        fixed(row.offeredPerSecond, 0),
        fixed(row.windowPerSecond, 0),
        fixed(row.steadyPerSecond, 0),
        fixed(row.lagP95, 1),
        fixed(row.lastTickLagMax, 1),
        fixed(row.p50),
        fixed(row.p95),
        fixed(row.max),
        fixed(row.commitsPerEvent, 3),
        fixed(row.statementsPerEvent, 3),
        fixed(row.serverCores, 2),
        fixed(row.serverCpuUsPerEvent, 0),
        row.complete,
      ]),
      ["l", "l"],
    ),
  );
  const target = rows.find((row) => row.system === "Rudder, PostgreSQL" && row.k === TARGET.k);
  if (!target) console.log(`\ngap to target: not measured (no PostgreSQL K=${TARGET.k} row)`);
  else {
    const gap = (label: string, measured: number, wanted: number, better: "higher" | "lower", digits: number) => {
      const met = better === "higher" ? measured >= wanted : measured <= wanted;
      return `  ${label}: measured ${fixed(measured, digits)}, target ${better === "higher" ? ">=" : "<="} ${wanted}: ${met ? "met" : `missed by ${fixed(Math.abs(measured - wanted), digits)}`}`;
    };
    console.log(`\ngap to target (PostgreSQL K=${TARGET.k}):`);
    console.log(gap("events/s delivered, whole span", target.eventsPerSecond, TARGET.eventsPerSecond, "higher", 0));
    console.log(gap("events/s delivered, steady (every stream running)", target.steadyPerSecond, TARGET.eventsPerSecond, "higher", 0));
    console.log(gap("emit->SSE p95 ms", target.p95, TARGET.p95Ms, "lower", 1));
    console.log(gap("commits/event", target.commitsPerEvent, TARGET.commitsPerEvent, "lower", 3));
    console.log(`  nothing lost or reordered, all durable: ${target.complete}`);
  }
}

await main();
