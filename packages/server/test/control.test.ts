import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startTestServer, type TestServer } from "./support/server.ts";

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));

describe("run control and recovery", () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ configFile: TESTING_CONFIG, worker: { maxAttempts: 3, retryBaseMs: 20 } });
  });
  after(() => server.close());

  const newThread = async () => (await server.request("POST", "/v1/threads", { body: {} })).body.thread_id as string;
  const joinRun = async (runId: string) => (await server.request("GET", `/v1/runs/${runId}/join?timeout=30`)).body;
  const get = async (runId: string) => (await server.request("GET", `/v1/runs/${runId}`)).body;
  async function pausedRun(metadata: Record<string, unknown> = {}) {
    const threadId = await newThread();
    const { body } = await server.request("POST", `/v1/threads/${threadId}/runs`, {
      body: { assistant_id: "approval", input: { request: "ship" }, metadata },
    });
    const run = await joinRun(body.run_id);
    assert.equal(run.status, "paused");
    return { threadId, run };
  }
  async function waitForStatus(runId: string, status: string) {
    for (let i = 0; i < 200; i++) {
      if ((await get(runId)).status === status) return;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    assert.fail(`run ${runId} never became ${status}`);
  }

  test("resume creates the continuing run, links the old one once, and the new run finishes the graph", async () => {
    const { threadId, run } = await pausedRun({ team: "ops" });
    const resumed = await server.request("POST", `/v1/runs/${run.run_id}/resume`, { body: { resume: { approved: true } } });
    assert.equal(resumed.status, 202);
    const next = resumed.body;
    assert.notEqual(next.run_id, run.run_id);
    assert.deepEqual([next.status, next.thread_id, next.assistant_id], ["pending", threadId, "approval"]);
    assert.deepEqual(next.metadata, { team: "ops", resumed_from_run_id: run.run_id });
    assert.equal(next.superseded_by_run_id, null);
    const old = await get(run.run_id);
    assert.deepEqual([old.status, old.superseded_by_run_id], ["paused", next.run_id], "the old run stays paused, linked");
    const done = await joinRun(next.run_id);
    assert.equal(done.status, "succeeded");
    assert.equal(done.output.outcome, "done: Plan for: ship");

    const again = await server.request("POST", `/v1/runs/${run.run_id}/resume`, { body: { resume: { approved: false } } });
    assert.deepEqual([again.status, again.body.code], [409, "run_resume_conflict"]);
    const notPaused = await server.request("POST", `/v1/runs/${next.run_id}/resume`, { body: {} });
    assert.deepEqual([notPaused.status, notPaused.body.code], [409, "conflict"]);
    const cancelOld = await server.request("POST", `/v1/runs/${run.run_id}/cancel`);
    assert.deepEqual([cancelOld.status, cancelOld.body.code, cancelOld.body.superseded_by_run_id], [409, "run_superseded", next.run_id]);
    assert.match(cancelOld.body.detail, new RegExp(next.run_id));
  });

  test("a resume that would be an empty Command is 422 and the paused run stays resumable; resume: null on a create is no command", async () => {
    const { run } = await pausedRun();
    for (const body of [{}, { resume: null }, { update: {} }, { resume: null, update: null, goto: null }]) {
      const refused = await server.request("POST", `/v1/runs/${run.run_id}/resume`, { body });
      assert.deepEqual([refused.status, refused.body.code], [422, "validation_error"], JSON.stringify(body));
    }
    const stillPaused = await get(run.run_id);
    assert.deepEqual([stillPaused.status, stillPaused.superseded_by_run_id], ["paused", null]);
    const resumed = await server.request("POST", `/v1/runs/${run.run_id}/resume`, { body: { resume: { approved: true } } });
    assert.equal(resumed.status, 202);
    assert.equal((await joinRun(resumed.body.run_id)).status, "succeeded");

    // The spec's default for resume is null: given as null, the run starts from its input.
    const { body: plain } = await server.request("POST", "/v1/runs", {
      body: { assistant_id: "echo", input: { message: "n" }, resume: null },
    });
    const done = await joinRun(plain.run_id);
    assert.deepEqual([done.status, done.output.reply], ["succeeded", "n"]);
  });

  test("a run created with resume on a thread whose paused run waits for its answer continues that run: it is linked, gets its steering, and its resume is 409", async () => {
    const { threadId, run } = await pausedRun({ team: "ops" });
    const steered = await server.request("POST", `/v1/runs/${run.run_id}/steer`, {
      body: { kind: "note", payload: "for whoever continues" },
    });
    assert.equal(steered.status, 202, JSON.stringify(steered.body));
    const created = await server.request("POST", `/v1/threads/${threadId}/runs`, {
      body: { assistant_id: "approval", resume: { approved: false } },
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    const next = created.body.run_id as string;
    assert.equal(created.body.metadata.resumed_from_run_id, run.run_id);
    const old = await get(run.run_id);
    assert.deepEqual(
      [old.status, old.superseded_by_run_id],
      ["paused", next],
      "the paused run stays paused, linked to the run that answered it",
    );
    const again = await server.request("POST", `/v1/runs/${run.run_id}/resume`, { body: { resume: { approved: true } } });
    assert.deepEqual(
      [again.status, again.body.code, again.body.superseded_by_run_id],
      [409, "run_resume_conflict", next],
      "no second answer",
    );
    const done = await joinRun(next);
    assert.deepEqual([done.status, done.output.outcome], ["succeeded", "rejected"]);
    const events = (await server.request("GET", `/v1/runs/${next}/events`)).body as { kind: string }[];
    assert.ok(
      events.some((event) => event.kind.startsWith("run.steer")),
      "the steering the paused run held moved to the run that answered it",
    );
    const runs = (await server.request("GET", `/v1/threads/${threadId}/runs`)).body as unknown[];
    assert.equal(runs.length, 2, "the paused run and the one that continued it: nothing ran the interrupt's answer twice");
  });

  test("a run created with a command on a thread where another run wrote since the pause leaves the paused run resumable", async () => {
    const threadId = await newThread();
    const first = await server.request("POST", `/v1/threads/${threadId}/runs`, {
      body: { assistant_id: "approval", input: { request: "first" } },
    });
    assert.equal((await joinRun(first.body.run_id)).status, "paused");
    const second = await server.request("POST", `/v1/threads/${threadId}/runs`, {
      body: { assistant_id: "approval", input: { request: "second" } },
    });
    assert.equal((await joinRun(second.body.run_id)).status, "paused");
    // The command answers the thread's head: the second run's interrupt; the first stays resumable.
    const created = await server.request("POST", `/v1/threads/${threadId}/runs`, {
      body: { assistant_id: "approval", resume: { approved: true } },
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    assert.equal((await joinRun(created.body.run_id)).output.outcome, "done: Plan for: second");
    assert.equal((await get(second.body.run_id)).superseded_by_run_id, created.body.run_id);
    assert.equal((await get(first.body.run_id)).superseded_by_run_id, null);
    const resumed = await server.request("POST", `/v1/runs/${first.body.run_id}/resume`, { body: { resume: { approved: true } } });
    assert.equal(resumed.status, 202, JSON.stringify(resumed.body));
    assert.equal((await joinRun(resumed.body.run_id)).output.outcome, "done: Plan for: first");
  });

  test("two runs paused on one thread: each resume answers its own run's interrupt, in either order", async () => {
    for (const order of [
      ["first", "second"],
      ["second", "first"],
    ] as const) {
      const threadId = await newThread();
      const paused: Record<string, string> = {};
      for (const request of ["first", "second"]) {
        const { body } = await server.request("POST", `/v1/threads/${threadId}/runs`, {
          body: { assistant_id: "approval", input: { request } },
        });
        assert.equal((await joinRun(body.run_id)).status, "paused");
        paused[request] = body.run_id;
      }
      const outcomes: Record<string, unknown> = {};
      for (const request of order) {
        const resumed = await server.request("POST", `/v1/runs/${paused[request]}/resume`, { body: { resume: { approved: true } } });
        assert.equal(resumed.status, 202);
        const done = await joinRun(resumed.body.run_id);
        assert.equal(done.status, "succeeded");
        outcomes[request] = done.output.outcome;
      }
      assert.deepEqual(outcomes, { first: "done: Plan for: first", second: "done: Plan for: second" }, `resumed ${order.join(", then ")}`);
    }
  });

  test("a state update made while a run is paused is what its resume continues from", async () => {
    const { threadId, run } = await pausedRun();
    const fork = await server.request("POST", `/v1/threads/${threadId}/fork`, { body: { values: { draft: "Plan edited by a human" } } });
    assert.ok(fork.status < 300, JSON.stringify(fork.body));
    const resumed = await server.request("POST", `/v1/runs/${run.run_id}/resume`, { body: { resume: { approved: true } } });
    assert.equal((await joinRun(resumed.body.run_id)).output.outcome, "done: Plan edited by a human");
  });

  test("twenty concurrent resumes of one paused run: exactly one wins, no duplicate run", async () => {
    for (let round = 0; round < 3; round++) {
      const { threadId, run } = await pausedRun();
      const answers = await Promise.all(
        Array.from({ length: 20 }, () => server.request("POST", `/v1/runs/${run.run_id}/resume`, { body: { resume: { approved: true } } })),
      );
      const statuses = answers.map((a) => a.status).sort();
      assert.deepEqual(statuses, [202, ...Array(19).fill(409)], `round ${round}`);
      assert.ok(answers.filter((a) => a.status === 409).every((a) => a.body.code === "run_resume_conflict"));
      const runs = (await server.request("GET", `/v1/threads/${threadId}/runs`)).body;
      assert.equal(runs.length, 2, "the paused run and exactly one successor");
    }
  });

  test("resume racing cancel: exactly one of them takes effect", async () => {
    for (let round = 0; round < 10; round++) {
      const { run } = await pausedRun();
      const [resume, cancel] = await Promise.all([
        server.request("POST", `/v1/runs/${run.run_id}/resume`, { body: { resume: { approved: true } } }),
        server.request("POST", `/v1/runs/${run.run_id}/cancel`),
      ]);
      const after = await get(run.run_id);
      if (resume.status === 202) {
        assert.deepEqual([cancel.status, cancel.body.code], [409, "run_superseded"], `round ${round}`);
        assert.deepEqual([after.status, after.superseded_by_run_id], ["paused", resume.body.run_id]);
      } else {
        assert.deepEqual([resume.status, resume.body.code, cancel.status], [409, "conflict", 200], `round ${round}`);
        assert.deepEqual([after.status, after.superseded_by_run_id], ["cancelled", null]);
      }
    }
  });

  test("cancel of a paused run (not resumed) ends it cancelled at once; user metadata never counts as superseded", async () => {
    const { run } = await pausedRun({ superseded_by_run_id: "00000000-0000-4000-8000-000000000000" });
    const cancelled = await server.request("POST", `/v1/runs/${run.run_id}/cancel`);
    assert.equal(cancelled.status, 200);
    assert.equal(cancelled.body.status, "cancelled");
    assert.ok(cancelled.body.finished_at);
    assert.equal(cancelled.body.superseded_by_run_id, null);
  });

  test("cancel of a node blocked in a 30 s await stops it through config.signal", async (t) => {
    const { body: run } = await server.request("POST", "/v1/runs", {
      body: { assistant_id: "steps", input: { steps: 1, delayMs: 30_000 } },
    });
    await waitForStatus(run.run_id, "running");
    const started = Date.now();
    const cancelling = await server.request("POST", `/v1/runs/${run.run_id}/cancel`);
    assert.equal(cancelling.body.status, "cancelling");
    const ended = (await server.request("GET", `/v1/runs/${run.run_id}/join?timeout=10`)).body;
    assert.equal(ended.status, "cancelled", "long before the node's 30 s would have passed");
    assert.equal(ended.error.code, "run_cancelled");
    t.diagnostic(`cancel took ${Date.now() - started} ms`);
    const events = (await server.request("GET", `/v1/runs/${run.run_id}/events`)).body;
    assert.equal(events.at(-1).kind, "run_cancelled");
  });

  test("a retryable failure is retried and continues from the last checkpoint", async () => {
    const dir = mkdtempSync(join(tmpdir(), "rudder-flaky-"));
    const effects = join(dir, "effects.log");
    const threadId = await newThread();
    const { body: run } = await server.request("POST", `/v1/threads/${threadId}/runs`, {
      body: { assistant_id: "flaky", input: { marker: join(dir, "marker"), sideEffectFile: effects } },
    });
    const done = await joinRun(run.run_id);
    assert.equal(done.status, "succeeded");
    assert.equal(done.attempt, 2);
    assert.deepEqual(readFileSync(effects, "utf8").trim().split("\n"), ["first", "second"], "the first node did not run again");
    assert.equal(done.usage.tokens, 5, "usage spent in the first attempt survives the retry");
    const kinds = (await server.request("GET", `/v1/runs/${run.run_id}/events?limit=1000`)).body.map((e: { kind: string }) => e.kind);
    assert.equal(kinds.filter((k: string) => k === "run_started").length, 2);
    assert.ok(kinds.includes("run_retrying"));
  });

  test("retryable failures dead-letter after the last attempt; redrive re-queues the same run", async () => {
    const { body: run } = await server.request("POST", "/v1/runs", { body: { assistant_id: "failing", input: { mode: "retryable" } } });
    const dead = await joinRun(run.run_id);
    assert.equal(dead.status, "dead_letter");
    assert.equal(dead.attempt, 3);
    assert.equal(dead.error.code, "dead_letter");
    assert.match(dead.error.message, /upstream reset/);
    const redriven = await server.request("POST", `/v1/runs/${run.run_id}/redrive`);
    assert.equal(redriven.status, 202);
    assert.deepEqual(
      [redriven.body.run_id, redriven.body.status, redriven.body.attempt, redriven.body.error],
      [run.run_id, "pending", 0, null],
    );
    assert.deepEqual(redriven.body.input, { mode: "retryable" }, "redrive keeps the input");
    const deadAgain = await joinRun(run.run_id);
    assert.equal(deadAgain.status, "dead_letter");
    const kinds = (await server.request("GET", `/v1/runs/${run.run_id}/events?limit=1000`)).body.map((e: { kind: string }) => e.kind);
    assert.ok(kinds.includes("run_redriven"));
    assert.equal(kinds.filter((k: string) => k === "run_dead_letter").length, 2);
  });

  test("a redrive restarts the run_timeout clock: a run redriven after its timeout has passed runs to its end", async () => {
    const dir = mkdtempSync(join(tmpdir(), "rudder-flaky-"));
    const { body: run } = await server.request("POST", "/v1/runs", {
      body: {
        assistant_id: "flaky",
        input: { marker: join(dir, "marker"), sideEffectFile: join(dir, "effects.log"), fatal: true },
        run_timeout: 1,
      },
    });
    const failed = await joinRun(run.run_id);
    assert.deepEqual([failed.status, failed.error.retryable], ["failed", false]);
    await new Promise((resolve) => setTimeout(resolve, 1_100)); // the first start's clock has run out
    const redriven = await server.request("POST", `/v1/runs/${run.run_id}/redrive`);
    assert.equal(redriven.status, 202);
    assert.equal(redriven.body.started_at, null, "pending again, not started");
    const done = await joinRun(run.run_id);
    assert.equal(done.status, "succeeded", JSON.stringify(done.error));
    assert.ok(Date.parse(done.started_at) > Date.parse(failed.finished_at), "its clock starts at the redriven run's start");
  });

  test("a deterministic failure is not retried; redrive of it runs it again; other states are 409", async () => {
    const { body: run } = await server.request("POST", "/v1/runs", { body: { assistant_id: "failing", input: { mode: "plain" } } });
    const failed = await joinRun(run.run_id);
    assert.deepEqual([failed.status, failed.attempt, failed.error.retryable], ["failed", 1, false]);
    assert.equal((await server.request("POST", `/v1/runs/${run.run_id}/redrive`)).status, 202);
    assert.equal((await joinRun(run.run_id)).status, "failed");
    const { body: ok } = await server.request("POST", "/v1/runs", { body: { assistant_id: "echo", input: { message: "x" } } });
    await joinRun(ok.run_id);
    const refused = await server.request("POST", `/v1/runs/${ok.run_id}/redrive`);
    assert.deepEqual([refused.status, refused.body.code], [409, "conflict"]);
  });

  test("run_timeout ends a run that runs too long as timed_out", async () => {
    const { body: run } = await server.request("POST", "/v1/runs", {
      body: { assistant_id: "steps", input: { steps: 1, delayMs: 20_000 }, run_timeout: 0.3 },
    });
    const ended = (await server.request("GET", `/v1/runs/${run.run_id}/join?timeout=10`)).body;
    assert.equal(ended.status, "timed_out");
    assert.deepEqual([ended.error.code, ended.error.retryable], ["run_timed_out", false]);
  });
});

describe("the queued-run quota holds for a resume", () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ configFile: TESTING_CONFIG, config: { queuedRunQuota: 2 } });
  });
  after(() => server.close());

  test("a resume while the tenant's queue is full is 429 quota_exceeded, and goes through once there is room", async () => {
    const create = (body: Record<string, unknown>, threadId?: string) =>
      server.request("POST", threadId ? `/v1/threads/${threadId}/runs` : "/v1/runs", { body });
    const { body: asking } = await create({ assistant_id: "approval", input: { request: "q" } });
    const paused = (await server.request("GET", `/v1/runs/${asking.run_id}/join?timeout=30`)).body;
    assert.equal(paused.status, "paused");
    const threadId = (await server.request("POST", "/v1/threads", { body: {} })).body.thread_id as string;
    const { body: slow } = await create({ assistant_id: "steps", input: { steps: 1, delayMs: 60_000 } }, threadId);
    const queued = [
      await create({ assistant_id: "echo", input: { message: "1" } }, threadId),
      await create({ assistant_id: "echo", input: { message: "2" } }, threadId),
    ];
    assert.deepEqual(
      queued.map((answer) => answer.body.status),
      ["pending", "pending"],
    );

    const refused = await server.request("POST", `/v1/runs/${paused.run_id}/resume`, { body: { resume: { approved: true } } });
    assert.deepEqual([refused.status, refused.body.code, refused.headers.get("retry-after")], [429, "quota_exceeded", "5"]);
    assert.deepEqual((await server.request("GET", `/v1/runs/${paused.run_id}`)).body.superseded_by_run_id, null);

    await server.request("POST", `/v1/runs/${queued[1]!.body.run_id}/cancel`);
    const resumed = await server.request("POST", `/v1/runs/${paused.run_id}/resume`, { body: { resume: { approved: true } } });
    assert.equal(resumed.status, 202);
    await server.request("POST", `/v1/runs/${slow.run_id}/cancel`);
  });
});
