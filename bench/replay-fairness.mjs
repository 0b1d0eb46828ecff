/**
 * One tenant's SSE replays against another tenant's requests (docs/benchmarks.md, "twenty-first
 * pass"): tenant A runs `ticker` for 5,000 events, then READERS streams replay it from
 * `Last-Event-ID: 0` over and over; meanwhile tenant B creates `echo` runs and reads each one's
 * stream to its end, one after another, and the create → stream end times are reported, first
 * quietly (5 s), then under the replays (SECONDS).
 *
 * Against a running server whose config has `echo` (examples/graphs/echo.ts:graph) and `ticker`
 * (bench/graphs.ts:ticker), e.g. on PostgreSQL:
 *
 *   DATABASE_URL=... RUDDER_JWT_SECRET=... npx rudder migrate --config CONFIG
 *   npx rudder serve --config CONFIG --port 2151 & npx rudder worker --config CONFIG &
 *   node bench/replay-fairness.mjs http://127.0.0.1:2151 "$(npx rudder token --tenant a --roles operator)" \
 *        "$(npx rudder token --tenant b --roles operator)" [READERS=200] [SECONDS=20]
 */
import { performance } from "node:perf_hooks";

const [url, tokenA, tokenB, readers = "200", seconds = "20"] = process.argv.slice(2);
if (!url || !tokenA || !tokenB) {
  console.error("usage: node bench/replay-fairness.mjs URL TOKEN_A TOKEN_B [READERS] [SECONDS]");
  process.exit(2);
}
const headers = (token) => ({ authorization: `Bearer ${token}`, "content-type": "application/json" });

async function post(path, token, body) {
  const answer = await fetch(url + path, { method: "POST", headers: headers(token), body: JSON.stringify(body) });
  if (answer.status >= 300) throw new Error(`${path} ${answer.status} ${await answer.text()}`);
  return answer.json();
}

/** Tenant B's create → stream end, one after another for `ms`. */
async function sample(label, ms) {
  const took = [];
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const started = performance.now();
    const run = await post("/v1/runs", tokenB, { assistant_id: "echo", input: { message: "hi" } });
    await (await fetch(`${url}/v1/runs/${run.run_id}/stream`, { headers: headers(tokenB) })).text();
    took.push(performance.now() - started);
  }
  took.sort((a, b) => a - b);
  const at = (q) => took[Math.min(took.length - 1, Math.floor(q * took.length))].toFixed(1);
  console.log(`${label}: n=${took.length} p50=${at(0.5)} p95=${at(0.95)} max=${at(1)} ms`);
}

const long = await post("/v1/runs", tokenA, { assistant_id: "ticker", input: { count: 5000, interval_ms: 0, delay_ms: 0 } });
await (await fetch(`${url}/v1/runs/${long.run_id}/join?timeout=120`, { headers: headers(tokenA) })).json();
await sample("quiet", 5000);
let stop = false;
let bytes = 0;
let replays = 0;
const statuses = {};
const noise = Array.from({ length: Number(readers) }, async () => {
  while (!stop) {
    const answer = await fetch(`${url}/v1/runs/${long.run_id}/stream`, { headers: { ...headers(tokenA), "last-event-id": "0" } });
    bytes += (await answer.text()).length;
    replays++;
    statuses[answer.status] = (statuses[answer.status] ?? 0) + 1;
  }
});
await new Promise((resolve) => setTimeout(resolve, 1000));
await sample(`with ${readers} replaying readers of tenant A`, Number(seconds) * 1000);
stop = true;
await Promise.all(noise);
console.log(`tenant A: ${replays} replays, ${(bytes / 1e6).toFixed(0)} MB, statuses ${JSON.stringify(statuses)}`);
