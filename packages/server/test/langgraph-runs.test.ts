import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import type { Client } from "@langchain/langgraph-sdk";
import { collect, lgClient, rejectsWith, waitUntilRunning } from "./support/langgraph.ts";
import { startTestServer, type TestServer } from "./support/server.ts";

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));

/**
 * The LangGraph API's run control through `@langchain/langgraph-sdk`: interrupts and Command
 * resume, multitask strategies, cancel, failures, tenants and roles, 404s, and runs created here
 * steered through /v1 (and /v1 runs listed here).
 */
describe("LangGraph API through the SDK: interrupts, multitask, cancel, failures, tenants, interop", () => {
  let server: TestServer;
  let client: Client;
  before(async () => {
    server = await startTestServer({ configFile: TESTING_CONFIG });
    client = await lgClient(server);
  });
  after(() => server.close());

  /** A run of `steps` that takes a while (each step waits `delayMs`, and a cancel stops it at once). */
  const slow = { steps: 40, delayMs: 250 };

  test("an interrupt answers __interrupt__, the thread is interrupted, and command.resume continues it", async () => {
    const thread = await client.threads.create();
    const paused = await client.runs.wait(thread.thread_id, "approval", { input: { request: "ship it" } });
    const interrupts = (paused as { __interrupt__: { id: string; value: { question: string; draft: string } }[] }).__interrupt__;
    assert.equal(interrupts.length, 1);
    assert.ok(interrupts[0]!.id);
    assert.deepEqual(interrupts[0]!.value, { question: "Approve this plan?", draft: "Plan for: ship it" });
    const interrupted = await client.threads.get(thread.thread_id);
    assert.equal(interrupted.status, "interrupted");
    assert.equal(Object.values(interrupted.interrupts).flat().length, 1);
    const state = await client.threads.getState(thread.thread_id);
    assert.deepEqual(state.next, ["review"]);
    const [first] = await client.runs.list(thread.thread_id);
    assert.equal(first!.status, "success");

    // Resume through a stream, as useStream does: the paused run's successor continues it.
    const parts = await collect(
      client.runs.stream(thread.thread_id, "approval", { command: { resume: { approved: true } }, streamMode: ["values", "updates"] }),
    );
    assert.equal(parts[0]!.event, "metadata");
    assert.deepEqual(parts.filter((part) => part.event === "values").at(-1)!.data, {
      request: "ship it",
      draft: "Plan for: ship it",
      approved: true,
      outcome: "done: Plan for: ship it",
    });
    const resumedId = (parts[0]!.data as { run_id: string }).run_id;
    const resumed = await server.request("GET", `/v1/runs/${resumedId}`);
    assert.equal(resumed.body.metadata.resumed_from_run_id, first!.run_id);
    assert.equal((await client.threads.get(thread.thread_id)).status, "idle");
  });

  test("an interrupt seen in an updates stream, then waits with command resume, update and goto", async () => {
    const thread = await client.threads.create();
    const parts = await collect(client.runs.stream(thread.thread_id, "approval", { input: { request: "deploy" }, streamMode: "updates" }));
    const interrupt = parts.find((part) => part.event === "updates" && "__interrupt__" in (part.data as object));
    assert.ok(interrupt, JSON.stringify(parts));
    const done = await client.runs.wait(thread.thread_id, "approval", { command: { resume: { approved: false } } });
    assert.equal((done as { outcome: string }).outcome, "rejected");

    // update and goto ride along: the update is applied as the run resumes.
    const edited = await client.threads.create();
    await client.runs.wait(edited.thread_id, "approval", { input: { request: "draft" } });
    const approved = await client.runs.wait(edited.thread_id, "approval", {
      command: { resume: { approved: true }, update: { draft: "edited plan" } },
    });
    assert.equal((approved as { outcome: string }).outcome, "done: edited plan");
    // goto on a thread with nothing paused: a run that starts at that node.
    const jumped = await client.runs.wait(edited.thread_id, "approval", { command: { goto: "act", update: { approved: false } } });
    assert.equal((jumped as { outcome: string }).outcome, "rejected");
  });

  test("multitask: reject is the default (409), enqueue waits its turn", async () => {
    const thread = await client.threads.create();
    const first = await client.runs.create(thread.thread_id, "steps", { input: { steps: 3, delayMs: 200 } });
    await rejectsWith(client.runs.create(thread.thread_id, "steps", { input: { steps: 1 } }), 409);
    const queued = await client.runs.create(thread.thread_id, "steps", { input: { steps: 4 }, multitaskStrategy: "enqueue" });
    assert.equal(queued.multitask_strategy, "enqueue");
    await client.runs.join(thread.thread_id, first.run_id);
    const values = await client.runs.join(thread.thread_id, queued.run_id);
    assert.equal((values as { count: number }).count, 4, "the queued run continued the first one's state");
    const firstRun = await server.request("GET", `/v1/runs/${first.run_id}`);
    const queuedRun = await server.request("GET", `/v1/runs/${queued.run_id}`);
    assert.ok(queuedRun.body.started_at >= firstRun.body.finished_at, "enqueued runs start after the previous ends");
  });

  test("updateState while a run of the thread is pending or running is a 409, as on the Platform; once it ends, the edit lands", async () => {
    const thread = await client.threads.create();
    const running = await client.runs.create(thread.thread_id, "steps", { input: { steps: 3, delayMs: 200 } });
    // The run is pending or running from its creation on: either way the edit would be lost under it.
    await rejectsWith(client.threads.updateState(thread.thread_id, { values: { label: "edited" } }), 409);
    await client.runs.join(thread.thread_id, running.run_id);
    await client.threads.updateState(thread.thread_id, { values: { label: "edited" } });
    const state = await client.threads.getState(thread.thread_id);
    assert.equal((state.values as { label?: string }).label, "edited");
  });

  test("multitask interrupt cancels the running run (interrupted); rollback also drops what it wrote", async () => {
    const thread = await client.threads.create();
    const a = await client.runs.create(thread.thread_id, "steps", { input: slow });
    await waitUntilRunning(server, a.run_id);
    const b = await client.runs.create(thread.thread_id, "steps", { input: { steps: 1, delayMs: 0 }, multitaskStrategy: "interrupt" });
    assert.equal(b.multitask_strategy, "interrupt");
    await client.runs.join(thread.thread_id, b.run_id);
    assert.equal((await client.runs.get(thread.thread_id, a.run_id)).status, "interrupted");
    assert.equal((await client.runs.get(thread.thread_id, b.run_id)).status, "success");

    // Rollback: a base state (count 1), a run that writes further steps, then a rollback run.
    const rolled = await client.threads.create();
    await client.runs.wait(rolled.thread_id, "steps", { input: { steps: 1, delayMs: 0 } });
    const writer = await client.runs.create(rolled.thread_id, "steps", { input: slow });
    for (let i = 0; i < 400 && ((await client.threads.getState(rolled.thread_id)).values as { count: number }).count < 3; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const values = await client.runs.wait(rolled.thread_id, "steps", { input: { steps: 2, delayMs: 0 }, multitaskStrategy: "rollback" });
    assert.equal((values as { count: number }).count, 2, "started from the base state, not from the cancelled run's steps");
    assert.equal((await client.runs.get(rolled.thread_id, writer.run_id)).status, "interrupted");
    assert.equal(((await client.threads.getState(rolled.thread_id)).values as { count: number }).count, 2);
  });

  test("cancel a queued run and a running one: both end interrupted; wait=true returns once stopped", async () => {
    const thread = await client.threads.create();
    const running = await client.runs.create(thread.thread_id, "steps", { input: slow });
    const queued = await client.runs.create(thread.thread_id, "steps", { input: { steps: 1 }, multitaskStrategy: "enqueue" });
    await waitUntilRunning(server, running.run_id);
    assert.equal(await client.runs.cancel(thread.thread_id, queued.run_id), undefined);
    assert.equal((await client.runs.get(thread.thread_id, queued.run_id)).status, "interrupted");
    await client.runs.cancel(thread.thread_id, running.run_id, true);
    assert.equal((await client.runs.get(thread.thread_id, running.run_id)).status, "interrupted");
    const v1 = await server.request("GET", `/v1/runs/${queued.run_id}`);
    assert.equal(v1.body.status, "cancelled");
    assert.equal(v1.body.started_at, null);

    // A cancelled run's join answers the values it left on the thread, as the Platform's does.
    const stepping = await client.threads.create();
    const stopped = await client.runs.create(stepping.thread_id, "steps", { input: slow });
    const counted = async () => ((await client.threads.getState(stepping.thread_id)).values as { count?: number }).count ?? 0;
    while ((await counted()) < 1) await new Promise((resolve) => setTimeout(resolve, 50));
    await client.runs.cancel(stepping.thread_id, stopped.run_id, true);
    const leftBehind = (await client.runs.join(stepping.thread_id, stopped.run_id)) as { count?: number };
    assert.ok((leftBehind.count ?? 0) >= 1, JSON.stringify(leftBehind));
    assert.deepEqual(leftBehind, (await client.threads.getState(stepping.thread_id)).values);

    // cancel_on_disconnect: a joiner that leaves before the end cancels the run.
    const fresh = await client.threads.create();
    const left = await client.runs.create(fresh.thread_id, "steps", { input: { steps: 20, delayMs: 250 } });
    await waitUntilRunning(server, left.run_id);
    const leaving = new AbortController();
    for await (const part of client.runs.joinStream(fresh.thread_id, left.run_id, { cancelOnDisconnect: true, signal: leaving.signal })) {
      if (part.event === "metadata") break;
    }
    leaving.abort();
    const joined = await server.request("GET", `/v1/runs/${left.run_id}/join?timeout=60`);
    assert.equal(joined.body.status, "cancelled");
  });

  test("a long wait or join sends a newline each second until its answer (as the Platform does); a short one none", async () => {
    const token = await server.token();
    const post = (path: string, body: unknown) =>
      fetch(`${server.url}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const thread = await client.threads.create();
    // Four ticks 900 ms apart: the run takes about 2.7 s, so at least two heartbeats precede the values.
    const long = await post(`/threads/${thread.thread_id}/runs/wait`, { assistant_id: "ticks", input: { count: 4, interval_ms: 900 } });
    assert.equal(long.status, 200);
    assert.match(long.headers.get("content-type")!, /^application\/json/);
    assert.match(long.headers.get("content-location")!, new RegExp(`^/threads/${thread.thread_id}/runs/`));
    const text = await long.text();
    assert.match(text, /^\n\n+\{/, JSON.stringify(text.slice(0, 20)));
    assert.equal((JSON.parse(text) as { done: number }).done, 4);

    const quick = await post(`/threads/${thread.thread_id}/runs/wait`, { assistant_id: "echo", input: { message: "q" } });
    assert.match(await quick.text(), /^\{/);

    // The SDK's wait and join read through the heartbeats.
    const waited = await client.runs.wait(null, "ticks", { input: { count: 3, interval_ms: 700 } });
    assert.equal((waited as { done: number }).done, 3);
    const run = await client.runs.create(thread.thread_id, "ticks", { input: { count: 3, interval_ms: 700 } });
    assert.equal(((await client.runs.join(thread.thread_id, run.run_id)) as { done: number }).done, 3);
  });

  test("a wait whose client leaves cancels its run with on_disconnect cancel, and leaves it running without", async () => {
    const token = await server.token();
    // The client leaves while the wait has answered nothing yet (under 1 s), and after its heartbeats began.
    for (const leaveAfterMs of [300, 1500]) {
      for (const onDisconnect of ["cancel", "continue"] as const) {
        const thread = await client.threads.create();
        const leaving = new AbortController();
        const waiting = fetch(`${server.url}/threads/${thread.thread_id}/runs/wait`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify({ assistant_id: "steps", input: { steps: 20, delayMs: 250 }, on_disconnect: onDisconnect }),
          signal: leaving.signal,
        }).then((response) => response.text());
        let runId: string | undefined;
        while (!runId) {
          const [run] = (await server.request("GET", `/v1/threads/${thread.thread_id}/runs`)).body as { run_id: string; status: string }[];
          if (run?.status === "running") runId = run.run_id;
          else await new Promise((resolve) => setTimeout(resolve, 50));
        }
        await new Promise((resolve) => setTimeout(resolve, leaveAfterMs));
        leaving.abort();
        await assert.rejects(waiting, { name: "AbortError" });
        if (onDisconnect === "cancel") {
          const joined = await server.request("GET", `/v1/runs/${runId}/join?timeout=30`);
          assert.equal(joined.body.status, "cancelled", `left after ${leaveAfterMs} ms`);
        } else {
          await new Promise((resolve) => setTimeout(resolve, 300));
          assert.equal((await server.request("GET", `/v1/runs/${runId}`)).body.status, "running", `left after ${leaveAfterMs} ms`);
          await server.request("POST", `/v1/runs/${runId}/cancel`);
        }
      }
    }
  });

  test("a failing graph: wait throws, raiseError false shows __error__, the stream ends with an error event", async () => {
    const thread = await client.threads.create();
    await assert.rejects(client.runs.wait(thread.thread_id, "failing", { input: { mode: "plain" } }), /node exploded/);
    const [failed] = await client.runs.list(thread.thread_id);
    assert.equal(failed!.status, "error");
    assert.equal((await client.threads.get(thread.thread_id)).status, "error");
    const body = await client.runs.wait(null, "failing", { input: { mode: "plain" }, raiseError: false });
    assert.deepEqual(body, { __error__: { error: "run_failed", message: "node exploded" } });
    const parts = await collect(client.runs.stream(null, "failing", { input: { mode: "plain" } }));
    assert.equal(parts[0]!.event, "metadata");
    assert.equal(parts.at(-1)!.event, "error");
    assert.match((parts.at(-1)!.data as { message: string }).message, /node exploded/);
  });

  test("tenants: another tenant's threads and runs are 404; viewers read but cannot write", async () => {
    const thread = await client.threads.create({ metadata: { owner: "t1" } });
    let runId = "";
    await client.runs.wait(thread.thread_id, "echo", { input: { message: "mine" }, onRunCreated: (meta) => (runId = meta.run_id) });
    const stranger = await lgClient(server, "t2");
    await rejectsWith(stranger.threads.get(thread.thread_id), 404);
    await rejectsWith(stranger.threads.getState(thread.thread_id), 404);
    await rejectsWith(stranger.runs.get(thread.thread_id, runId), 404);
    await rejectsWith(stranger.runs.create(thread.thread_id, "echo", { input: { message: "theirs" } }), 404);
    await assert.rejects(collect(stranger.runs.joinStream(thread.thread_id, runId)), /404/);
    assert.equal((await stranger.threads.search({ metadata: { owner: "t1" } })).length, 0);

    const viewer = await lgClient(server, "t1", ["viewer"]);
    assert.equal((await viewer.threads.get(thread.thread_id)).thread_id, thread.thread_id);
    assert.deepEqual(await viewer.runs.join(thread.thread_id, runId), { message: "mine", reply: "mine" });
    await rejectsWith(viewer.threads.create(), 403);
    await rejectsWith(viewer.runs.create(thread.thread_id, "echo", { input: { message: "x" } }), 403);
    await rejectsWith(viewer.runs.cancel(thread.thread_id, runId), 403);
    // A reader cannot cancel by leaving either.
    await assert.rejects(collect(viewer.runs.joinStream(thread.thread_id, runId, { cancelOnDisconnect: true })), /403/);
    await rejectsWith(viewer.runs.join(thread.thread_id, runId, { cancelOnDisconnect: true }), 403);
  });

  test("an Idempotency-Key on a run creation replays it, as on /v1; another request with the key is 409", async () => {
    const thread = await client.threads.create();
    for (const path of ["/runs", `/threads/${thread.thread_id}/runs`, "/runs/wait"]) {
      const headers = { "idempotency-key": `lg-${randomUUID()}` };
      const body = { assistant_id: "echo", input: { message: "once" }, multitask_strategy: "enqueue" };
      const first = await server.request("POST", path, { body, headers });
      const again = await server.request("POST", path, { body, headers });
      assert.equal(first.status, 200, JSON.stringify(first.body));
      assert.equal(again.status, 200, JSON.stringify(again.body));
      const runIdOf = (answer: typeof first) =>
        (answer.body.run_id as string | undefined) ?? answer.headers.get("content-location")!.split("/").at(-1);
      assert.equal(runIdOf(again), runIdOf(first), `${path}: the retry answers the first run`);
      const other = await server.request("POST", path, { body: { ...body, input: { message: "twice" } }, headers });
      assert.deepEqual([other.status, other.body.code], [409, "idempotency_conflict"], path);
    }
  });

  test("404s: unknown threads, runs, assistants; a run under another thread's path", async () => {
    const thread = await client.threads.create();
    const missing = randomUUID();
    await rejectsWith(client.threads.get(missing), 404);
    await rejectsWith(client.threads.getState(missing), 404);
    await rejectsWith(client.threads.getHistory(missing), 404);
    await rejectsWith(client.runs.get(thread.thread_id, missing), 404);
    await rejectsWith(client.runs.join(thread.thread_id, missing), 404);
    await rejectsWith(client.runs.cancel(thread.thread_id, missing), 404);
    await rejectsWith(client.runs.create(missing, "echo", { input: { message: "x" } }), 404);
    await rejectsWith(client.runs.create(missing, "echo", { input: { message: "x" }, multitaskStrategy: "rollback" }), 404);
    await rejectsWith(client.runs.create(missing, "echo", { command: { resume: "yes" } }), 404);
    await rejectsWith(client.runs.wait(missing, "echo", { input: { message: "x" } }), 404);
    await assert.rejects(collect(client.runs.stream(missing, "echo", { input: { message: "x" } })), /404/);
    await rejectsWith(client.runs.create(thread.thread_id, "no-such-assistant", { input: {} }), 404);
    await rejectsWith(client.runs.list(missing), 404);
    let runId = "";
    await client.runs.wait(null, "echo", { input: { message: "x" }, onRunCreated: (meta) => (runId = meta.run_id) });
    await rejectsWith(client.runs.get(thread.thread_id, runId), 404);
    // What the facade cannot honour is a 422 naming it, not a silent difference.
    await rejectsWith(
      client.runs.create(thread.thread_id, "echo", { input: { message: "x" }, webhook: "http://example.invalid/hook" }),
      422,
    );
    await rejectsWith(client.threads.create({ threadId: "not-a-uuid" }), 422);
  });

  test("a run from a checkpoint its thread does not have (unknown, another thread's, another tenant's) is 404 not_found before any run exists; a known one runs", async () => {
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, "echo", { input: { message: "first" } });
    const [newest, older] = await client.threads.getHistory(thread.thread_id, { limit: 2 });
    const other = await client.threads.create();
    await client.runs.wait(other.thread_id, "echo", { input: { message: "other thread" } });
    const otherThreads = (await client.threads.getState(other.thread_id)).checkpoint.checkpoint_id!;
    const stranger = await lgClient(server, "t2");
    const theirs = await stranger.threads.create();
    await stranger.runs.wait(theirs.thread_id, "echo", { input: { message: "theirs" } });
    const theirCheckpoint = (await stranger.threads.getState(theirs.thread_id)).checkpoint.checkpoint_id!;
    const unknown = "1f1e0000-0000-6000-8000-000000000000";
    const runsBefore = (await client.runs.list(thread.thread_id)).length;

    const input = { message: "second" };
    for (const checkpointId of [unknown, otherThreads, theirCheckpoint]) {
      await rejectsWith(client.runs.wait(thread.thread_id, "echo", { input, checkpointId }), 404);
      await rejectsWith(client.runs.create(thread.thread_id, "echo", { input, checkpointId }), 404);
      await assert.rejects(collect(client.runs.stream(thread.thread_id, "echo", { input, checkpointId })), /404/);
      await rejectsWith(
        client.runs.wait(thread.thread_id, "echo", {
          input,
          checkpoint: { checkpoint_id: checkpointId, checkpoint_ns: "", checkpoint_map: null },
        }),
        404,
      );
    }
    const raw = await server.request("POST", `/threads/${thread.thread_id}/runs/wait`, {
      body: { assistant_id: "echo", input, checkpoint_id: unknown },
    });
    assert.equal(raw.status, 404);
    assert.equal(raw.body.code, "not_found");
    // A stateless run has no checkpoint to start from; if_not_exists cannot make a thread that has one.
    await rejectsWith(client.runs.wait(null, "echo", { input, checkpointId: older!.checkpoint.checkpoint_id! }), 404);
    const fresh = randomUUID();
    await rejectsWith(client.runs.wait(fresh, "echo", { input, checkpointId: unknown, ifNotExists: "create" }), 404);
    await rejectsWith(client.threads.get(fresh), 404);
    // /v1 names the checkpoint in the run's config: the same answer.
    const v1 = await server.request("POST", `/v1/threads/${thread.thread_id}/runs`, {
      body: { assistant_id: "echo", input, config: { configurable: { checkpoint_id: theirCheckpoint } } },
    });
    assert.equal(v1.status, 404);
    assert.equal(v1.body.code, "not_found");
    assert.equal((await client.runs.list(thread.thread_id)).length, runsBefore, "no run was created");
    assert.equal((await client.threads.getState(thread.thread_id)).checkpoint.checkpoint_id, newest!.checkpoint.checkpoint_id);

    // The thread's own checkpoints still start runs: from there, with the new input.
    const fromOlder = await client.runs.wait(thread.thread_id, "echo", { input, checkpointId: older!.checkpoint.checkpoint_id! });
    assert.deepEqual(fromOlder, { message: "second", reply: "second" });

    // Resuming an interrupted thread with a command names no unknown checkpoint either; the run stays paused.
    const asking = await client.threads.create();
    await client.runs.wait(asking.thread_id, "approval", { input: { request: "ship it" } });
    await rejectsWith(
      client.runs.wait(asking.thread_id, "approval", { command: { resume: { approved: true } }, checkpointId: unknown }),
      404,
    );
    assert.equal((await client.threads.get(asking.thread_id)).status, "interrupted");
  });

  test("interop: a run created through the SDK is steered through /v1; /v1 runs appear in the SDK's list", async () => {
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, "steerable", { input: { rounds: 200, waitMs: 200 } });
    const steered = await server.request("POST", `/v1/runs/${run.run_id}/steer`, { body: { kind: "stop", payload: { why: "enough" } } });
    assert.equal(steered.status, 202, JSON.stringify(steered.body));
    const values = (await client.runs.join(thread.thread_id, run.run_id)) as {
      stopped: boolean;
      received: { kind: string; payload: unknown }[];
    };
    assert.equal(values.stopped, true);
    assert.deepEqual(
      values.received.map((seen) => [seen.kind, seen.payload]),
      [["stop", { why: "enough" }]],
    );
    // The /v1 stream of the same run has Rudder's own events, which the LangGraph stream leaves out.
    const events = await server.request("GET", `/v1/runs/${run.run_id}/events?limit=1000`);
    assert.ok(events.body.some((event: { kind: string }) => event.kind === "run.steer.consumed"));
    const lgEvents = await collect(client.runs.joinStream(thread.thread_id, run.run_id, { streamMode: ["values", "updates", "custom"] }));
    assert.ok(lgEvents.every((part) => !part.event.startsWith("run")));

    const v1 = await server.request("POST", `/v1/threads/${thread.thread_id}/runs`, {
      body: { assistant_id: "steps", input: { steps: 1 } },
    });
    assert.equal(v1.status, 202);
    const listed = await client.runs.list(thread.thread_id);
    assert.deepEqual(
      listed.map((found) => found.run_id),
      [v1.body.run_id, run.run_id],
    );
    assert.equal(listed[0]!.multitask_strategy, "enqueue");
  });
});
