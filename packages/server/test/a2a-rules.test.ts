import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { TaskState, type Part, type StreamResponse } from "@a2a-js/sdk";
import { ContentTypeNotSupportedError, RequestMalformedError } from "@a2a-js/sdk/errors";
import { RUN_STATUSES, type RunStatus } from "../src/domain/runs.ts";
import { agentCard, legacyAgentCard } from "../src/gateways/a2a/card.ts";
import { inputFromParts, outputText, resumeValueFromParts, tokenText } from "../src/gateways/a2a/parts.ts";
import {
  MAX_PARAMS_DEPTH,
  isMethodOf,
  isPushNotificationMethod,
  paramsProblem,
  protocolVersionOf,
  withProtocolDefaults,
} from "../src/gateways/a2a/request-rules.ts";
import { TaskEventMapper, runStatusesOf, stateLabel, taskOf, taskStateOf } from "../src/gateways/a2a/task-view.ts";
import type { TaskRun } from "../src/runs/a2a-tasks.ts";
import type { RunEvent } from "@rudder/api";
import { data, dataOf, text, textOf } from "./support/a2a.ts";

const toMessages = { messagesChannel: true, textField: "input" };
const toField = { messagesChannel: false, textField: "prompt" };
const file: Part = {
  content: { $case: "url", value: "https://example.com/a.pdf" },
  metadata: undefined,
  filename: "a.pdf",
  mediaType: "application/pdf",
};

const run = (fields: Partial<TaskRun>): TaskRun => ({
  task_id: "task-1",
  run_id: "run-1",
  thread_id: "thread-1",
  status: "running",
  output: null,
  error: null,
  created_at: "2026-01-01T00:00:00.000Z",
  updated_at: "2026-01-01T00:00:01.000Z",
  ...fields,
});

let sequence = 0;
const event = (kind: string, eventData: Record<string, unknown> = {}): RunEvent => ({
  id: `run-1:${++sequence}`,
  run_id: "run-1",
  sequence,
  kind,
  data: eventData,
  created_at: "2026-01-01T00:00:00.000Z",
});
const token = (content: unknown, type = "ai") => event("messages", { message: { type, content }, node: "n", metadata: {} });

describe("A2A input from message parts", () => {
  test("text becomes a user message on a messages channel, or the configured field", () => {
    assert.deepEqual(inputFromParts([text("hello"), text("world")], toMessages), { messages: [{ role: "user", content: "hello\nworld" }] });
    assert.deepEqual(inputFromParts([text("hello")], toField), { prompt: "hello" });
  });

  test("object data parts merge into the input, in order, and text adds to them", () => {
    assert.deepEqual(inputFromParts([data({ a: 1, b: 1 }), data({ b: 2 })], toField), { a: 1, b: 2 });
    assert.deepEqual(inputFromParts([data({ messages: [{ role: "system", content: "be brief" }] }), text("hi")], toMessages), {
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content: "hi" },
      ],
    });
  });

  test("no parts, a data part that is not an object, or a file part is refused", () => {
    assert.throws(() => inputFromParts([], toField), RequestMalformedError);
    const list: Part = { content: { $case: "data", value: [1, 2] }, metadata: undefined, filename: "", mediaType: "" };
    assert.throws(() => inputFromParts([list], toField), RequestMalformedError);
    assert.throws(() => inputFromParts([file], toField), ContentTypeNotSupportedError);
  });

  test("a resume value is the first data part's value, else the text", () => {
    assert.deepEqual(resumeValueFromParts([text("ignored"), data({ approved: true }), data({ approved: false })]), { approved: true });
    assert.equal(resumeValueFromParts([text("yes"), text("please")]), "yes\nplease");
  });
});

describe("A2A text of outputs and tokens", () => {
  test("the last AI message, in LangChain's serialised form or as a dict, or the output as JSON", () => {
    const serialised = (cls: string, content: unknown) => ({
      lc: 1,
      type: "constructor",
      id: ["langchain_core", "messages", cls],
      kwargs: { content },
    });
    assert.equal(
      outputText({
        messages: [
          serialised("HumanMessage", "q"),
          serialised("AIMessage", "first"),
          serialised("AIMessageChunk", "last"),
          serialised("ToolMessage", "tool"),
        ],
      }),
      "last",
    );
    assert.equal(
      outputText({
        messages: [
          { type: "human", content: "q" },
          { type: "ai", content: [{ type: "text", text: "a" }, { type: "image_url" }, { type: "text", text: "b" }] },
        ],
      }),
      "ab",
    );
    assert.equal(outputText({ answer: 42 }), '{"answer":42}');
    assert.equal(
      outputText({ messages: [serialised("HumanMessage", "only a question")] }),
      JSON.stringify({ messages: [serialised("HumanMessage", "only a question")] }),
    );
  });

  test("tokens are an AI chunk's non-empty text", () => {
    assert.equal(tokenText(token("He").data), "He");
    assert.equal(tokenText(token("").data), undefined);
    assert.equal(tokenText(token("tool output", "tool").data), undefined);
  });
});

describe("A2A task states and views", () => {
  test("the state table of DESIGN.md, and its inverse for ListTasks", () => {
    const expected: Record<RunStatus, TaskState> = {
      pending: TaskState.TASK_STATE_SUBMITTED,
      running: TaskState.TASK_STATE_WORKING,
      cancelling: TaskState.TASK_STATE_WORKING,
      paused: TaskState.TASK_STATE_INPUT_REQUIRED,
      succeeded: TaskState.TASK_STATE_COMPLETED,
      failed: TaskState.TASK_STATE_FAILED,
      timed_out: TaskState.TASK_STATE_FAILED,
      dead_letter: TaskState.TASK_STATE_FAILED,
      cancelled: TaskState.TASK_STATE_CANCELED,
    };
    for (const status of RUN_STATUSES) assert.equal(taskStateOf(status), expected[status], status);
    assert.deepEqual(runStatusesOf(TaskState.TASK_STATE_FAILED), ["failed", "timed_out", "dead_letter"]);
    assert.deepEqual(runStatusesOf(TaskState.TASK_STATE_REJECTED), []);
    assert.equal(stateLabel("paused"), "input-required");
  });

  test("a paused run asks its interrupts' question; a failed one says its error; only a completed one has the artifact", () => {
    const paused = taskOf(run({ status: "paused", output: { draft: "d", __interrupt__: [{ id: "i1", value: "Approve?" }] } }));
    assert.equal(paused.status?.state, TaskState.TASK_STATE_INPUT_REQUIRED);
    assert.equal(textOf(paused.status!.message!.parts), "Approve?");
    assert.deepEqual(dataOf(paused.status!.message!.parts), [{ interrupts: [{ id: "i1", value: "Approve?" }] }]);
    assert.equal(paused.status!.message!.taskId, "task-1");
    assert.deepEqual(paused.artifacts, []);
    const structured = taskOf(run({ status: "paused", output: { __interrupt__: [{ id: "i1", value: { question: "q" } }] } }));
    assert.equal(textOf(structured.status!.message!.parts), '{"question":"q"}');
    const failed = taskOf(run({ status: "timed_out", error: { code: "run_timed_out", message: "too slow", retryable: false } }));
    assert.equal(textOf(failed.status!.message!.parts), "run_timed_out: too slow");
    const cancelled = taskOf(run({ status: "cancelled", error: { code: "run_cancelled", message: "cancelled", retryable: false } }));
    assert.equal(cancelled.status?.message, undefined);
    const done = taskOf(run({ status: "succeeded", output: { answer: 1 } }));
    assert.deepEqual([done.id, done.contextId, done.status?.timestamp], ["task-1", "thread-1", "2026-01-01T00:00:01.000Z"]);
    assert.deepEqual(
      done.artifacts.map((artifact) => [artifact.artifactId, dataOf(artifact.parts), textOf(artifact.parts)]),
      [["output", [{ answer: 1 }], '{"answer":1}']],
    );
    assert.deepEqual(done.metadata, { rudder_run_id: "run-1", rudder_run_status: "succeeded" });
  });
});

describe("A2A stream of a run's events", () => {
  const kinds = (updates: StreamResponse[]) =>
    updates.map((update) => {
      const payload = update.payload!;
      if (payload.$case === "artifactUpdate")
        return `artifact:${textOf(payload.value.artifact!.parts)}:${payload.value.append ? "append" : "new"}${payload.value.lastChunk ? ":last" : ""}`;
      if (payload.$case === "statusUpdate") return `status:${TaskState[payload.value.status!.state]}`;
      return payload.$case;
    });

  test("working, tokens appended to one artifact, then the whole artifact and the final status", () => {
    const mapper = new TaskEventMapper({ task_id: "task-1", thread_id: "thread-1" });
    const updates = [
      event("run_started"),
      event("node_started"),
      token("He"),
      token(""),
      token("llo"),
      event("values", { values: {} }),
    ].flatMap((found) => mapper.updates(found));
    assert.deepEqual(kinds(updates), ["status:TASK_STATE_WORKING", "artifact:He:new", "artifact:llo:append"]);
    const end = mapper.finish(run({ status: "succeeded", output: { messages: [{ type: "ai", content: "Hello" }] } }));
    assert.deepEqual(kinds(end), ["artifact:Hello:new:last", "status:TASK_STATE_COMPLETED"]);
    for (const update of [...updates, ...end]) {
      const value = update.payload!.value as { taskId: string; contextId: string };
      assert.deepEqual([value.taskId, value.contextId], ["task-1", "thread-1"]);
    }
  });

  test("an attempt that starts over replaces what the failed one streamed", () => {
    const mapper = new TaskEventMapper({ task_id: "task-1", thread_id: "thread-1" });
    const updates = [event("run_started"), token("par"), event("run_retrying"), event("run_started"), token("whole")].flatMap((found) =>
      mapper.updates(found),
    );
    assert.deepEqual(kinds(updates), ["status:TASK_STATE_WORKING", "artifact:par:new", "status:TASK_STATE_WORKING", "artifact:whole:new"]);
  });

  test("a run that needs input or failed ends with its status only", () => {
    const mapper = new TaskEventMapper({ task_id: "task-1", thread_id: "thread-1" });
    assert.deepEqual(kinds(mapper.finish(run({ status: "paused", output: { __interrupt__: [] } }))), ["status:TASK_STATE_INPUT_REQUIRED"]);
    assert.deepEqual(kinds(mapper.finish(run({ status: "failed", error: { code: "run_failed", message: "x", retryable: false } }))), [
      "status:TASK_STATE_FAILED",
    ]);
  });
});

describe("A2A agent card", () => {
  const assistant = {
    assistant_id: "helper",
    graph_id: "g",
    name: "",
    description: null,
    config: {},
    context: {},
    metadata: {},
    created_at: "2026-01-01T00:00:00.000Z",
    updated_at: "2026-01-01T00:00:00.000Z",
  };

  test("1.0: names fall back to the ids; one JSON-RPC endpoint for 1.0 and 0.3; streaming, no push, bearer", () => {
    const card = agentCard(assistant, {
      endpoint: "https://rudder.example/a2a/helper",
      inputChannels: ["prompt", "answer"],
      target: toField,
    });
    assert.equal(card.name, "helper");
    assert.equal(card.description, "Rudder assistant helper (graph g)");
    assert.deepEqual(
      card.supportedInterfaces.map((found) => [found.url, found.protocolBinding, found.protocolVersion]),
      [
        ["https://rudder.example/a2a/helper", "JSONRPC", "1.0"],
        ["https://rudder.example/a2a/helper", "JSONRPC", "0.3"],
      ],
    );
    assert.deepEqual([card.capabilities?.streaming, card.capabilities?.pushNotifications], [true, false]);
    assert.equal(card.securitySchemes.bearer?.scheme?.$case, "httpAuthSecurityScheme");
    assert.match(card.skills[0]!.description, /input field "prompt".*prompt, answer/);
  });

  test("0.3: the SDK's translation, with url, protocolVersion and the bearer scheme", async () => {
    const legacy = await legacyAgentCard(
      agentCard(assistant, { endpoint: "https://rudder.example/a2a/helper", inputChannels: undefined, target: toMessages }),
    );
    assert.equal(legacy.url, "https://rudder.example/a2a/helper");
    assert.equal(legacy.protocolVersion, "0.3");
    assert.equal(legacy.preferredTransport, "JSONRPC");
    assert.deepEqual(legacy.securitySchemes?.bearer, {
      type: "http",
      scheme: "Bearer",
      bearerFormat: "JWT or API key",
      description: "A Rudder token of the tenant: viewer reads tasks, operator sends and cancels",
    });
    assert.match(legacy.skills[0]!.description, /messages channel/);
  });
});

describe("A2A request rules", () => {
  test("each version's methods, and no other", () => {
    assert.ok(isMethodOf("SendMessage", false) && isMethodOf("message/send", true));
    assert.ok(!isMethodOf("message/send", false) && !isMethodOf("SendMessage", true));
    assert.ok(!isMethodOf("tasks/list", true) && !isMethodOf("foo", false) && !isMethodOf("toString", false));
  });

  test("params that cannot be stored, or ids that are not strings, are a problem; absent params are not", () => {
    assert.equal(paramsProblem(undefined), undefined);
    assert.equal(paramsProblem({ message: { messageId: "m", role: "ROLE_USER", parts: [{ data: { a: "b" } }] } }), undefined);
    assert.match(paramsProblem({ id: "a\u0000b" })!, /^params\/id contains U\+0000/);
    assert.match(paramsProblem({ message: { parts: [{ text: "\udc00" }] } })!, /^params\/message\/parts\/0\/text .*lone surrogate/);
    assert.match(paramsProblem({ n: Number.POSITIVE_INFINITY })!, /finite/);
    let deep: unknown = {};
    for (let level = 1; level < MAX_PARAMS_DEPTH; level++) deep = { a: deep };
    assert.equal(paramsProblem(deep), undefined);
    assert.match(paramsProblem({ a: deep })!, /deeper than 131 levels/);
    assert.equal(paramsProblem({ id: { a: 1 } }), "params.id must be a string");
    assert.equal(paramsProblem({ message: { context_id: 5 } }), "params.message.context_id must be a string");
    assert.equal(paramsProblem({ id: null, message: { role: "user", taskId: null } }), undefined);
  });

  test("members whose wrong type would silently change a call are a problem; push methods are known as such", () => {
    const send = (extra: Record<string, unknown>, message: Record<string, unknown> = {}) =>
      paramsProblem({ message: { messageId: "m", role: "user", parts: [], ...message }, ...extra });
    assert.equal(
      send({ configuration: { blocking: true, historyLength: 0, acceptedOutputModes: ["text/plain"] }, metadata: {} }),
      undefined,
    );
    assert.equal(send({}, { role: "ROLE_USER" }), undefined);
    assert.equal(send({}, { role: 1 }), undefined);
    assert.equal(send({ configuration: "x" }), "params.configuration must be an object");
    assert.equal(send({ configuration: [1] }), "params.configuration must be an object");
    assert.equal(send({ configuration: { blocking: "yes" } }), "params.configuration.blocking must be true or false");
    assert.equal(send({ configuration: { returnImmediately: "x" } }), "params.configuration.returnImmediately must be true or false");
    assert.equal(send({ metadata: "x" }), "params.metadata must be an object");
    assert.match(send({}, { role: "ROLE_X" })!, /^params\.message\.role must be "user" or "agent"/);
    assert.equal(paramsProblem({ id: "t", historyLength: "abc" }), "params.historyLength must be a whole number, 0 or more");
    assert.equal(paramsProblem({ id: "t", historyLength: -5 }), "params.historyLength must be a whole number, 0 or more");
    assert.equal(paramsProblem({ id: "t", historyLength: 3 }), undefined);
    assert.ok(isPushNotificationMethod("tasks/pushNotificationConfig/set") && isPushNotificationMethod("CreateTaskPushNotificationConfig"));
    assert.ok(!isPushNotificationMethod("message/send") && !isPushNotificationMethod("GetTask"));
  });

  test("a message needs a role, each part one content, and a text part a string text (the SDK would coerce or drop them)", () => {
    const parts = (...list: unknown[]) => paramsProblem({ message: { messageId: "m", role: "user", parts: list } });
    assert.equal(parts({ kind: "text", text: "hi" }, { text: "hi" }, { data: { a: 1 } }, { kind: "file", file: { uri: "u" } }), undefined);
    assert.equal(
      paramsProblem({ message: { messageId: "m", parts: [{ text: "hi" }] } }),
      'params.message.role is required ("user", or ROLE_USER in 1.0)',
    );
    assert.equal(parts({ kind: "text", text: { a: 1 } }), "params.message.parts[0].text must be a string");
    assert.equal(parts({ text: "ok" }, { text: 5 }), "params.message.parts[1].text must be a string");
    assert.equal(parts({ kind: "text" }), "params.message.parts[0].text must be a string");
    assert.equal(parts({ text: true }), "params.message.parts[0].text must be a string");
    assert.equal(parts({ text: "a", data: { b: 1 } }), "params.message.parts[0] holds text and data: a part holds one content");
  });

  test("prototype members anywhere in params are a problem, as in a REST body", () => {
    const poisoned = JSON.parse('{"message":{"role":"user","parts":[{"data":{"__proto__":{"message":"lost"},"reply":"r"}}]}}') as unknown;
    assert.match(paramsProblem(poisoned)!, /^params\/message\/parts\/0\/data has a "__proto__" member/);
    const constructor = JSON.parse('{"metadata":{"constructor":{"prototype":{}}}}') as unknown;
    assert.match(paramsProblem(constructor)!, /^params\/metadata has a "__proto__" member, or a "constructor" member holding "prototype"/);
    assert.equal(paramsProblem(JSON.parse('{"metadata":{"constructor":"fine"}}')), undefined);
  });

  test("what a request leaves out: 0.3 sends block, 1.0 ListTasks takes no params, a version's patch number does not count", () => {
    const send = { message: { messageId: "m" }, configuration: { acceptedOutputModes: ["text/plain"] } };
    assert.deepEqual(withProtocolDefaults("message/send", send, true), {
      ...send,
      configuration: { acceptedOutputModes: ["text/plain"], blocking: true },
    });
    const explicit = { message: {}, configuration: { blocking: false } };
    assert.equal(withProtocolDefaults("message/send", explicit, true), explicit);
    assert.equal(withProtocolDefaults("SendMessage", send, false), send);
    assert.deepEqual(withProtocolDefaults("ListTasks", undefined, false), {});
    assert.equal(withProtocolDefaults("GetTask", undefined, false), undefined);
    assert.equal(protocolVersionOf("1.0.0"), "1.0");
    assert.equal(protocolVersionOf(" 0.3.0 "), "0.3");
    assert.equal(protocolVersionOf("1.0"), "1.0");
    assert.equal(protocolVersionOf("2"), "2");
    assert.equal(protocolVersionOf(undefined), undefined);
  });
});
