import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { SignJWT } from "jose";
import { mintToken } from "../src/auth/authenticator.ts";
import { openWaits } from "../src/http/shutdown.ts";
import { apiClient, type Api } from "./support/api.ts";
import { createTestDatabase, TEST_DRIVER } from "./support/db.ts";
import { Processes, setUpProcesses, startApi, startWorker } from "./support/processes.ts";
import { openSse, type SseEvent } from "./support/sse.ts";
import { startTestServer } from "./support/server.ts";

/**
 * Graceful shutdown (issue 13): a worker stops claiming, lets running attempts finish within its
 * grace period and hands the rest back for another worker at once; an API stops accepting, ends
 * open streams cleanly (clients resume elsewhere with Last-Event-ID) and finishes requests in
 * flight. In process on both drivers; as real `rudder` processes on SIGTERM, too.
 */

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));
const SECRET = "rudder-shutdown-test-secret-rudder-shutdown-test";
const LONG_RUN = { steps: 12, delayMs: 200 };

test("stopping a worker hands its running runs back; another worker continues them from the checkpoint", async () => {
  const database = await createTestDatabase();
  const effects = join(mkdtempSync(join(tmpdir(), "rudder-drain-")), "effects.log");
  const first = await startTestServer({ configFile: TESTING_CONFIG, database, worker: { shutdownGraceMs: 200 } });
  const { body: run } = await first.request("POST", "/v1/runs", {
    body: { assistant_id: "steps", input: { steps: 6, delayMs: 300, sideEffectFile: effects } },
  });
  for (let i = 0; i < 400 && !(existsSync(effects) && readFileSync(effects, "utf8").split("\n").length > 2); i++)
    await new Promise((r) => setTimeout(r, 25));

  const stopping = Date.now();
  await first.server.close(); // the worker stops claiming, waits 200 ms, aborts and hands the run back
  const stoppedIn = Date.now() - stopping;
  assert.ok(stoppedIn < 5000, `stopped within a bound (${stoppedIn} ms)`);
  const [row] = await database.db.query<{ status: string; attempt: number }>("select status, attempt from runs where run_id = $1", [
    run.run_id,
  ]);
  assert.deepEqual(row, { status: "pending", attempt: 1 }, "handed back to the queue");
  const [handback] = await database.db.query<{ data: { reason: string } }>(
    "select data from run_events where run_id = $1 and kind = 'run_retrying' order by sequence desc limit 1",
    [run.run_id],
  );
  assert.equal(handback!.data.reason, "worker_shutdown");

  const second = await startTestServer({ configFile: TESTING_CONFIG, database, worker: {} });
  try {
    const done = (await second.request("GET", `/v1/runs/${run.run_id}/join?timeout=30`)).body;
    assert.deepEqual([done.status, done.attempt, done.output.count], ["succeeded", 2, 6]);
    const steps = readFileSync(effects, "utf8")
      .trim()
      .split("\n")
      .map((line) => Number(line.split(" ").at(-1)));
    for (let n = 1; n <= 6; n++) assert.ok(steps.includes(n), `step ${n} ran`);
    assert.ok(steps.length <= 7, "only the interrupted step may have run twice");
  } finally {
    await second.close(); // drops the database
  }
});

/** An HTTP/1.1 connection written by hand, so a test can hold a request half-sent. */
class RawConnection {
  private readonly socket: Socket;
  private data = "";
  readonly closed: Promise<void>;

  constructor(url: string) {
    const { hostname, port } = new URL(url);
    this.socket = connect(Number(port), hostname);
    this.socket.on("data", (chunk) => (this.data += chunk.toString()));
    this.closed = new Promise((resolve) => this.socket.on("close", () => resolve()));
    this.socket.on("error", () => {});
  }

  write(text: string): void {
    this.socket.write(text);
  }

  destroy(): void {
    this.socket.destroy();
  }

  /** Resolves once the server has sent `text` (e.g. "100 Continue": it has read a request's head). */
  async received(text: string): Promise<void> {
    while (!this.data.includes(text)) await sleep(10);
  }

  /** The HTTP responses received once the server closed the connection: status, headers, body. */
  async responses(): Promise<{ status: number; headers: Record<string, string>; body: string }[]> {
    await this.closed;
    const answers = [];
    // Interim 100 Continue answers are not responses.
    let rest = this.data.replaceAll("HTTP/1.1 100 Continue\r\n\r\n", "");
    while (rest.startsWith("HTTP/1.1 ")) {
      const headEnd = rest.indexOf("\r\n\r\n");
      const [statusLine, ...lines] = rest.slice(0, headEnd).split("\r\n");
      const headers = Object.fromEntries(
        lines.map((line) => [line.slice(0, line.indexOf(":")).toLowerCase(), line.slice(line.indexOf(":") + 1).trim()]),
      );
      const length = Number(headers["content-length"] ?? 0);
      answers.push({ status: Number(statusLine!.split(" ")[1]), headers, body: rest.slice(headEnd + 4, headEnd + 4 + length) });
      rest = rest.slice(headEnd + 4 + length);
    }
    return answers;
  }
}

/**
 * The head of a POST /v1/threads whose body (`length` bytes) follows separately. It asks for
 * 100 Continue, which the server sends as soon as it has read the head: from then on the request
 * is in flight.
 */
const threadPostHead = (token: string, length: number) =>
  `POST /v1/threads HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\nExpect: 100-continue\r\n\r\n`;

const sequences = (events: readonly SseEvent[]) => events.map((event) => Number(event.id));

/** Reads events until `count` have arrived. */
async function readEvents(stream: Awaited<ReturnType<typeof openSse>>, count: number): Promise<SseEvent[]> {
  const events: SseEvent[] = [];
  while (events.length < count) {
    const event = await stream.next();
    assert.ok(event, "the stream ended early");
    events.push(event);
  }
  return events;
}

/** A stream resumed with Last-Event-ID continues exactly after it, to the run's last event. */
function assertContinues(before: readonly SseEvent[], after: readonly SseEvent[]): void {
  const last = Number(before.at(-1)!.id);
  assert.deepEqual(
    sequences(after),
    after.map((_, index) => last + 1 + index),
    "no gap and no repeat",
  );
  assert.equal(after.at(-1)!.event, "run_succeeded");
}

test("closing the API ends open streams cleanly, finishes requests in flight, ends joins, and refuses what comes after with a 503 problem", async () => {
  const database = await createTestDatabase();
  const first = await startTestServer({ configFile: TESTING_CONFIG, database, worker: { shutdownGraceMs: 100 } });
  const connection = new RawConnection(first.url);
  let closing: Promise<void> | undefined;
  try {
    const token = await first.token();
    const { body: run } = await first.request("POST", "/v1/runs", { body: { assistant_id: "steps", input: LONG_RUN } });
    const stream = await openSse(`${first.url}/v1/runs/${run.run_id}/stream`, { headers: { authorization: `Bearer ${token}` } });
    const seen = await readEvents(stream, 3);
    const joinArrived = new Promise<void>((resolve) =>
      first.server.app!.server.on("request", (request) => request.url?.includes("/join") && resolve()),
    );
    const join = first.request("GET", `/v1/runs/${run.run_id}/join?timeout=120`);
    await joinArrived;

    // A request in flight: its head has been read, its body has not arrived yet.
    const body = JSON.stringify({ metadata: { sent: "during shutdown" } });
    connection.write(threadPostHead(token, Buffer.byteLength(body)));
    await connection.received("100 Continue");
    connection.write(body.slice(0, 10));

    closing = first.server.close();
    seen.push(...(await stream.rest()));
    assert.ok(stream.ended, "the stream ends cleanly: what was written is delivered, then the response ends");
    // A join ends so shutdown need not wait for it: 408 if it was waiting, 503 if it arrived as the
    // close began; both tell the client to try again (elsewhere).
    const joined = await join;
    assert.ok([408, 503].includes(joined.status), `join answered ${joined.status}`);
    assert.equal(joined.body.retryable, true);
    if (joined.status === 408) assert.doesNotMatch(joined.body.detail, /after 120 s/, "it did not wait its timeout out");
    // The rest of the in-flight body, and a second request pipelined after it on the same connection.
    connection.write(body.slice(10) + "GET /v1/threads HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer " + token + "\r\n\r\n");
    const [finished, refused] = await connection.responses();
    assert.equal(finished?.status, 201, "the request in flight finished");
    assert.equal(refused?.status, 503, "a request after shutdown began is refused");
    assert.match(refused!.headers["content-type"] ?? "", /^application\/problem\+json/);
    assert.equal(JSON.parse(refused!.body).code, "unavailable");
    assert.equal(refused!.headers["retry-after"], "1");
    await closing;

    const second = await startTestServer({ configFile: TESTING_CONFIG, database, worker: {} });
    try {
      const thread = JSON.parse(finished!.body).thread_id;
      assert.deepEqual((await second.request("GET", `/v1/threads/${thread}`)).body.metadata, { sent: "during shutdown" });
      const resumed = await openSse(`${second.url}/v1/runs/${run.run_id}/stream`, {
        headers: { authorization: `Bearer ${await second.token()}` },
        lastEventId: stream.lastEventId,
      });
      assertContinues(seen, await resumed.rest());
    } finally {
      await second.server.close();
    }
  } finally {
    connection.destroy();
    await (closing ?? first.server.close());
    await database.drop();
  }
});

test("a server holds many streams and joins at once without a listener warning, and each leaves the shutdown set when it ends", async () => {
  const warnings: Error[] = [];
  const onWarning = (warning: Error) => warnings.push(warning);
  process.on("warning", onWarning);
  const server = await startTestServer({ configFile: TESTING_CONFIG, worker: false });
  try {
    const token = await server.token();
    const headers = { authorization: `Bearer ${token}` };
    const http = server.server.app!.server;
    const { body: run } = await server.request("POST", "/v1/runs", { body: { assistant_id: "steps", input: LONG_RUN } });
    // No worker: the run stays pending, so every stream and join waits until it is cancelled.
    const streams = await Promise.all(Array.from({ length: 25 }, () => openSse(`${server.url}/v1/runs/${run.run_id}/stream`, { headers })));
    const joins = Array.from({ length: 25 }, () => server.request("GET", `/v1/runs/${run.run_id}/join?timeout=120`));
    for (let i = 0; i < 400 && openWaits(http) < 50; i++) await sleep(25);
    assert.equal(openWaits(http), 50, "every stream and join is registered to end on shutdown");

    assert.equal((await server.request("POST", `/v1/runs/${run.run_id}/cancel`)).status, 200);
    for (const stream of streams) assert.equal((await stream.rest()).at(-1)?.event, "run_cancelled");
    for (const join of joins) assert.equal((await join).body.status, "cancelled");
    for (let i = 0; i < 400 && openWaits(http) > 0; i++) await sleep(25);
    assert.equal(openWaits(http), 0, "ended streams and joins leave nothing registered");
    await sleep(50); // warnings are emitted on the next tick
    assert.deepEqual(
      warnings.filter((warning) => warning.name === "MaxListenersExceededWarning").map((warning) => warning.message),
      [],
    );
  } finally {
    process.off("warning", onWarning);
    await server.close();
  }
});

test("SIGTERM on rudder worker: it claims nothing more, finishes what fits in the grace period, and hands the rest back at once", async (t) => {
  const setup = await setUpProcesses(t, SECRET);
  if (!setup) return;
  const { database, processes } = setup;
  try {
    // A ten-minute lease: a run left to expire its lease would not move again during the test.
    const workerEnv = { RUDDER_LEASE_MS: "600000", RUDDER_SHUTDOWN_GRACE_MS: "2000", RUDDER_WORKER_POLL_MS: "200" };
    const [url, firstWorker] = await Promise.all([
      startApi(processes, TESTING_CONFIG),
      startWorker(processes, "worker-1", TESTING_CONFIG, workerEnv),
    ]);
    const api = apiClient(url, await mintToken(SECRET, { tenantId: "shutdown", roles: ["admin"] }));
    const short = (await api<{ run_id: string }>("POST", "/v1/runs", { assistant_id: "steps", input: { steps: 3, delayMs: 200 } })).body
      .run_id;
    const long = (await api<{ run_id: string }>("POST", "/v1/runs", { assistant_id: "steps", input: { steps: 20, delayMs: 400 } })).body
      .run_id;
    await waitForRows(database.db, "select count(*)::int as n from runs where status = 'running' and lease_owner = $1", [firstWorker], 2);

    // The late run is created only once the worker has taken the signal in, or it could fairly claim it.
    const { exitCode: exited } = await processes.signalAcknowledged("worker-1", "SIGTERM", /SIGTERM received, stopping/);
    const late = (await api<{ run_id: string }>("POST", "/v1/runs", { assistant_id: "echo", input: { message: "after SIGTERM" } })).body
      .run_id;
    assert.equal(await exited, 0, "the worker exits cleanly");

    const rows = await database.db.query<{
      run_id: string;
      status: string;
      attempt: number;
      lease_owner: string | null;
      available: boolean;
    }>("select run_id::text as run_id, status, attempt, lease_owner, available_at <= now() as available from runs");
    const row = (id: string) => rows.find((candidate) => candidate.run_id === id);
    assert.deepEqual(
      row(short),
      { run_id: short, status: "succeeded", attempt: 1, lease_owner: null, available: true },
      "finished within the grace period",
    );
    assert.deepEqual(
      row(long),
      { run_id: long, status: "pending", attempt: 1, lease_owner: null, available: true },
      "handed back: claimable now, not after its lease",
    );
    assert.deepEqual(
      row(late),
      { run_id: late, status: "pending", attempt: 0, lease_owner: null, available: true },
      "never claimed by the stopping worker",
    );

    await startWorker(processes, "worker-2", TESTING_CONFIG, workerEnv);
    for (const [id, attempt] of [
      [long, 2],
      [late, 1],
    ] as const) {
      const done = await joinUntilSettled(api, id);
      assert.deepEqual([done.status, done.attempt], ["succeeded", attempt], id);
    }
  } catch (error) {
    t.diagnostic(processes.stderr());
    throw error;
  } finally {
    await processes.stopAll();
    await database.drop();
  }
});

test("SIGTERM on rudder serve: streams end cleanly, requests in flight finish, clients continue on another instance", async (t) => {
  const setup = await setUpProcesses(t, SECRET);
  if (!setup) return;
  const { database, processes } = setup;
  try {
    const first = await startApi(processes, TESTING_CONFIG);
    const banner = await processes.start("serve-2", ["serve", "--config", TESTING_CONFIG, "--port", "0"], /listening at http:\/\/\S+/);
    const second = /listening at (http:\/\/\S+)/.exec(banner)![1]!;
    await startWorker(processes, "worker", TESTING_CONFIG);
    const token = await mintToken(SECRET, { tenantId: "shutdown", roles: ["admin"] });
    const api = apiClient(first, token);
    const auth = { authorization: `Bearer ${token}` };

    // rudder serve refuses tokens that never expire (row 12).
    const forever = await new SignJWT({ tenant_id: "shutdown", roles: ["admin"] })
      .setProtectedHeader({ alg: "HS256" })
      .sign(new TextEncoder().encode(SECRET));
    assert.equal((await apiClient(second, forever)("GET", "/v1/threads")).status, 401);

    const run = (await api<{ run_id: string }>("POST", "/v1/runs", { assistant_id: "steps", input: LONG_RUN })).body.run_id;
    const stream = await openSse(`${first}/v1/runs/${run}/stream`, { headers: auth });
    const seen = await readEvents(stream, 3);
    const body = JSON.stringify({ metadata: { sent: "during SIGTERM" } });
    const connection = new RawConnection(first);
    connection.write(threadPostHead(token, Buffer.byteLength(body)));
    await connection.received("100 Continue");
    connection.write(body.slice(0, 10));

    const exited = processes.signal("serve", "SIGTERM");
    seen.push(...(await stream.rest()));
    assert.ok(stream.ended, "the stream ends cleanly");
    connection.write(body.slice(10));
    const [finished] = await connection.responses();
    assert.equal(finished?.status, 201, "the request in flight finished");
    assert.equal(await exited, 0, "rudder serve exits cleanly");
    await assert.rejects(fetch(`${first}/health`), "it accepts no new connection");

    const resumed = await openSse(`${second}/v1/runs/${run}/stream`, { headers: auth, lastEventId: stream.lastEventId });
    assertContinues(seen, await resumed.rest());
    const thread = JSON.parse(finished!.body).thread_id;
    assert.equal((await apiClient(second, token)("GET", `/v1/threads/${thread}`)).status, 200);
  } catch (error) {
    t.diagnostic(processes.stderr());
    throw error;
  } finally {
    await processes.stopAll();
    await database.drop();
  }
});

test(`SIGTERM on rudder dev (${TEST_DRIVER}): the stream ends cleanly, the run is handed back, and the next start finishes it`, async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), "rudder-shutdown-dev-"));
  const database = TEST_DRIVER === "postgres" ? await createTestDatabase({ migrated: false }) : undefined;
  await database?.db.close();
  const processes = new Processes({
    DATABASE_URL: database?.url,
    RUDDER_JWT_SECRET: SECRET,
    RUDDER_LOG_LEVEL: "warn",
    RUDDER_SHUTDOWN_GRACE_MS: "300",
  });
  const startDev = async (name: string) => {
    const banner = await processes.start(
      name,
      ["dev", "--config", TESTING_CONFIG, "--port", "0", "--data-dir", dataDir],
      /ready at http:\/\/\S+/,
    );
    return /ready at (http:\/\/\S+)/.exec(banner)![1]!;
  };
  try {
    const token = await mintToken(SECRET, { tenantId: "shutdown", roles: ["admin"] });
    const auth = { authorization: `Bearer ${token}` };
    const first = await startDev("dev-1");
    const run = (await apiClient(first, token)<{ run_id: string }>("POST", "/v1/runs", { assistant_id: "steps", input: LONG_RUN })).body
      .run_id;
    const stream = await openSse(`${first}/v1/runs/${run}/stream`, { headers: auth });
    const seen = await readEvents(stream, 3);
    const exited = processes.signal("dev-1", "SIGTERM");
    seen.push(...(await stream.rest()));
    assert.ok(stream.ended, "the stream ends cleanly");
    assert.equal(await exited, 0, "rudder dev exits cleanly");

    const second = await startDev("dev-2");
    const resumed = await openSse(`${second}/v1/runs/${run}/stream`, { headers: auth, lastEventId: stream.lastEventId });
    const rest = await resumed.rest();
    assertContinues(seen, rest);
    assert.ok(
      rest.some((event) => event.event === "run_retrying" && JSON.parse(event.data).data.reason === "worker_shutdown"),
      "handed back on shutdown",
    );
    const done = await apiClient(second, token)<{ status: string; attempt: number }>("GET", `/v1/runs/${run}`);
    assert.deepEqual([done.body.status, done.body.attempt], ["succeeded", 2]);
  } catch (error) {
    t.diagnostic(processes.stderr());
    throw error;
  } finally {
    await processes.stopAll();
    await database?.drop();
  }
});

/** Waits until `sql` (returning one row with `n`) counts `expected`, for up to a minute. */
async function waitForRows(
  db: { query<Row>(sql: string, params?: readonly unknown[]): Promise<Row[]> },
  sql: string,
  params: unknown[],
  expected: number,
): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const [row] = await db.query<{ n: number }>(sql, params);
    if (row?.n === expected) return;
    assert.ok(Date.now() < deadline, `${sql} reached ${expected}`);
    await sleep(50);
  }
}

async function joinUntilSettled(api: Api, runId: string): Promise<{ status: string; attempt: number }> {
  for (;;) {
    const joined = await api<{ status: string; attempt: number }>("GET", `/v1/runs/${runId}/join?timeout=60`);
    if (joined.status !== 408) return joined.body;
  }
}
