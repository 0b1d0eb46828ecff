import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import type { Client } from "@langchain/langgraph-sdk";
import { lgClient, rejectsWith } from "./support/langgraph.ts";
import { startTestServer, type TestServer } from "./support/server.ts";

const CONFIG = fileURLToPath(new URL("./fixtures/langgraph-streams.rudder.json", import.meta.url));

/** The worker's poll interval here: long, so a delayed run is claimed by its due-time wake-up, not by a poll. */
const POLL_MS = 60_000;

/**
 * The LangGraph API's delayed runs, breakpoints, task payloads, subgraph namespaces and the
 * `events` / `tools` / `lifecycle` stream modes, through `@langchain/langgraph-sdk` only.
 */
describe("LangGraph API through the SDK: after_seconds, breakpoints, stream modes, subgraphs", () => {
  let server: TestServer;
  let client: Client;
  before(async () => {
    server = await startTestServer({ configFile: CONFIG, worker: { pollMs: POLL_MS } });
    client = await lgClient(server);
  });
  after(() => server.close());

  test("after_seconds: the run is created pending, is not started before its time, and starts when it comes due", async () => {
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, "echo", { input: { message: "later" }, afterSeconds: 1.5 });
    assert.equal(run.status, "pending");
    await new Promise((resolve) => setTimeout(resolve, 700));
    assert.equal((await client.runs.get(thread.thread_id, run.run_id)).status, "pending");
    assert.equal((await client.threads.get(thread.thread_id)).status, "idle");
    const values = await client.runs.join(thread.thread_id, run.run_id);
    assert.deepEqual(values, { message: "later", reply: "later" });
    const done = await server.request("GET", `/v1/runs/${run.run_id}`);
    const waited = Date.parse(done.body.started_at) - Date.parse(done.body.created_at);
    assert.ok(waited >= 1400, `started ${waited} ms after creation`);
    // Claimed by the worker's wake-up at the due time: its poll would come only after POLL_MS.
    assert.ok(waited < POLL_MS / 2, `started ${waited} ms after creation`);

    // Stateless, through wait: the call holds until the delayed run has run.
    const stateless = await client.runs.wait(null, "echo", { input: { message: "soon" }, afterSeconds: 0.5 });
    assert.deepEqual(stateless, { message: "soon", reply: "soon" });
  });

  test("after_seconds: a delayed run can be cancelled before it starts; bad values are 422", async () => {
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, "echo", { input: { message: "never" }, afterSeconds: 60 });
    await client.runs.cancel(thread.thread_id, run.run_id, true);
    assert.equal((await client.runs.get(thread.thread_id, run.run_id)).status, "interrupted");
    await rejectsWith(client.runs.create(thread.thread_id, "echo", { input: { message: "x" }, afterSeconds: -1 }), 422);
    await rejectsWith(client.runs.create(thread.thread_id, "echo", { input: { message: "x" }, afterSeconds: 400 * 24 * 3600 }), 422);
  });
});
