import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import type { Checkpoint, Client, Run } from "@langchain/langgraph-sdk";
import { collect, lgClient, rejectsWith, waitUntilRunning } from "./support/langgraph.ts";
import { startTestServer, type TestServer } from "./support/server.ts";

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));

/**
 * The LangGraph API's management calls through `@langchain/langgraph-sdk`'s Client: assistants
 * created, updated, deleted and versioned; threads copied and pruned; state at a checkpoint
 * object; history by GET; batches of stateless runs; runs deleted and cancelled in bulk; a
 * thread's crons deleted with it.
 */
describe("LangGraph API through the SDK: managing assistants, threads and runs", () => {
  let server: TestServer;
  let client: Client;
  /** Runs a test leaves running on purpose; cancelled (through /v1) before the server closes. */
  const slowRuns: string[] = [];
  before(async () => {
    server = await startTestServer({ configFile: TESTING_CONFIG });
    client = await lgClient(server);
  });
  after(async () => {
    for (const runId of slowRuns) await server.request("POST", `/v1/runs/${runId}/cancel`);
    await server.close();
  });

  /** Starts a `steps` run on the thread that runs far longer than any test (a cancel stops it at once). */
  async function startSlow(threadId: string, multitaskStrategy?: "enqueue"): Promise<Run> {
    const run = await client.runs.create(threadId, "steps", { input: { steps: 400, delayMs: 250 }, multitaskStrategy });
    slowRuns.push(run.run_id);
    return run;
  }

  /** Waits (through /v1) until the run has ended or paused, and answers its Rudder status. */
  async function ended(runId: string): Promise<string> {
    const joined = await server.request("GET", `/v1/runs/${runId}/join?timeout=60`);
    assert.equal(joined.status, 200, JSON.stringify(joined.body));
    return joined.body.status as string;
  }

  /** The run's Rudder status through /v1 (which tells `cancelling` from `running`; the LangGraph surface shows both as running). */
  async function rudderStatus(runId: string): Promise<string> {
    return (await server.request("GET", `/v1/runs/${runId}`)).body.status as string;
  }

  /** runs.wait on a thread, answering the run's id. */
  async function finishedRun(threadId: string, assistantId: string, input: Record<string, unknown>): Promise<string> {
    let runId = "";
    await client.runs.wait(threadId, assistantId, { input, onRunCreated: (meta) => (runId = meta.run_id) });
    assert.ok(runId);
    return runId;
  }

  describe("assistants", () => {
    test("create: a new assistant of a graph (200), found by get and search, and runnable", async () => {
      const created = await client.assistants.create({
        graphId: "echo",
        name: "Managed echo",
        metadata: { a: 1 },
        config: { configurable: { tone: "plain" } },
      });
      assert.ok(created.assistant_id);
      assert.equal(created.graph_id, "echo");
      assert.equal(created.name, "Managed echo");
      assert.deepEqual(created.metadata, { a: 1 });
      assert.equal(created.version, 1);

      const fetched = await client.assistants.get(created.assistant_id);
      assert.equal(fetched.assistant_id, created.assistant_id);
      assert.equal(fetched.name, "Managed echo");
      const found = await client.assistants.search({ graphId: "echo", limit: 100 });
      assert.ok(
        found.some((assistant) => assistant.assistant_id === created.assistant_id),
        JSON.stringify(found.map((assistant) => assistant.assistant_id)),
      );

      const input = { message: "via a created assistant" };
      assert.deepEqual(await client.runs.wait(null, created.assistant_id, { input }), await client.runs.wait(null, "echo", { input }));

      const raw = await server.request("POST", "/assistants", { body: { graph_id: "echo" } });
      assert.equal(raw.status, 200, "200 as on the Platform, not /v1's 201");
    });

    test("create with an explicit id: raise (the default) is a 409 the second time, do_nothing answers the existing one", async () => {
      const assistantId = `managed-${randomUUID()}`;
      const first = await client.assistants.create({ graphId: "echo", assistantId, name: "first" });
      assert.equal(first.assistant_id, assistantId);
      await rejectsWith(client.assistants.create({ graphId: "echo", assistantId, name: "second" }), 409);
      const again = await client.assistants.create({ graphId: "echo", assistantId, name: "third", ifExists: "do_nothing" });
      assert.deepEqual([again.assistant_id, again.name], [assistantId, "first"]);
      assert.equal((await client.assistants.get(assistantId)).name, "first");
    });

    test("create of an unknown graph is a 422", async () => {
      await rejectsWith(client.assistants.create({ graphId: "no-such-graph" }), 422);
    });

    test("update: the name replaced, metadata merged with the stored; the one version Rudder keeps is replaced", async () => {
      const created = await client.assistants.create({ graphId: "echo", name: "n1", metadata: { a: 1 } });
      const updated = await client.assistants.update(created.assistant_id, { name: "n2", metadata: { b: 2 } });
      assert.equal(updated.assistant_id, created.assistant_id);
      assert.equal(updated.name, "n2");
      assert.deepEqual(updated.metadata, { a: 1, b: 2 });
      assert.equal(updated.version, 1, "docs/langgraph-api.md: Rudder keeps one version of an assistant");
      const fetched = await client.assistants.get(created.assistant_id);
      assert.deepEqual([fetched.name, fetched.metadata, fetched.version], ["n2", { a: 1, b: 2 }, 1]);
      assert.deepEqual((await client.assistants.update(created.assistant_id, { metadata: { c: 3 } })).metadata, { a: 1, b: 2, c: 3 });
    });

    test("update of a graph's default assistant is 409, of an unknown one 404", async () => {
      await rejectsWith(client.assistants.update("echo", { name: "renamed" }), 409);
      await rejectsWith(client.assistants.update(`missing-${randomUUID()}`, { name: "x" }), 404);
    });

    test("delete: then get and a second delete are 404; a graph's default assistant is 409", async () => {
      const created = await client.assistants.create({ graphId: "echo", name: "doomed" });
      await client.assistants.delete(created.assistant_id);
      await rejectsWith(client.assistants.get(created.assistant_id), 404);
      await rejectsWith(client.assistants.delete(created.assistant_id), 404);
      await rejectsWith(client.assistants.delete("echo"), 409);
      assert.equal((await client.assistants.get("echo")).assistant_id, "echo");
    });

    test("getVersions: one entry, the assistant's current version, also after an update", async () => {
      const created = await client.assistants.create({
        graphId: "echo",
        name: "versioned",
        metadata: { a: 1 },
        config: { configurable: { tone: "plain" } },
      });
      for (const update of [undefined, { name: "versioned again", metadata: { b: 2 } }]) {
        if (update) await client.assistants.update(created.assistant_id, update);
        const assistant = await client.assistants.get(created.assistant_id);
        const versions = await client.assistants.getVersions(created.assistant_id);
        assert.equal(versions.length, 1, JSON.stringify(versions));
        const [version] = versions;
        assert.equal(version!.assistant_id, assistant.assistant_id);
        assert.equal(version!.version, assistant.version);
        assert.equal(version!.graph_id, "echo");
        assert.deepEqual(version!.config, assistant.config);
        assert.deepEqual(version!.metadata, assistant.metadata);
        assert.equal(version!.name, assistant.name);
        assert.ok(version!.created_at, JSON.stringify(version));
      }
    });

    test("setLatest: the current version answers the assistant; a version it does not have is 404", async () => {
      const created = await client.assistants.create({ graphId: "echo", name: "latest" });
      const latest = await client.assistants.setLatest(created.assistant_id, created.version);
      assert.deepEqual([latest.assistant_id, latest.version, latest.name], [created.assistant_id, created.version, "latest"]);
      await rejectsWith(client.assistants.setLatest(created.assistant_id, 99), 404);
    });
  });

  describe("threads", () => {
    test("copy: a new thread with the metadata, state and history of the original; runs on the copy leave the original alone", async () => {
      const original = await client.threads.create({ metadata: { origin: "copied" } });
      await client.runs.wait(original.thread_id, "steps", { input: { steps: 1, delayMs: 0 } });
      const originalThread = await client.threads.get(original.thread_id);
      const stateBefore = await client.threads.getState(original.thread_id);
      const historyBefore = await client.threads.getHistory(original.thread_id, { limit: 100 });

      const copy = await client.threads.copy(original.thread_id);
      assert.ok(copy.thread_id);
      assert.notEqual(copy.thread_id, original.thread_id);
      assert.deepEqual(copy.metadata, originalThread.metadata);
      assert.deepEqual((await client.threads.get(copy.thread_id)).metadata, originalThread.metadata);
      assert.deepEqual((await client.threads.getState(copy.thread_id)).values, stateBefore.values);
      assert.equal((await client.threads.getHistory(copy.thread_id, { limit: 100 })).length, historyBefore.length);

      const values = await client.runs.wait(copy.thread_id, "steps", { input: { steps: 3, delayMs: 0 } });
      assert.equal((values as { count: number }).count, 3, "the copy's run continued from the copied count of 1");
      assert.deepEqual((await client.threads.getState(original.thread_id)).values, stateBefore.values);
      assert.equal((await client.threads.getHistory(original.thread_id, { limit: 100 })).length, historyBefore.length);
    });

    test("copy of an unknown thread is a 404", async () => {
      await rejectsWith(client.threads.copy(randomUUID()), 404);
    });

    test("getState with a checkpoint object (POST …/state/checkpoint) equals getState at that checkpoint id", async () => {
      const thread = await client.threads.create();
      await client.runs.wait(thread.thread_id, "echo", { input: { message: "one" } });
      await client.runs.wait(thread.thread_id, "echo", { input: { message: "two" } });
      const history = await client.threads.getHistory(thread.thread_id);
      const older = history.find((state) => (state.values as { message?: string }).message === "one")!;
      assert.ok(older, JSON.stringify(history));
      const checkpointId = older.checkpoint.checkpoint_id!;
      const byId = await client.threads.getState(thread.thread_id, checkpointId);
      assert.equal(byId.checkpoint.checkpoint_id, checkpointId);
      assert.deepEqual(byId.values, { message: "one", reply: "one" });

      assert.deepEqual(await client.threads.getState(thread.thread_id, { checkpoint_id: checkpointId } as Checkpoint), byId);
      assert.deepEqual(await client.threads.getState(thread.thread_id, older.checkpoint), byId, "the checkpoint object history gives");
    });

    test("GET /threads/{id}/history?limit=2: two states, newest first, as the SDK's getHistory", async () => {
      const thread = await client.threads.create();
      await client.runs.wait(thread.thread_id, "echo", { input: { message: "one" } });
      await client.runs.wait(thread.thread_id, "echo", { input: { message: "two" } });
      const response = await fetch(`${server.url}/threads/${thread.thread_id}/history?limit=2`, {
        headers: { authorization: `Bearer ${await server.token()}` },
      });
      assert.equal(response.status, 200);
      const states = (await response.json()) as Awaited<ReturnType<Client["threads"]["getHistory"]>>;
      assert.equal(states.length, 2);
      assert.equal(states[0]!.checkpoint.checkpoint_id, (await client.threads.getState(thread.thread_id)).checkpoint.checkpoint_id);
      assert.equal(states[0]!.parent_checkpoint?.checkpoint_id, states[1]!.checkpoint.checkpoint_id, "newest first");
      assert.deepEqual(states, await client.threads.getHistory(thread.thread_id, { limit: 2 }));
    });

    test("deleting a thread deletes its crons (and no other thread's)", async () => {
      const thread = await client.threads.create();
      const other = await client.threads.create();
      const cron = await client.crons.createForThread(thread.thread_id, "echo", { schedule: "0 0 1 1 *" });
      const kept = await client.crons.createForThread(other.thread_id, "echo", { schedule: "0 0 1 1 *" });
      assert.deepEqual(
        (await client.crons.search({ threadId: thread.thread_id })).map((found) => found.cron_id),
        [cron.cron_id],
      );
      await client.threads.delete(thread.thread_id);
      assert.deepEqual(await client.crons.search({ threadId: thread.thread_id }), []);
      assert.deepEqual(
        (await client.crons.search({ threadId: other.thread_id })).map((found) => found.cron_id),
        [kept.cron_id],
      );
      await client.crons.delete(kept.cron_id);
    });

    test("prune with delete: the threads are gone", async () => {
      const first = await client.threads.create();
      const second = await client.threads.create();
      await client.runs.wait(first.thread_id, "echo", { input: { message: "pruned" } });
      assert.deepEqual(await client.threads.prune([first.thread_id, second.thread_id]), { pruned_count: 2 });
      await rejectsWith(client.threads.get(first.thread_id), 404);
      await rejectsWith(client.threads.get(second.thread_id), 404);
    });

    test("prune with keep_latest: the thread stays with its latest state and a history of one", async () => {
      const thread = await client.threads.create();
      await client.runs.wait(thread.thread_id, "steps", { input: { steps: 1, delayMs: 0 } });
      await client.runs.wait(thread.thread_id, "steps", { input: { steps: 2, delayMs: 0 } });
      const latest = await client.threads.getState(thread.thread_id);
      assert.ok((await client.threads.getHistory(thread.thread_id)).length > 1);

      assert.deepEqual(await client.threads.prune([thread.thread_id], { strategy: "keep_latest" }), { pruned_count: 1 });
      assert.equal((await client.threads.get(thread.thread_id)).thread_id, thread.thread_id);
      assert.deepEqual((await client.threads.getState(thread.thread_id)).values, latest.values);
      assert.equal((await client.threads.getHistory(thread.thread_id)).length, 1);
    });
  });

  describe("runs", () => {
    test("createBatch: stateless runs with distinct ids, each run to success with its own input", async () => {
      const messages = ["b1", "b2", "b3"];
      const runs = await client.runs.createBatch(messages.map((message) => ({ assistantId: "echo", input: { message } })));
      assert.equal(runs.length, 3);
      assert.equal(new Set(runs.map((run) => run.run_id)).size, 3);
      for (const [i, run] of runs.entries()) {
        assert.equal(run.thread_id, null);
        assert.equal(await ended(run.run_id), "succeeded");
        const parts = await collect(client.runs.joinStream(null, run.run_id));
        assert.deepEqual(parts.filter((part) => part.event === "values").at(-1)?.data, { message: messages[i], reply: messages[i] });
      }
    });

    test("createBatch of nothing is a 422", async () => {
      await rejectsWith(client.runs.createBatch([]), 422);
    });

    test("delete: a finished run is gone from get and list; a pending or running run is 409; unknown 404", async () => {
      const thread = await client.threads.create();
      const deleted = await finishedRun(thread.thread_id, "echo", { message: "one" });
      const kept = await finishedRun(thread.thread_id, "echo", { message: "two" });
      await client.runs.delete(thread.thread_id, deleted);
      await rejectsWith(client.runs.get(thread.thread_id, deleted), 404);
      assert.deepEqual(
        (await client.runs.list(thread.thread_id)).map((run) => run.run_id),
        [kept],
      );
      await rejectsWith(client.runs.delete(thread.thread_id, deleted), 404);
      await rejectsWith(client.runs.delete(thread.thread_id, randomUUID()), 404);

      const running = await startSlow(thread.thread_id);
      const pending = await startSlow(thread.thread_id, "enqueue");
      await waitUntilRunning(server, running.run_id);
      await rejectsWith(client.runs.delete(thread.thread_id, running.run_id), 409);
      await rejectsWith(client.runs.delete(thread.thread_id, pending.run_id), 409);
      assert.equal((await client.runs.get(thread.thread_id, running.run_id)).status, "running");
      assert.equal((await client.runs.get(thread.thread_id, pending.run_id)).status, "pending");
    });

    test("delete: a paused run is 409 until a resume carries it on; then it can go, and its successor stays", async () => {
      const thread = await client.threads.create();
      await client.runs.wait(thread.thread_id, "approval", { input: { request: "ship it" } });
      const [paused] = await client.runs.list(thread.thread_id);
      await rejectsWith(client.runs.delete(thread.thread_id, paused!.run_id), 409);
      await client.runs.wait(thread.thread_id, "approval", { command: { resume: { approved: true } } });
      const runs = await client.runs.list(thread.thread_id);
      assert.equal(runs.length, 2);
      await client.runs.delete(thread.thread_id, paused!.run_id);
      assert.deepEqual(
        (await client.runs.list(thread.thread_id)).map((run) => run.run_id),
        runs.filter((run) => run.run_id !== paused!.run_id).map((run) => run.run_id),
      );
    });

    test("cancelMany of a thread with status all: its running and pending runs end interrupted", async () => {
      const thread = await client.threads.create();
      const running = await startSlow(thread.thread_id);
      const pending = await startSlow(thread.thread_id, "enqueue");
      await waitUntilRunning(server, running.run_id);
      await client.runs.cancelMany({ threadId: thread.thread_id, status: "all" });
      for (const run of [running, pending]) {
        assert.equal(await ended(run.run_id), "cancelled");
        assert.equal((await client.runs.get(thread.thread_id, run.run_id)).status, "interrupted");
      }
      assert.equal((await client.threads.get(thread.thread_id)).status, "idle");
    });

    test("cancelMany by run ids: those runs end interrupted, another keeps running", async () => {
      const threads = await Promise.all([client.threads.create(), client.threads.create(), client.threads.create()]);
      const [a, b, other] = await Promise.all(threads.map((thread) => startSlow(thread.thread_id)));
      await waitUntilRunning(server, a!.run_id);
      await client.runs.cancelMany({ runIds: [a!.run_id, b!.run_id] });
      for (const run of [a!, b!]) {
        assert.equal(await ended(run.run_id), "cancelled");
        assert.equal((await client.runs.get(run.thread_id, run.run_id)).status, "interrupted");
      }
      assert.ok(["pending", "running"].includes(await rudderStatus(other!.run_id)), "not cancelling");
    });

    test('cancel with action "rollback": a run that had not started is deleted; a running one is stopped and kept, as on the Platform', async () => {
      const thread = await client.threads.create();
      const running = await startSlow(thread.thread_id);
      const queued = await startSlow(thread.thread_id, "enqueue");
      const another = await startSlow(thread.thread_id, "enqueue");
      await waitUntilRunning(server, running.run_id);
      await client.runs.cancel(thread.thread_id, queued.run_id, true, "rollback");
      await rejectsWith(client.runs.get(thread.thread_id, queued.run_id), 404);
      await client.runs.cancelMany({ runIds: [another.run_id], action: "rollback" });
      await rejectsWith(client.runs.get(thread.thread_id, another.run_id), 404);
      await client.runs.cancel(thread.thread_id, running.run_id, true, "rollback");
      assert.equal((await client.runs.get(thread.thread_id, running.run_id)).status, "interrupted");
      assert.deepEqual(
        (await client.runs.list(thread.thread_id)).map((run) => run.run_id),
        [running.run_id],
      );
    });

    test("cancelMany with status pending: the pending run ends interrupted, the running one keeps running", async () => {
      const thread = await client.threads.create();
      const running = await startSlow(thread.thread_id);
      const pending = await startSlow(thread.thread_id, "enqueue");
      await waitUntilRunning(server, running.run_id);
      await client.runs.cancelMany({ threadId: thread.thread_id, status: "pending" });
      assert.equal(await ended(pending.run_id), "cancelled");
      assert.equal((await client.runs.get(thread.thread_id, pending.run_id)).status, "interrupted");
      assert.equal(await rudderStatus(running.run_id), "running", "not cancelling");
    });
  });
});
