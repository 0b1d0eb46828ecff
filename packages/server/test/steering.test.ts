import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { drainSteering, hasSteering, peekSteering, waitForSteering } from "@rudder/graph";
import { startTestServer, type TestServer } from "./support/server.ts";
import { openSse, type SseConnection } from "./support/sse.ts";

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));

type Event = { sequence: number; kind: string; data: Record<string, unknown> };

/** What the `listen_loop` node reports of each iteration (a custom event). */
type Iteration = { iteration: number; woke: boolean; drained: number[]; node_attempt: number | null };

/** A run's live stream, read event by event. */
class LiveStream {
  readonly seen: Event[] = [];
  private constructor(private readonly connection: SseConnection) {}

  static async open(server: TestServer, runId: string): Promise<LiveStream> {
    const headers = { authorization: `Bearer ${await server.token()}` };
    return new LiveStream(await openSse(`${server.url}/v1/runs/${runId}/stream`, { headers, lastEventId: "0" }));
  }

  /** Reads on until an event matches (and returns it); fails if the stream ends first. */
  async until(matches: (event: Event) => boolean, what: string): Promise<Event> {
    for (;;) {
      const next = await this.connection.next();
      assert.ok(next, `the stream ended before ${what}`);
      const event = JSON.parse(next.data) as Event;
      this.seen.push(event);
      if (matches(event)) return event;
    }
  }

  close(): void {
    this.connection.close();
  }
}

const iterationOf = (event: Event) => (event.kind === "custom" ? (event.data.data as Iteration) : undefined);

/** A test-held gate for one of the worker's hooks: the run waits at that point until released. */
class HookGate {
  constructor(private readonly minAttempt = 0) {}

  private held = new Map<string, { entered: () => void; release: Promise<void>; open: () => void; fail: boolean }>();
  private entered = new Map<string, Promise<void>>();

  hold(runId: string, options: { fail?: boolean } = {}): { entered: Promise<void>; release: () => void } {
    let open = () => {};
    let enter = () => {};
    const release = new Promise<void>((resolve) => (open = resolve));
    const entered = new Promise<void>((resolve) => (enter = resolve));
    this.held.set(runId, { entered: enter, release, open, fail: options.fail ?? false });
    this.entered.set(runId, entered);
    return { entered, release: open };
  }

  readonly hook = async (runId: string, attempt = 0) => {
    const gate = this.held.get(runId);
    if (gate && attempt < this.minAttempt) return;
    if (!gate) return;
    this.held.delete(runId);
    gate.entered();
    await gate.release;
    if (gate.fail) throw new Error("final flush failed (test hook)");
  };
}

describe("steering", () => {
  let server: TestServer;
  const gate = new HookGate();
  const claimGate = new HookGate(2);
  before(async () => {
    server = await startTestServer({
      configFile: TESTING_CONFIG,
      worker: {
        steeringPollMs: 200,
        leaseMs: 1500,
        heartbeatMs: 300,
        hooks: { afterSteeringClosed: gate.hook, afterClaim: claimGate.hook },
      },
    });
  });
  after(() => server.close());

  const steer = (runId: string, body: Record<string, unknown>, extra: { tenant?: string; headers?: Record<string, string> } = {}) =>
    server.request("POST", `/v1/runs/${runId}/steer`, { body, ...extra });
  const joinRun = async (runId: string) => (await server.request("GET", `/v1/runs/${runId}/join?timeout=30`)).body;
  const events = async (runId: string): Promise<Event[]> => (await server.request("GET", `/v1/runs/${runId}/events?limit=1000`)).body;
  const ofKind = (list: Event[], kind: string) => list.filter((e) => e.kind === kind);
  const newThread = async () => (await server.request("POST", "/v1/threads", { body: {} })).body.thread_id as string;
  const create = async (assistant: string, input: Record<string, unknown>, threadId?: string) =>
    (await server.request("POST", threadId ? `/v1/threads/${threadId}/runs` : "/v1/runs", { body: { assistant_id: assistant, input } }))
      .body;
  async function waitForStatus(runId: string, status: string) {
    for (let i = 0; i < 400; i++) {
      if ((await server.request("GET", `/v1/runs/${runId}`)).body.status === status) return;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    assert.fail(`run ${runId} never became ${status}`);
  }

  test("a running graph reads steering in order; each read is durably consumed once, with its lifecycle events", async () => {
    const run = await create("steerable", { rounds: 50, waitMs: 5000 });
    await waitForStatus(run.run_id, "running");
    const first = await steer(run.run_id, { kind: "note", payload: { text: "one" }, metadata: { from: "ui" } });
    assert.equal(first.status, 202);
    assert.deepEqual(Object.keys(first.body).sort(), ["created_at", "id", "kind", "run_id", "sequence", "status"]);
    assert.deepEqual([first.body.run_id, first.body.sequence, first.body.kind, first.body.status], [run.run_id, 1, "note", "pending"]);
    await steer(run.run_id, { kind: "note", payload: { text: "two" } });
    await steer(run.run_id, { kind: "stop", payload: null });
    const done = await joinRun(run.run_id);
    assert.equal(done.status, "succeeded");
    assert.deepEqual(
      done.output.received.map((m: { payload: unknown }) => m.payload),
      [{ text: "one" }, { text: "two" }, null],
    );
    assert.deepEqual(
      done.output.received.map((m: { sequence: number }) => m.sequence),
      [1, 2, 3],
    );

    const log = await events(run.run_id);
    const accepted = ofKind(log, "run.steer.accepted");
    const consumed = ofKind(log, "run.steer.consumed");
    assert.equal(accepted.length, 3);
    assert.equal(consumed.length, 3, "each row consumed exactly once");
    assert.deepEqual(
      accepted[0]!.data,
      { steering_event_id: first.body.id, sequence: 1, kind: "note" },
      "no source_event_id for a row never moved",
    );
    const c0 = consumed[0]!.data;
    assert.deepEqual(Object.keys(c0).sort(), [
      "kind",
      "namespace",
      "node",
      "queue_latency_seconds",
      "sequence",
      "steering_event_id",
      "task_id",
    ]);
    assert.deepEqual([c0.steering_event_id, c0.sequence, c0.kind, c0.node, c0.namespace], [first.body.id, 1, "note", "listen", []]);
    assert.equal(typeof c0.task_id, "string");
    assert.ok(typeof c0.queue_latency_seconds === "number" && c0.queue_latency_seconds >= 0);
    assert.equal(ofKind(log, "run.steer.superseded").length, 0);
    assert.ok(!log.some((e) => e.kind === "run.steer.available"), "there is no run.steer.available event");

    const replay = await steer(run.run_id, { kind: "other", payload: 1, idempotency_key: "never-used" });
    assert.deepEqual([replay.status, replay.body.code], [409, "run_terminal"]);
  });

  test("waitForSteering wakes on an accept, well before its timeout", async () => {
    const run = await create("steerable", { rounds: 1, waitMs: 20_000 });
    await waitForStatus(run.run_id, "running");
    await new Promise((resolve) => setTimeout(resolve, 100));
    await steer(run.run_id, { kind: "go", payload: 1 });
    const done = (await server.request("GET", `/v1/runs/${run.run_id}/join?timeout=10`)).body;
    assert.equal(done.status, "succeeded", "the 20 s wait ended because steering arrived");
    assert.equal(done.output.received[0].kind, "go");
  });

  test("replays: same key returns the same row with its current status, never a new one", async () => {
    const run = await create("steerable", { rounds: 50, waitMs: 5000 });
    await waitForStatus(run.run_id, "running");
    const first = await steer(run.run_id, { kind: "k", payload: { a: 1 }, idempotency_key: "key-1" });
    const again = await steer(run.run_id, { kind: "different", payload: { b: 2 }, idempotency_key: "key-1" });
    assert.equal(again.status, 202);
    assert.deepEqual([again.body.id, again.body.sequence], [first.body.id, first.body.sequence]);
    const viaHeader = await steer(
      run.run_id,
      { kind: "k", payload: 1, idempotency_key: "body-key" },
      { headers: { "idempotency-key": "key-1" } },
    );
    assert.equal(viaHeader.body.id, first.body.id, "the header wins over the body field");
    await steer(run.run_id, { kind: "stop", payload: null });
    await joinRun(run.run_id);
    const late = await steer(run.run_id, { kind: "k", payload: { a: 1 }, idempotency_key: "key-1" });
    assert.deepEqual(
      [late.status, late.body.id, late.body.status],
      [202, first.body.id, "consumed"],
      "a replay after the end is still 202, with the row's status now",
    );
    const rows = await server.database.db.query<{ n: number }>("select count(*)::int as n from steering_events where run_id = $1", [
      run.run_id,
    ]);
    assert.equal(rows[0]!.n, 2);
  });

  test("concurrent steers with one key create one row", async () => {
    const run = await create("steerable", { rounds: 50, waitMs: 5000 });
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => steer(run.run_id, { kind: "k", payload: 1, idempotency_key: "same" })),
    );
    assert.ok(answers.every((a) => a.status === 202));
    assert.equal(new Set(answers.map((a) => a.body.id)).size, 1);
    await steer(run.run_id, { kind: "stop", payload: null });
    await joinRun(run.run_id);
  });

  test("validation: 413 over the size limit (nothing written), 422 for a bad body, 404 for another tenant's run", async () => {
    const run = await create("steerable", { rounds: 50, waitMs: 5000 });
    const big = await steer(run.run_id, { kind: "big", payload: "x".repeat(32 * 1024) });
    assert.deepEqual([big.status, big.body.code], [413, "payload_too_large"]);
    const bigMeta = await steer(run.run_id, { kind: "big", payload: "x".repeat(30_000), metadata: { pad: "y".repeat(3000) } });
    assert.equal(bigMeta.status, 413, "payload and metadata count together");
    for (const body of [
      { payload: 1 },
      { kind: "k" },
      { kind: "k", payload: 1, metadata: [1] },
      { kind: "k", payload: 1, extra: true },
      { kind: "", payload: 1 },
    ]) {
      assert.equal((await steer(run.run_id, body)).status, 422, JSON.stringify(body));
    }
    assert.equal((await steer(run.run_id, { kind: "k", payload: 1 }, { tenant: "someone-else" })).status, 404);
    const rows = await server.database.db.query<{ n: number }>("select count(*)::int as n from steering_events where run_id = $1", [
      run.run_id,
    ]);
    assert.equal(rows[0]!.n, 0, "nothing was written");
    await steer(run.run_id, { kind: "stop", payload: null });
    await joinRun(run.run_id);
  });

  test("a graph that never reads steering: rows are superseded at the final boundary, in the final transaction", async () => {
    const run = await create("steps", { steps: 1, delayMs: 300 });
    await waitForStatus(run.run_id, "running");
    const accepted = await steer(run.run_id, { kind: "ignored", payload: 1 });
    const done = await joinRun(run.run_id);
    assert.equal(done.status, "succeeded", "the run keeps its computed result");
    assert.equal(done.attempt, 1, "and is not retried because of the row");
    const log = await events(run.run_id);
    const superseded = ofKind(log, "run.steer.superseded");
    assert.equal(superseded.length, 1);
    assert.deepEqual(superseded[0]!.data, {
      steering_event_id: accepted.body.id,
      source_event_id: accepted.body.id,
      sequence: 1,
      kind: "ignored",
      reason: "unconsumed_at_final_boundary",
      superseded_by_run_id: null,
      replacement_steering_event_id: null,
    });
    assert.equal(log.at(-1)!.kind, "run_succeeded", "the supersede is written before the final event, same transaction");
    const replay = await steer(run.run_id, { kind: "ignored", payload: 1, idempotency_key: "x" });
    assert.equal(replay.status, 409);
  });

  test("the run_finalizing window: new keys 409, known keys replay; then run_terminal", async () => {
    const threadId = await newThread();
    // It waits for a "stop" that the test sends only once the steer below was accepted.
    const blocker = await create("steerable", { rounds: 100, waitMs: 60_000 }, threadId);
    const run = await create("steps", { steps: 1, delayMs: 50 }, threadId);
    const held = gate.hold(run.run_id);
    after(() => held.release());
    const early = await steer(run.run_id, { kind: "early", payload: 1, idempotency_key: "early" });
    assert.equal(early.status, 202, "accepted while pending");
    await steer(blocker.run_id, { kind: "stop", payload: null });
    await joinRun(blocker.run_id);
    await held.entered;
    const read = (await server.request("GET", `/v1/runs/${run.run_id}`)).body;
    assert.deepEqual([read.status, read.steering_closed], ["running", true], "still reads as running while finalizing");
    const refused = await steer(run.run_id, { kind: "late", payload: 1, idempotency_key: "late" });
    assert.deepEqual([refused.status, refused.body.code], [409, "run_finalizing"]);
    const replay = await steer(run.run_id, { kind: "early", payload: 1, idempotency_key: "early" });
    assert.deepEqual([replay.status, replay.body.id, replay.body.status], [202, early.body.id, "pending"]);
    held.release();
    assert.equal((await joinRun(run.run_id)).status, "succeeded");
    const terminal = await steer(run.run_id, { kind: "late", payload: 1, idempotency_key: "late" });
    assert.deepEqual([terminal.status, terminal.body.code], [409, "run_terminal"]);
    const replayAfter = await steer(run.run_id, { kind: "early", payload: 1, idempotency_key: "early" });
    assert.deepEqual([replayAfter.status, replayAfter.body.status], [202, "superseded"]);
  });

  test("a final flush that fails takes the retry path: rows stay pending and the new claim reopens steering", async () => {
    // A run queued behind another on its thread is pending for sure when the first steer arrives.
    const threadId = await newThread();
    // It waits for a "stop" that the test sends only once the steer below was accepted.
    const blocker = await create("steerable", { rounds: 100, waitMs: 60_000 }, threadId);
    const run = await create("steps", { steps: 1, delayMs: 50 }, threadId);
    const finalization = gate.hold(run.run_id, { fail: true });
    const reclaim = claimGate.hold(run.run_id);
    try {
      const early = await steer(run.run_id, { kind: "early", payload: 1 });
      assert.equal(early.status, 202, JSON.stringify(early.body));
      await steer(blocker.run_id, { kind: "stop", payload: null });
      await joinRun(blocker.run_id);
      await finalization.entered;
      finalization.release();
      const closed = await steer(run.run_id, { kind: "during", payload: 1 });
      assert.deepEqual([closed.status, closed.body.code], [409, "run_finalizing"], "admission stays closed until the run is claimed again");
      const [row] = await server.database.db.query<{ status: string }>("select status from steering_events where id = $1", [early.body.id]);
      assert.equal(row!.status, "pending", "the failed flush superseded nothing");

      await reclaim.entered; // the lease expired and the run was claimed again, as attempt 2
      const reclaimed = (await server.request("GET", `/v1/runs/${run.run_id}`)).body;
      assert.deepEqual([reclaimed.status, reclaimed.attempt, reclaimed.steering_closed], ["running", 2, false]);
      const reopened = await steer(run.run_id, { kind: "after", payload: 2 });
      assert.equal(reopened.status, 202, "a retried run accepts steering again");
      reclaim.release();

      const done = await joinRun(run.run_id);
      assert.deepEqual([done.status, done.attempt], ["succeeded", 2]);
      // The last step's checkpoint committed with the gate (durability sync): attempt 2 resumes
      // after it, so its node does not run again.
      const log = await events(run.run_id);
      const secondStart = log.findIndex((e) => e.kind === "run_started" && (e.data as { attempt: number }).attempt === 2);
      assert.ok(secondStart >= 0, "attempt 2 started");
      assert.deepEqual(
        log.slice(secondStart).filter((e) => e.kind === "updates"),
        [],
        "attempt 2 ran no node",
      );
      const superseded = ofKind(log, "run.steer.superseded").map((e) => [e.data.steering_event_id, e.data.reason]);
      assert.deepEqual(superseded, [
        [early.body.id, "unconsumed_at_final_boundary"],
        [reopened.body.id, "unconsumed_at_final_boundary"],
      ]);
    } finally {
      // A failed assertion must not leave the worker parked in a hook (the server could not stop).
      finalization.release();
      reclaim.release();
    }
  });

  test("a stateless run whose final flush fails runs its last step again: the settle would have dropped that checkpoint", async () => {
    const sideEffectFile = join(mkdtempSync(join(tmpdir(), "rudder-final-flush-")), "side-effects.log");
    const run = await create("steps", { steps: 1, delayMs: 50, sideEffectFile });
    const finalization = gate.hold(run.run_id, { fail: true });
    const reclaim = claimGate.hold(run.run_id);
    try {
      await finalization.entered;
      finalization.release();
      await reclaim.entered; // the lease expired and the run was claimed again, as attempt 2
      reclaim.release();
      const done = await joinRun(run.run_id);
      assert.deepEqual([done.status, done.attempt], ["succeeded", 2]);
      // Durability sync: the input checkpoint committed before the node ran; the node's own
      // checkpoint was held for the final boundary, and a stateless run's is never written there.
      const log = await events(run.run_id);
      const starts = log.map((e, index) => (e.kind === "run_started" ? index : -1)).filter((index) => index >= 0);
      assert.equal(starts.length, 2, "two attempts started");
      assert.deepEqual(
        readFileSync(sideEffectFile, "utf8").trim().split("\n"),
        [`${run.run_id}  1`, `${run.run_id}  1`],
        "the node ran in both attempts",
      );
      assert.equal(done.output.count, 1, "the run's result is attempt 2's alone");
      const [left] = await server.database.db.query<{ count: string }>(
        "select count(*)::text as count from checkpoints where thread_id = $1",
        [run.run_id],
      );
      assert.equal(left!.count, "0", "the finished stateless run left no checkpoints");
    } finally {
      finalization.release();
      reclaim.release();
    }
  });

  test("cancel wins over steer: nothing is consumed after the cancel", async () => {
    const run = await create("steps", { steps: 1, delayMs: 30_000 });
    await waitForStatus(run.run_id, "running");
    const accepted = await steer(run.run_id, { kind: "too-late", payload: 1 });
    await server.request("POST", `/v1/runs/${run.run_id}/cancel`);
    const cancelling = await steer(run.run_id, { kind: "while-cancelling", payload: 1 });
    assert.ok([202, 409].includes(cancelling.status), "accepted while cancelling (or terminal if the cancel already finished)");
    const done = await joinRun(run.run_id);
    assert.equal(done.status, "cancelled");
    const log = await events(run.run_id);
    assert.equal(ofKind(log, "run.steer.consumed").length, 0);
    const superseded = ofKind(log, "run.steer.superseded").map((e) => e.data.steering_event_id);
    assert.ok(superseded.includes(accepted.body.id));
  });

  test("a node listening in a loop: each message once, its consumption seen while the node runs, idle waits run their timeout", async () => {
    const run = await create("listen_loop", { timeoutMs: 200, iterations: 300 });
    const stream = await LiveStream.open(server, run.run_id);
    try {
      const hello = (await steer(run.run_id, { kind: "message", payload: { message: "hello" } })).body;
      const consumed = await stream.until(
        (e) => e.kind === "run.steer.consumed" && e.data.steering_event_id === hello.id,
        "hello's run.steer.consumed",
      );
      assert.deepEqual([consumed.data.node, consumed.data.namespace, consumed.data.sequence], ["listen", [], 1]);
      assert.equal(
        (await server.request("GET", `/v1/runs/${run.run_id}`)).body.status,
        "running",
        "consumption is visible while the node still runs",
      );
      // Three iterations after the one that drained hello find nothing new: waitForSteering answers
      // false (each after its timeout: 300 instant iterations would have ended the run).
      let idle = 0;
      await stream.until((e) => {
        const it = iterationOf(e);
        if (it && it.drained.length === 0) idle++;
        return idle === 3;
      }, "three idle iterations");
      const stop = await steer(run.run_id, { kind: "message", payload: { message: "stop" } });
      assert.equal(stop.status, 202, `the loop still listens: ${JSON.stringify(stop.body)}`);
      const done = await joinRun(run.run_id);
      assert.equal(done.status, "succeeded");
      assert.deepEqual(done.output.log, ["hello", "stop"]);
      const log = await events(run.run_id);
      assert.deepEqual(
        ofKind(log, "run.steer.consumed").map((e) => e.data.steering_event_id),
        [hello.id, stop.body.id],
      );
      const iterations = log.map(iterationOf).filter((it) => it !== undefined);
      assert.deepEqual(
        iterations.flatMap((it) => it.drained),
        [1, 2],
        "each message drained once",
      );
      const wokeForNothing = iterations.filter((it) => it.woke && it.drained.length === 0);
      assert.deepEqual(wokeForNothing, [], "waitForSteering never answered true with nothing new to drain");
      assert.ok(iterations.length < 300, "the loop did not run out of iterations");
    } finally {
      stream.close();
    }
  });

  test("a node listening in a loop: 20 rapid steers are logged once each, in order, with 20 consumed events in order", async () => {
    const run = await create("listen_loop", { timeoutMs: 200, iterations: 300 });
    await waitForStatus(run.run_id, "running");
    const sent: { id: string }[] = [];
    for (let i = 0; i < 20; i++) sent.push((await steer(run.run_id, { kind: "message", payload: { message: `m${i}` } })).body);
    const stream = await LiveStream.open(server, run.run_id);
    try {
      await stream.until((e) => e.kind === "run.steer.consumed" && e.data.steering_event_id === sent[19]!.id, "m19's run.steer.consumed");
    } finally {
      stream.close();
    }
    await steer(run.run_id, { kind: "message", payload: { message: "stop" } });
    const done = await joinRun(run.run_id);
    assert.deepEqual(done.output.log, [...Array.from({ length: 20 }, (_, i) => `m${i}`), "stop"]);
    const consumed = ofKind(await events(run.run_id), "run.steer.consumed");
    assert.deepEqual(
      consumed.map((e) => e.data.steering_event_id),
      [...sent.map((e) => e.id), consumed.at(-1)!.data.steering_event_id],
    );
    assert.deepEqual(
      consumed.map((e) => e.data.sequence),
      Array.from({ length: 21 }, (_, i) => i + 1),
    );
  });

  for (const { name, assistant, failWith, runAttempt } of [
    { name: "LangGraph's retryPolicy runs the node again", assistant: "listen_loop_retry_policy", failWith: "plain", runAttempt: 1 },
    { name: "a retryable error: Rudder retries the attempt", assistant: "listen_loop", failWith: "retryable", runAttempt: 2 },
  ]) {
    test(`a listening node fails after a drain (${name}): its next execution gets the same messages first, none twice`, async () => {
      const marker = join(mkdtempSync(join(tmpdir(), "rudder-listen-fail-")), "marker");
      const run = await create(assistant, { timeoutMs: 200, iterations: 300, marker, failWith });
      const stream = await LiveStream.open(server, run.run_id);
      try {
        const hello = (await steer(run.run_id, { kind: "message", payload: { message: "hello" } })).body;
        await stream.until((e) => e.kind === "run.steer.consumed" && e.data.steering_event_id === hello.id, "hello consumed");
        const fail = (await steer(run.run_id, { kind: "message", payload: { message: "fail" } })).body;
        // The next execution's first iteration drains both again (sequences 1 and 2).
        const replay = await stream.until(
          (e) =>
            iterationOf(e)?.drained.includes(2) === true && stream.seen.filter((s) => iterationOf(s)?.drained.includes(2)).length === 2,
          "the re-execution's drain",
        );
        const stop = (await steer(run.run_id, { kind: "message", payload: { message: "stop" } })).body;
        const done = await joinRun(run.run_id);
        assert.deepEqual([done.status, done.attempt], ["succeeded", runAttempt]);
        assert.deepEqual(done.output.log, ["hello", "fail", "stop"], "each message in the state once");
        assert.deepEqual(iterationOf(replay)!.drained, [1, 2], "the re-execution's first drain: both, in order");
        assert.equal(iterationOf(replay)!.iteration, 0);
        if (failWith === "plain") assert.equal(iterationOf(replay)!.node_attempt, 2, "LangGraph's second node attempt");
        const log = await events(run.run_id);
        assert.deepEqual(
          ofKind(log, "run.steer.consumed").map((e) => e.data.steering_event_id),
          [hello.id, fail.id, stop.id],
          "one consumed event each",
        );
        const drains = log
          .map(iterationOf)
          .filter((it) => it !== undefined)
          .flatMap((it) => it.drained);
        assert.deepEqual(
          drains.filter((sequence) => sequence === 3),
          [3],
          "stop drained once",
        );
        assert.deepEqual(
          drains.filter((sequence) => sequence === 1),
          [1, 1],
          "hello drained by each execution once",
        );
      } finally {
        stream.close();
      }
    });
  }

  for (const durability of ["sync", "exit"] as const) {
    test(`a worker that dies after a drain (durability ${durability}): the run's next attempt gets the messages again, consumed once`, async () => {
      const marker = join(mkdtempSync(join(tmpdir(), "rudder-hang-")), "marker");
      const { body: run } = await server.request("POST", "/v1/runs", {
        body: { assistant_id: "drain_then_hang", input: { marker, expect: 2 }, durability },
      });
      const stream = await LiveStream.open(server, run.run_id);
      try {
        await waitForStatus(run.run_id, "running");
        const sent = [(await steer(run.run_id, { kind: "a", payload: 1 })).body, (await steer(run.run_id, { kind: "b", payload: 2 })).body];
        await stream.until((e) => e.kind === "custom", "the drain before the hang");
        // The worker "dies": its lease lapses and is taken, as when its process is gone.
        await server.database.db.query(
          "update runs set lease_owner = 'a-dead-worker', lease_expires_at = now() - interval '1 second' where run_id = $1",
          [run.run_id],
        );
        const done = await joinRun(run.run_id);
        assert.deepEqual([done.status, done.attempt], ["succeeded", 2]);
        assert.deepEqual(
          done.output.received.map((m: { sourceEventId: string }) => m.sourceEventId),
          sent.map((e) => e.id),
          "in the state once each, in order",
        );
        assert.deepEqual(
          ofKind(await events(run.run_id), "run.steer.consumed").map((e) => e.data.steering_event_id),
          sent.map((e) => e.id),
          "consumed once each",
        );
        const rows = await server.database.db.query<{ settled: boolean }>(
          "select settled_at is not null as settled from steering_events where run_id = $1",
          [run.run_id],
        );
        assert.deepEqual(
          rows.map((row) => row.settled),
          [true, true],
          "settled once the retry's writes were checkpointed",
        );
      } finally {
        stream.close();
      }
    });
  }

  test("parallel tasks draining in one superstep: each event goes to exactly one of them", async () => {
    for (let round = 0; round < 5; round++) {
      const run = await create("parallel_drain", { waitMs: 3000 });
      await waitForStatus(run.run_id, "running");
      await Promise.all(Array.from({ length: 6 }, (_, i) => steer(run.run_id, { kind: "item", payload: i })));
      const done = await joinRun(run.run_id);
      if (done.status !== "succeeded") assert.fail(`round ${round}: ${JSON.stringify(done)}\n${JSON.stringify(await events(run.run_id))}`);
      const payloads = done.output.received.map((m: { payload: number }) => m.payload).sort();
      const consumed = ofKind(await events(run.run_id), "run.steer.consumed");
      assert.equal(consumed.length, done.output.received.length, `round ${round}`);
      assert.equal(new Set(consumed.map((e) => e.data.steering_event_id)).size, consumed.length, "no event consumed twice");
      assert.deepEqual(payloads, [...new Set(payloads)], "no event delivered twice");
    }
  });

  test("a subgraph node drains the run's steering; the event names its namespace", async () => {
    const run = await create("subgraph_drain", { waitMs: 5000 });
    await waitForStatus(run.run_id, "running");
    await steer(run.run_id, { kind: "deep", payload: "x" });
    const done = await joinRun(run.run_id);
    assert.deepEqual(
      done.output.received.map((m: { kind: string }) => m.kind),
      ["deep"],
    );
    const consumed = ofKind(await events(run.run_id), "run.steer.consumed")[0]!.data;
    assert.equal(consumed.node, "inner_drain");
    assert.equal((consumed.namespace as string[]).length, 1);
    assert.match((consumed.namespace as string[])[0]!, /^outer:/);
  });

  test("messages drained by a task that never committed its result are handed to the retry, consumed once", async () => {
    const marker = join(mkdtempSync(join(tmpdir(), "rudder-redeliver-")), "marker");
    const run = await create("drain_then_fail", { marker });
    await waitForStatus(run.run_id, "running");
    const sent = [(await steer(run.run_id, { kind: "a", payload: 1 })).body, (await steer(run.run_id, { kind: "b", payload: 2 })).body];
    const done = await joinRun(run.run_id);
    assert.deepEqual([done.status, done.attempt], ["succeeded", 2]);
    assert.deepEqual(
      done.output.received.map((m: { kind: string }) => m.kind),
      ["a", "b"],
      "the retry got them again",
    );
    const log = await events(run.run_id);
    const consumed = ofKind(log, "run.steer.consumed").map((e) => e.data.steering_event_id);
    assert.deepEqual(
      consumed,
      sent.map((e) => e.id),
      "consumed once each, at the first attempt's drain",
    );
    assert.equal(ofKind(log, "run.steer.superseded").length, 0);
  });

  test("drain, then interrupt: the resumed run's re-execution of the task gets them again first, then what came while paused", async () => {
    const threadId = await newThread();
    const run = await create("drain_then_ask", {}, threadId);
    await waitForStatus(run.run_id, "running");
    const hint = (await steer(run.run_id, { kind: "hint", payload: "use the cache" })).body;
    const paused = await joinRun(run.run_id);
    assert.equal(paused.status, "paused");
    assert.equal(paused.output.__interrupt__[0].value.seen, 1, "the node did read it before pausing");
    const pausedLog = await events(run.run_id);
    assert.deepEqual(
      ofKind(pausedLog, "run.steer.consumed").map((e) => e.data.steering_event_id),
      [hint.id],
      "consumed at the drain, before the pause",
    );
    const later = (await steer(run.run_id, { kind: "later", payload: "and the logs" })).body;

    const next = (await server.request("POST", `/v1/runs/${run.run_id}/resume`, { body: { resume: "yes" } })).body;
    const done = await joinRun(next.run_id);
    assert.equal(done.status, "succeeded");
    assert.deepEqual(
      done.output.received.map((m: { payload: unknown; sourceEventId: string }) => [m.payload, m.sourceEventId]),
      [
        ["use the cache", hint.id],
        ["and the logs", later.id],
      ],
      "the re-execution's first drain: the event it drained before the interrupt, then the new one",
    );
    const aLog = await events(run.run_id);
    assert.equal(ofKind(aLog, "run.steer.consumed").length, 1, "no second consumed event on the paused run");
    assert.deepEqual(
      ofKind(aLog, "run.steer.superseded").map((e) => e.data.steering_event_id),
      [later.id],
      "only the pending one moved",
    );
    const bLog = await events(next.run_id);
    const consumedBy = ofKind(pausedLog, "run.steer.consumed")[0]!.data.task_id;
    assert.deepEqual(
      ofKind(bLog, "node_started").map((e) => [e.data.node, e.data.task_id]),
      [["ask", consumedBy]],
      "LangGraph runs the interrupted task again under its task id",
    );
    assert.deepEqual(
      ofKind(bLog, "run.steer.accepted").map((e) => e.data.source_event_id),
      [later.id],
    );
    assert.deepEqual(
      ofKind(bLog, "run.steer.consumed").map((e) => e.data.source_event_id),
      [later.id],
      "the replayed one is not reported consumed again",
    );
  });

  test("drain, complete, a later node interrupts, resume: nothing is handed out again", async () => {
    const threadId = await newThread();
    const run = await create("drain_then_later_ask", {}, threadId);
    await waitForStatus(run.run_id, "running");
    const x = (await steer(run.run_id, { kind: "x", payload: "x" })).body;
    assert.equal((await joinRun(run.run_id)).status, "paused");
    const [row] = await server.database.db.query<{ status: string; settled: boolean }>(
      "select status, settled_at is not null as settled from steering_events where id = $1",
      [x.id],
    );
    assert.deepEqual(row, { status: "consumed", settled: true }, "settled with the draining task's writes");
    const next = (await server.request("POST", `/v1/runs/${run.run_id}/resume`, { body: { resume: "go" } })).body;
    const done = await joinRun(next.run_id);
    assert.equal(done.status, "succeeded");
    assert.deepEqual(
      done.output.received.map((m: { node: string; sourceEventId: string }) => [m.node, m.sourceEventId]),
      [["read", x.id]],
      "in the state once",
    );
    assert.equal(ofKind(await events(run.run_id), "run.steer.consumed").length, 1);
    assert.equal((await events(next.run_id)).filter((e) => e.kind.startsWith("run.steer.")).length, 0);
  });

  test("admission by state: pending and paused accept; a resumed run is 409 run_superseded", async () => {
    const threadId = await newThread();
    const paused = await create("two_hops", {}, threadId);
    assert.equal((await joinRun(paused.run_id)).status, "paused");
    const onPaused = await steer(paused.run_id, { kind: "p", payload: 1 });
    assert.equal(onPaused.status, 202, "a paused run accepts steering");
    const next = (await server.request("POST", `/v1/runs/${paused.run_id}/resume`, { body: { resume: "a1" } })).body;
    const superseded = await steer(paused.run_id, { kind: "p", payload: 2 });
    assert.deepEqual([superseded.status, superseded.body.code, superseded.body.superseded_by_run_id], [409, "run_superseded", next.run_id]);
    const replay = await steer(paused.run_id, { kind: "p", payload: 1, idempotency_key: "none" });
    assert.equal(replay.status, 409);
    assert.equal((await joinRun(next.run_id)).status, "paused");
  });

  test("steering follows the run across two pause/resume hops: root ids stable, order kept, latency counts the pauses", async () => {
    const threadId = await newThread();
    const a = await create("two_hops", {}, threadId);
    assert.equal((await joinRun(a.run_id)).status, "paused");
    const s1 = (await steer(a.run_id, { kind: "one", payload: 1, metadata: { m: 1 }, idempotency_key: "s1" })).body;
    const s2 = (await steer(a.run_id, { kind: "two", payload: 2 })).body;
    assert.deepEqual([s1.sequence, s2.sequence], [1, 2]);
    await new Promise((resolve) => setTimeout(resolve, 300));

    const b = (await server.request("POST", `/v1/runs/${a.run_id}/resume`, { body: { resume: "a1" } })).body;
    const aLog = await events(a.run_id);
    const transfers = ofKind(aLog, "run.steer.superseded");
    assert.equal(transfers.length, 2);
    assert.deepEqual(
      transfers.map((e) => [e.data.steering_event_id, e.data.source_event_id, e.data.reason, e.data.superseded_by_run_id]),
      [
        [s1.id, s1.id, "resume_transfer", b.run_id],
        [s2.id, s2.id, "resume_transfer", b.run_id],
      ],
    );
    const bAccepted = ofKind(await events(b.run_id), "run.steer.accepted");
    assert.deepEqual(
      bAccepted.map((e) => [e.data.sequence, e.data.kind, e.data.source_event_id]),
      [
        [1, "one", s1.id],
        [2, "two", s2.id],
      ],
    );
    assert.deepEqual(
      transfers.map((e) => e.data.replacement_steering_event_id),
      bAccepted.map((e) => e.data.steering_event_id),
    );
    const bPaused = await joinRun(b.run_id);
    assert.equal(bPaused.status, "paused");
    const s3 = (await steer(b.run_id, { kind: "three", payload: 3 })).body;
    assert.equal(s3.sequence, 3, "a new steer on the new run follows the moved ones");
    const replayOnB = await steer(b.run_id, { kind: "one", payload: 1, idempotency_key: "s1" });
    assert.equal(replayOnB.body.sequence, 1, "the idempotency key moved with the row");
    await new Promise((resolve) => setTimeout(resolve, 300));

    const c = (await server.request("POST", `/v1/runs/${b.run_id}/resume`, { body: { resume: "a2" } })).body;
    const done = await joinRun(c.run_id);
    assert.equal(done.status, "succeeded");
    assert.deepEqual(
      done.output.received.map((m: { kind: string; sequence: number; sourceEventId: string }) => [m.kind, m.sequence, m.sourceEventId]),
      [
        ["one", 1, s1.id],
        ["two", 2, s2.id],
        ["three", 3, s3.id],
      ],
    );
    const consumed = ofKind(await events(c.run_id), "run.steer.consumed");
    assert.deepEqual(
      consumed.map((e) => e.data.source_event_id),
      [s1.id, s2.id, s3.id],
    );
    assert.ok((consumed[0]!.data.queue_latency_seconds as number) >= 0.6, "latency runs from the first acceptance, pauses included");
    const cAccepted = ofKind(await events(c.run_id), "run.steer.accepted");
    assert.deepEqual(
      cAccepted.map((e) => e.data.source_event_id),
      [s1.id, s2.id, s3.id],
    );
    const rows = await server.database.db.query<{ created_at: Date | string; source_event_id: string }>(
      "select created_at, source_event_id::text as source_event_id from steering_events where run_id = $1 order by sequence",
      [c.run_id],
    );
    assert.equal(new Date(rows[0]!.created_at).toISOString(), s1.created_at, "created_at preserved across migrations");
  });
});

describe("@rudder/graph outside Rudder", () => {
  test("the steering functions are safe no-ops in a plain graph.invoke", async () => {
    const config = { configurable: { thread_id: "x" } };
    assert.deepEqual(await drainSteering(config), []);
    assert.deepEqual(await peekSteering(config), []);
    assert.equal(await hasSteering(undefined), false);
    assert.equal(await waitForSteering(config, { timeoutMs: 10_000 }), false);
  });
});
