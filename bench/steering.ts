/**
 * Steering latency: from a steer's durable acceptance to its consumption, for a graph waiting in
 * waitForSteering, with wake-up notices on and with them dropped (the poll interval then bounds
 * the wait). The figure is the server's own `queue_latency_seconds` of run.steer.consumed
 * (acceptance commit → consumption commit, one database clock).
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

async function measure(server: TestServer): Promise<number[]> {
  const { body: run } = await server.request("POST", "/v1/runs", { body: { assistant_id: "steerable", input: { rounds: STEERS + 10, waitMs: 60_000 } } });
  for (let i = 0; i < 100 && (await server.request("GET", `/v1/runs/${run.run_id}`)).body.status !== "running"; i++) await new Promise((r) => setTimeout(r, 20));
  const latencies: number[] = [];
  let cursor = 0;
  for (let i = 0; i < STEERS; i++) {
    const { body: accepted } = await server.request("POST", `/v1/runs/${run.run_id}/steer`, { body: { kind: "tick", payload: i } });
    // Wait for this steer's consumption before sending the next, so each measures one wake-up.
    for (;;) {
      const events = (await server.request("GET", `/v1/runs/${run.run_id}/events?after=${cursor}&limit=1000`)).body as { sequence: number; kind: string; data: Record<string, unknown> }[];
      cursor = events.at(-1)?.sequence ?? cursor;
      const consumed = events.find((e) => e.kind === "run.steer.consumed" && e.data.steering_event_id === accepted.id);
      if (consumed) {
        latencies.push(Number(consumed.data.queue_latency_seconds) * 1000);
        break;
      }
      await new Promise((r) => setTimeout(r, 10));
    }
  }
  await server.request("POST", `/v1/runs/${run.run_id}/steer`, { body: { kind: "stop", payload: null } });
  await server.request("GET", `/v1/runs/${run.run_id}/join?timeout=30`);
  return latencies.sort((a, b) => a - b);
}

async function bench(driver: "pglite" | "postgres", notices: boolean) {
  if (driver === "postgres") process.env.RUDDER_TEST_DATABASE_URL ??= "postgres://postgres@127.0.0.1:5432/test";
  else delete process.env.RUDDER_TEST_DATABASE_URL;
  const database = await createTestDatabase({ migrated: false });
  const base = database.url ? createPostgresNotifier(database.url) : createLocalNotifier();
  const server = await startTestServer({ configFile: CONFIG, database, worker: { steeringPollMs: POLL_MS }, notifier: notices ? base : droppingSteering(base) });
  try {
    const latencies = await measure(server);
    const row = {
      driver,
      notices: notices ? "on" : `off (poll ${POLL_MS} ms)`,
      steers: latencies.length,
      p50_ms: percentile(latencies, 50).toFixed(1),
      p99_ms: percentile(latencies, 99).toFixed(1),
      max_ms: latencies.at(-1)!.toFixed(1),
    };
    console.log(JSON.stringify(row));
    return row;
  } finally {
    await server.close();
  }
}

const drivers = values.driver === "both" ? (["pglite", "postgres"] as const) : [values.driver as "pglite" | "postgres"];
const rows = [];
for (const driver of drivers) for (const notices of [true, false]) rows.push(await bench(driver, notices));
console.table(rows);
