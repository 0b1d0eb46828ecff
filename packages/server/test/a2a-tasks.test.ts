import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { TaskState, type ListTasksRequest, type Task } from "@a2a-js/sdk";
import type { Client } from "@a2a-js/sdk/client";
import { TaskNotFoundError } from "@a2a-js/sdk/errors";
import {
  a2aClient,
  answerOf,
  artifactUpdates,
  asTask,
  cardUrl,
  collect,
  data,
  get,
  outputOf,
  readUntil,
  sendRequest,
  stateOf,
  text,
  textOf,
  userMessage,
} from "./support/a2a.ts";
import { startTestServer, type TestServer } from "./support/server.ts";

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));

/** ListTasks through the SDK client, every field of the request at its default unless `params` sets it. */
const listTasks = (client: Client, params: Partial<ListTasksRequest> = {}) =>
  client.listTasks({
    tenant: "",
    contextId: "",
    status: TaskState.TASK_STATE_UNSPECIFIED,
    pageToken: "",
    statusTimestampAfter: undefined,
    pageSize: undefined,
    historyLength: undefined,
    includeArtifacts: undefined,
    ...params,
  });

/** A2A task lists, concurrent sends, several API processes, and an agent that delegates to a Rudder assistant over A2A. */
describe("A2A tasks", () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ configFile: TESTING_CONFIG });
  });
  after(() => server.close());

  /** Waits (server-side) until the run behind a task is terminal or paused. */
  const settled = async (runId: string, tenant?: string) => {
    const joined = await server.request("GET", `/v1/runs/${runId}/join?timeout=60`, { tenant });
    assert.equal(joined.status, 200, JSON.stringify(joined.body));
  };

  describe("ListTasks (1.0)", () => {
    test("lists the assistant's tasks, newest first, by context and state, a page at a time", async () => {
      const chat = await a2aClient(server, "chat_messages", "1.0", { tenant: "t-list" });
      const first = asTask(await chat.sendMessage(sendRequest(userMessage([text("a")]))));
      const second = asTask(await chat.sendMessage(sendRequest(userMessage([text("b")], { contextId: first.contextId }))));
      const other = asTask(await chat.sendMessage(sendRequest(userMessage([text("c")]))));
      const list = (params: Partial<ListTasksRequest>, lister: Client = chat) => listTasks(lister, params);
      const all = await list({});
      assert.deepEqual(
        all.tasks.map((task) => task.id),
        [other.id, second.id, first.id],
      );
      assert.equal(all.totalSize, 3);
      assert.ok(
        all.tasks.every((task) => task.artifacts.length === 0),
        "artifacts only when asked for",
      );
      const inContext = await list({ contextId: first.contextId, includeArtifacts: true });
      assert.deepEqual(
        inContext.tasks.map((task) => task.id),
        [second.id, first.id],
      );
      assert.equal(answerOf(inContext.tasks[0]!), "You said: b (turn 2)");
      assert.equal((await list({ status: TaskState.TASK_STATE_COMPLETED })).totalSize, 3);
      assert.equal((await list({ status: TaskState.TASK_STATE_WORKING })).totalSize, 0);
      const page1 = await list({ pageSize: 2 });
      assert.equal(page1.tasks.length, 2);
      assert.ok(page1.nextPageToken);
      const page2 = await list({ pageSize: 2, pageToken: page1.nextPageToken });
      assert.deepEqual(
        page2.tasks.map((task) => task.id),
        [first.id],
      );
      assert.equal(page2.nextPageToken, "");
      // Another assistant's and another tenant's tasks are not listed.
      assert.equal((await list({}, await a2aClient(server, "echo", "1.0", { tenant: "t-list" }))).totalSize, 0);
      assert.equal((await list({}, await a2aClient(server, "chat_messages", "1.0", { tenant: "t-other" }))).totalSize, 0);
      const since = await list({ statusTimestampAfter: new Date(Date.now() + 60_000).toISOString() });
      assert.equal(since.totalSize, 0);
    });
  });

  describe("concurrency and processes", () => {
    test("one message sent five times at once starts one task, and leaves no stray context behind", async () => {
      const echo = await a2aClient(server, "echo", "1.0", { tenant: "t-race" });
      const rounds = 3;
      for (let round = 0; round < rounds; round++) {
        const message = userMessage([data({ message: `race ${round}` })]);
        const results = await Promise.all(Array.from({ length: 5 }, () => echo.sendMessage(sendRequest(message))));
        assert.equal(new Set(results.map((result) => asTask(result).id)).size, 1);
      }
      const [counts] = await server.database.db.query<{ runs: number; threads: number }>(
        "select (select count(*)::int from runs where tenant_id = $1) as runs, (select count(*)::int from threads where tenant_id = $1) as threads",
        ["t-race"],
      );
      assert.deepEqual(counts, { runs: rounds, threads: rounds });
    });

    test("a task started through one API process is streamed, read and cancelled through another", async () => {
      // A second API process on the same database, without a worker: the first one's worker runs
      // the tasks; the second knows them only from the database.
      const other = await startTestServer({
        configFile: TESTING_CONFIG,
        database: { ...server.database, drop: async () => {} },
        worker: false,
      });
      try {
        const there = await a2aClient(other, "chat_messages", "1.0");
        const events = await collect(there.sendMessageStream(sendRequest(userMessage([text("elsewhere")]))));
        assert.equal(stateOf(events.at(-1)!), TaskState.TASK_STATE_COMPLETED);
        assert.equal(textOf(artifactUpdates(events).at(-1)!.artifact!.parts), "You said: elsewhere (turn 1)");
        const taskId = (events[0]!.payload!.value as Task).id;
        const here = await a2aClient(server, "chat_messages", "1.0");
        assert.equal(answerOf(await here.getTask(get(taskId))), "You said: elsewhere (turn 1)");
        const steerable = await a2aClient(server, "steerable", "1.0");
        const started = asTask(
          await steerable.sendMessage(sendRequest(userMessage([data({ rounds: 1, waitMs: 60_000 })]), { returnImmediately: true })),
        );
        await readUntil(
          steerable.resubscribeTask({ tenant: "", id: started.id }),
          (event) => stateOf(event) === TaskState.TASK_STATE_WORKING,
        );
        const cancelledThere = await a2aClient(other, "steerable", "1.0");
        await cancelledThere.cancelTask({ tenant: "", id: started.id, metadata: undefined });
        await settled(started.id);
        assert.equal((await cancelledThere.getTask(get(started.id))).status?.state, TaskState.TASK_STATE_CANCELED);
      } finally {
        await other.server.close();
      }
    });
  });

  describe("a task is its first run and the runs that resume it, never what run metadata says", () => {
    test("a REST run whose metadata names a task changes nothing about it, and one naming nonsense is no task", async () => {
      const tenant = "t-spoof";
      const echo = await a2aClient(server, "echo", "1.0", { tenant });
      const task = asTask(await echo.sendMessage(sendRequest(userMessage([data({ message: "original" })]))));
      assert.equal(task.status?.state, TaskState.TASK_STATE_COMPLETED);
      const spoof = async (path: string, body: Record<string, unknown>) => {
        const created = await server.request("POST", path, { body, tenant });
        assert.equal(created.status, 202, JSON.stringify(created.body));
        await settled((created.body as { run_id: string }).run_id, tenant);
      };
      // A "re-run" that copied the task's metadata, on its context and stateless; another assistant's run naming it.
      await spoof(`/v1/threads/${task.contextId}/runs`, {
        assistant_id: "echo",
        input: { message: "SPOOFED" },
        metadata: { a2a_task_id: task.id },
      });
      await spoof("/v1/runs", { assistant_id: "echo", input: { message: "SPOOFED" }, metadata: { a2a_task_id: task.id } });
      await spoof("/v1/runs", { assistant_id: "echo-loud", input: { message: "SPOOFED" }, metadata: { a2a_task_id: task.id } });
      for (const bogus of [null, "", 123, { x: 1 }, "not-a-uuid"])
        await spoof("/v1/runs", { assistant_id: "echo", input: { message: "bogus" }, metadata: { a2a_task_id: bogus } });
      const read = await echo.getTask(get(task.id));
      assert.equal(read.metadata?.rudder_run_id, task.id);
      assert.equal(read.contextId, task.contextId);
      assert.deepEqual(outputOf(read), outputOf(task));
      const listed = await listTasks(echo);
      assert.deepEqual(
        listed.tasks.map((listedTask) => listedTask.id),
        [task.id],
      );
      assert.equal(listed.totalSize, 1);
      const loud = await a2aClient(server, "echo-loud", "1.0", { tenant });
      await assert.rejects(loud.getTask(get(task.id)), (error) => error instanceof TaskNotFoundError);
      await assert.rejects(echo.getTask(get("not-a-uuid")), (error) => error instanceof TaskNotFoundError);
    });

    test("a cancel that meets a run an answer has just resumed cancels the run that carries the task on", async () => {
      const tenant = "t-cancel-resume";
      // two_hops asks twice, so the run the answer resumes cannot succeed before the cancel lands.
      const approval = await a2aClient(server, "two_hops", "1.0", { tenant });
      const asked = asTask(await approval.sendMessage(sendRequest(userMessage([data({ answers: [] })]))));
      assert.equal(asked.status?.state, TaskState.TASK_STATE_INPUT_REQUIRED);
      const tasks = server.server.a2aTasks;
      // The cancel read the task while it waited for input; the answer resumed it before the cancel ran.
      const stale = (await tasks.current(tenant, "two_hops", asked.id))!;
      const resumed = await server.request("POST", `/v1/runs/${asked.id}/resume`, { body: { resume: { approved: true } }, tenant });
      assert.equal(resumed.status, 202, JSON.stringify(resumed.body));
      const cancelled = await tasks.cancel(tenant, "two_hops", stale);
      assert.equal(cancelled.run_id, (resumed.body as { run_id: string }).run_id);
      await settled(cancelled.run_id, tenant);
      assert.equal((await approval.getTask(get(asked.id))).status?.state, TaskState.TASK_STATE_CANCELED);
    });
  });

  describe("delegation", () => {
    test("a LangGraph agent that calls an agent over A2A delegates to a Rudder assistant through the gateway", async () => {
      // The delegating agent is itself a Rudder assistant, driven over A2A: a client asks it, it
      // asks chat_messages, and the answer comes back through both gateways.
      const token = await server.token("t1", ["operator"]);
      const created = await server.request("POST", "/v1/assistants", {
        body: {
          assistant_id: "delegator",
          graph_id: "delegate",
          name: "Delegator",
          context: { agent_card_url: cardUrl(server, "chat_messages"), token },
          metadata: { a2a_text_field: "task" },
        },
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const delegator = await a2aClient(server, "delegator", "1.0");
      const first = asTask(await delegator.sendMessage(sendRequest(userMessage([text("hello")]))));
      assert.equal(first.status?.state, TaskState.TASK_STATE_COMPLETED, JSON.stringify(first.status));
      assert.equal(outputOf(first).answer, "You said: hello (turn 1)");
      assert.equal(outputOf(first).remote_state, "TASK_STATE_COMPLETED");
      const remote = await server.request("GET", `/v1/runs/${outputOf(first).remote_task_id as string}`);
      assert.equal(remote.body.assistant_id, "chat_messages");
      // The next turn in the delegator's context continues the remote context too.
      const second = asTask(await delegator.sendMessage(sendRequest(userMessage([text("again")], { contextId: first.contextId }))));
      assert.equal(outputOf(second).answer, "You said: again (turn 2)");
      assert.equal(outputOf(second).remote_context_id, outputOf(first).remote_context_id);
    });
  });
});
