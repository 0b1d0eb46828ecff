import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startTestServer, type TestServer } from "./support/server.ts";
import { SPELLED_OUT_DEFAULTS } from "./support/runs.ts";
import { assertProblem } from "./support/problem.ts";

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));

interface Frame {
  id?: string;
  event?: string;
  data?: string;
  comment?: string;
}

/** Reads a whole SSE response (it must end by itself) into frames and comments. */
async function readStream(
  server: TestServer,
  runId: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; frames: Frame[]; contentType: string | null }> {
  const response = await fetch(`${server.url}/v1/runs/${runId}/stream`, {
    headers: { authorization: `Bearer ${await server.token()}`, accept: "text/event-stream", ...headers },
    signal: AbortSignal.timeout(20_000),
  });
  const text = await response.text();
  const frames = text
    .split("\n\n")
    .filter(Boolean)
    .map((block) => {
      const frame: Frame = {};
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) frame.comment = line.slice(1).trim();
        else {
          const [field, ...rest] = line.split(": ");
          frame[field as "id" | "event" | "data"] = rest.join(": ");
        }
      }
      return frame;
    });
  return { status: response.status, frames, contentType: response.headers.get("content-type") };
}

const sequencesOf = (frames: Frame[]) => frames.filter((f) => f.id).map((f) => Number(f.id));

describe("runs (with a worker)", () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ configFile: TESTING_CONFIG });
  });
  after(() => server.close());

  const newThread = async (tenant?: string) => (await server.request("POST", "/v1/threads", { tenant, body: {} })).body.thread_id as string;
  const joinRun = (runId: string, tenant?: string) => server.request("GET", `/v1/runs/${runId}/join?timeout=20`, { tenant });
  const createOn = (threadId: string, body: Record<string, unknown>, extra: { tenant?: string; headers?: Record<string, string> } = {}) =>
    server.request("POST", `/v1/threads/${threadId}/runs`, { body, ...extra });

  test("a thread run is accepted pending, executed, and joined succeeded with its output", async () => {
    const threadId = await newThread();
    const created = await createOn(threadId, { assistant_id: "echo", input: { message: "hi" }, metadata: { purpose: "test" } });
    assert.equal(created.status, 202);
    const run = created.body;
    assert.equal(run.status, "pending");
    assert.equal(run.thread_id, threadId);
    assert.deepEqual([run.attempt, run.started_at, run.finished_at, run.output, run.error], [0, null, null, null, null]);
    assert.deepEqual([run.durability, run.multitask_strategy, run.metadata], ["sync", "enqueue", { purpose: "test" }]);
    const joined = await joinRun(run.run_id);
    assert.equal(joined.status, 200);
    assert.equal(joined.body.status, "succeeded");
    assert.deepEqual(joined.body.output, { message: "hi", reply: "hi" });
    assert.equal(joined.body.attempt, 1);
    assert.ok(joined.body.started_at && joined.body.finished_at);
    assert.deepEqual((await server.request("GET", `/v1/runs/${run.run_id}`)).body, joined.body);
    const listed = await server.request("GET", `/v1/threads/${threadId}/runs`);
    assert.deepEqual(
      listed.body.map((r: { run_id: string }) => r.run_id),
      [run.run_id],
    );
    const thread = await server.request("GET", `/v1/threads/${threadId}`);
    assert.equal(thread.body.status, "idle");
    const state = await server.request("GET", `/v1/threads/${threadId}/state`);
    assert.equal(state.body.values.reply, "hi");
    assert.equal(state.body.metadata.graph_id, "echo", "checkpoints record the graph that wrote them");
  });

  test("the event log is ordered from 1 with no gaps: run_started, node events, values, run_succeeded", async () => {
    const { body: run } = await server.request("POST", "/v1/runs", { body: { assistant_id: "steps", input: { steps: 3 } } });
    await joinRun(run.run_id);
    const events = (await server.request("GET", `/v1/runs/${run.run_id}/events?limit=1000`)).body;
    assert.deepEqual(
      events.map((e: { sequence: number }) => e.sequence),
      events.map((_: unknown, i: number) => i + 1),
    );
    const kinds = events.map((e: { kind: string }) => e.kind);
    assert.equal(kinds[0], "run_started");
    assert.equal(kinds.at(-1), "run_succeeded");
    assert.equal(kinds.filter((k: string) => k === "node_started").length, 3);
    assert.equal(kinds.filter((k: string) => k === "node_completed").length, 3);
    assert.ok(kinds.includes("values") && kinds.includes("updates"));
    assert.deepEqual(events[0], {
      id: `${run.run_id}:1`,
      run_id: run.run_id,
      sequence: 1,
      kind: "run_started",
      data: events[0].data,
      created_at: events[0].created_at,
    });
    const page = (await server.request("GET", `/v1/runs/${run.run_id}/events?after=2&limit=2`)).body;
    assert.deepEqual(
      page.map((e: { sequence: number }) => e.sequence),
      [3, 4],
    );
    const skipped = (await server.request("GET", `/v1/runs/${run.run_id}/events?after=1&offset=2&limit=2`)).body;
    assert.deepEqual(
      skipped.map((e: { sequence: number }) => e.sequence),
      [4, 5],
      "offset skips entries after the cursor",
    );
  });

  test("the event list pages as every list does: limit defaults to 50, offset to 0", async () => {
    const { body: run } = await server.request("POST", "/v1/runs", {
      body: { assistant_id: "ticks", input: { count: 60, interval_ms: 0 } },
    });
    assert.equal((await joinRun(run.run_id)).body.status, "succeeded");
    const first = (await server.request("GET", `/v1/runs/${run.run_id}/events`)).body as { sequence: number }[];
    assert.equal(first.length, 50);
    assert.deepEqual(first[0]!.sequence, 1);
    const rest = (await server.request("GET", `/v1/runs/${run.run_id}/events?offset=50&limit=1000`)).body as { sequence: number }[];
    assert.equal(rest[0]!.sequence, 51);
    assert.ok(rest.length > 10, "60 ticks and the run's own events");
    const bad = await server.request("GET", `/v1/runs/${run.run_id}/events?offset=-1`);
    assert.equal(bad.status, 422);
  });

  test("config.recursion_limit bounds the run's supersteps (LangGraph Platform's field, and LangChain's recursionLimit)", async () => {
    const run = async (steps: number, config: Record<string, unknown>) => {
      const created = await server.request("POST", "/v1/runs", { body: { assistant_id: "steps", input: { steps }, config } });
      assert.equal(created.status, 202, JSON.stringify(created.body));
      return (await joinRun(created.body.run_id)).body;
    };
    const beyondDefault = await run(30, { recursion_limit: 100 });
    assert.equal(beyondDefault.status, "succeeded", JSON.stringify(beyondDefault.error));
    assert.equal(beyondDefault.output.count, 30);
    const lowered = await run(5, { recursion_limit: 2 });
    assert.equal(lowered.status, "failed");
    assert.match(lowered.error.message, /Recursion limit of 2/);
    assert.equal((await run(5, { recursionLimit: 2 })).status, "failed");
    const viaRoot = await server.request("POST", "/runs/wait", {
      body: { assistant_id: "steps", input: { steps: 30 }, config: { recursion_limit: 100 } },
    });
    assert.equal(viaRoot.body.count, 30, JSON.stringify(viaRoot.body));
    for (const bad of [0, 1.5, "10", 2 ** 31]) {
      const refused = await server.request("POST", "/v1/runs", { body: { assistant_id: "steps", config: { recursion_limit: bad } } });
      assertProblem(refused, 422, "validation_error");
      assert.match(refused.body.detail, /config\/recursion_limit must be an integer/);
    }
  });

  test("custom stream writes and chat-model tokens become custom and messages events", async () => {
    const { body: run } = await server.request("POST", "/v1/runs", { body: { assistant_id: "chat", input: { prompt: "hey" } } });
    const joined = await joinRun(run.run_id);
    assert.equal(joined.body.output.answer, "hello there friend");
    const events = (await server.request("GET", `/v1/runs/${run.run_id}/events?limit=1000`)).body;
    const custom = events.find((e: { kind: string }) => e.kind === "custom");
    assert.deepEqual(custom.data.data, { progress: "thinking", prompt: "hey" });
    const tokens = events.filter((e: { kind: string }) => e.kind === "messages");
    assert.ok(tokens.length > 1, "tokens stream one by one");
    assert.equal(tokens.map((e: { data: { message: { content: string } } }) => e.data.message.content).join(""), "hello there friend");
    assert.equal(tokens[0].data.node, "talk");
  });

  test("a stateless run has no thread and leaves no checkpoints behind", async () => {
    const created = await server.request("POST", "/v1/runs", { body: { assistant_id: "echo", input: { message: "solo" } } });
    assert.equal(created.body.thread_id, null);
    const joined = await joinRun(created.body.run_id);
    assert.deepEqual(joined.body.output, { message: "solo", reply: "solo" });
    const [row] = await server.database.db.query<{ n: number }>("select count(*)::int as n from checkpoints where thread_id = $1", [
      created.body.run_id,
    ]);
    assert.equal(row!.n, 0);
  });

  test("durability: sync and async checkpoint every step; exit checkpoints once, with the run's outcome", async () => {
    const checkpointsOf = async (threadId: string) =>
      (await server.request("GET", `/v1/threads/${threadId}/history?limit=100`)).body.length as number;
    const counts: Record<string, number> = {};
    for (const durability of ["sync", "async", "exit"]) {
      const threadId = await newThread();
      const joined = await joinRun(
        (await createOn(threadId, { assistant_id: "echo", input: { message: durability }, durability })).body.run_id,
      );
      assert.equal(joined.body.status, "succeeded");
      assert.equal((await server.request("GET", `/v1/threads/${threadId}/state`)).body.values.reply, durability);
      counts[durability] = await checkpointsOf(threadId);
    }
    assert.equal(counts.exit, 1, "exit writes only the final checkpoint");
    assert.ok(counts.sync! > 1, "sync writes a checkpoint per step");
    assert.equal(counts.async, counts.sync, "async writes the same checkpoints as sync");

    // The checkpoint an interrupt leaves with exit is committed with the pause, so a resume continues from it.
    const threadId = await newThread();
    const paused = await joinRun(
      (await createOn(threadId, { assistant_id: "approval", input: { request: "ship" }, durability: "exit" })).body.run_id,
    );
    assert.equal(paused.body.status, "paused");
    assert.equal((await server.request("GET", `/v1/threads/${threadId}/state`)).body.values.draft, "Plan for: ship");
    const resumed = await joinRun(
      (await createOn(threadId, { assistant_id: "approval", resume: { approved: true }, durability: "exit" })).body.run_id,
    );
    assert.equal(resumed.body.status, "succeeded");
    assert.equal(resumed.body.output.outcome, "done: Plan for: ship");

    const stateless = await joinRun(
      (await server.request("POST", "/v1/runs", { body: { assistant_id: "echo", input: { message: "gone" }, durability: "exit" } })).body
        .run_id,
    );
    assert.equal(stateless.body.output.reply, "gone");
    const [row] = await server.database.db.query<{ n: number }>("select count(*)::int as n from checkpoints where thread_id = $1", [
      stateless.body.run_id,
    ]);
    assert.equal(row!.n, 0);
  });

  test("context and config merge over the assistant's defaults", async () => {
    const loud = await joinRun(
      (await server.request("POST", "/v1/runs", { body: { assistant_id: "echo-loud", input: { message: "hi" } } })).body.run_id,
    );
    assert.equal(loud.body.output.reply, "hi!!!");
    assert.deepEqual(loud.body.context, { suffix: "!!!" });
    const quiet = await joinRun(
      (
        await server.request("POST", "/v1/runs", {
          body: { assistant_id: "echo-loud", input: { message: "hi" }, context: { suffix: "?" } },
        })
      ).body.run_id,
    );
    assert.equal(quiet.body.output.reply, "hi?");
  });

  test("an interrupt pauses the run with its interrupts; a run with resume continues the thread", async () => {
    const threadId = await newThread();
    const first = await joinRun((await createOn(threadId, { assistant_id: "approval", input: { request: "deploy" } })).body.run_id);
    assert.equal(first.body.status, "paused");
    assert.equal(first.body.output.__interrupt__[0].value.question, "Approve this plan?");
    assert.equal(first.body.output.draft, "Plan for: deploy");
    assert.equal((await server.request("GET", `/v1/threads/${threadId}`)).body.status, "paused");
    const second = await joinRun((await createOn(threadId, { assistant_id: "approval", resume: { approved: true } })).body.run_id);
    assert.equal(second.body.status, "succeeded");
    assert.equal(second.body.output.outcome, "done: Plan for: deploy");
  });

  test("failures end failed with the spec's error object", async () => {
    const plain = await joinRun(
      (await server.request("POST", "/v1/runs", { body: { assistant_id: "failing", input: { mode: "plain" } } })).body.run_id,
    );
    assert.equal(plain.body.status, "failed");
    assert.deepEqual(plain.body.error, { code: "run_failed", message: "node exploded", retryable: false });
    const invalid = await joinRun(
      (await server.request("POST", "/v1/runs", { body: { assistant_id: "failing", input: { mode: "ok" } } })).body.run_id,
    );
    assert.equal(invalid.body.status, "failed");
    assert.equal(invalid.body.error.code, "invalid_update");
    const events = (await server.request("GET", `/v1/runs/${plain.body.run_id}/events`)).body;
    assert.equal(events.at(-1).kind, "run_failed");
    assert.deepEqual(events.at(-1).data.error, plain.body.error);
  });

  test("enqueue: runs on one thread execute one at a time, in creation order", async () => {
    const threadId = await newThread();
    const file = join(mkdtempSync(join(tmpdir(), "rudder-order-")), "effects.log");
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push(
        (await createOn(threadId, { assistant_id: "steps", input: { steps: 1, delayMs: 30, sideEffectFile: file, label: `r${i}` } })).body
          .run_id,
      );
    }
    const runs = await Promise.all(ids.map(async (id) => (await joinRun(id)).body));
    assert.ok(runs.every((r) => r.status === "succeeded"));
    const labels = readFileSync(file, "utf8")
      .trim()
      .split("\n")
      .map((line) => line.split(" ")[1]);
    assert.deepEqual(labels, ["r0", "r1", "r2", "r3", "r4"]);
    for (let i = 1; i < runs.length; i++) {
      assert.ok(runs[i - 1].finished_at <= runs[i].started_at, `run ${i} started after run ${i - 1} finished`);
    }
  });

  test("reject: 409 concurrent_run while the thread has an active run", async () => {
    const threadId = await newThread();
    const busy = await createOn(threadId, { assistant_id: "steps", input: { steps: 1, delayMs: 400 } });
    const refused = await createOn(threadId, { assistant_id: "echo", input: { message: "x" }, multitask_strategy: "reject" });
    assert.deepEqual([refused.status, refused.body.code], [409, "concurrent_run"]);
    await joinRun(busy.body.run_id);
    const accepted = await createOn(threadId, { assistant_id: "echo", input: { message: "x" }, multitask_strategy: "reject" });
    assert.equal(accepted.status, 202);
    assert.equal((await joinRun(accepted.body.run_id)).body.status, "succeeded");
  });

  test("creates racing settles on one thread, every strategy at once: no error, every run ends, the last one succeeds", async () => {
    // cancel_previous and reject lock the thread's runs and then the thread, the order settles and
    // claims use; a create taking them the other way round deadlocks against a settle.
    const strategies = ["enqueue", "cancel_previous", "reject"] as const;
    for (let round = 0; round < 6; round++) {
      const threadId = await newThread();
      const created = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          createOn(threadId, { assistant_id: "echo", input: { message: `m${i}` }, multitask_strategy: strategies[i % 3] }),
        ),
      );
      for (const response of created)
        assert.ok(
          response.status === 202 || (response.status === 409 && response.body.code === "concurrent_run"),
          JSON.stringify(response.body),
        );
      const accepted = created.filter((response) => response.status === 202).map((response) => response.body.run_id as string);
      const ended = await Promise.all(accepted.map((runId) => joinRun(runId)));
      for (const joined of ended) assert.ok(["succeeded", "cancelled"].includes(joined.body.status), JSON.stringify(joined.body));
      const last = await createOn(threadId, { assistant_id: "echo", input: { message: "last" }, multitask_strategy: "cancel_previous" });
      assert.equal((await joinRun(last.body.run_id)).body.status, "succeeded");
    }
  });

  test("cancel_previous: the running run is stopped, the queued one cancelled, the new one runs", async () => {
    const threadId = await newThread();
    const running = (await createOn(threadId, { assistant_id: "steps", input: { steps: 20, delayMs: 200 } })).body.run_id;
    for (let i = 0; i < 50 && (await server.request("GET", `/v1/runs/${running}`)).body.status !== "running"; i++)
      await new Promise((r) => setTimeout(r, 50));
    const queued = (await createOn(threadId, { assistant_id: "echo", input: { message: "queued" } })).body.run_id;
    const latest = (await createOn(threadId, { assistant_id: "echo", input: { message: "latest" }, multitask_strategy: "cancel_previous" }))
      .body.run_id;
    const [a, b, c] = await Promise.all([joinRun(running), joinRun(queued), joinRun(latest)]);
    assert.equal(a.body.status, "cancelled");
    assert.equal(a.body.error.code, "run_cancelled");
    assert.equal(b.body.status, "cancelled");
    assert.equal(b.body.started_at, null, "the queued run never started");
    assert.equal(c.body.status, "succeeded");
    assert.ok(a.body.finished_at <= c.body.started_at);
  });

  test("SSE: frames as the spec says, resumable with Last-Event-ID, closed at the end", async () => {
    const { body: run } = await server.request("POST", "/v1/runs", { body: { assistant_id: "steps", input: { steps: 4, delayMs: 20 } } });
    const full = await readStream(server, run.run_id);
    assert.equal(full.status, 200);
    assert.match(full.contentType ?? "", /^text\/event-stream/);
    const frames = full.frames.filter((f) => f.id);
    const sequences = sequencesOf(frames);
    assert.deepEqual(
      sequences,
      sequences.map((_, i) => i + 1),
      "from 1, no gaps, no repeats",
    );
    for (const frame of frames) {
      const data = JSON.parse(frame.data!);
      assert.deepEqual(Object.keys(data).sort(), ["created_at", "data", "id", "kind", "run_id", "sequence"]);
      assert.equal(data.sequence, Number(frame.id));
      assert.equal(data.kind, frame.event);
      assert.equal(data.run_id, run.run_id);
    }
    assert.equal(frames.at(-1)!.event, "run_succeeded");
    const resumed = await readStream(server, run.run_id, { "last-event-id": "5" });
    assert.deepEqual(sequencesOf(resumed.frames), sequences.slice(5));
    const done = await readStream(server, run.run_id, { "last-event-id": String(sequences.length) });
    assert.deepEqual(sequencesOf(done.frames), [], "a finished run's stream closes at once");
  });

  test("SSE closes when the run pauses", async () => {
    const { body: run } = await createOn(await newThread(), { assistant_id: "approval", input: { request: "r" } });
    const stream = await readStream(server, run.run_id);
    assert.equal(stream.frames.filter((f) => f.id).at(-1)!.event, "run_paused");
  });

  test("tenant isolation and roles for runs", async () => {
    const threadId = await newThread("runs-a");
    const { body: run } = await createOn(threadId, { assistant_id: "echo", input: { message: "mine" } }, { tenant: "runs-a" });
    await joinRun(run.run_id, "runs-a");
    for (const [method, path] of [
      ["GET", `/v1/runs/${run.run_id}`],
      ["GET", `/v1/runs/${run.run_id}/join?timeout=1`],
      ["GET", `/v1/runs/${run.run_id}/events`],
      ["GET", `/v1/runs/${run.run_id}/stream`],
      ["POST", `/v1/runs/${run.run_id}/cancel`],
      ["GET", `/v1/threads/${threadId}/runs`],
    ] as const) {
      const answer = await server.request(method, path, { tenant: "runs-b" });
      assert.equal(answer.status, 404, `${method} ${path}`);
    }
    const onOthersThread = await createOn(threadId, { assistant_id: "echo", input: {} }, { tenant: "runs-b" });
    assert.equal(onOthersThread.status, 404);
    const viewer = await server.request("POST", "/v1/runs", { tenant: "runs-a", roles: ["viewer"], body: { assistant_id: "echo" } });
    assert.equal(viewer.status, 403);
    assert.equal((await server.request("GET", `/v1/runs/${run.run_id}`, { tenant: "runs-a", roles: ["viewer"] })).status, 200);
  });
});

describe("runs (queue only, no worker)", () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ configFile: TESTING_CONFIG, worker: false, config: { queuedRunQuota: 3 } });
  });
  after(() => server.close());

  const createStateless = (body: Record<string, unknown>, extra: { tenant?: string; headers?: Record<string, string> } = {}) =>
    server.request("POST", "/v1/runs", { body, ...extra });

  test("bad requests are 422: unknown assistant or field, bad enums, non-positive budgets, wrong input", async () => {
    const bodies = [
      { assistant_id: "nope" },
      { assistant_id: "echo", colour: "red" },
      { assistant_id: "echo", durability: "eventually" },
      { assistant_id: "echo", multitask_strategy: "yolo" },
      { assistant_id: "echo", max_tokens: 0 },
      { assistant_id: "echo", max_cost: -1 },
      { assistant_id: "echo", run_timeout: 0 },
      { assistant_id: "echo", input: { unknown_channel: 1 } },
      { assistant_id: "echo", input: [1, 2] },
      { assistant_id: "echo", metadata: "x" },
      {},
    ];
    for (const body of bodies) {
      const answer = await createStateless(body, { tenant: "bad" });
      assert.deepEqual([answer.status, answer.body.code], [422, "validation_error"], JSON.stringify(body));
    }
    const missingThread = await server.request("POST", "/v1/threads/00000000-0000-4000-8000-000000000000/runs", {
      tenant: "bad",
      body: { assistant_id: "echo" },
    });
    assert.equal(missingThread.status, 404);
  });

  test("Idempotency-Key: same request replays the run, a different one conflicts, other tenants are independent", async () => {
    const key = { "idempotency-key": "order-42" };
    const body = { assistant_id: "echo", input: { message: "once" } };
    const first = await createStateless(body, { tenant: "idem", headers: key });
    const again = await createStateless({ input: { message: "once" }, assistant_id: "echo" }, { tenant: "idem", headers: key });
    assert.deepEqual([first.status, again.status], [202, 202]);
    assert.equal(again.body.run_id, first.body.run_id);
    const different = await createStateless({ assistant_id: "echo", input: { message: "twice" } }, { tenant: "idem", headers: key });
    assert.deepEqual([different.status, different.body.code], [409, "idempotency_conflict"]);
    const otherTenant = await createStateless(body, { tenant: "idem-2", headers: key });
    assert.equal(otherTenant.status, 202);
    assert.notEqual(otherTenant.body.run_id, first.body.run_id);
    const tooLong = await createStateless(body, { tenant: "idem", headers: { "idempotency-key": "k".repeat(256) } });
    assert.equal(tooLong.status, 422);
    const [row] = await server.database.db.query<{ n: number }>("select count(*)::int as n from runs where idempotency_key = 'order-42'");
    assert.equal(row!.n, 2);
  });

  test("Idempotency-Key: a default spelled out (or left out) is the same request and replays; a value other than the default conflicts", async () => {
    const tenant = "idem-defaults";
    const keyed = (key: string) => ({ tenant, headers: { "idempotency-key": key } });
    const bare = { assistant_id: "echo", input: { message: "i" } };
    const defaults = SPELLED_OUT_DEFAULTS;
    const first = await createStateless(bare, keyed("defaults"));
    assert.equal(first.status, 202);
    const replays = [
      { ...bare, durability: "sync" },
      { ...bare, multitask_strategy: "enqueue", context: {}, config: {} },
      { ...defaults, input: { message: "i" }, assistant_id: "echo" },
    ];
    for (const body of replays) {
      const again = await createStateless(body, keyed("defaults"));
      assert.deepEqual([again.status, again.body.run_id], [202, first.body.run_id], JSON.stringify(body));
    }
    const different = await createStateless({ ...bare, durability: "async" }, keyed("defaults"));
    assert.deepEqual([different.status, different.body.code], [409, "idempotency_conflict"]);

    // The other way round: the first request spells the defaults, the retry leaves them out; `input: null` is no input.
    const spelled = await createStateless({ assistant_id: "echo", input: null, ...defaults }, keyed("spelled"));
    assert.equal(spelled.status, 202);
    const retried = await createStateless({ assistant_id: "echo" }, keyed("spelled"));
    assert.deepEqual([retried.status, retried.body.run_id], [202, spelled.body.run_id]);

    // On a thread, a create decided under the thread's lock ("reject") replays before the strategy
    // is applied: its own pending run does not make the retry a concurrent_run.
    const threadId = (await server.request("POST", "/v1/threads", { tenant, body: {} })).body.thread_id as string;
    const onThread = { assistant_id: "echo", input: { message: "t" }, multitask_strategy: "reject" };
    const created = await server.request("POST", `/v1/threads/${threadId}/runs`, { body: onThread, ...keyed("on-thread") });
    assert.equal(created.status, 202);
    const again = await server.request("POST", `/v1/threads/${threadId}/runs`, {
      body: { ...onThread, durability: "sync", run_timeout: null, metadata: {} },
      ...keyed("on-thread"),
    });
    assert.deepEqual([again.status, again.body.run_id], [202, created.body.run_id], JSON.stringify(again.body));
    const otherTimeout = await server.request("POST", `/v1/threads/${threadId}/runs`, {
      body: { ...onThread, run_timeout: 60 },
      ...keyed("on-thread"),
    });
    assert.deepEqual([otherTimeout.status, otherTimeout.body.code], [409, "idempotency_conflict"]);

    const [row] = await server.database.db.query<{ n: number }>("select count(*)::int as n from runs where tenant_id = $1", [tenant]);
    assert.equal(row!.n, 3, "one run per key");
  });

  test("Idempotency-Key under concurrency: same-key creates at once make one run; the rest replay it", async () => {
    for (let round = 0; round < 5; round++) {
      const headers = { "idempotency-key": `burst-${round}` };
      const body = { assistant_id: "echo", input: { message: `burst ${round}` } };
      // One tenant per round, so the queue-only server's quota of 3 is never what answers.
      const answers = await Promise.all(Array.from({ length: 8 }, () => createStateless(body, { tenant: `burst-${round}`, headers })));
      assert.deepEqual(
        answers.map((answer) => answer.status),
        Array(8).fill(202),
        JSON.stringify(answers.map((answer) => answer.body)),
      );
      assert.equal(new Set(answers.map((answer) => answer.body.run_id)).size, 1);
    }
  });

  test("Idempotency-Key under concurrency on a thread: same-key creates that decide under its lock neither cancel nor refuse their own run", async () => {
    for (const strategy of ["cancel_previous", "reject"]) {
      for (let round = 0; round < 5; round++) {
        const tenant = `burst-${strategy}-${round}`;
        const threadId = (await server.request("POST", "/v1/threads", { body: {}, tenant })).body.thread_id as string;
        const headers = { "idempotency-key": `thread-burst-${round}` };
        const body = { assistant_id: "echo", input: { message: `burst ${round}` }, multitask_strategy: strategy };
        const answers = await Promise.all(
          Array.from({ length: 8 }, () => server.request("POST", `/v1/threads/${threadId}/runs`, { body, tenant, headers })),
        );
        const shown = JSON.stringify(answers.map((answer) => answer.body));
        assert.deepEqual(
          answers.map((answer) => answer.status),
          Array(8).fill(202),
          `${strategy}: ${shown}`,
        );
        const runIds = new Set(answers.map((answer) => answer.body.run_id));
        assert.equal(runIds.size, 1, shown);
        const run = await server.request("GET", `/v1/runs/${[...runIds][0] as string}`, { tenant });
        assert.equal(run.body.status, "pending", `${strategy}: the key's run was not cancelled by its own copies`);
      }
    }
  });

  test("the queued-run quota is per tenant: 429 quota_exceeded with Retry-After", async () => {
    for (let i = 0; i < 3; i++) assert.equal((await createStateless({ assistant_id: "echo" }, { tenant: "quota" })).status, 202);
    const over = await createStateless({ assistant_id: "echo" }, { tenant: "quota" });
    assert.deepEqual([over.status, over.body.code, over.body.retryable], [429, "quota_exceeded", true]);
    assert.ok(Number(over.headers.get("retry-after")) > 0);
    assert.equal((await createStateless({ assistant_id: "echo" }, { tenant: "quota-other" })).status, 202);
  });

  test("creates arriving at once hold the quota exactly: of ten, three are accepted and seven refused", async () => {
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => createStateless({ assistant_id: "echo" }, { tenant: "quota-burst" })),
    );
    assert.deepEqual(
      answers.map((answer) => answer.status).sort(),
      [...Array(3).fill(202), ...Array(7).fill(429)],
      JSON.stringify(answers.map((answer) => answer.body)),
    );
    const [row] = await server.database.db.query<{ n: number }>("select count(*)::int as n from runs where tenant_id = 'quota-burst'");
    assert.equal(row!.n, 3);
  });

  test("join: timeout must be in (0, 300]; a run still pending gives 408 join_timeout", async () => {
    const { body: run } = await createStateless({ assistant_id: "echo" }, { tenant: "join" });
    for (const timeout of ["0", "-1", "301", "abc"]) {
      const answer = await server.request("GET", `/v1/runs/${run.run_id}/join?timeout=${timeout}`, { tenant: "join" });
      assert.deepEqual([answer.status, answer.body.code], [422, "validation_error"], timeout);
    }
    const started = Date.now();
    const timedOut = await server.request("GET", `/v1/runs/${run.run_id}/join?timeout=0.3`, { tenant: "join" });
    assert.deepEqual([timedOut.status, timedOut.body.code, timedOut.body.retryable], [408, "join_timeout", true]);
    assert.ok(Date.now() - started >= 250, "it waited");
    // Any positive number of seconds up to 300, fractions of a millisecond too (a timer takes whole ones).
    for (const timeout of ["0.0005", "1.0001", "0.0015"]) {
      const answer = await server.request("GET", `/v1/runs/${run.run_id}/join?timeout=${timeout}`, { tenant: "join" });
      assert.deepEqual([answer.status, answer.body.code], [408, "join_timeout"], timeout);
    }
  });

  test("cancel: a pending run ends cancelled at once and never starts; a terminal run is 409", async () => {
    const { body: run } = await createStateless({ assistant_id: "echo" }, { tenant: "cancel" });
    const cancelled = await server.request("POST", `/v1/runs/${run.run_id}/cancel`, { tenant: "cancel" });
    assert.equal(cancelled.status, 200);
    assert.equal(cancelled.body.status, "cancelled");
    assert.ok(cancelled.body.finished_at);
    assert.equal(cancelled.body.started_at, null);
    assert.equal(cancelled.body.error.code, "run_cancelled");
    const again = await server.request("POST", `/v1/runs/${run.run_id}/cancel`, { tenant: "cancel" });
    assert.deepEqual([again.status, again.body.code], [409, "conflict"]);
    const joined = await server.request("GET", `/v1/runs/${run.run_id}/join?timeout=1`, { tenant: "cancel" });
    assert.equal(joined.body.status, "cancelled");
  });

  test("SSE on a quiet run sends heartbeats, then closes when the run ends", async () => {
    const { body: run } = await createStateless({ assistant_id: "echo" }, { tenant: "t1" });
    const reading = readStream(server, run.run_id);
    await new Promise((resolve) => setTimeout(resolve, 700));
    await server.request("POST", `/v1/runs/${run.run_id}/cancel`);
    const { frames } = await reading;
    assert.ok(frames.filter((f) => f.comment === "heartbeat").length >= 2, "heartbeats while idle");
    assert.equal(frames.filter((f) => f.id).at(-1)!.event, "run_cancelled");
  });

  test("a thread cannot be deleted while it has an active run", async () => {
    const threadId = (await server.request("POST", "/v1/threads", { tenant: "del", body: {} })).body.thread_id;
    const { body: run } = await server.request("POST", `/v1/threads/${threadId}/runs`, { tenant: "del", body: { assistant_id: "echo" } });
    const refused = await server.request("DELETE", `/v1/threads/${threadId}`, { tenant: "del" });
    assert.deepEqual([refused.status, refused.body.code], [409, "conflict"]);
    await server.request("POST", `/v1/runs/${run.run_id}/cancel`, { tenant: "del" });
    assert.equal((await server.request("DELETE", `/v1/threads/${threadId}`, { tenant: "del" })).status, 204);
    assert.equal((await server.request("GET", `/v1/runs/${run.run_id}`, { tenant: "del" })).status, 404, "its runs went with it");
  });
});
