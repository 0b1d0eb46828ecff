import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { RudderClient, RudderError } from "../src/index.ts";
import { backoffMs, retryAfterSeconds, shouldRetry, shouldRetryUnsafeWrite, DEFAULT_RETRY } from "../src/retry.ts";
import { startTestServer, type TestServer } from "../../server/test/support/server.ts";

const run = promisify(execFile);
const QUICKSTART = fileURLToPath(new URL("../../../examples/client/quickstart.ts", import.meta.url));
const TESTING_CONFIG = fileURLToPath(new URL("../../server/test/fixtures/testing.rudder.json", import.meta.url));
const FAST_RETRY = { attempts: 5, baseMs: 10, capMs: 200 };

/** What the proxy does with one request: pass it on (optionally cutting the answer), or answer itself. */
type Fault =
  | { kind: "pass" }
  | { kind: "answer"; status: number; headers?: Record<string, string>; body?: unknown }
  /** Forwards, lets the server do the work, then resets the client's connection before any answer. */
  | { kind: "reset_after_forward" }
  /** Forwards, lets the server do the work, then answers this status instead (a proxy that lost the answer). */
  | { kind: "answer_after_forward"; status: number }
  /** Forwards, then cuts the answer after this many SSE frames. */
  | { kind: "cut_stream"; frames: number };

/** A local HTTP proxy in front of the real server that injects the faults `plan` picks. */
async function faultProxy(
  target: string,
  plan: (req: IncomingMessage, index: number) => Fault,
): Promise<{
  url: string;
  seen: { method: string; path: string; headers: IncomingMessage["headers"]; body: string }[];
  close(): Promise<void>;
}> {
  const upstream = new URL(target);
  const seen: { method: string; path: string; headers: IncomingMessage["headers"]; body: string }[] = [];
  const server: Server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const fault = plan(req, seen.length);
    seen.push({ method: req.method!, path: req.url!, headers: req.headers, body: body.toString() });
    if (fault.kind === "answer") {
      res.writeHead(fault.status, { "content-type": "application/problem+json", ...fault.headers });
      res.end(JSON.stringify(fault.body ?? {}));
      return;
    }
    const forwarded = httpRequest(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...req.headers, host: upstream.host } },
      (answer) => {
        if (fault.kind === "reset_after_forward") {
          answer.resume();
          answer.on("end", () => req.socket.destroy());
          return;
        }
        if (fault.kind === "answer_after_forward") {
          answer.resume();
          answer.on("end", () => {
            res.writeHead(fault.status, { "content-type": "text/html" });
            res.end("<html>upstream answer lost</html>");
          });
          return;
        }
        res.writeHead(answer.statusCode!, answer.headers);
        if (fault.kind === "cut_stream") {
          // Forward whole frames only, then reset the connection once `frames` of them reached the client.
          let pending = "";
          let sent = 0;
          answer.setEncoding("utf8");
          answer.on("data", (chunk: string) => {
            pending += chunk;
            for (let end = pending.indexOf("\n\n"); end !== -1 && sent < fault.frames; end = pending.indexOf("\n\n")) {
              const frame = pending.slice(0, end + 2);
              pending = pending.slice(end + 2);
              sent++;
              res.write(frame, () => {
                if (sent >= fault.frames) {
                  answer.destroy();
                  req.socket.destroy();
                }
              });
            }
          });
          answer.on("end", () => res.end());
          return;
        }
        answer.pipe(res);
      },
    );
    forwarded.on("error", () => res.destroy());
    forwarded.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe("retry rules (spec section 7), as pure functions", () => {
  test("retried: retryable problems, network failures, 429, temporary 5xx; never idempotency_conflict", () => {
    assert.equal(shouldRetry(new RudderError({ code: "quota_exceeded", retryable: true }, 429)), true);
    assert.equal(shouldRetry(new RudderError({ code: "rate_limited" }, 429)), true);
    assert.equal(shouldRetry(new RudderError({}, 502)), true);
    assert.equal(shouldRetry(RudderError.network(new Error("ECONNRESET"))), true);
    assert.equal(shouldRetry(new RudderError({ code: "idempotency_conflict", retryable: false }, 409)), false);
    assert.equal(shouldRetry(new RudderError({ code: "validation_error", retryable: false }, 422)), false);
    assert.equal(shouldRetry(new RudderError({ code: "some_new_code" }, 400)), false, "unknown codes are handled safely");
    assert.equal(shouldRetry(new Error("not ours")), false);
  });
  test("a write that is not safe to repeat: retried only when the answer says it was not carried out", () => {
    for (const status of [429, 503]) assert.equal(shouldRetryUnsafeWrite(new RudderError({}, status)), true, String(status));
    assert.equal(shouldRetryUnsafeWrite(new RudderError({ code: "request_timeout", retryable: true }, 408)), true);
    assert.equal(shouldRetryUnsafeWrite(new RudderError({ code: "unavailable", retryable: true }, 503)), true);
    // The write may have happened: a network failure, a 500 (even one marked retryable), a proxy's 502 or 504.
    assert.equal(shouldRetryUnsafeWrite(RudderError.network(new Error("ECONNRESET"))), false);
    for (const status of [500, 502, 504]) assert.equal(shouldRetryUnsafeWrite(new RudderError({}, status)), false, String(status));
    assert.equal(shouldRetryUnsafeWrite(new RudderError({ code: "internal", retryable: true }, 500)), false);
    assert.equal(shouldRetryUnsafeWrite(new RudderError({ code: "validation_error", retryable: false }, 422)), false);
    assert.equal(shouldRetryUnsafeWrite(new Error("not ours")), false);
  });
  test("Retry-After: delay-seconds or an HTTP-date", () => {
    const now = Date.parse("2026-01-01T00:00:00.000Z");
    assert.equal(retryAfterSeconds("2", now), 2);
    assert.equal(retryAfterSeconds("0", now), 0);
    assert.equal(retryAfterSeconds(new Date(now + 3000).toUTCString(), now), 3);
    assert.equal(retryAfterSeconds("Thu, 01 Jan 2026 00:00:05 GMT", now), 5);
    assert.equal(retryAfterSeconds("Wed, 31 Dec 2025 23:59:00 GMT", now), 0, "a past date: at once");
    for (const unreadable of [null, "", "soon", "-1"]) assert.equal(retryAfterSeconds(unreadable, now), undefined, String(unreadable));
  });
  test("backoff is bounded exponential with jitter; Retry-After wins (capped)", () => {
    const options = { ...DEFAULT_RETRY, baseMs: 100, capMs: 1000 };
    assert.deepEqual(
      [1, 2, 3, 4, 5].map((attempt) => backoffMs(new Error("x"), attempt, options, () => 1)),
      [100, 200, 400, 800, 1000],
    );
    assert.equal(
      backoffMs(new Error("x"), 3, options, () => 0),
      0,
    );
    assert.equal(backoffMs(new RudderError({}, 429, { retryAfterSeconds: 0.3 }), 1, options), 300);
    assert.equal(backoffMs(new RudderError({}, 429, { retryAfterSeconds: 60 }), 1, options), 1000);
  });
});

describe("@rudder/client against a real server", () => {
  let server: TestServer;
  let client: RudderClient;
  before(async () => {
    server = await startTestServer({ configFile: TESTING_CONFIG });
    client = new RudderClient({ baseUrl: server.url, token: () => server.token(), retry: FAST_RETRY });
  });
  after(() => server.close());

  test("threads: create, get, list, update, state, history, fork, delete", async () => {
    const thread = await client.threads.create({ metadata: { user: "ada" } });
    assert.equal((await client.threads.get(thread.thread_id)).metadata.user, "ada");
    assert.ok((await client.threads.list({ metadata: { user: "ada" } })).some((t) => t.thread_id === thread.thread_id));
    assert.deepEqual((await client.threads.update(thread.thread_id, { metadata: { user: "grace" } })).metadata, { user: "grace" });
    const run = await client.runs.createAndWait({ thread_id: thread.thread_id, assistant_id: "echo", input: { message: "hi" } });
    assert.equal(run.status, "succeeded");
    const state = await client.threads.getState(thread.thread_id);
    assert.ok(state.values);
    const history = await client.threads.getHistory(thread.thread_id);
    assert.ok(history.length >= 2, "the input's checkpoint and the run's");
    const [newest] = await client.threads.getHistory(thread.thread_id, { limit: 1 });
    const older = await client.threads.getHistory(thread.thread_id, { before: newest!.checkpoint!.checkpoint_id });
    assert.deepEqual(
      older.map((entry) => entry.checkpoint?.checkpoint_id),
      history.slice(1).map((entry) => entry.checkpoint?.checkpoint_id),
    );
    assert.ok((await client.threads.updateState(thread.thread_id, {})).configurable);
    await client.threads.delete(thread.thread_id);
    await assert.rejects(
      client.threads.get(thread.thread_id),
      (error: unknown) => error instanceof RudderError && error.code === "not_found" && error.status === 404,
    );
  });

  test("assistants: create, get, list, update, delete", async () => {
    const created = await client.assistants.create({ graph_id: "echo", name: "mine" });
    assert.equal((await client.assistants.get(created.assistant_id)).name, "mine");
    assert.ok((await client.assistants.list()).some((a) => a.assistant_id === created.assistant_id));
    assert.equal((await client.assistants.update(created.assistant_id, { name: "renamed" })).name, "renamed");
    await client.assistants.delete(created.assistant_id);
    await assert.rejects(client.assistants.get(created.assistant_id), RudderError);
  });

  test("runs: create, get, list, join, wait, cancel, resume, redrive, steer, events, stream", async () => {
    const thread = await client.threads.create();
    const paused = await client.runs.createAndWait({ thread_id: thread.thread_id, assistant_id: "approval", input: { request: "deploy" } });
    assert.equal(paused.status, "paused");
    const resumed = await client.runs.resume(paused.run_id, { resume: { approved: true } });
    assert.equal((await client.runs.wait(resumed.run_id)).status, "succeeded");
    assert.deepEqual(
      (await client.runs.list({ thread_id: thread.thread_id })).map((r) => r.run_id).sort(),
      [paused.run_id, resumed.run_id].sort(),
    );

    const failed = await client.runs.createAndWait({ assistant_id: "failing", input: { mode: "plain" } });
    assert.equal(failed.status, "failed");
    const redriven = await client.runs.redrive(failed.run_id);
    assert.equal(redriven.run_id, failed.run_id);
    assert.equal((await client.runs.wait(failed.run_id)).status, "failed");

    const slow = await client.runs.create({ assistant_id: "steps", input: { steps: 1, delayMs: 30_000 } });
    await assert.rejects(
      client.runs.join(slow.run_id, { timeout: 0.2 }),
      (error: unknown) => error instanceof RudderError && error.code === "join_timeout",
    );
    const accepted = await client.runs.steer(slow.run_id, { kind: "note", payload: { text: "hi" } });
    assert.equal(accepted.status, "pending");
    await client.runs.cancel(slow.run_id);
    assert.equal((await client.runs.wait(slow.run_id)).status, "cancelled");

    const streamed: string[] = [];
    for await (const event of client.runs.stream(slow.run_id)) streamed.push(event.event);
    const listed = (await client.runs.events(slow.run_id)).map((event) => event.kind);
    assert.deepEqual(streamed, listed);
    assert.equal(streamed.at(-1), "run_cancelled");
  });

  test("schedules: create, get, list, update, delete; runs.list filters the tenant's runs", async () => {
    const schedule = await client.schedules.create({
      assistant_id: "echo",
      cron: "0 9 * * 1",
      timezone: "Europe/Paris",
      input: { message: "monday" },
      metadata: { team: "ops" },
    });
    assert.deepEqual([schedule.cron, schedule.timezone, schedule.enabled], ["0 9 * * 1", "Europe/Paris", true]);
    assert.ok(schedule.next_run_at && new Date(schedule.next_run_at) > new Date());
    assert.equal((await client.schedules.get(schedule.schedule_id)).metadata.team, "ops");
    assert.ok((await client.schedules.list({ limit: 100 })).some((s) => s.schedule_id === schedule.schedule_id));
    const paused = await client.schedules.update(schedule.schedule_id, { enabled: false });
    assert.deepEqual([paused.enabled, paused.next_run_at], [false, null]);
    await client.schedules.delete(schedule.schedule_id);
    await assert.rejects(
      client.schedules.get(schedule.schedule_id),
      (error: unknown) => error instanceof RudderError && error.code === "not_found",
    );
    await assert.rejects(
      client.schedules.create({ assistant_id: "echo", cron: "not a cron" }),
      (error: unknown) => error instanceof RudderError && error.status === 422,
    );

    const tag = globalThis.crypto.randomUUID();
    const tagged = await client.runs.createAndWait({ assistant_id: "echo", input: { message: "x" }, metadata: { tag } });
    assert.deepEqual(
      (await client.runs.list({ metadata: { tag } })).map((r) => r.run_id),
      [tagged.run_id],
    );
    assert.ok(
      (await client.runs.list({ status: "succeeded", assistant_id: "echo", limit: 5 })).every(
        (r) => r.status === "succeeded" && r.assistant_id === "echo",
      ),
    );
  });

  test("store: batch put, get, search, list_namespaces, delete; search over GET; tenant-scoped", async () => {
    const namespace = ["users", globalThis.crypto.randomUUID()];
    const written = await client.store.batch([
      { kind: "put", namespace, key: "prefs", value: { theme: "dark", size: 3 } },
      { kind: "put", namespace, key: "notes", value: { text: "likes tea", size: 1 } },
      { kind: "get", namespace, key: "prefs" },
    ]);
    assert.equal(written.results.length, 3);
    assert.deepEqual(written.results.slice(0, 2), [null, null]);
    assert.deepEqual((written.results[2] as { value: unknown }).value, { theme: "dark", size: 3 });
    const hits = await client.store.search({ namespace, filter: { size: { $gt: 2 } } });
    assert.deepEqual(
      hits.map((hit) => hit.key),
      ["prefs"],
    );
    const { results } = await client.store.batch([
      { kind: "list_namespaces", prefix: namespace },
      { kind: "delete", namespace, key: "prefs" },
      { kind: "get", namespace, key: "prefs" },
    ]);
    assert.deepEqual(results, [[namespace], null, null]);
    const other = new RudderClient({ baseUrl: server.url, token: () => server.token("another-tenant"), retry: FAST_RETRY });
    assert.deepEqual(await other.store.search({ namespace }), [], "another tenant sees nothing");
    // A segment is checked as it is, not joined into a path: ["a/b"] is not ["a","b"], nor [""] the whole store.
    for (const bad of [[namespace.join("/")], [""]]) {
      await assert.rejects(
        client.store.search({ namespace: bad }),
        (error: unknown) => error instanceof RudderError && error.code === "validation_error",
        JSON.stringify(bad),
      );
    }
    assert.equal((await client.store.search()).length > 0, true, "no namespace: the whole store");
    await assert.rejects(
      client.store.batch([{ kind: "put", namespace: [], key: "k", value: {} }]),
      (error: unknown) => error instanceof RudderError && error.status === 422,
    );
  });

  test("the quick start example (examples/client/quickstart.ts) runs as written", async () => {
    const { stdout } = await run(process.execPath, ["--import", "tsx", QUICKSTART], {
      env: { ...process.env, RUDDER_URL: server.url, RUDDER_TOKEN: await server.token() },
    });
    const lines = stdout.trim().split("\n");
    assert.equal(lines[0], "event 1: run_started");
    assert.match(lines.at(-2) ?? "", /^event \d+: run_succeeded$/);
    const [status, output] = (lines.at(-1) ?? "").split(": ");
    assert.deepEqual([status, JSON.parse(output ?? "null")], ["run succeeded", { message: "hello", reply: "hello" }]);
  });

  test("problems become RudderError with code, status, title, detail, retryable, requestId", async () => {
    const error = await client.runs.get("00000000-0000-4000-8000-000000000000").catch((e: unknown) => e);
    assert.ok(error instanceof RudderError);
    assert.deepEqual([error.code, error.status, error.retryable], ["not_found", 404, false]);
    assert.ok(error.title && error.detail && error.requestId);
  });
});

describe("@rudder/client through a fault-injecting proxy", () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ configFile: TESTING_CONFIG });
  });
  after(() => server.close());

  async function through(plan: (req: IncomingMessage, index: number) => Fault) {
    const proxy = await faultProxy(server.url, plan);
    return { proxy, client: new RudderClient({ baseUrl: proxy.url, token: () => server.token(), retry: FAST_RETRY }) };
  }

  test("429 with Retry-After, then 503: retried until it succeeds", async () => {
    const { proxy, client } = await through((_req, index) =>
      index === 0
        ? { kind: "answer", status: 429, headers: { "retry-after": "0" }, body: { code: "rate_limited", retryable: true, status: 429 } }
        : index === 1
          ? { kind: "answer", status: 503, headers: { "retry-after": "0" }, body: { code: "unavailable", retryable: true, status: 503 } }
          : { kind: "pass" },
    );
    try {
      const thread = await client.threads.create();
      assert.ok(thread.thread_id);
      assert.equal(proxy.seen.length, 3);
    } finally {
      await proxy.close();
    }
  });

  test("a write that is not safe to repeat is not sent again after a 500, 502 or 504 (it may have been done)", async () => {
    for (const status of [500, 502, 504]) {
      let faulted = 0;
      const { proxy, client } = await through((req) =>
        req.method === "POST" && !faulted++ ? { kind: "answer_after_forward", status } : { kind: "pass" },
      );
      try {
        const marker = `unsafe-${status}`;
        const error = await client.threads.create({ metadata: { marker } }).catch((e: unknown) => e);
        assert.ok(error instanceof RudderError && error.status === status, String(error));
        assert.equal(proxy.seen.length, 1, `create sent once after a ${status}`);
        const threads = (await server.request("GET", `/v1/threads?metadata=${encodeURIComponent(JSON.stringify({ marker }))}`)).body;
        assert.equal((threads as unknown[]).length, 1, "one thread, not two");
      } finally {
        await proxy.close();
      }
    }
    // Cancel likewise; a read after the same fault is retried.
    const thread = await new RudderClient({ baseUrl: server.url, token: () => server.token() }).threads.create();
    let faulted = 0;
    const { proxy, client } = await through(() => (!faulted++ ? { kind: "answer_after_forward", status: 502 } : { kind: "pass" }));
    try {
      assert.equal((await client.threads.get(thread.thread_id)).thread_id, thread.thread_id);
      assert.equal(proxy.seen.length, 2, "the read was retried");
      faulted = 0;
      const run = await client.runs.create({ thread_id: thread.thread_id, assistant_id: "steps", input: { steps: 50, delayMs: 100 } });
      assert.equal(proxy.seen.length, 4, "run creation (with its key) was retried");
      faulted = 0;
      const error = await client.runs.cancel(run.run_id).catch((e: unknown) => e);
      assert.ok(error instanceof RudderError && error.status === 502);
      assert.equal(proxy.seen.filter((request) => request.path.endsWith("/cancel")).length, 1, "cancel sent once");
    } finally {
      await proxy.close();
    }
  });

  test("Retry-After as an HTTP-date is waited for", async () => {
    const times: number[] = [];
    const { proxy } = await through((_req, index) => {
      times.push(Date.now());
      // Two seconds ahead; the header has whole seconds, so the wait is between one and two.
      return index === 0
        ? {
            kind: "answer",
            status: 429,
            headers: { "retry-after": new Date(Date.now() + 2000).toUTCString() },
            body: { code: "rate_limited" },
          }
        : { kind: "pass" };
    });
    try {
      const client = new RudderClient({ baseUrl: proxy.url, token: () => server.token(), retry: { ...FAST_RETRY, capMs: 5000 } });
      await client.threads.list();
      assert.equal(proxy.seen.length, 2);
      assert.ok(times[1]! - times[0]! >= 900, `waited ${times[1]! - times[0]!} ms`);
    } finally {
      await proxy.close();
    }
  });

  test("a reset connection on create: the retry replays the same run, no duplicate", async () => {
    let resetDone = 0;
    const { proxy, client } = await through((req) =>
      req.url!.endsWith("/runs") && !resetDone++ ? { kind: "reset_after_forward" } : { kind: "pass" },
    );
    try {
      const thread = await client.threads.create();
      const run = await client.runs.create({ thread_id: thread.thread_id, assistant_id: "echo", input: { message: "once" } });
      const creates = proxy.seen.filter((request) => request.method === "POST" && request.path.endsWith("/runs"));
      assert.equal(creates.length, 2, "sent twice");
      assert.equal(creates[0]!.headers["idempotency-key"], creates[1]!.headers["idempotency-key"], "with the same key");
      assert.equal(creates[0]!.body, creates[1]!.body, "and the identical body");
      const runs = (await server.request("GET", `/v1/threads/${thread.thread_id}/runs`)).body as { run_id: string }[];
      assert.deepEqual(
        runs.map((r) => r.run_id),
        [run.run_id],
        "one run",
      );
    } finally {
      await proxy.close();
    }
  });

  test("a stream cut mid-run: every event once, in order, nothing missing", async () => {
    const { proxy, client } = await through((req) => (req.url!.endsWith("/stream") ? { kind: "cut_stream", frames: 2 } : { kind: "pass" }));
    try {
      const run = await client.runs.create({ assistant_id: "steps", input: { steps: 4, delayMs: 100 } });
      const sequences: number[] = [];
      for await (const event of client.runs.stream(run.run_id)) sequences.push(event.sequence);
      const stored = (await server.request("GET", `/v1/runs/${run.run_id}/events?limit=1000`)).body as { sequence: number }[];
      assert.deepEqual(
        sequences,
        stored.map((event) => event.sequence),
      );
      assert.ok(proxy.seen.filter((request) => request.path.endsWith("/stream")).length >= 2, "it reconnected");
    } finally {
      await proxy.close();
    }
  });

  test("idempotency_conflict is not retried and no new key is tried", async () => {
    const { proxy, client } = await through(() => ({ kind: "pass" }));
    try {
      await client.runs.create({ assistant_id: "echo", input: { message: "a" } }, { idempotencyKey: "same-key" });
      const error = await client.runs
        .create({ assistant_id: "echo", input: { message: "b" } }, { idempotencyKey: "same-key" })
        .catch((e: unknown) => e);
      assert.ok(error instanceof RudderError);
      assert.equal(error.code, "idempotency_conflict");
      assert.equal(proxy.seen.length, 2, "the conflicting create was sent once");
    } finally {
      await proxy.close();
    }
  });
});
