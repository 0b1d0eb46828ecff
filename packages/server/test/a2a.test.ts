import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { TaskState, type ListTasksRequest, type StreamResponse, type Task, type TaskArtifactUpdateEvent } from "@a2a-js/sdk";
import type { Client } from "@a2a-js/sdk/client";
import { TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError } from "@a2a-js/sdk/errors";
import {
  A2A_VERSIONS,
  a2aClient,
  cardUrl,
  collect,
  data,
  dataOf,
  rpc,
  sendRequest,
  sseData,
  text,
  textOf,
  userMessage,
} from "./support/a2a.ts";
import { startTestServer, type TestServer } from "./support/server.ts";
import { parseSse, type SseItem } from "./support/sse.ts";

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));

const stateOf = (event: StreamResponse): TaskState | undefined =>
  event.payload?.$case === "task" ? event.payload.value.status?.state : event.payload?.$case === "statusUpdate" ? event.payload.value.status?.state : undefined;
const artifactUpdates = (events: StreamResponse[]): TaskArtifactUpdateEvent[] =>
  events.flatMap((event) => (event.payload?.$case === "artifactUpdate" ? [event.payload.value] : []));
const asTask = (result: unknown): Task => {
  assert.ok(result && typeof result === "object" && "status" in result, `expected a task, got ${JSON.stringify(result)}`);
  return result as Task;
};
const outputOf = (task: Task): Record<string, unknown> => dataOf(task.artifacts[0]?.parts ?? [])[0] as Record<string, unknown>;
const answerOf = (task: Task): string => textOf(task.artifacts[0]?.parts ?? []);
const get = (id: string) => ({ tenant: "", id, historyLength: undefined });

/** Reads a task's stream until `until` holds for an event (the stream stays open), returning what it read. */
async function readUntil(stream: AsyncGenerator<StreamResponse>, until: (event: StreamResponse) => boolean): Promise<StreamResponse[]> {
  const seen: StreamResponse[] = [];
  // next() rather than for-await: leaving a for-await loop would close the stream.
  for (let next = await stream.next(); !next.done; next = await stream.next()) {
    seen.push(next.value);
    if (until(next.value)) return seen;
  }
  throw new Error(`the stream ended before the awaited event: ${JSON.stringify(seen.map(stateOf))}`);
}

describe("A2A gateway", () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ configFile: TESTING_CONFIG });
  });
  after(() => server.close());

  /** Waits (server-side) until the run behind a task is terminal or paused. */
  const settled = async (runId: string) => {
    const joined = await server.request("GET", `/v1/runs/${runId}/join?timeout=60`);
    assert.equal(joined.status, 200, JSON.stringify(joined.body));
  };

  for (const version of A2A_VERSIONS) {
    describe(`A2A ${version}`, () => {
      const client = (assistantId: string, who?: Parameters<typeof a2aClient>[3]): Promise<Client> => a2aClient(server, assistantId, version, who);

      test("the agent card describes the assistant, its JSON-RPC endpoint, streaming and bearer auth", async () => {
        const card = await (await client("echo-text")).getAgentCard();
        assert.equal(card.name, "Echo");
        assert.equal(card.description, "Echoes its input message back");
        assert.ok(card.version);
        assert.equal(card.capabilities?.streaming, true);
        assert.equal(card.capabilities?.pushNotifications, false);
        assert.deepEqual(card.defaultInputModes, ["text/plain", "application/json"]);
        assert.equal(card.skills.length, 1);
        assert.match(card.skills[0]!.description, /input field "message"/);
        assert.ok(card.securitySchemes.bearer);
        const endpoints = card.supportedInterfaces.map((found) => [found.protocolBinding, found.url]);
        assert.deepEqual(endpoints[0], ["JSONRPC", `${server.url}/a2a/echo-text`]);
        // An assistant without a name or description still gets non-empty ones.
        const bare = await (await client("steps")).getAgentCard();
        assert.equal(bare.name, "steps");
        assert.match(bare.description, /steps/);
      });

      test("a blocking send to a messages graph completes with the answer as text and the state as data", async () => {
        const task = asTask(await (await client("chat_messages")).sendMessage(sendRequest(userMessage([text("hello")]))));
        assert.equal(task.status?.state, TaskState.TASK_STATE_COMPLETED);
        assert.equal(answerOf(task), "You said: hello (turn 1)");
        assert.ok(Array.isArray(outputOf(task).messages));
        // The task is the run: same id; its context is the run's thread.
        const run = await server.request("GET", `/v1/runs/${task.id}`);
        assert.equal(run.body.thread_id, task.contextId);
        assert.deepEqual(run.body.input, { messages: [{ role: "user", content: "hello" }] });
      });

      test("a streaming send to a messages graph streams the model's tokens into the output artifact, then completes", async () => {
        const events = await collect((await client("chat_messages")).sendMessageStream(sendRequest(userMessage([text("stream me")]))));
        assert.equal(events[0]?.payload?.$case, "task");
        const chunks = artifactUpdates(events);
        const tokens = chunks.filter((chunk) => !chunk.lastChunk);
        assert.ok(tokens.length > 1, "tokens arrive one by one");
        assert.equal(tokens[0]!.append, false);
        assert.ok(tokens.slice(1).every((chunk) => chunk.append));
        assert.equal(tokens.map((chunk) => textOf(chunk.artifact!.parts)).join(""), "You said: stream me (turn 1)");
        const whole = chunks.at(-1)!;
        assert.equal(whole.lastChunk, true);
        assert.equal(whole.append, false);
        assert.equal(textOf(whole.artifact!.parts), "You said: stream me (turn 1)");
        assert.ok(chunks.every((chunk) => chunk.artifact?.artifactId === "output"));
        assert.equal(stateOf(events.at(-1)!), TaskState.TASK_STATE_COMPLETED);
        assert.ok(events.some((event) => event.payload?.$case === "statusUpdate" && stateOf(event) === TaskState.TASK_STATE_WORKING));
      });

      test("a data part is a data-input graph's input; text goes to the assistant's a2a_text_field", async () => {
        const echo = await client("echo");
        const viaData = asTask(await echo.sendMessage(sendRequest(userMessage([data({ message: "hi" })]))));
        assert.equal(viaData.status?.state, TaskState.TASK_STATE_COMPLETED);
        assert.deepEqual(outputOf(viaData), { message: "hi", reply: "hi" });
        assert.deepEqual(JSON.parse(answerOf(viaData)), { message: "hi", reply: "hi" }, "without an AI message, the text is the output as JSON");
        const streamed = await collect(echo.sendMessageStream(sendRequest(userMessage([data({ message: "streamed" })]))));
        assert.deepEqual(dataOf(artifactUpdates(streamed).at(-1)!.artifact!.parts)[0], { message: "streamed", reply: "streamed" });
        assert.equal(stateOf(streamed.at(-1)!), TaskState.TASK_STATE_COMPLETED);
        const viaText = asTask(await (await client("echo-text")).sendMessage(sendRequest(userMessage([text("hey")]))));
        assert.deepEqual(outputOf(viaText), { message: "hey", reply: "hey" });
      });

      test("two messages in one context continue one thread", async () => {
        const chat = await client("chat_messages");
        const first = asTask(await chat.sendMessage(sendRequest(userMessage([text("one")]))));
        const second = asTask(await chat.sendMessage(sendRequest(userMessage([text("two")], { contextId: first.contextId }))));
        assert.equal(second.contextId, first.contextId);
        assert.notEqual(second.id, first.id);
        assert.equal(answerOf(second), "You said: two (turn 2)");
      });

      test("an interrupt is input-required; a message with the task id resumes it and the task completes under the same id", async () => {
        const approval = await client("approval");
        const asked = asTask(await approval.sendMessage(sendRequest(userMessage([data({ request: "deploy" })]))));
        assert.equal(asked.status?.state, TaskState.TASK_STATE_INPUT_REQUIRED);
        const question = asked.status!.message!;
        assert.match(textOf(question.parts), /Approve this plan\?/);
        const [{ interrupts }] = dataOf(question.parts) as [{ interrupts: { value: { draft: string } }[] }];
        assert.equal(interrupts[0]!.value.draft, "Plan for: deploy");
        const done = asTask(await approval.sendMessage(sendRequest(userMessage([data({ approved: true })], { taskId: asked.id, contextId: asked.contextId }))));
        assert.equal(done.id, asked.id);
        assert.equal(done.status?.state, TaskState.TASK_STATE_COMPLETED);
        assert.equal(outputOf(done).outcome, "done: Plan for: deploy");
        const read = await approval.getTask(get(asked.id));
        assert.equal(read.status?.state, TaskState.TASK_STATE_COMPLETED);
        assert.notEqual(read.metadata?.rudder_run_id, asked.id, "a resumed run carries the task on");
      });

      test("streamed, an interrupt ends the stream at input-required; a streamed text answer resumes it", async () => {
        const approval = await client("approval-text");
        const first = await collect(approval.sendMessageStream(sendRequest(userMessage([text("ship it")]))));
        assert.equal(stateOf(first.at(-1)!), TaskState.TASK_STATE_INPUT_REQUIRED);
        const taskId = (first[0]!.payload!.value as Task).id;
        const second = await collect(approval.sendMessageStream(sendRequest(userMessage([text("yes")], { taskId }))));
        assert.equal((second[0]!.payload!.value as Task).id, taskId);
        assert.equal(stateOf(second.at(-1)!), TaskState.TASK_STATE_COMPLETED);
        // A text answer is the resume value: the graph approves only `{approved: true}`.
        assert.equal(outputOf(asTask(await approval.getTask(get(taskId)))).outcome, "rejected");
      });

      test("cancel stops a working task; a canceled task cannot be canceled again", async () => {
        const steerable = await client("steerable");
        const started = asTask(await steerable.sendMessage(sendRequest(userMessage([data({ rounds: 1, waitMs: 60_000 })]), { returnImmediately: true })));
        assert.ok([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING].includes(started.status!.state));
        await readUntil(steerable.resubscribeTask({ tenant: "", id: started.id }), (event) => stateOf(event) === TaskState.TASK_STATE_WORKING);
        const canceled = await steerable.cancelTask({ tenant: "", id: started.id, metadata: undefined });
        assert.equal(canceled.id, started.id);
        assert.ok([TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_WORKING].includes(canceled.status!.state));
        await settled(started.id);
        assert.equal((await steerable.getTask(get(started.id))).status?.state, TaskState.TASK_STATE_CANCELED);
        await assert.rejects(steerable.cancelTask({ tenant: "", id: started.id, metadata: undefined }), (error) => error instanceof TaskNotCancelableError);
      });

      test("cancel of an input-required task cancels it at once", async () => {
        const approval = await client("approval");
        const asked = asTask(await approval.sendMessage(sendRequest(userMessage([data({ request: "x" })]))));
        const canceled = await approval.cancelTask({ tenant: "", id: asked.id, metadata: undefined });
        assert.equal(canceled.status?.state, TaskState.TASK_STATE_CANCELED);
      });

      test("a dropped stream loses nothing: SubscribeToTask joins the running task and follows it to the end", async () => {
        const steerable = await client("steerable");
        const first = steerable.sendMessageStream(sendRequest(userMessage([data({ rounds: 1, waitMs: 60_000 })])));
        const before = await readUntil(first, (event) => stateOf(event) === TaskState.TASK_STATE_WORKING);
        await first.return(undefined); // the client goes away mid-task
        const taskId = (before[0]!.payload!.value as Task).id;
        const joined = steerable.resubscribeTask({ tenant: "", id: taskId });
        const seen = await readUntil(joined, (event) => stateOf(event) === TaskState.TASK_STATE_WORKING);
        assert.equal(seen[0]!.payload?.$case, "task");
        const steer = await server.request("POST", `/v1/runs/${taskId}/steer`, { body: { kind: "stop", payload: {} } });
        assert.equal(steer.status, 202);
        const rest = await collect(joined);
        assert.equal(stateOf(rest.at(-1)!), TaskState.TASK_STATE_COMPLETED);
        const output = dataOf(artifactUpdates(rest).at(-1)!.artifact!.parts)[0] as { stopped: boolean; received: { kind: string }[] };
        assert.equal(output.stopped, true);
        assert.deepEqual(output.received.map((message) => message.kind), ["stop"]);
        await assert.rejects(collect(steerable.resubscribeTask({ tenant: "", id: taskId })), (error) => error instanceof UnsupportedOperationError);
      });

      test("GetTask reads a task; an unknown one is task-not-found", async () => {
        const echo = await client("echo");
        const task = asTask(await echo.sendMessage(sendRequest(userMessage([data({ message: "kept" })]))));
        const read = await echo.getTask(get(task.id));
        assert.equal(read.id, task.id);
        assert.equal(read.contextId, task.contextId);
        assert.deepEqual(outputOf(read), { message: "kept", reply: "kept" });
        await assert.rejects(echo.getTask(get("00000000-0000-4000-8000-000000000000")), (error) => error instanceof TaskNotFoundError);
        // A task is its assistant's: another agent does not know it.
        await assert.rejects((await client("echo-text")).getTask(get(task.id)), (error) => error instanceof TaskNotFoundError);
      });

      test("a message id sent again returns the task it started; reused for another message it is refused", async () => {
        const echo = await client("echo");
        const message = userMessage([data({ message: "once" })]);
        const first = asTask(await echo.sendMessage(sendRequest(message)));
        const again = asTask(await echo.sendMessage(sendRequest(message)));
        assert.equal(again.id, first.id);
        const runs = await server.database.db.query<{ n: number }>("select count(*)::int as n from runs where metadata->>'a2a_message_id' = $1", [message.messageId]);
        assert.equal(runs[0]!.n, 1);
        await assert.rejects(echo.sendMessage(sendRequest({ ...message, parts: [data({ message: "different" })] })), /already sent with a different message/);
      });

      test("tenant isolation: another tenant's tasks, contexts and assistants are not found", async () => {
        const mine = asTask(await (await client("approval")).sendMessage(sendRequest(userMessage([data({ request: "secret" })]))));
        const theirs = await client("approval", { tenant: "t2" });
        await assert.rejects(theirs.getTask(get(mine.id)), (error) => error instanceof TaskNotFoundError);
        await assert.rejects(theirs.cancelTask({ tenant: "", id: mine.id, metadata: undefined }), (error) => error instanceof TaskNotFoundError);
        await assert.rejects(collect(theirs.resubscribeTask({ tenant: "", id: mine.id })), (error) => error instanceof TaskNotFoundError);
        await assert.rejects(theirs.sendMessage(sendRequest(userMessage([data({ approved: true })], { taskId: mine.id }))), (error) => error instanceof TaskNotFoundError);
        await assert.rejects(theirs.sendMessage(sendRequest(userMessage([data({ request: "x" })], { contextId: mine.contextId }))), /names no context/);
        assert.equal((await server.request("GET", `/v1/runs/${mine.id}`)).body.status, "paused", "untouched");
      });

      test("roles: a viewer reads cards and tasks and subscribes; its sends and cancels are refused and create nothing", async () => {
        const asked = asTask(await (await client("approval", { tenant: "t-roles" })).sendMessage(sendRequest(userMessage([data({ request: "look" })]))));
        const viewer = await client("approval", { tenant: "t-roles", roles: ["viewer"] });
        assert.equal((await viewer.getAgentCard()).name, "approval");
        assert.equal((await viewer.getTask(get(asked.id))).status?.state, TaskState.TASK_STATE_INPUT_REQUIRED);
        const joined = await collect(viewer.resubscribeTask({ tenant: "", id: asked.id }));
        assert.equal(stateOf(joined.at(-1)!), TaskState.TASK_STATE_INPUT_REQUIRED);
        const count = async () =>
          (await server.database.db.query<{ runs: number; threads: number }>(
            "select (select count(*)::int from runs where tenant_id = $1) as runs, (select count(*)::int from threads where tenant_id = $1) as threads",
            ["t-roles"],
          ))[0];
        const before = await count();
        const forbidden = (error: unknown) => (error as { envelopeCode?: number }).envelopeCode === -32000 && /^forbidden/.test((error as Error).message);
        await assert.rejects(viewer.sendMessage(sendRequest(userMessage([data({ request: "no" })]))), forbidden);
        await assert.rejects(collect(viewer.sendMessageStream(sendRequest(userMessage([data({ request: "no" })])))), forbidden);
        await assert.rejects(viewer.sendMessage(sendRequest(userMessage([data({ approved: true })], { taskId: asked.id }))), forbidden);
        await assert.rejects(viewer.cancelTask({ tenant: "", id: asked.id, metadata: undefined }), forbidden);
        assert.deepEqual(await count(), before);
        assert.equal((await server.request("GET", `/v1/runs/${asked.id}`, { tenant: "t-roles" })).body.status, "paused");
      });
    });
  }

  describe("ListTasks (1.0)", () => {
    test("lists the assistant's tasks, newest first, by context and state, a page at a time", async () => {
      const chat = await a2aClient(server, "chat_messages", "1.0", { tenant: "t-list" });
      const first = asTask(await chat.sendMessage(sendRequest(userMessage([text("a")]))));
      const second = asTask(await chat.sendMessage(sendRequest(userMessage([text("b")], { contextId: first.contextId }))));
      const other = asTask(await chat.sendMessage(sendRequest(userMessage([text("c")]))));
      const list = (params: Partial<ListTasksRequest>, lister: Client = chat) =>
        lister.listTasks({
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
      const all = await list({});
      assert.deepEqual(all.tasks.map((task) => task.id), [other.id, second.id, first.id]);
      assert.equal(all.totalSize, 3);
      assert.ok(all.tasks.every((task) => task.artifacts.length === 0), "artifacts only when asked for");
      const inContext = await list({ contextId: first.contextId, includeArtifacts: true });
      assert.deepEqual(inContext.tasks.map((task) => task.id), [second.id, first.id]);
      assert.equal(answerOf(inContext.tasks[0]!), "You said: b (turn 2)");
      assert.equal((await list({ status: TaskState.TASK_STATE_COMPLETED })).totalSize, 3);
      assert.equal((await list({ status: TaskState.TASK_STATE_WORKING })).totalSize, 0);
      const page1 = await list({ pageSize: 2 });
      assert.equal(page1.tasks.length, 2);
      assert.ok(page1.nextPageToken);
      const page2 = await list({ pageSize: 2, pageToken: page1.nextPageToken });
      assert.deepEqual(page2.tasks.map((task) => task.id), [first.id]);
      assert.equal(page2.nextPageToken, "");
      // Another assistant's and another tenant's tasks are not listed.
      assert.equal((await list({}, await a2aClient(server, "echo", "1.0", { tenant: "t-list" }))).totalSize, 0);
      assert.equal((await list({}, await a2aClient(server, "chat_messages", "1.0", { tenant: "t-other" }))).totalSize, 0);
      const since = await list({ statusTimestampAfter: new Date(Date.now() + 60_000).toISOString() });
      assert.equal(since.totalSize, 0);
    });
  });

  describe("JSON-RPC errors", () => {
    const send1 = (message: Record<string, unknown>) => ({ jsonrpc: "2.0", id: 7, method: "SendMessage", params: { message: { messageId: crypto.randomUUID(), role: "ROLE_USER", ...message } } });
    const send03 = (message: Record<string, unknown>) => ({
      jsonrpc: "2.0",
      id: 7,
      method: "message/send",
      params: { message: { kind: "message", messageId: crypto.randomUUID(), role: "user", ...message } },
    });
    const code = async (assistantId: string, body: unknown, options: Parameters<typeof rpc>[3] = {}) => {
      const answer = await rpc(server, assistantId, body, options);
      assert.equal(answer.status, 200, answer.text);
      return answer.body.error?.code;
    };

    test("malformed JSON is -32700; a body that is not a request is -32600; an unknown method is -32601", async () => {
      for (const version of [undefined, "1.0"]) {
        const parse = await rpc(server, "echo", undefined, { version, rawBody: "{not json" });
        assert.deepEqual([parse.status, parse.body.error?.code, parse.body.id], [200, -32700, null]);
        assert.equal(await code("echo", { jsonrpc: "2.0", id: 1 }, { version }), -32600);
        assert.equal(await code("echo", [{ jsonrpc: "2.0", id: 1, method: "tasks/get" }], { version }), -32600);
        assert.equal(await code("echo", { jsonrpc: "1.0", id: 1, method: "tasks/get", params: {} }, { version }), -32600);
        assert.equal(await code("echo", { jsonrpc: "2.0", id: 1, method: "NoSuchMethod", params: {} }, { version }), -32601);
      }
      // Each version serves its own method names.
      assert.equal(await code("echo", { jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "x" } }), -32601);
      assert.equal(await code("echo", { jsonrpc: "2.0", id: 1, method: "tasks/get", params: { id: "x" } }, { version: "1.0" }), -32601);
      assert.equal(await code("echo", { jsonrpc: "2.0", id: 1, method: "tasks/list", params: {} }), -32601);
      assert.equal(await code("echo", { jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "x" } }, { version: "2.0" }), -32009);
      assert.equal(await code("echo", send1({ parts: [{ text: "x" }] }), { version: "1.0", contentType: "text/plain" }), -32005);
    });

    test("bad params are -32602", async () => {
      for (const [version, send] of [["1.0", send1], [undefined, send03]] as const) {
        const method = version ? "SendMessage" : "message/send";
        assert.equal(await code("echo", { jsonrpc: "2.0", id: 1, method, params: 5 }, { version }), -32602);
        assert.equal(await code("echo", { jsonrpc: "2.0", id: 1, method, params: {} }, { version }), -32602);
        const dataPart = (value: unknown) => (version ? { data: value } : { kind: "data", data: value });
        const textPart = (value: string) => (version ? { text: value } : { kind: "text", text: value });
        assert.equal(await code("echo", send({ parts: [] }), { version }), -32602);
        assert.equal(await code("echo", send({ parts: [dataPart({ nope: 1 })] }), { version }), -32602, "not an input field of the graph");
        assert.equal(await code("echo", send({ parts: [textPart("hi")] }), { version }), -32602, "echo has no `input` field for text");
        assert.equal(await code("echo", send({ parts: [textPart("hi")], contextId: "not-a-context" }), { version }), -32602);
        assert.equal(await code("echo", send({ parts: [textPart("hi")], contextId: crypto.randomUUID() }), { version }), -32602);
      }
      assert.equal(await code("echo", send1({ parts: [{ data: [1, 2] }] }), { version: "1.0" }), -32602, "a data part must be an object");
      assert.equal(await code("echo", send1({ parts: [{ url: "https://example.com/a.pdf" }] }), { version: "1.0" }), -32005, "file parts");
    });

    test("unknown tasks are -32001, ended ones -32002 to cancel and -32004 to message or subscribe", async () => {
      const done = asTask(await (await a2aClient(server, "echo", "1.0")).sendMessage(sendRequest(userMessage([data({ message: "end" })]))));
      const plain = await server.request("POST", "/v1/runs", { body: { assistant_id: "echo", input: { message: "not a task" } } });
      for (const version of [undefined, "1.0"]) {
        const [getTask, cancelTask, subscribe] = version ? ["GetTask", "CancelTask", "SubscribeToTask"] : ["tasks/get", "tasks/cancel", "tasks/resubscribe"];
        const call = (method: string, id: string) => code("echo", { jsonrpc: "2.0", id: 1, method, params: { id } }, { version });
        assert.equal(await call(getTask, crypto.randomUUID()), -32001);
        assert.equal(await call(getTask, "not-a-uuid"), -32001);
        assert.equal(await call(getTask, plain.body.run_id), -32001, "a run not started over A2A is no task");
        assert.equal(await call(cancelTask, crypto.randomUUID()), -32001);
        assert.equal(await call(cancelTask, done.id), -32002);
        assert.equal(await call(subscribe, done.id), -32004);
        const answer = version ? send1({ parts: [{ text: "more" }], taskId: done.id }) : send03({ parts: [{ kind: "text", text: "more" }], taskId: done.id });
        assert.equal(await code("echo", answer, { version }), -32004);
      }
    });

    test("push notifications are -32003 in both versions; there is no extended card", async () => {
      const config = { taskId: "t", url: "https://example.com/hook" };
      for (const method of ["CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig"]) {
        assert.equal(await code("echo", { jsonrpc: "2.0", id: 1, method, params: { ...config, id: "c" } }, { version: "1.0" }), -32003, method);
      }
      for (const method of ["tasks/pushNotificationConfig/set", "tasks/pushNotificationConfig/get", "tasks/pushNotificationConfig/list", "tasks/pushNotificationConfig/delete"]) {
        const params = method.endsWith("set") ? { taskId: "t", pushNotificationConfig: { url: "https://example.com/hook" } } : { id: "t", pushNotificationConfigId: "c" };
        assert.equal(await code("echo", { jsonrpc: "2.0", id: 1, method, params }), -32003, method);
      }
      const withPush = send1({ parts: [{ data: { message: "x" } }] });
      (withPush.params as Record<string, unknown>).configuration = { taskPushNotificationConfig: { url: "https://example.com/hook" } };
      assert.equal(await code("echo", withPush, { version: "1.0" }), -32003);
      assert.equal(await code("echo", { jsonrpc: "2.0", id: 1, method: "GetExtendedAgentCard", params: {} }, { version: "1.0" }), -32007);
      assert.equal(await code("echo", { jsonrpc: "2.0", id: 1, method: "agent/getAuthenticatedExtendedCard" }), -32007);
    });

    test("0.3 streams mark the last update final, for an ended task and for one that needs input", async () => {
      const stream = (assistantId: string, parts: unknown[]) =>
        rpc(server, assistantId, { jsonrpc: "2.0", id: "s", method: "message/stream", params: { message: { kind: "message", messageId: crypto.randomUUID(), role: "user", parts } } });
      for (const [assistantId, state] of [["echo", "completed"], ["approval", "input-required"]] as const) {
        const answer = await stream(assistantId, [{ kind: "data", data: assistantId === "echo" ? { message: "f" } : { request: "f" } }]);
        assert.match(answer.contentType ?? "", /text\/event-stream/);
        const frames = sseData(answer.text);
        assert.ok(frames.every((frame) => (frame as { id?: unknown }).id === "s"));
        const last = frames.at(-1)!.result as { kind: string; status: { state: string }; final: boolean };
        assert.deepEqual([last.kind, last.status.state, last.final], ["status-update", state, true]);
        assert.ok(frames.slice(0, -1).every((frame) => frame.result?.final !== true));
      }
      // 1.0 has no `final`: its stream ends after the terminal update.
      const v1 = await rpc(server, "echo", send1({ parts: [{ data: { message: "g" } }] }), { version: "1.0" });
      assert.equal(v1.body.error, undefined);
      const streamed = await rpc(server, "echo", { ...send1({ parts: [{ data: { message: "g2" } }] }), method: "SendStreamingMessage" }, { version: "1.0" });
      const frames = sseData(streamed.text);
      assert.deepEqual(Object.keys(frames.at(-1)!.result!), ["statusUpdate"]);
    });

    test("a quiet stream carries heartbeat comments until its task ends", async () => {
      const steerable = await a2aClient(server, "steerable", "1.0");
      const started = asTask(await steerable.sendMessage(sendRequest(userMessage([data({ rounds: 1, waitMs: 60_000 })]), { returnImmediately: true })));
      const response = await fetch(`${server.url}/a2a/steerable`, {
        method: "POST",
        headers: { authorization: `Bearer ${await server.token()}`, "content-type": "application/json", "a2a-version": "1.0" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "SubscribeToTask", params: { id: started.id } }),
      });
      assert.match(response.headers.get("content-type") ?? "", /text\/event-stream/);
      const items = parseSse(response.body as unknown as AsyncIterable<Uint8Array>);
      const seen: SseItem[] = [];
      for (let item = await items.next(); !item.done; item = await items.next()) {
        seen.push(item.value);
        if (item.value.type === "comment" && seen.some((found) => found.type === "event")) break;
      }
      assert.deepEqual(seen.at(-1), { type: "comment", text: "heartbeat" });
      await server.request("POST", `/v1/runs/${started.id}/steer`, { body: { kind: "stop", payload: {} } });
      const rest: SseItem[] = [];
      for (let item = await items.next(); !item.done; item = await items.next()) rest.push(item.value);
      const last = rest.filter((item) => item.type === "event").at(-1) as { data: string };
      assert.equal(JSON.parse(last.data).result.statusUpdate.status.state, "TASK_STATE_COMPLETED");
    });

    test("refusals before JSON-RPC: no token or a bad one is 401, no role 403, another tenant's assistant 404, as problem+json", async () => {
      for (const url of [cardUrl(server, "echo"), `${server.url}/a2a/echo`]) {
        const method = url.endsWith(".json") ? "GET" : "POST";
        const anonymous = await fetch(url, { method, headers: { "content-type": "application/json" }, body: method === "POST" ? "{}" : undefined });
        assert.equal(anonymous.status, 401);
        assert.match(anonymous.headers.get("content-type") ?? "", /application\/problem\+json/);
        const forged = await fetch(url, { method, headers: { authorization: "Bearer nope", "content-type": "application/json" }, body: method === "POST" ? "{}" : undefined });
        assert.equal(forged.status, 401);
        const roleless = await fetch(url, { method, headers: { authorization: `Bearer ${await server.token("t1", [])}`, "content-type": "application/json" }, body: method === "POST" ? "{}" : undefined });
        assert.equal(roleless.status, 403);
        assert.equal(((await roleless.json()) as { code: string }).code, "forbidden");
      }
      const created = await server.request("POST", "/v1/assistants", { body: { assistant_id: "private-echo", graph_id: "echo" } });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const mine = await fetch(cardUrl(server, "private-echo"), { headers: { authorization: `Bearer ${await server.token()}` } });
      assert.equal(mine.status, 200);
      const theirs = await fetch(cardUrl(server, "private-echo"), { headers: { authorization: `Bearer ${await server.token("t2")}` } });
      assert.equal(theirs.status, 404);
      assert.equal(((await theirs.json()) as { code: string }).code, "not_found");
      const post = await rpc(server, "private-echo", send03({ parts: [{ kind: "data", data: { message: "x" } }] }), { tenant: "t2" });
      assert.equal(post.status, 404);
      assert.equal(post.body.error, undefined);
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
      const other = await startTestServer({ configFile: TESTING_CONFIG, database: { ...server.database, drop: async () => {} }, worker: false });
      try {
        const there = await a2aClient(other, "chat_messages", "1.0");
        const events = await collect(there.sendMessageStream(sendRequest(userMessage([text("elsewhere")]))));
        assert.equal(stateOf(events.at(-1)!), TaskState.TASK_STATE_COMPLETED);
        assert.equal(textOf(artifactUpdates(events).at(-1)!.artifact!.parts), "You said: elsewhere (turn 1)");
        const taskId = (events[0]!.payload!.value as Task).id;
        const here = await a2aClient(server, "chat_messages", "1.0");
        assert.equal(answerOf(await here.getTask(get(taskId))), "You said: elsewhere (turn 1)");
        const steerable = await a2aClient(server, "steerable", "1.0");
        const started = asTask(await steerable.sendMessage(sendRequest(userMessage([data({ rounds: 1, waitMs: 60_000 })]), { returnImmediately: true })));
        await readUntil(steerable.resubscribeTask({ tenant: "", id: started.id }), (event) => stateOf(event) === TaskState.TASK_STATE_WORKING);
        const cancelledThere = await a2aClient(other, "steerable", "1.0");
        await cancelledThere.cancelTask({ tenant: "", id: started.id, metadata: undefined });
        await settled(started.id);
        assert.equal((await cancelledThere.getTask(get(started.id))).status?.state, TaskState.TASK_STATE_CANCELED);
      } finally {
        await other.server.close();
      }
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
