import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { TaskState, type Task } from "@a2a-js/sdk";
import type { Client } from "@a2a-js/sdk/client";
import { TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError } from "@a2a-js/sdk/errors";
import {
  A2A_VERSIONS,
  a2aClient,
  answerOf,
  artifactUpdates,
  asTask,
  collect,
  data,
  dataOf,
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

/** The A2A gateway with the official SDK client, in both protocol versions: cards, sends, streams, interrupts, cancel, subscribe, tenants and roles. */
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
      const client = (assistantId: string, who?: Parameters<typeof a2aClient>[3]): Promise<Client> =>
        a2aClient(server, assistantId, version, who);

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
        assert.deepEqual(
          JSON.parse(answerOf(viaData)),
          { message: "hi", reply: "hi" },
          "without an AI message, the text is the output as JSON",
        );
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
        const done = asTask(
          await approval.sendMessage(
            sendRequest(userMessage([data({ approved: true })], { taskId: asked.id, contextId: asked.contextId })),
          ),
        );
        assert.equal(done.id, asked.id);
        assert.equal(done.status?.state, TaskState.TASK_STATE_COMPLETED);
        assert.equal(outputOf(done).outcome, "done: Plan for: deploy");
        const read = await approval.getTask(get(asked.id));
        assert.equal(read.status?.state, TaskState.TASK_STATE_COMPLETED);
        assert.notEqual(read.metadata?.rudder_run_id, asked.id, "a resumed run carries the task on");
      });

      test("a retried answer (the same messageId) gets the task it carried on, as a retried first send does; concurrent copies too", async () => {
        const approval = await client("approval");
        const asked = asTask(await approval.sendMessage(sendRequest(userMessage([data({ request: "retry" })]))));
        const answer = userMessage([data({ approved: true })], { taskId: asked.id, contextId: asked.contextId });
        const copies = (await Promise.all(Array.from({ length: 4 }, () => approval.sendMessage(sendRequest(answer))))).map(asTask);
        for (const copy of copies) {
          assert.equal(copy.id, asked.id);
          assert.equal(copy.status?.state, TaskState.TASK_STATE_COMPLETED);
        }
        const retried = asTask(await approval.sendMessage(sendRequest(answer)));
        assert.equal(retried.status?.state, TaskState.TASK_STATE_COMPLETED);
        assert.equal(outputOf(retried).outcome, "done: Plan for: retry");
        const runs = (await server.request("GET", `/v1/runs?thread_id=${asked.contextId}`)).body as unknown[];
        assert.equal(runs.length, 2, "one resume, however many copies of the answer");
        // Another message to the completed task is still refused.
        await assert.rejects(
          approval.sendMessage(sendRequest(userMessage([data({ approved: false })], { taskId: asked.id, contextId: asked.contextId }))),
        );
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
        const started = asTask(
          await steerable.sendMessage(sendRequest(userMessage([data({ rounds: 1, waitMs: 60_000 })]), { returnImmediately: true })),
        );
        assert.ok([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING].includes(started.status!.state));
        await readUntil(
          steerable.resubscribeTask({ tenant: "", id: started.id }),
          (event) => stateOf(event) === TaskState.TASK_STATE_WORKING,
        );
        const canceled = await steerable.cancelTask({ tenant: "", id: started.id, metadata: undefined });
        assert.equal(canceled.id, started.id);
        assert.ok([TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_WORKING].includes(canceled.status!.state));
        await settled(started.id);
        assert.equal((await steerable.getTask(get(started.id))).status?.state, TaskState.TASK_STATE_CANCELED);
        await assert.rejects(
          steerable.cancelTask({ tenant: "", id: started.id, metadata: undefined }),
          (error) => error instanceof TaskNotCancelableError,
        );
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
        assert.deepEqual(
          output.received.map((message) => message.kind),
          ["stop"],
        );
        await assert.rejects(
          collect(steerable.resubscribeTask({ tenant: "", id: taskId })),
          (error) => error instanceof UnsupportedOperationError,
        );
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
        const runs = await server.database.db.query<{ n: number }>(
          "select count(*)::int as n from runs where metadata->>'a2a_message_id' = $1",
          [message.messageId],
        );
        assert.equal(runs[0]!.n, 1);
        await assert.rejects(
          echo.sendMessage(sendRequest({ ...message, parts: [data({ message: "different" })] })),
          /already sent with a different message/,
        );
      });

      test("tenant isolation: another tenant's tasks, contexts and assistants are not found", async () => {
        const mine = asTask(await (await client("approval")).sendMessage(sendRequest(userMessage([data({ request: "secret" })]))));
        const theirs = await client("approval", { tenant: "t2" });
        await assert.rejects(theirs.getTask(get(mine.id)), (error) => error instanceof TaskNotFoundError);
        await assert.rejects(
          theirs.cancelTask({ tenant: "", id: mine.id, metadata: undefined }),
          (error) => error instanceof TaskNotFoundError,
        );
        await assert.rejects(collect(theirs.resubscribeTask({ tenant: "", id: mine.id })), (error) => error instanceof TaskNotFoundError);
        await assert.rejects(
          theirs.sendMessage(sendRequest(userMessage([data({ approved: true })], { taskId: mine.id }))),
          (error) => error instanceof TaskNotFoundError,
        );
        await assert.rejects(
          theirs.sendMessage(sendRequest(userMessage([data({ request: "x" })], { contextId: mine.contextId }))),
          /names no context/,
        );
        assert.equal((await server.request("GET", `/v1/runs/${mine.id}`)).body.status, "paused", "untouched");
      });

      test("roles: a viewer reads cards and tasks and subscribes; its sends and cancels are refused and create nothing", async () => {
        const asked = asTask(
          await (await client("approval", { tenant: "t-roles" })).sendMessage(sendRequest(userMessage([data({ request: "look" })]))),
        );
        const viewer = await client("approval", { tenant: "t-roles", roles: ["viewer"] });
        assert.equal((await viewer.getAgentCard()).name, "approval");
        assert.equal((await viewer.getTask(get(asked.id))).status?.state, TaskState.TASK_STATE_INPUT_REQUIRED);
        const joined = await collect(viewer.resubscribeTask({ tenant: "", id: asked.id }));
        assert.equal(stateOf(joined.at(-1)!), TaskState.TASK_STATE_INPUT_REQUIRED);
        const count = async () =>
          (
            await server.database.db.query<{ runs: number; threads: number }>(
              "select (select count(*)::int from runs where tenant_id = $1) as runs, (select count(*)::int from threads where tenant_id = $1) as threads",
              ["t-roles"],
            )
          )[0];
        const before = await count();
        const forbidden = (error: unknown) =>
          (error as { envelopeCode?: number }).envelopeCode === -32000 && /^forbidden/.test((error as Error).message);
        await assert.rejects(viewer.sendMessage(sendRequest(userMessage([data({ request: "no" })]))), forbidden);
        await assert.rejects(collect(viewer.sendMessageStream(sendRequest(userMessage([data({ request: "no" })])))), forbidden);
        await assert.rejects(viewer.sendMessage(sendRequest(userMessage([data({ approved: true })], { taskId: asked.id }))), forbidden);
        await assert.rejects(viewer.cancelTask({ tenant: "", id: asked.id, metadata: undefined }), forbidden);
        assert.deepEqual(await count(), before);
        assert.equal((await server.request("GET", `/v1/runs/${asked.id}`, { tenant: "t-roles" })).body.status, "paused");
      });
    });
  }
});
