import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { mintToken } from "../src/auth/authenticator.ts";
import { createLocalNotifier } from "../src/notify/notifier.ts";
import { createLogger } from "../src/observability/logger.ts";
import { Metrics } from "../src/observability/metrics.ts";
import { startServer } from "../src/server.ts";
import { createTestDatabase, TEST_DATABASE_URL, TEST_DRIVER } from "./support/db.ts";
import { startTestServer, TEST_SECRET, type TestServer } from "./support/server.ts";
import { openSse } from "./support/sse.ts";
import { runRudder, startRudder, waitForOutput } from "./support/cli.ts";
import { logLines } from "./support/log-lines.ts";

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));
const SCRAPE_TOKEN = "scrape-token-0123456789abcdef";

/** One series of a scrape: its name, labels and value. */
interface Sample {
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly value: number;
}

/** The samples of a Prometheus text exposition (the subset prom-client writes: no timestamps). */
function parseMetrics(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(match, `not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const pair of (match[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[pair[1]!] = pair[2]!;
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/** The sum of the series of `name` whose labels include `labels`. */
function sum(samples: readonly Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((sample) => sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value))
    .reduce((total, sample) => total + sample.value, 0);
}

async function scrape(url: string, authorization: string | undefined = `Bearer ${SCRAPE_TOKEN}`): Promise<Sample[]> {
  const response = await fetch(`${url}/metrics`, { headers: authorization ? { authorization } : {} });
  assert.equal(response.status, 200, await response.clone().text());
  assert.match(response.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
  return parseMetrics(await response.text());
}

/** The log lines as JSON once `check` holds of them (bounded, like `scrapeUntil`). */
async function logsUntil(
  lines: readonly string[],
  check: (logs: Record<string, unknown>[]) => boolean,
): Promise<Record<string, unknown>[]> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const logs = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    if (check(logs) || Date.now() > deadline) return logs;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Scrapes until `check` holds (gauges read at scrape time follow the database, not this test). */
async function scrapeUntil(url: string, check: (samples: Sample[]) => boolean, what: string): Promise<Sample[]> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const samples = await scrape(url);
    if (check(samples)) return samples;
    if (Date.now() > deadline) assert.fail(`metrics never showed ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Every metric docs/observability.md lists, with its type. */
const DOCUMENTED: Record<string, string> = {
  rudder_http_requests_total: "counter",
  rudder_http_request_duration_seconds: "histogram",
  rudder_runs_created_total: "counter",
  rudder_runs_settled_total: "counter",
  rudder_run_retries_total: "counter",
  rudder_run_claim_wait_seconds: "histogram",
  rudder_attempt_duration_seconds: "histogram",
  rudder_worker_active_attempts: "gauge",
  rudder_queue_pending_runs: "gauge",
  rudder_queue_ready_runs: "gauge",
  rudder_queue_blocked_runs: "gauge",
  rudder_queue_oldest_age_seconds: "gauge",
  rudder_steering_accepted_total: "counter",
  rudder_steering_consumed_total: "counter",
  rudder_steering_superseded_total: "counter",
  rudder_steering_consume_latency_seconds: "histogram",
  rudder_sse_streams_open: "gauge",
  rudder_db_connections: "gauge",
  rudder_db_unavailable_errors_total: "counter",
  rudder_notifier_listening: "gauge",
  rudder_notifier_reconnects_total: "counter",
  rudder_scheduler_fire_lag_seconds: "histogram",
  rudder_process_cpu_seconds_total: "counter",
  rudder_process_resident_memory_bytes: "gauge",
  rudder_nodejs_eventloop_lag_p99_seconds: "gauge",
  rudder_nodejs_heap_size_used_bytes: "gauge",
};

describe("observability: GET /metrics", () => {
  let server: TestServer;
  const { lines, destination } = logLines();

  before(async () => {
    server = await startTestServer({
      configFile: TESTING_CONFIG,
      worker: { retryBaseMs: 10, maxAttempts: 2 },
      config: { metricsToken: SCRAPE_TOKEN },
      logger: createLogger({ level: "trace", format: "json", destination }),
    });
  });
  after(() => server.close());

  test("answers 401 without credentials or with a wrong token, 403 without a role that reads, 200 for a viewer and for the scrape token", async () => {
    const status = async (headers: Record<string, string>) => (await fetch(`${server.url}/metrics`, { headers })).status;
    assert.equal(await status({}), 401);
    assert.equal(await status({ authorization: "Bearer wrong-scrape-token" }), 401);
    assert.equal(await status({ authorization: "Basic abc" }), 401);
    assert.equal(await status({ authorization: `Bearer ${await mintToken(TEST_SECRET, { tenantId: "t1", roles: [] })}` }), 403);
    assert.equal(await status({ authorization: `Bearer ${await server.token("t1", ["viewer"])}` }), 200);
    assert.equal(await status({ authorization: `Bearer ${SCRAPE_TOKEN}` }), 200);
    const problem = await fetch(`${server.url}/metrics`);
    assert.match(problem.headers.get("content-type") ?? "", /^application\/problem\+json/);
    assert.equal(((await problem.json()) as { code: string }).code, "unauthorized");
  });

  test("every documented metric is exposed with its type and help, and /metrics is in the OpenAPI document", async () => {
    const response = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${SCRAPE_TOKEN}` } });
    const text = await response.text();
    for (const [name, type] of Object.entries(DOCUMENTED)) {
      assert.match(text, new RegExp(`^# TYPE ${name} ${type}$`, "m"), `${name} is not a ${type}`);
      assert.match(text, new RegExp(`^# HELP ${name} \\S`, "m"));
    }
    const openapi = (await server.request("GET", "/openapi.json")).body;
    assert.ok(openapi.paths["/metrics"]?.get, "/metrics is documented");
  });

  test("counters move by what runs did: created, succeeded, failed, retried, dead-lettered, paused, resumed, steered, superseded", async () => {
    const beforeRuns = await scrape(server.url);
    const thread = (await server.request("POST", "/v1/threads", { body: {} })).body.thread_id as string;
    const create = async (assistant: string, input: unknown) => {
      const response = await server.request("POST", "/v1/runs", { body: { assistant_id: assistant, input } });
      assert.equal(response.status, 202, JSON.stringify(response.body));
      return response.body.run_id as string;
    };
    const join = async (runId: string) => (await server.request("GET", `/v1/runs/${runId}/join?timeout=60`)).body;

    assert.equal((await join(await create("echo", { message: "hi" }))).status, "succeeded");
    assert.equal((await join(await create("failing", { mode: "plain" }))).status, "failed");
    // Retryable: attempt 1 is retried, attempt 2 (maxAttempts) dead-letters.
    assert.equal((await join(await create("failing", { mode: "retryable" }))).status, "dead_letter");

    // Steering a running run: accepted, consumed.
    const steered = await create("steerable", { rounds: 1, waitMs: 30_000 });
    const stream = await openSse(`${server.url}/v1/runs/${steered}/stream`, {
      headers: { authorization: `Bearer ${await server.token()}` },
    });
    for (let event = await stream.next(); event && event.event !== "run_started"; event = await stream.next());
    await scrapeUntil(server.url, (samples) => sum(samples, "rudder_sse_streams_open") === 1, "one open stream");
    assert.equal(
      (await server.request("POST", `/v1/runs/${steered}/steer`, { body: { kind: "note", payload: { text: "hello" } } })).status,
      202,
    );
    assert.equal((await join(steered)).status, "succeeded");
    await stream.rest();
    stream.close();
    await scrapeUntil(server.url, (samples) => sum(samples, "rudder_sse_streams_open") === 0, "the stream closed");

    // A paused run steered, then resumed: the event moves to the new run (resume_transfer) and,
    // unconsumed when that run finishes, is superseded there (unconsumed_at_final_boundary).
    const paused = (
      await server.request("POST", `/v1/threads/${thread}/runs`, { body: { assistant_id: "approval", input: { request: "ship" } } })
    ).body.run_id as string;
    assert.equal((await join(paused)).status, "paused");
    assert.equal((await server.request("POST", `/v1/runs/${paused}/steer`, { body: { kind: "note", payload: {} } })).status, 202);
    const resumed = await server.request("POST", `/v1/runs/${paused}/resume`, { body: { resume: { approved: true } } });
    assert.equal(resumed.status, 202, JSON.stringify(resumed.body));
    assert.equal((await join(resumed.body.run_id)).status, "succeeded");

    const afterRuns = await scrape(server.url);
    const delta = (name: string, labels: Record<string, string> = {}) => sum(afterRuns, name, labels) - sum(beforeRuns, name, labels);
    assert.equal(delta("rudder_runs_created_total", { graph_id: "echo" }), 1);
    assert.equal(delta("rudder_runs_created_total", { graph_id: "failing" }), 2);
    assert.equal(delta("rudder_runs_created_total", { graph_id: "steerable" }), 1);
    assert.equal(delta("rudder_runs_created_total", { graph_id: "approval" }), 2, "the resume's run is created too");
    assert.equal(delta("rudder_runs_created_total"), 6);
    assert.equal(delta("rudder_runs_settled_total", { status: "succeeded", graph_id: "echo" }), 1);
    assert.equal(delta("rudder_runs_settled_total", { status: "failed", graph_id: "failing" }), 1);
    assert.equal(delta("rudder_runs_settled_total", { status: "dead_letter", graph_id: "failing" }), 1);
    assert.equal(delta("rudder_runs_settled_total", { status: "succeeded", graph_id: "steerable" }), 1);
    assert.equal(delta("rudder_runs_settled_total", { status: "paused", graph_id: "approval" }), 1);
    assert.equal(delta("rudder_runs_settled_total", { status: "succeeded", graph_id: "approval" }), 1);
    assert.equal(delta("rudder_runs_settled_total"), 6);
    assert.equal(delta("rudder_run_retries_total", { reason: "error", graph_id: "failing" }), 1);
    assert.equal(delta("rudder_run_retries_total"), 1);
    // Attempts: echo 1, failing 1 + 2, steerable 1, approval 2.
    assert.equal(delta("rudder_attempt_duration_seconds_count"), 7);
    assert.equal(delta("rudder_attempt_duration_seconds_count", { status: "pending", graph_id: "failing" }), 1);
    assert.equal(delta("rudder_run_claim_wait_seconds_count"), 7);
    assert.equal(delta("rudder_steering_accepted_total"), 2);
    assert.equal(delta("rudder_steering_consumed_total"), 1);
    assert.equal(delta("rudder_steering_consume_latency_seconds_count"), 1);
    assert.equal(delta("rudder_steering_superseded_total", { reason: "resume_transfer" }), 1);
    assert.equal(delta("rudder_steering_superseded_total", { reason: "unconsumed_at_final_boundary" }), 1);
    assert.equal(delta("rudder_http_requests_total", { method: "POST", route: "/v1/runs", status: "202" }), 4);
    assert.equal(delta("rudder_http_requests_total", { method: "POST", route: "/v1/threads/:thread_id/runs", status: "202" }), 1);
    assert.equal(delta("rudder_http_requests_total", { method: "POST", route: "/v1/runs/:run_id/steer", status: "202" }), 2);
    assert.equal(delta("rudder_http_requests_total", { method: "GET", route: "/v1/runs/:run_id/join", status: "200" }), 6);
    assert.equal(
      delta("rudder_http_requests_total", { method: "GET", route: "/v1/runs/:run_id/stream", status: "200" }),
      1,
      "a stream is counted when it ends",
    );
    assert.equal(delta("rudder_http_request_duration_seconds_count", { method: "POST", route: "/v1/runs" }), 4);
    assert.equal(sum(afterRuns, "rudder_worker_active_attempts"), 0);
    assert.equal(sum(afterRuns, "rudder_notifier_listening"), 1);
    assert.ok(sum(afterRuns, "rudder_db_connections", { state: "max" }) >= 1);
  });

  test("requests no route matches are counted under one label, not their URL", async () => {
    const beforeScrape = await scrape(server.url);
    for (const id of ["a", "b", "c"]) assert.equal((await fetch(`${server.url}/nothing/${id}`)).status, 404);
    const afterScrape = await scrape(server.url);
    const labels = { route: "unmatched", status: "404" };
    assert.equal(sum(afterScrape, "rudder_http_requests_total", labels) - sum(beforeScrape, "rudder_http_requests_total", labels), 3);
    assert.ok(!afterScrape.some((sample) => sample.labels.route?.includes("nothing")));
  });

  test("a method a known path does not answer (405) is counted under that path's route", async () => {
    const beforeScrape = await scrape(server.url);
    for (const id of ["a", "b"]) assert.equal((await fetch(`${server.url}/v1/runs/${id}/join`, { method: "DELETE" })).status, 405);
    const afterScrape = await scrape(server.url);
    const labels = { method: "DELETE", route: "/v1/runs/:run_id/join", status: "405" };
    assert.equal(sum(afterScrape, "rudder_http_requests_total", labels) - sum(beforeScrape, "rudder_http_requests_total", labels), 2);
  });

  test("logs are JSON lines; request logs carry request_id, a run's carry run_id, attempt and worker_id; a failure is logged once with its stack", async () => {
    const runId = (
      await server.request("POST", "/v1/runs", {
        body: { assistant_id: "echo", input: { message: "log me" } },
        headers: { "x-request-id": "req-observability-1" },
      })
    ).body.run_id as string;
    await server.request("GET", `/v1/runs/${runId}/join?timeout=60`);
    const failed = (await server.request("POST", "/v1/runs", { body: { assistant_id: "failing", input: { mode: "plain" } } })).body
      .run_id as string;
    await server.request("GET", `/v1/runs/${failed}/join?timeout=60`);
    // The worker logs an attempt once its settle resolved, which a join may answer before.
    const logs = await logsUntil(
      lines,
      (all) =>
        all.some((log) => log.run_id === runId && log.msg === "attempt settled") && all.some((log) => log.run_id === failed && log.err),
    );
    const created = logs.filter((log) => log.request_id === "req-observability-1");
    assert.ok(created.some((log) => log.msg === "incoming request" && log.level === "debug"));
    const completed = created.find((log) => log.msg === "request completed");
    assert.ok(completed, "one line per request at info, with what an operator filters on");
    assert.equal(completed.level, "info");
    assert.equal(completed.method, "POST");
    assert.equal(completed.path, "/v1/runs");
    assert.equal(completed.route, "/v1/runs");
    assert.equal(completed.status, 202);
    assert.equal(typeof completed.response_time_ms, "number");
    assert.ok(logs.every((log) => typeof log.time === "number" && typeof log.level === "string" && typeof log.msg === "string"));
    const streamEnded = logs.find((log) => log.msg === "stream ended");
    assert.ok(streamEnded, "an SSE stream logs its end");
    assert.equal(streamEnded.route, "/v1/runs/:run_id/stream");
    assert.equal(typeof streamEnded.request_id, "string");
    const ofRun = logs.filter((log) => log.run_id === runId);
    assert.deepEqual(
      ofRun.map((log) => log.msg),
      ["attempt started", "attempt settled"],
    );
    for (const log of ofRun) {
      assert.equal(log.attempt, 1);
      assert.equal(log.worker_id, server.server.worker!.id);
      assert.equal(log.tenant_id, "t1");
      assert.equal(log.graph_id, "echo");
    }
    assert.equal(ofRun[1]!.status, "succeeded");
    const failures = logs.filter((log) => log.run_id === failed && log.err !== undefined);
    assert.equal(failures.length, 1, "the graph's error is logged once");
    assert.equal(failures[0]!.msg, "attempt failed");
    assert.equal(failures[0]!.level, "warn");
    assert.match((failures[0]!.err as { stack: string }).stack, /node exploded\n\s+at /);
  });

  test("no token, API key or secret ever reaches the logs", async () => {
    const token = await server.token();
    const forged = "eyJhbGciOiJIUzI1NiJ9.eyJmb3JnZWQiOnRydWV9.Zm9yZ2VkLXNpZ25hdHVyZS1TRUNSRVQ";
    const apiKey = "rudder-api-key-SECRET-4711";
    await fetch(`${server.url}/v1/threads`, { headers: { authorization: `Bearer ${token}` } });
    await fetch(`${server.url}/v1/threads`, { headers: { authorization: `Bearer ${forged}` } });
    await fetch(`${server.url}/v1/threads`, { headers: { "x-api-key": apiKey } });
    await fetch(`${server.url}/v1/threads?token=${encodeURIComponent("query-SECRET-99")}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${SCRAPE_TOKEN}` } });
    await fetch(`${server.url}/metrics`, { headers: { authorization: "Bearer wrong-scrape-SECRET" } });
    const text = lines.join("\n");
    assert.ok(lines.length > 0);
    for (const secret of [
      token,
      token.split(".")[2]!,
      forged,
      apiKey,
      SCRAPE_TOKEN,
      "wrong-scrape-SECRET",
      "query-SECRET-99",
      TEST_SECRET,
    ]) {
      assert.ok(!text.includes(secret), `the logs hold a secret: ${secret.slice(0, 12)}…`);
    }
  });
});

describe("observability: queue gauges, across processes", () => {
  test("a process without a worker sees the queue fill and empty; a worker-only process serves its own metrics on its listener", async () => {
    const database = await createTestDatabase({ migrated: false });
    const api = await startTestServer({ configFile: TESTING_CONFIG, database, worker: false, config: { metricsToken: SCRAPE_TOKEN } });
    try {
      const create = async () =>
        (await api.request("POST", "/v1/runs", { body: { assistant_id: "echo", input: { message: "queued" } } })).body.run_id as string;
      const queued = [await create(), await create(), await create()];
      const full = await scrapeUntil(api.url, (samples) => sum(samples, "rudder_queue_pending_runs") === 3, "three pending runs");
      assert.equal(sum(full, "rudder_queue_ready_runs"), 3);
      assert.equal(sum(full, "rudder_queue_blocked_runs"), 0);
      assert.ok(sum(full, "rudder_queue_oldest_age_seconds") >= 0);
      // One cancelled while pending: counted settled by the API process that cancelled it.
      const beforeCancel = await scrape(api.url);
      assert.equal((await api.request("POST", `/v1/runs/${queued[0]}/cancel`)).status, 200);
      const afterCancel = await scrapeUntil(api.url, (samples) => sum(samples, "rudder_queue_pending_runs") === 2, "two pending runs");
      const cancelled = { status: "cancelled", graph_id: "echo" };
      assert.equal(sum(afterCancel, "rudder_runs_settled_total", cancelled) - sum(beforeCancel, "rudder_runs_settled_total", cancelled), 1);

      // Two runs on one thread: the second waits for the first, so it is blocked, not ready, and
      // does not age the queue (a long run ahead of it must not read as a stuck queue).
      const threadId = (await api.request("POST", "/v1/threads", { body: {} })).body.thread_id as string;
      const onThread = async () =>
        (await api.request("POST", `/v1/threads/${threadId}/runs`, { body: { assistant_id: "steps", input: { steps: 1 } } })).body
          .run_id as string;
      const [head, behind] = [await onThread(), await onThread()];
      const withThread = await scrapeUntil(api.url, (samples) => sum(samples, "rudder_queue_pending_runs") === 4, "four pending runs");
      assert.deepEqual(
        [sum(withThread, "rudder_queue_ready_runs"), sum(withThread, "rudder_queue_blocked_runs")],
        [3, 1],
        "the run behind its thread's head is blocked",
      );
      for (const runId of [behind, head]) assert.equal((await api.request("POST", `/v1/runs/${runId}/cancel`)).status, 200);
      await scrapeUntil(api.url, (samples) => sum(samples, "rudder_queue_pending_runs") === 2, "two pending runs again");

      // A worker-only process on the same database: it executes the other two and counts them.
      const worker = await startServer({
        config: { ...api.config, metricsPort: 0 },
        db: database.db,
        schema: "require-current",
        api: false,
        worker: { pollMs: 100 },
        logger: false,
      });
      try {
        assert.ok(worker.metricsUrl);
        assert.equal((await fetch(`${worker.metricsUrl}/metrics`)).status, 401);
        assert.equal(
          (await fetch(`${worker.metricsUrl}/metrics`, { headers: { authorization: `Bearer ${await api.token("t1", ["viewer"])}` } }))
            .status,
          200,
        );
        assert.equal((await fetch(`${worker.metricsUrl}/ready`)).status, 200);
        assert.equal((await fetch(`${worker.metricsUrl}/elsewhere`)).status, 404);
        for (const runId of queued.slice(1))
          assert.equal((await api.request("GET", `/v1/runs/${runId}/join?timeout=60`)).body.status, "succeeded");
        const workerSamples = await scrape(worker.metricsUrl);
        assert.equal(sum(workerSamples, "rudder_runs_settled_total", { status: "succeeded", graph_id: "echo" }), 2);
        assert.equal(sum(workerSamples, "rudder_runs_created_total"), 0, "runs are counted created where they were created");
        assert.equal(sum(workerSamples, "rudder_attempt_duration_seconds_count"), 2);
        const apiSamples = await scrapeUntil(api.url, (samples) => sum(samples, "rudder_queue_pending_runs") === 0, "an empty queue");
        assert.equal(sum(apiSamples, "rudder_runs_created_total", { graph_id: "echo" }), 3);
        assert.equal(sum(apiSamples, "rudder_runs_settled_total", { status: "succeeded" }), 0, "the API process executed nothing");
      } finally {
        await worker.close();
      }
    } finally {
      await api.close();
    }
  });
});

describe("observability: queue gauges when the database cannot be read", () => {
  test("they read NaN, not the last figures, which would look current and keep a stalled-queue alert quiet", async () => {
    const metrics = new Metrics({ processMetrics: false, queueCacheMs: 0 });
    let readable = true;
    metrics.setSources({
      queue: async () => {
        if (!readable) throw new Error("connect ECONNREFUSED");
        return { pending: 15, ready: 15, blocked: 0, oldestReadySeconds: 4 };
      },
    });
    const value = async (name: string) => (await metrics.registry.getSingleMetric(name)!.get()).values[0]?.value;
    assert.equal(await value("rudder_queue_oldest_age_seconds"), 4);
    readable = false;
    for (const name of [
      "rudder_queue_pending_runs",
      "rudder_queue_ready_runs",
      "rudder_queue_blocked_runs",
      "rudder_queue_oldest_age_seconds",
    ])
      assert.ok(Number.isNaN(await value(name)), name);
    readable = true;
    assert.equal(await value("rudder_queue_pending_runs"), 15);
  });
});

describe("observability: /ready and the notifier", () => {
  test("/ready answers 503 once the LISTEN connection has been down longer than the bound; /health stays 200", async () => {
    const local = createLocalNotifier();
    let down = false;
    const notifier = { ...local, health: () => ({ listening: !down, since: 0, reconnects: down ? 3 : 0 }) };
    const server = await startTestServer({ worker: false, notifier, config: { metricsToken: SCRAPE_TOKEN, readyListenGraceMs: 1000 } });
    try {
      assert.equal((await fetch(`${server.url}/ready`)).status, 200);
      down = true;
      const ready = await fetch(`${server.url}/ready`);
      assert.equal(ready.status, 503);
      assert.equal(((await ready.json()) as { code: string }).code, "unavailable");
      assert.equal((await fetch(`${server.url}/health`)).status, 200);
      const samples = await scrape(server.url);
      assert.equal(sum(samples, "rudder_notifier_listening"), 0);
      assert.equal(sum(samples, "rudder_notifier_reconnects_total"), 3);
    } finally {
      await server.close();
    }
  });

  test(
    "PostgreSQL: a LISTEN connection killed by the server is counted as a reconnect and comes back",
    { skip: !TEST_DATABASE_URL && "needs PostgreSQL" },
    async () => {
      const server = await startTestServer({ worker: false, config: { metricsToken: SCRAPE_TOKEN } });
      const admin = new pg.Client({ connectionString: server.database.url });
      await admin.connect();
      try {
        const listening = await scrapeUntil(
          server.url,
          (samples) => sum(samples, "rudder_notifier_listening") === 1,
          "the LISTEN connection up",
        );
        const reconnects = sum(listening, "rudder_notifier_reconnects_total");
        await admin.query(
          "select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and query = 'listen rudder'",
        );
        await scrapeUntil(server.url, (samples) => sum(samples, "rudder_notifier_reconnects_total") === reconnects + 1, "one reconnect");
        await scrapeUntil(server.url, (samples) => sum(samples, "rudder_notifier_listening") === 1, "the LISTEN connection back");
        assert.equal((await fetch(`${server.url}/ready`)).status, 200);
      } finally {
        await admin.end();
        await server.close();
      }
    },
  );
});

describe("observability: log formats", () => {
  test("pretty prints readable lines; json prints one JSON object per line", () => {
    const pretty = logLines();
    createLogger({ level: "info", format: "pretty", destination: pretty.destination }).info(
      { run_id: "r1", authorization: "Bearer x" },
      "attempt settled",
    );
    const text = pretty.lines.join("\n");
    assert.match(text, /INFO.*attempt settled/);
    assert.match(text, /"run_id":"r1"/);
    assert.doesNotMatch(text, /Bearer x/);
    assert.throws(() => JSON.parse(text));
    const json = logLines();
    createLogger({ level: "info", format: "json", destination: json.destination }).info(
      { run_id: "r1", token: "t0ken" },
      "attempt settled",
    );
    assert.equal(json.lines.length, 1);
    const line = JSON.parse(json.lines[0]!) as Record<string, unknown>;
    assert.equal(line.msg, "attempt settled");
    assert.equal(line.level, "info");
    assert.equal(line.run_id, "r1");
    assert.equal(line.token, "[redacted]");
  });
});

describe("observability: real rudder processes", () => {
  test("bad --log-format and --metrics-port values stop the command with one clear line", async () => {
    const format = await runRudder(["worker", "--log-format", "xml"], { DATABASE_URL: "postgres://127.0.0.1:1/none" });
    assert.equal(format.code, 1);
    assert.match(format.stderr, /log format .* must be json or pretty, not "xml"/);
    const port = await runRudder(["worker", "--metrics-port", "ninety"], { DATABASE_URL: "postgres://127.0.0.1:1/none" });
    assert.equal(port.code, 1);
    assert.match(port.stderr, /metrics port .* must be 0 to 65535 or "off", not "ninety"/);
  });

  test(
    "rudder serve and rudder worker: each exposes its own metrics, and the worker's JSON log lines of a run carry its run_id",
    { skip: TEST_DRIVER === "pglite" && "needs PostgreSQL: processes share one database" },
    async () => {
      const database = await createTestDatabase();
      const env = {
        DATABASE_URL: database.url,
        RUDDER_JWT_SECRET: TEST_SECRET,
        RUDDER_METRICS_TOKEN: SCRAPE_TOKEN,
        RUDDER_LOG_LEVEL: "info",
      };
      const serve = startRudder(["serve", "--config", TESTING_CONFIG, "--port", "0"], env);
      const worker = startRudder(["worker", "--config", TESTING_CONFIG, "--metrics-port", "0"], { ...env, RUDDER_WORKER_POLL_MS: "200" });
      const apiBanner = waitForOutput(serve, /rudder serve: listening at http:\/\/\S+/);
      const workerBanner = waitForOutput(worker, /metrics at http:\/\/\S+\/metrics/);
      const workerOut: string[] = [];
      worker.stdout.on("data", (chunk: Buffer) => workerOut.push(chunk.toString()));
      const stopped = (child: typeof serve) =>
        new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : child.once("exit", () => resolve())));
      try {
        const apiUrl = /rudder serve: listening at (http:\/\/\S+)/.exec(await apiBanner)![1]!;
        const metricsUrl = /metrics at (http:\/\/\S+)\/metrics/.exec(await workerBanner)![1]!;
        const token = await mintToken(TEST_SECRET, { tenantId: "t1", roles: ["admin"] });
        const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
        const created = await fetch(`${apiUrl}/v1/runs`, {
          method: "POST",
          headers,
          body: JSON.stringify({ assistant_id: "echo", input: { message: "across processes" } }),
        });
        assert.equal(created.status, 202);
        const runId = ((await created.json()) as { run_id: string }).run_id;
        const joined = await fetch(`${apiUrl}/v1/runs/${runId}/join?timeout=60`, { headers });
        assert.equal(((await joined.json()) as { status: string }).status, "succeeded");

        assert.equal((await fetch(`${metricsUrl}/metrics`)).status, 401);
        const fromWorker = await scrape(metricsUrl);
        assert.equal(sum(fromWorker, "rudder_runs_settled_total", { status: "succeeded", graph_id: "echo" }), 1);
        assert.equal(sum(fromWorker, "rudder_run_claim_wait_seconds_count"), 1);
        assert.ok(sum(fromWorker, "rudder_process_resident_memory_bytes") > 0);
        const fromApi = await scrape(apiUrl);
        assert.equal(sum(fromApi, "rudder_runs_created_total", { graph_id: "echo" }), 1);
        assert.equal(sum(fromApi, "rudder_runs_settled_total"), 0);

        const lines = workerOut
          .join("")
          .split("\n")
          .filter((line) => line.startsWith("{"))
          .map((line) => JSON.parse(line) as Record<string, unknown>);
        const ofRun = lines.filter((line) => line.run_id === runId);
        assert.deepEqual(
          ofRun.map((line) => line.msg),
          ["attempt started", "attempt settled"],
        );
        assert.ok(ofRun.every((line) => line.attempt === 1 && typeof line.worker_id === "string" && line.level === "info"));
      } finally {
        serve.kill("SIGTERM");
        worker.kill("SIGTERM");
        await Promise.all([stopped(serve), stopped(worker)]);
        await database.drop();
      }
    },
  );
});
