/**
 * Steering latency: from a steer's durable acceptance to its consumption, with wake-up notices on
 * and with them dropped (the poll interval then bounds the wait), for two graphs:
 *
 * - `steerable`: each round is a node run that waits in waitForSteering, drains and returns;
 * - `listen_loop`: one node that keeps listening in a loop (waitForSteering with a 200 ms timeout,
 *   drain, log, again) and returns only at "stop": its run.steer.consumed must not wait for it.
 *
 * Two figures per steer: the server's own `queue_latency_seconds` of run.steer.consumed
 * (acceptance commit → consumption commit, one database clock), and what a client sees: from
 * sending the steer to reading its run.steer.consumed on the run's live SSE stream (and, of that,
 * the steer call itself: request to 202). The client runs in the server's process, so on a busy
 * machine the two share one event loop.
 *
 *   node --import tsx bench/steering.ts [--driver pglite|postgres|both] [--steers N]
 *
 * PostgreSQL: RUDDER_TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test); a
 * private database is created and dropped.
 */
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { createLocalNotifier, createPostgresNotifier, type Notifier } from "../packages/server/src/notify/notifier.ts";
import { createTestDatabase } from "../packages/server/test/support/db.ts";
import { startTestServer, type TestServer } from "../packages/server/test/support/server.ts";
import { openSse } from "../packages/server/test/support/sse.ts";

const { values } = parseArgs({ options: { driver: { type: "string", default: "both" }, steers: { type: "string", default: "200" } } });
const STEERS = Number(values.steers);
const CONFIG = fileURLToPath(new URL("../packages/server/test/fixtures/testing.rudder.json", import.meta.url));
const POLL_MS = 1000;

/** Drops `steering` notices: the worker then finds new rows only by polling storage. */
function droppingSteering(inner: Notifier): Notifier {
  return {
    publish: (...notices) => inner.publish(...notices.filter((notice) => notice.topic !== "steering")),
    publishWithin: (tx, ...notices) => inner.publishWithin(tx, ...notices.filter((notice) => notice.topic !== "steering")),
    subscribe: (listener) => inner.subscribe(listener),
    close: () => inner.close(),
  };
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

const GRAPHS = {
  steerable: { input: { rounds: STEERS + 10, waitMs: 60_000 }, stop: { kind: "stop", payload: null } },
  listen_loop: { input: { timeoutMs: 200, iterations: 1_000_000 }, stop: { kind: "message", payload: { message: "stop" } } },
} as const;
type GraphName = keyof typeof GRAPHS;

/** One steer at a time, each sent once the previous one's consumption was seen on the stream. */
async function measure(server: TestServer, graph: GraphName): Promise<{ queue: number[]; client: number[]; call: number[] }> {
  // Each steerable round is a superstep: lift LangGraph's default recursion limit (25).
  const body = { assistant_id: graph, input: GRAPHS[graph].input, config: { recursionLimit: 1_000_000 } };
  const { body: run } = await server.request("POST", "/v1/runs", { body });
  for (let i = 0; i < 100 && (await server.request("GET", `/v1/runs/${run.run_id}`)).body.status !== "running"; i++)
    await new Promise((r) => setTimeout(r, 20));
  const stream = await openSse(`${server.url}/v1/runs/${run.run_id}/stream`, {
    headers: { authorization: `Bearer ${await server.token()}` },
    lastEventId: "0",
  });
  const queue: number[] = [];
  const client: number[] = [];
  const call: number[] = [];
  try {
    for (let i = 0; i < STEERS; i++) {
      const sentAt = performance.now();
      const { body: accepted } = await server.request("POST", `/v1/runs/${run.run_id}/steer`, {
        body: { kind: "message", payload: { message: `m${i}` } },
      });
      call.push(performance.now() - sentAt);
      for (;;) {
        const next = await stream.next();
        if (!next) throw new Error(`the stream of run ${run.run_id} ended before m${i} was consumed`);
        const event = JSON.parse(next.data) as { kind: string; data: Record<string, unknown> };
        if (event.kind !== "run.steer.consumed" || event.data.steering_event_id !== accepted.id) continue;
        client.push(performance.now() - sentAt);
        queue.push(Number(event.data.queue_latency_seconds) * 1000);
        break;
      }
    }
  } finally {
    stream.close();
  }
  await server.request("POST", `/v1/runs/${run.run_id}/steer`, { body: GRAPHS[graph].stop });
  await server.request("GET", `/v1/runs/${run.run_id}/join?timeout=30`);
  const sorted = (values: number[]) => values.sort((a, b) => a - b);
  return { queue: sorted(queue), client: sorted(client), call: sorted(call) };
}

async function bench(driver: "pglite" | "postgres", notices: boolean) {
  if (driver === "postgres") process.env.RUDDER_TEST_DATABASE_URL ??= "postgres://postgres@127.0.0.1:5432/test";
  else delete process.env.RUDDER_TEST_DATABASE_URL;
  const database = await createTestDatabase({ migrated: false });
  const base = database.url ? createPostgresNotifier(database.url) : createLocalNotifier();
  const server = await startTestServer({
    configFile: CONFIG,
    database,
    worker: { steeringPollMs: POLL_MS },
    notifier: notices ? base : droppingSteering(base),
  });
  const rows = [];
  try {
    for (const graph of Object.keys(GRAPHS) as GraphName[]) {
      const { queue, client, call } = await measure(server, graph);
      const row = {
        driver,
        graph,
        notices: notices ? "on" : `off (poll ${POLL_MS} ms)`,
        steers: queue.length,
        queue_p50_ms: percentile(queue, 50).toFixed(1),
        queue_p99_ms: percentile(queue, 99).toFixed(1),
        queue_max_ms: queue.at(-1)!.toFixed(1),
        client_p50_ms: percentile(client, 50).toFixed(1),
        client_p99_ms: percentile(client, 99).toFixed(1),
        steer_call_p50_ms: percentile(call, 50).toFixed(1),
      };
      console.log(JSON.stringify(row));
      rows.push(row);
    }
    return rows;
  } finally {
    await server.close();
  }
}

const drivers = values.driver === "both" ? (["pglite", "postgres"] as const) : [values.driver as "pglite" | "postgres"];
const rows = [];
for (const driver of drivers) for (const notices of [true, false]) rows.push(...(await bench(driver, notices)));
console.table(rows);
