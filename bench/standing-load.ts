/**
 * Rudder under a standing load (issue 22, items 6 and 7): 1,000 running runs, 10,000 queued behind
 * them and 2,000 open SSE streams, on the embedded driver (`rudder dev`, PGlite) and on PostgreSQL
 * (`rudder serve` and `rudder worker`, two processes). Under that load it measures, one request at a
 * time:
 *
 * - p95 of plain reads and writes: create thread, get thread, get run, list a run's events;
 * - create → `run_started` on the run's stream (a stateless echo run; the worker has free slots);
 * - steer → its `run.steer.accepted` on every stream of the run (two per running run);
 *
 * then cancels all running runs (one request each, 16 at a time) and measures the time until every
 * stream has its `run_cancelled`, while sampling the queue: it must keep draining meanwhile. Then
 * it waits until the queue is empty and reads each server process's RSS. With `--cycles N` it builds,
 * measures, cancels and drains N times in a row (item 7: does memory return after a cycle?).
 *
 * Usage (from the repository root):
 *
 *   node --import tsx bench/standing-load.ts [--driver pglite|postgres|both] [--scale F] [--cycles N]
 *        [--samples N] [--database-url URL] [--cpu-prof DIR]
 *
 *   --driver        which driver(s) to measure (default both)
 *   --scale F       multiplies the load: F × 1,000 running runs, F × 10,000 queued, 2 streams per
 *                   running run (default 1; 0.1 for a quick try)
 *   --cycles N      load cycles in a row per driver (default 1; item 7 wants 3)
 *   --samples N     requests per latency figure (default 200)
 *   --database-url  the PostgreSQL server (default $RUDDER_BENCH_DATABASE_URL or
 *                   postgres://postgres@127.0.0.1:5432/test); a private database rudder_load_<uuid> is
 *                   created on it and dropped after (also on Ctrl-C)
 *   --cpu-prof DIR  the server processes write V8 CPU profiles (node --cpu-prof) into DIR when they exit
 *
 * The load: one thread per running run; on it a `hold` run (bench/graphs.ts: waits until cancelled)
 * and, queued behind it on the same thread (multitask strategy enqueue), F × 10,000 echo runs round
 * robin over the threads (10 per thread at scale 1). The
 * worker has slots for every running run and 50 more, so new runs start at once while the queued
 * ones wait for their thread. The client is this process (the servers are child processes); on a
 * shared machine it competes with them for the cores, so its figures are pessimistic.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import type { ChildProcessWithoutNullStreams } from "node:child_process";
import { mintToken } from "../packages/server/src/auth/authenticator.ts";
import { runRudder, startRudder, waitForOutput } from "../packages/server/test/support/cli.ts";
import { DEFAULT_DATABASE_URL, drivers, exitWithUsage, fixed, percentile, positive, queryOnce, sleep, type Driver } from "./common.ts";
import { now } from "./counting.ts";

const { values: args } = parseArgs({
  options: {
    driver: { type: "string", default: "both" },
    scale: { type: "string", default: "1" },
    cycles: { type: "string", default: "1" },
    samples: { type: "string", default: "200" },
    "database-url": { type: "string", default: DEFAULT_DATABASE_URL },
    "cpu-prof": { type: "string" },
    help: { type: "boolean", default: false },
  },
});
exitWithUsage(
  args.help,
  "node --import tsx bench/standing-load.ts [--driver pglite|postgres|both] [--scale F] [--cycles N] [--samples N] [--database-url URL] [--cpu-prof DIR]",
);
const DRIVERS = drivers(args.driver);
const SCALE = Number(args.scale);
if (!(SCALE > 0)) throw new Error(`--scale must be a positive number, not "${args.scale}"`);
const CYCLES = positive(args.cycles, "--cycles");
const SAMPLES = positive(args.samples, "--samples");
const DATABASE_URL = args["database-url"];
/** Node 20 refuses --cpu-prof in NODE_OPTIONS: it goes on the servers' command line. */
const CPU_PROF_ARGS = args["cpu-prof"] ? ["--cpu-prof", `--cpu-prof-dir=${args["cpu-prof"]}`] : [];

const RUNNING = Math.max(1, Math.round(1000 * SCALE));
const QUEUED = Math.max(1, Math.round(10_000 * SCALE));
const STREAMS_PER_RUN = 2;
const CANCEL_CONCURRENCY = 16;
const BUILD_CONCURRENCY = 16;

/** Issue 22 item 6's targets, and item 7's. */
const TARGETS = { plainP95Ms: 10, startedP95Ms: 50, steerP95Ms: 20, cancelAllMs: 5000, rssReturn: 0.2 };

const SECRET = "rudder-load-secret-rudder-load-secret-rudder";
const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** "measured (target T: met)" or "measured (target T: N× over)". */
function against(measured: number, target: number, unit: string): string {
  if (!Number.isFinite(measured)) return `- (target ${target} ${unit}: not measured)`;
  const verdict = measured <= target ? "met" : `gap ${fixed(measured - target)} ${unit}, ${fixed(measured / target, 2)}× the target`;
  return `${fixed(measured)} ${unit} (target ≤ ${target} ${unit}: ${verdict})`;
}

async function pool<T>(items: readonly T[], concurrency: number, work: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) {
        const index = next++;
        await work(items[index]!, index);
      }
    }),
  );
}

// ---------------------------------------------------------------------------------------------
// The servers: real `rudder` processes

interface ServerProcess {
  readonly name: string;
  readonly child: ChildProcessWithoutNullStreams;
}

interface Deployment {
  readonly driver: Driver;
  readonly url: string;
  readonly processes: ServerProcess[];
  stop(): Promise<void>;
}

async function adminQuery<Row>(sql: string, params: unknown[] = []): Promise<Row[]> {
  return queryOnce<Row>(DATABASE_URL, sql, params);
}

const cleanups = new Set<() => Promise<void>>();
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    console.log(`\n${signal}: stopping servers and dropping private databases`);
    void Promise.allSettled([...cleanups].map((cleanup) => cleanup())).then(() => process.exit(130));
  });
}

function spawnRudder(name: string, argv: string[], env: Record<string, string>): ServerProcess {
  const child = startRudder(argv, env, CPU_PROF_ARGS);
  // Drained so a chatty child never blocks on a full pipe; warnings and errors are echoed.
  child.stdout.on("data", (chunk: Buffer) => {
    for (const line of chunk.toString().split("\n"))
      if (/"level":"(warn|error|fatal)"|WARN|ERROR|Warning/.test(line)) console.log(`  [${name}] ${line.slice(0, 300)}`);
  });
  child.stderr.on("data", (chunk: Buffer) => {
    const text = chunk.toString().trim();
    if (text) console.log(`  [${name} stderr] ${text.slice(0, 500)}`);
  });
  return { name, child };
}

async function stopProcess(server: ServerProcess): Promise<void> {
  const { child } = server;
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
  await exited;
  clearTimeout(timer);
}

function configFile(dir: string): string {
  const file = join(dir, "rudder.json");
  writeFileSync(
    file,
    JSON.stringify({ graphs: { echo: `${ROOT}examples/graphs/echo.ts:graph`, hold: `${ROOT}bench/graphs.ts:hold` } }, null, 2),
  );
  return file;
}

async function deploy(driver: Driver): Promise<Deployment> {
  const dir = mkdtempSync(join(os.tmpdir(), "rudder-load-"));
  const config = configFile(dir);
  const env: Record<string, string> = {
    RUDDER_JWT_SECRET: SECRET,
    RUDDER_LOG_LEVEL: "warn",
    RUDDER_LOG_FORMAT: "json",
    RUDDER_WORKER_CONCURRENCY: String(RUNNING + 50),
    RUDDER_QUEUED_RUN_QUOTA: String(QUEUED + 10 * SAMPLES + 1000),
    RUDDER_CRON_ENABLED: "false",
  };
  if (driver === "pglite") {
    const dev = spawnRudder("dev", ["dev", "--config", config, "--port", "0", "--data-dir", join(dir, "data")], env);
    const stop = async () => {
      await stopProcess(dev);
      rmSync(dir, { recursive: true, force: true });
    };
    cleanups.add(stop);
    const banner = await waitForOutput(dev.child, /ready at http:\/\/\S+/, 600_000).catch(async (error: unknown) => {
      await stop();
      throw error;
    });
    const url = /ready at (http:\/\/\S+)/.exec(banner)![1]!;
    return { driver, url, processes: [dev], stop };
  }
  const name = `rudder_load_${randomUUID().replaceAll("-", "")}`;
  await adminQuery(`create database ${name}`);
  const databaseUrl = new URL(DATABASE_URL);
  databaseUrl.pathname = `/${name}`;
  const pgEnv = { ...env, DATABASE_URL: databaseUrl.toString() };
  const migrated = await runRudder(["migrate", "--config", config], pgEnv, 120_000);
  if (migrated.code !== 0) throw new Error(`rudder migrate failed: ${migrated.stderr}`);
  const api = spawnRudder("serve", ["serve", "--config", config, "--port", "0"], pgEnv);
  const worker = spawnRudder("worker", ["worker", "--config", config], pgEnv);
  const stop = async () => {
    await Promise.all([stopProcess(api), stopProcess(worker)]);
    await adminQuery(`drop database if exists ${name} with (force)`);
    rmSync(dir, { recursive: true, force: true });
  };
  cleanups.add(stop);
  const [banner] = await Promise.all([
    waitForOutput(api.child, /listening at http:\/\/\S+/, 600_000),
    waitForOutput(worker.child, /rudder worker: \S+ executing/, 600_000),
  ]).catch(async (error: unknown) => {
    await stop();
    throw error;
  });
  const url = /listening at (http:\/\/\S+)/.exec(banner)![1]!;
  return { driver, url, processes: [api, worker], stop };
}

/** Resident set size of a process, MB (Linux /proc). */
function rssMb(pid: number | undefined): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1]) / 1024;
  } catch {
    return Number.NaN;
  }
}

/** Peak resident set size since the process started, MB. */
function peakMb(pid: number | undefined): number {
  try {
    return Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]) / 1024;
  } catch {
    return Number.NaN;
  }
}

// ---------------------------------------------------------------------------------------------
// The client

class Api {
  constructor(
    readonly url: string,
    private readonly token: string,
  ) {}

  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const response = await fetch(this.url + path, {
      method,
      headers: { authorization: `Bearer ${this.token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${text.slice(0, 300)}`);
    return (text ? JSON.parse(text) : undefined) as T;
  }

  /** Pending runs in the queue (the server reads it from the database, cached for a second). */
  async pending(): Promise<number> {
    const response = await fetch(`${this.url}/metrics`, { headers: { authorization: `Bearer ${this.token}` } });
    const text = await response.text();
    const found = /^rudder_queue_pending_runs(?:\{[^}]*\})? (\d+)/m.exec(text);
    if (!found) throw new Error(`no rudder_queue_pending_runs in /metrics (${response.status})`);
    return Number(found[1]);
  }
}

interface RunRow {
  run_id: string;
  status: string;
}

/** One SSE stream of a run: when each event kind (and each steering row's acceptance) arrived. */
class Stream {
  readonly seen = new Map<string, number>();
  readonly steers = new Map<string, number>();
  private readonly controller = new AbortController();
  private waiters: (() => void)[] = [];
  ended = false;
  failure: string | undefined;

  constructor(api: Api, token: string, runId: string) {
    void this.read(api, token, runId);
  }

  private async read(api: Api, token: string, runId: string): Promise<void> {
    try {
      const response = await fetch(`${api.url}/v1/runs/${runId}/stream`, {
        headers: { authorization: `Bearer ${token}`, accept: "text/event-stream" },
        signal: this.controller.signal,
      });
      if (response.status !== 200 || !response.body) throw new Error(`stream ${runId}: ${response.status}`);
      const decoder = new TextDecoder();
      let buffer = "";
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        for (let end = buffer.indexOf("\n\n"); end !== -1; end = buffer.indexOf("\n\n")) {
          this.frame(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
      this.ended = true;
    } catch (error) {
      if (!this.controller.signal.aborted) this.failure = String(error);
    } finally {
      this.notify();
    }
  }

  private frame(text: string): void {
    const at = now();
    let kind: string | undefined;
    let data: string | undefined;
    for (const line of text.split("\n")) {
      if (line.startsWith("event: ")) kind = line.slice(7);
      else if (line.startsWith("data: ")) data = line.slice(6);
    }
    if (kind === undefined) return; // a heartbeat comment
    if (!this.seen.has(kind)) this.seen.set(kind, at);
    if (kind === "run.steer.accepted" && data) {
      const event = JSON.parse(data) as { data: { steering_event_id?: string } };
      if (event.data.steering_event_id) this.steers.set(event.data.steering_event_id, at);
    }
    this.notify();
  }

  private notify(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const waiter of waiters) waiter();
  }

  /** Resolves with the time `found` first returns a number (or rejects when the stream ends first / after `timeoutMs`). */
  async until(found: () => number | undefined, what: string, timeoutMs = 120_000): Promise<number> {
    const deadline = now() + timeoutMs;
    for (;;) {
      const at = found();
      if (at !== undefined) return at;
      if (this.ended || this.failure) throw new Error(`stream ended before ${what}${this.failure ? `: ${this.failure}` : ""}`);
      if (now() > deadline) throw new Error(`no ${what} within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 1000);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  close(): void {
    this.controller.abort();
  }
}

interface Held {
  readonly threadId: string;
  readonly runId: string;
  readonly streams: Stream[];
}

interface CycleResult {
  buildS: number;
  plain: Record<string, number>;
  startedP95: number;
  startedP50: number;
  steerP95: number;
  steerP50: number;
  cancelRequestsS: number;
  allCancelledMs: number;
  cancelledP50Ms: number;
  pendingBefore: number;
  pendingAtLastCancelled: number;
  drainedS: number;
  drainRate: number;
  rss: Record<string, number>;
}

async function buildLoad(api: Api, token: string): Promise<Held[]> {
  const held: Held[] = [];
  const indexes = Array.from({ length: RUNNING }, (_, index) => index);
  await pool(indexes, BUILD_CONCURRENCY, async () => {
    const thread = await api.call<{ thread_id: string }>("POST", "/v1/threads", { metadata: { bench: "standing-load" } });
    const run = await api.call<RunRow>("POST", `/v1/threads/${thread.thread_id}/runs`, {
      assistant_id: "hold",
      input: { hold_ms: 3_600_000 },
    });
    const streams = Array.from({ length: STREAMS_PER_RUN }, () => new Stream(api, token, run.run_id));
    held.push({ threadId: thread.thread_id, runId: run.run_id, streams });
  });
  // Every hold run running (its run_started seen on its first stream) before the queue is built behind them.
  await Promise.all(held.map(({ streams }) => streams[0]!.until(() => streams[0]!.seen.get("run_started"), "run_started", 300_000)));
  // Round robin over the threads: thread i gets runs i, i + RUNNING, ... (10 each at scale 1).
  const queued = Array.from({ length: QUEUED }, (_, index) => held[index % held.length]!.threadId);
  await pool(queued, BUILD_CONCURRENCY, async (threadId) => {
    await api.call("POST", `/v1/threads/${threadId}/runs`, {
      assistant_id: "echo",
      input: { message: "queued" },
      multitask_strategy: "enqueue",
    });
  });
  return held;
}

async function timed(action: () => Promise<unknown>): Promise<number> {
  const started = now();
  await action();
  return now() - started;
}

async function measurePlain(api: Api, held: Held[]): Promise<Record<string, number>> {
  const samples: Record<string, number[]> = { "create thread": [], "get thread": [], "get run": [], "list events": [] };
  for (let i = 0; i < SAMPLES; i++) {
    const target = held[i % held.length]!;
    samples["create thread"]!.push(await timed(() => api.call("POST", "/v1/threads", {})));
    samples["get thread"]!.push(await timed(() => api.call("GET", `/v1/threads/${target.threadId}`)));
    samples["get run"]!.push(await timed(() => api.call("GET", `/v1/runs/${target.runId}`)));
    samples["list events"]!.push(await timed(() => api.call("GET", `/v1/runs/${target.runId}/events`)));
  }
  return Object.fromEntries(Object.entries(samples).map(([name, values]) => [name, percentile(values, 95)]));
}

async function measureStarted(api: Api, token: string): Promise<number[]> {
  const latencies: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const sent = now();
    const run = await api.call<RunRow>("POST", "/v1/runs", { assistant_id: "echo", input: { message: "started?" } });
    const stream = new Stream(api, token, run.run_id);
    try {
      latencies.push((await stream.until(() => stream.seen.get("run_started"), "run_started", 60_000)) - sent);
    } finally {
      stream.close();
    }
  }
  return latencies;
}

async function measureSteer(api: Api, held: Held[]): Promise<number[]> {
  const latencies: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const target = held[i % held.length]!;
    const sent = now();
    const accepted = await api.call<{ id: string }>("POST", `/v1/runs/${target.runId}/steer`, {
      kind: "message",
      payload: { message: `steer ${i}` },
    });
    const seen = await Promise.all(
      target.streams.map((stream) => stream.until(() => stream.steers.get(accepted.id), "run.steer.accepted", 60_000)),
    );
    latencies.push(Math.max(...seen) - sent);
  }
  return latencies;
}

async function cycle(deployment: Deployment, api: Api, token: string, number: number): Promise<CycleResult> {
  const buildStarted = now();
  const held = await buildLoad(api, token);
  const buildS = (now() - buildStarted) / 1000;
  const pendingBuilt = await api.pending();
  console.log(
    `  cycle ${number}: built in ${fixed(buildS)} s: ${held.length} running, ${pendingBuilt} pending in the queue, ${held.length * STREAMS_PER_RUN} streams open`,
  );
  const plain = await measurePlain(api, held);
  const started = await measureStarted(api, token);
  const steer = await measureSteer(api, held);

  // Cancel every running run, 16 requests at a time, sampling the queue meanwhile.
  const pendingBefore = await api.pending();
  const queueSamples: { at: number; pending: number }[] = [];
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      queueSamples.push({ at: now(), pending: await api.pending().catch(() => Number.NaN) });
      await sleep(1000);
    }
  })();
  const cancelStarted = now();
  const everyCancelled = Promise.all(
    held.flatMap(({ streams }) => streams.map((stream) => stream.until(() => stream.seen.get("run_cancelled"), "run_cancelled", 600_000))),
  );
  await pool(held, CANCEL_CONCURRENCY, async ({ runId }) => {
    await api.call("POST", `/v1/runs/${runId}/cancel`);
  });
  const cancelRequestsS = (now() - cancelStarted) / 1000;
  const cancelledAt = await everyCancelled;
  const allCancelledMs = Math.max(...cancelledAt) - cancelStarted;
  const pendingAtLastCancelled = await api.pending();

  // Drain: the queue behind the cancelled runs empties.
  const drainStarted = now();
  for (let pending = pendingAtLastCancelled; pending > 0; pending = await api.pending()) await sleep(500);
  sampling = false;
  await sampler;
  const drainedS = (now() - cancelStarted) / 1000;
  const drainRate = pendingBefore / drainedS;
  for (const { streams } of held) for (const stream of streams) stream.close();
  void drainStarted;
  // Settled for a few seconds (timers, sockets, the last attempts) before RSS is read.
  await sleep(5000);
  const rss = Object.fromEntries(deployment.processes.map((server) => [server.name, rssMb(server.child.pid)]));
  const drainedDuringCancel = queueSamples.filter((sample) => sample.at <= cancelStarted + allCancelledMs);
  const first = drainedDuringCancel[0]?.pending ?? pendingBefore;
  const last = drainedDuringCancel.at(-1)?.pending ?? pendingAtLastCancelled;
  console.log(
    `  cycle ${number}: cancels sent in ${fixed(cancelRequestsS)} s; every stream had run_cancelled after ${fixed(allCancelledMs / 1000, 2)} s; queue ${first} → ${last} pending meanwhile (${pendingAtLastCancelled} when the last stream ended), empty ${fixed(drainedS)} s after the first cancel`,
  );
  return {
    buildS,
    plain,
    startedP95: percentile(started, 95),
    startedP50: percentile(started, 50),
    steerP95: percentile(steer, 95),
    steerP50: percentile(steer, 50),
    cancelRequestsS,
    allCancelledMs,
    cancelledP50Ms: percentile(
      cancelledAt.map((at) => at - cancelStarted),
      50,
    ),
    pendingBefore,
    pendingAtLastCancelled,
    drainedS,
    drainRate,
    rss,
  };
}

async function benchDriver(driver: Driver): Promise<void> {
  console.log(`\n=== ${driver === "pglite" ? "PGlite: rudder dev (one process)" : "PostgreSQL: rudder serve + rudder worker"} ===`);
  const deployment = await deploy(driver);
  try {
    const token = await mintToken(SECRET, { tenantId: "bench", roles: ["admin"] });
    const api = new Api(deployment.url, token);
    await sleep(3000);
    const idle = Object.fromEntries(deployment.processes.map((server) => [server.name, rssMb(server.child.pid)]));
    console.log(
      `  idle RSS: ${Object.entries(idle)
        .map(([name, mb]) => `${name} ${fixed(mb, 0)} MB`)
        .join(", ")}`,
    );
    const results: CycleResult[] = [];
    for (let number = 1; number <= CYCLES; number++) results.push(await cycle(deployment, api, token, number));
    const peaks = Object.fromEntries(deployment.processes.map((server) => [server.name, peakMb(server.child.pid)]));

    for (const [index, result] of results.entries()) {
      console.log(
        `\n  cycle ${index + 1} (${RUNNING} running, ${result.pendingBefore} queued, ${RUNNING * STREAMS_PER_RUN} streams; ${SAMPLES} samples per figure):`,
      );
      for (const [name, p95] of Object.entries(result.plain))
        console.log(`    ${name.padEnd(28)} p95 ${against(p95, TARGETS.plainP95Ms, "ms")}`);
      console.log(
        `    ${"create → run_started".padEnd(28)} p95 ${against(result.startedP95, TARGETS.startedP95Ms, "ms")}; p50 ${fixed(result.startedP50)} ms`,
      );
      console.log(
        `    ${"steer → event on every stream".padEnd(28)} p95 ${against(result.steerP95, TARGETS.steerP95Ms, "ms")}; p50 ${fixed(result.steerP50)} ms`,
      );
      console.log(
        `    ${"cancel all → every stream".padEnd(28)} ${against(result.allCancelledMs, TARGETS.cancelAllMs, "ms")}; half the streams by ${fixed(result.cancelledP50Ms, 0)} ms; requests took ${fixed(result.cancelRequestsS, 2)} s`,
      );
      console.log(
        `    ${"queue".padEnd(28)} ${result.pendingBefore} pending at the first cancel, ${result.pendingAtLastCancelled} when every stream had run_cancelled (${result.pendingAtLastCancelled < result.pendingBefore ? "draining" : "NOT draining"}), empty after ${fixed(result.drainedS)} s (${fixed(result.drainRate, 0)} runs/s)`,
      );
      console.log(
        `    ${"RSS after the drain".padEnd(28)} ${Object.entries(result.rss)
          .map(([name, mb]) => `${name} ${fixed(mb, 0)} MB`)
          .join(", ")}`,
      );
    }
    console.log(`\n  memory (item 7): idle → after each cycle; peak over the whole run`);
    for (const server of deployment.processes) {
      const after = results.map((result) => result.rss[server.name]!);
      const first = after[0]!;
      // The embedded process: every later cycle within 20 % of the first; API and worker: the last cycle no higher than the first (5 % noise).
      const embedded = server.name === "dev";
      const growth = after.length > 1 ? ((embedded ? Math.max(...after.slice(1)) : after.at(-1)!) - first) / first : Number.NaN;
      const limit = embedded ? TARGETS.rssReturn : 0.05;
      const verdict = Number.isNaN(growth)
        ? "one cycle: run --cycles 3 to compare"
        : `${embedded ? "later cycles at most" : "last cycle"} ${fixed(growth * 100)} % above the first (target ${embedded ? `≤ ${TARGETS.rssReturn * 100} %` : "no growth, ≤ 5 % noise"}: ${growth <= limit ? "met" : "gap"})`;
      console.log(
        `    ${server.name.padEnd(8)} idle ${fixed(idle[server.name]!, 0)} MB → ${after.map((mb) => `${fixed(mb, 0)} MB`).join(" → ")}; peak ${fixed(peaks[server.name]!, 0)} MB; ${verdict}`,
      );
    }
  } finally {
    await deployment.stop();
    cleanups.delete(deployment.stop);
  }
}

console.log(
  `standing load: ${RUNNING} running runs, ${QUEUED} queued behind them on their threads, ${RUNNING * STREAMS_PER_RUN} SSE streams; scale ${SCALE}, ${CYCLES} cycle(s), ${SAMPLES} samples per latency; ${os.availableParallelism()} cores, node ${process.version}`,
);
try {
  for (const driver of DRIVERS) await benchDriver(driver);
} catch (error) {
  await Promise.allSettled([...cleanups].map((cleanup) => cleanup()));
  throw error;
}
