import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import {
  attemptOutcome,
  isRefusal,
  rowOnlyMoves,
  RUN_TRANSITIONS,
  transitionFor,
  type AttemptResult,
  type RunTrigger,
  type StopReason,
} from "../src/domain/run-lifecycle.ts";
import { ACTIVE_STATUSES, RUN_STATUSES, TERMINAL_STATUSES, type RunStatus } from "../src/domain/runs.ts";
import { steeringAdmission } from "../src/domain/steering.ts";
import { openSse } from "./support/sse.ts";
import { startTestServer, type TestServer } from "./support/server.ts";

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));
const run = (status: RunStatus, superseded: string | null = null) => ({ run_id: "r1", status, superseded_by_run_id: superseded });

describe("the run lifecycle table (spec section 3, one case per row)", () => {
  const rows: {
    row: string;
    from: RunStatus;
    superseded?: string;
    trigger: RunTrigger;
    to: RunStatus | "unchanged" | "refused";
    code?: string;
    finishes?: boolean;
  }[] = [
    { row: "pending → POST cancel → cancelled, finished_at", from: "pending", trigger: "cancel", to: "cancelled", finishes: true },
    {
      row: "paused (not resumed) → POST cancel → cancelled, finished_at",
      from: "paused",
      trigger: "cancel",
      to: "cancelled",
      finishes: true,
    },
    { row: "running → POST cancel → cancelling", from: "running", trigger: "cancel", to: "cancelling", finishes: false },
    {
      row: "paused, already resumed → POST cancel → 409 run_superseded",
      from: "paused",
      superseded: "r2",
      trigger: "cancel",
      to: "refused",
      code: "run_superseded",
    },
    {
      row: "paused → POST resume → stays paused (the link is written)",
      from: "paused",
      trigger: "resume",
      to: "unchanged",
      finishes: false,
    },
    {
      row: "paused, resumed already → POST resume → 409 run_resume_conflict",
      from: "paused",
      superseded: "r2",
      trigger: "resume",
      to: "refused",
      code: "run_resume_conflict",
    },
    { row: "failed → POST redrive → re-enqueued", from: "failed", trigger: "redrive", to: "pending", finishes: false },
    { row: "dead_letter → POST redrive → re-enqueued", from: "dead_letter", trigger: "redrive", to: "pending", finishes: false },
    { row: "running → error → failed", from: "running", trigger: "fail", to: "failed", finishes: true },
    { row: "running → run_timeout → timed_out", from: "running", trigger: "time_out", to: "timed_out", finishes: true },
    { row: "running → retries exhausted → dead_letter", from: "running", trigger: "give_up", to: "dead_letter", finishes: true },
    { row: "a worker claims a new delivery attempt (pending)", from: "pending", trigger: "claim", to: "running", finishes: false },
    { row: "a worker claims a new delivery attempt (lease expired)", from: "running", trigger: "claim", to: "running", finishes: false },
    // DESIGN.md's decisions where the spec says "not shown"
    { row: "cancelling → POST cancel → unchanged", from: "cancelling", trigger: "cancel", to: "unchanged", finishes: false },
    { row: "cancelling → the worker stops it → cancelled", from: "cancelling", trigger: "stop_cancelled", to: "cancelled", finishes: true },
    { row: "cancelling, worker dead → reaper → cancelled", from: "cancelling", trigger: "reap", to: "cancelled", finishes: true },
    { row: "pending → cancel_previous → cancelled", from: "pending", trigger: "cancel_previous", to: "cancelled", finishes: true },
    { row: "running → cancel_previous → cancelling", from: "running", trigger: "cancel_previous", to: "cancelling", finishes: false },
    { row: "running → retryable error → pending (retry)", from: "running", trigger: "retry", to: "pending", finishes: false },
    { row: "running → interrupt → paused (not finished)", from: "running", trigger: "pause", to: "paused", finishes: false },
    { row: "cancelling → graph ends anyway → succeeded", from: "cancelling", trigger: "succeed", to: "succeeded", finishes: true },
    { row: "running → worker shutdown → pending", from: "running", trigger: "hand_back", to: "pending", finishes: false },
    { row: "succeeded → POST cancel → 409 conflict", from: "succeeded", trigger: "cancel", to: "refused", code: "conflict" },
    { row: "running → POST resume → 409 conflict", from: "running", trigger: "resume", to: "refused", code: "conflict" },
    { row: "succeeded → POST redrive → 409 conflict", from: "succeeded", trigger: "redrive", to: "refused", code: "conflict" },
  ];
  for (const c of rows) {
    test(c.row, () => {
      const decision = transitionFor(run(c.from, c.superseded ?? null), c.trigger);
      if (c.to === "refused") {
        assert.ok(isRefusal(decision));
        assert.equal(decision.refused, c.code);
        return;
      }
      assert.ok(!isRefusal(decision), JSON.stringify(decision));
      assert.equal(decision.to, c.to);
      assert.equal(decision.finishes, c.finishes);
    });
  }

  test("no two rules share a (status, trigger) pair, and every status that finishes is terminal", () => {
    const seen = new Set<string>();
    for (const rule of RUN_TRANSITIONS) {
      for (const from of rule.from) {
        const key = `${from}/${rule.trigger}`;
        assert.ok(!seen.has(key), `duplicate rule ${key}`);
        seen.add(key);
      }
      if (rule.to !== "unchanged") assert.equal(rule.finishes, TERMINAL_STATUSES.has(rule.to), `${rule.trigger}: finishes iff terminal`);
    }
  });

  test("row-only moves: a cancel of a running run changes the run's row alone; nothing with an event, a thread status or a freed thread is one", () => {
    assert.deepEqual([...rowOnlyMoves("cancel")], [["running", "cancelling"]]);
    assert.deepEqual([...rowOnlyMoves("cancel_previous")], [["running", "cancelling"]]);
    for (const trigger of new Set(RUN_TRANSITIONS.map((rule) => rule.trigger))) {
      for (const [from, to] of rowOnlyMoves(trigger)) {
        const rule = transitionFor(run(from), trigger);
        assert.ok(!isRefusal(rule), `${from}/${trigger}`);
        assert.deepEqual([rule.to, rule.event, rule.thread], [to, null, null], `${from}/${trigger}`);
        assert.ok(ACTIVE_STATUSES.includes(to), `${from}/${trigger}: the run keeps its thread`);
      }
    }
    assert.equal(rowOnlyMoves("redrive").size, 0, "a redrive appends run_redriven");
    assert.equal(rowOnlyMoves("succeed").size, 0);
  });

  test("a terminal status changes only by redrive (failed, dead_letter)", () => {
    for (const status of RUN_STATUSES.filter((s) => TERMINAL_STATUSES.has(s))) {
      const leaving = RUN_TRANSITIONS.filter((rule) => rule.from.includes(status));
      assert.deepEqual(
        leaving.map((rule) => rule.trigger),
        status === "failed" || status === "dead_letter" ? ["redrive"] : [],
        status,
      );
    }
  });
});

describe("steering admission by run state (spec section 4, one case per row)", () => {
  const facts = (status: RunStatus, options: { closed?: boolean; superseded?: string } = {}) => ({
    run_id: "r1",
    status,
    steering_closed: options.closed ?? false,
    superseded_by_run_id: options.superseded ?? null,
  });
  const rows: { row: string; run: ReturnType<typeof facts>; expect: "202" | "run_finalizing" | "run_terminal" | "run_superseded" }[] = [
    { row: "pending → 202", run: facts("pending"), expect: "202" },
    { row: "running → 202", run: facts("running"), expect: "202" },
    { row: "cancelling → 202 (cancel still wins)", run: facts("cancelling"), expect: "202" },
    { row: "running with steering_closed → 409 run_finalizing", run: facts("running", { closed: true }), expect: "run_finalizing" },
    { row: "cancelling with steering_closed → 409 run_finalizing", run: facts("cancelling", { closed: true }), expect: "run_finalizing" },
    { row: "paused → 202", run: facts("paused"), expect: "202" },
    {
      row: "paused with a stale steering_closed → 202 (a pause never closes admission)",
      run: facts("paused", { closed: true }),
      expect: "202",
    },
    ...(["succeeded", "failed", "cancelled", "timed_out", "dead_letter"] as const).map((status) => ({
      row: `${status} → 409 run_terminal`,
      run: facts(status, { closed: true }),
      expect: "run_terminal" as const,
    })),
    {
      row: "resumed (superseded_by_run_id set) → 409 run_superseded",
      run: facts("paused", { superseded: "r2" }),
      expect: "run_superseded",
    },
  ];
  for (const c of rows) {
    test(c.row, () => {
      const admission = steeringAdmission(c.run);
      assert.equal(admission.admitted ? "202" : admission.code, c.expect);
    });
  }
});

describe("how an attempt ends (DESIGN.md: which failures are retried)", () => {
  const policy = { maxAttempts: 3, retryBaseMs: 1000 };
  const facts = (attempt: number, more: { started_at?: string; handed_back?: number } = {}) => ({
    status: "running" as RunStatus,
    attempt,
    run_timeout: 5,
    started_at: null,
    ...more,
  });
  const threw = (error: unknown): AttemptResult => ({ kind: "threw", error });
  const cases: {
    name: string;
    attempt: number;
    result: AttemptResult;
    stopped?: Exclude<StopReason, "lease_lost">;
    status: RunStatus;
    event: string;
    code?: string;
  }[] = [
    { name: "success", attempt: 1, result: { kind: "succeeded", output: { a: 1 } }, status: "succeeded", event: "run_succeeded" },
    { name: "interrupt", attempt: 1, result: { kind: "paused", output: {}, interrupts: [1] }, status: "paused", event: "run_paused" },
    { name: "plain error", attempt: 1, result: threw(new Error("x")), status: "failed", event: "run_failed", code: "run_failed" },
    {
      name: "retryable: true",
      attempt: 1,
      result: threw(Object.assign(new Error("x"), { retryable: true })),
      status: "pending",
      event: "run_retrying",
      code: "run_failed",
    },
    {
      name: "ECONNRESET",
      attempt: 2,
      result: threw(Object.assign(new Error("x"), { code: "ECONNRESET" })),
      status: "pending",
      event: "run_retrying",
      code: "run_failed",
    },
    {
      name: "retryable, last attempt",
      attempt: 3,
      result: threw(Object.assign(new Error("x"), { code: "UND_ERR_SOCKET" })),
      status: "dead_letter",
      event: "run_dead_letter",
      code: "dead_letter",
    },
    {
      name: "InvalidUpdateError",
      attempt: 1,
      result: threw(Object.assign(new Error("x"), { name: "InvalidUpdateError" })),
      status: "failed",
      event: "run_failed",
      code: "invalid_update",
    },
    {
      name: "cancelled wins over success",
      attempt: 1,
      result: { kind: "succeeded", output: {} },
      stopped: "cancelled",
      status: "cancelled",
      event: "run_cancelled",
      code: "run_cancelled",
    },
    {
      name: "timeout",
      attempt: 1,
      result: threw(new Error("aborted")),
      stopped: "timed_out",
      status: "timed_out",
      event: "run_timed_out",
      code: "run_timed_out",
    },
    {
      name: "shutdown hands back",
      attempt: 1,
      result: threw(new Error("aborted")),
      stopped: "shutdown",
      status: "pending",
      event: "run_retrying",
    },
    {
      name: "a run that keeps losing its worker",
      attempt: 4,
      result: threw(new Error("aborted")),
      stopped: "attempts_exhausted",
      status: "dead_letter",
      event: "run_dead_letter",
      code: "dead_letter",
    },
  ];
  for (const c of cases) {
    test(c.name, () => {
      const outcome = attemptOutcome(facts(c.attempt), c.result, c.stopped, policy);
      assert.equal(outcome.status, c.status);
      assert.equal(outcome.event.kind, c.event);
      assert.equal(outcome.error?.code, c.code);
    });
  }
  test("a retry whose backoff would end past the run_timeout times the run out now", () => {
    const retryable = threw(Object.assign(new Error("x"), { retryable: true }));
    const started = Date.parse("2026-01-01T00:00:00Z");
    const at = (seconds: number) =>
      attemptOutcome(facts(2, { started_at: new Date(started).toISOString() }), retryable, undefined, policy, started + seconds * 1000);
    // run_timeout 5 s, backoff 2 s before attempt 3.
    assert.equal(at(2.9).status, "pending");
    assert.equal(at(3).status, "timed_out");
    assert.equal(at(3).error?.code, "run_timed_out");
  });
  test("attempts handed back at shutdown count toward no limit", () => {
    const retryable = threw(Object.assign(new Error("x"), { retryable: true }));
    assert.equal(attemptOutcome(facts(3), retryable, undefined, policy).status, "dead_letter");
    assert.equal(attemptOutcome(facts(5, { handed_back: 3 }), retryable, undefined, policy).status, "pending");
    assert.equal(attemptOutcome(facts(5, { handed_back: 2 }), retryable, undefined, policy).status, "dead_letter");
    const lost = attemptOutcome(facts(7, { handed_back: 3 }), threw(new Error("aborted")), "attempts_exhausted", policy);
    assert.equal(lost.error?.message, "its worker was lost on each of 3 attempts");
  });
  test("retries back off exponentially", () => {
    const delays = [1, 2].map(
      (attempt) =>
        attemptOutcome(facts(attempt), threw(Object.assign(new Error("x"), { retryable: true })), undefined, policy).retryDelayMs,
    );
    assert.deepEqual(delays, [1000, 2000]);
  });
});

describe("every terminal transition has exactly one terminal event", () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ configFile: TESTING_CONFIG, worker: { concurrency: 4, pollMs: 200 } });
  });
  after(() => server.close());

  const newThread = async () => (await server.request("POST", "/v1/threads", { body: {} })).body.thread_id as string;
  const terminalKinds = new Set(["run_succeeded", "run_failed", "run_cancelled", "run_timed_out", "run_dead_letter"]);
  const events = async (runId: string) =>
    (await server.request("GET", `/v1/runs/${runId}/events?limit=1000`)).body as { kind: string; data: Record<string, unknown> }[];

  /** Opens the run's stream now and resolves with every event once the server ends it. */
  async function streamUntilEnd(runId: string) {
    const connection = await openSse(`${server.url}/v1/runs/${runId}/stream`, {
      headers: { authorization: `Bearer ${await server.token()}` },
    });
    return connection.rest();
  }

  async function blockedThread(): Promise<{ threadId: string; blocker: string; queued: string }> {
    const threadId = await newThread();
    const blocker = (
      await server.request("POST", `/v1/threads/${threadId}/runs`, {
        body: { assistant_id: "steps", input: { steps: 1, delayMs: 30_000 } },
      })
    ).body.run_id;
    const queued = (
      await server.request("POST", `/v1/threads/${threadId}/runs`, { body: { assistant_id: "echo", input: { message: "waiting" } } })
    ).body.run_id;
    return { threadId, blocker, queued };
  }

  test("a pending run cancelled by cancel_previous: one run_cancelled, its stream ends, a join returns", async () => {
    const { threadId, blocker, queued } = await blockedThread();
    const stream = streamUntilEnd(queued);
    const join = server.request("GET", `/v1/runs/${queued}/join?timeout=120`);
    const newest = await server.request("POST", `/v1/threads/${threadId}/runs`, {
      body: { assistant_id: "echo", input: { message: "now" }, multitask_strategy: "cancel_previous" },
    });
    assert.equal(newest.status, 202);
    const joined = await join;
    assert.deepEqual([joined.status, joined.body.status, joined.body.error.code], [200, "cancelled", "run_cancelled"]);
    const streamed = await stream;
    assert.equal(streamed.at(-1)!.event, "run_cancelled");
    const log = await events(queued);
    assert.deepEqual(
      log.filter((e) => terminalKinds.has(e.kind)).map((e) => [e.kind, e.data.reason, e.data.from]),
      [["run_cancelled", "cancel_previous", "pending"]],
    );
    // The running blocker is cancelled cooperatively, once; the newest run then runs.
    assert.equal((await server.request("GET", `/v1/runs/${blocker}/join?timeout=60`)).body.status, "cancelled");
    assert.equal((await events(blocker)).filter((e) => terminalKinds.has(e.kind)).length, 1);
    assert.equal((await server.request("GET", `/v1/runs/${newest.body.run_id}/join?timeout=60`)).body.status, "succeeded");
  });

  test("a pending run cancelled by the LangGraph API's interrupt strategy: one run_cancelled, its stream ends, a join returns", async () => {
    const { threadId, blocker, queued } = await blockedThread();
    const stream = streamUntilEnd(queued);
    const join = server.request("GET", `/v1/runs/${queued}/join?timeout=120`);
    // The LangGraph surface at the root names cancel_previous "interrupt".
    const newest = await server.request("POST", `/threads/${threadId}/runs`, {
      body: { assistant_id: "echo", input: { message: "now" }, multitask_strategy: "interrupt" },
    });
    assert.equal(newest.status, 200, JSON.stringify(newest.body));
    assert.equal((await join).body.status, "cancelled");
    assert.equal((await stream).at(-1)!.event, "run_cancelled");
    assert.deepEqual(
      (await events(queued)).filter((e) => terminalKinds.has(e.kind)).map((e) => [e.kind, e.data.reason, e.data.from]),
      [["run_cancelled", "cancel_previous", "pending"]],
    );
    assert.equal((await server.request("GET", `/v1/runs/${blocker}/join?timeout=60`)).body.status, "cancelled");
    assert.equal((await events(blocker)).filter((e) => terminalKinds.has(e.kind)).length, 1);
    assert.equal((await server.request("GET", `/v1/runs/${newest.body.run_id}/join?timeout=60`)).body.status, "succeeded");
  });

  test("a pending run cancelled by POST /cancel: one run_cancelled, its stream ends, a join returns", async () => {
    const { blocker, queued } = await blockedThread();
    const stream = streamUntilEnd(queued);
    const join = server.request("GET", `/v1/runs/${queued}/join?timeout=120`);
    assert.equal((await server.request("POST", `/v1/runs/${queued}/cancel`)).body.status, "cancelled");
    assert.equal((await join).body.status, "cancelled");
    assert.equal((await stream).at(-1)!.event, "run_cancelled");
    assert.deepEqual(
      (await events(queued)).filter((e) => terminalKinds.has(e.kind)).map((e) => [e.kind, e.data.reason]),
      [["run_cancelled", "cancel_requested"]],
    );
    await server.request("POST", `/v1/runs/${blocker}/cancel`);
    assert.equal((await server.request("GET", `/v1/runs/${blocker}/join?timeout=60`)).body.status, "cancelled");
  });

  test("succeeded, failed, timed out, cancelled while running: each ends with one terminal event of one shape", async () => {
    const created = await Promise.all([
      server.request("POST", "/v1/runs", { body: { assistant_id: "echo", input: { message: "hi" } } }),
      server.request("POST", "/v1/runs", { body: { assistant_id: "failing", input: { mode: "plain" } } }),
      server.request("POST", "/v1/runs", { body: { assistant_id: "steps", input: { steps: 1, delayMs: 30_000 }, run_timeout: 0.5 } }),
      server.request("POST", "/v1/runs", { body: { assistant_id: "steps", input: { steps: 1, delayMs: 30_000 } } }),
    ]);
    const [ok, failed, slow, cancelled] = created.map((answer) => answer.body.run_id as string);
    for (;;) {
      const status = (await server.request("GET", `/v1/runs/${cancelled}`)).body.status;
      if (status === "running") break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await server.request("POST", `/v1/runs/${cancelled}/cancel`);
    const expected: [string, string][] = [
      [ok!, "run_succeeded"],
      [failed!, "run_failed"],
      [slow!, "run_timed_out"],
      [cancelled!, "run_cancelled"],
    ];
    for (const [runId, kind] of expected) {
      await server.request("GET", `/v1/runs/${runId}/join?timeout=60`);
      const terminal = (await events(runId)).filter((e) => terminalKinds.has(e.kind));
      assert.deepEqual(
        terminal.map((e) => e.kind),
        [kind],
        runId,
      );
      if (kind !== "run_succeeded") assert.equal(typeof (terminal[0]!.data.error as { code?: unknown }).code, "string");
      if (kind === "run_cancelled")
        assert.deepEqual([terminal[0]!.data.reason, terminal[0]!.data.from], ["cancel_requested", "cancelling"]);
    }
  });
});
