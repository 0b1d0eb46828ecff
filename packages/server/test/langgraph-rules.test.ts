import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { RUN_STATUSES, THREAD_STATUSES, type Run, type RunEvent } from "@rudder/api";
import {
  checkpointIdOf,
  formatSse,
  kwargsOf,
  LG_KWARGS_KEY,
  LgEventMapper,
  lgMultitask,
  lgRun,
  lgRunStatus,
  lgThreadStatus,
  metadataEvent,
  replayAfter,
  requestedStreamModes,
  rudderMultitask,
  rudderRunStatuses,
  rudderThreadStatus,
  snakeCaseKeys,
  unservedStreamModes,
  unsupportedRunFields,
  waitBody,
} from "../src/gateways/langgraph/mapping.ts";

/** The LangGraph facade's pure rules: names, bodies and the log → SSE mapping (DESIGN.md "LangGraph Platform API"). */

const run = (overrides: Partial<Run> = {}): Run => ({
  run_id: "00000000-0000-4000-8000-000000000001",
  thread_id: null,
  assistant_id: "echo",
  status: "succeeded",
  input: { message: "hi" },
  context: {},
  config: {},
  metadata: {},
  output: { reply: "hi" },
  error: null,
  attempt: 1,
  multitask_strategy: "reject",
  durability: "sync",
  run_timeout: null,
  max_model_calls: null,
  max_tool_calls: null,
  max_tokens: null,
  max_cost: null,
  usage: { model_calls: 0, tool_calls: 0, tokens: 0, cost: 0 },
  superseded_by_run_id: null,
  steering_closed: false,
  created_at: "2026-11-25T10:00:00.000Z",
  started_at: null,
  finished_at: null,
  updated_at: "2026-11-25T10:00:00.000Z",
  ...overrides,
});

let sequence = 0;
const event = (kind: string, data: Record<string, unknown>): RunEvent => ({
  id: `e${++sequence}`,
  run_id: "r",
  sequence,
  kind,
  data,
  created_at: "2026-11-25T10:00:00.000Z",
});

describe("LangGraph facade rules", () => {
  test("run statuses map as DESIGN.md states, and every Rudder status has one", () => {
    const expected = {
      pending: "pending",
      running: "running",
      cancelling: "running",
      paused: "success",
      succeeded: "success",
      failed: "error",
      dead_letter: "error",
      cancelled: "interrupted",
      timed_out: "timeout",
    };
    for (const status of RUN_STATUSES) assert.equal(lgRunStatus(status), expected[status], status);
    assert.deepEqual(rudderRunStatuses("error").sort(), ["dead_letter", "failed"]);
    assert.deepEqual(rudderRunStatuses("interrupted"), ["cancelled"]);
  });

  test("thread statuses: paused is interrupted; the mapping goes both ways", () => {
    assert.equal(lgThreadStatus("paused"), "interrupted");
    for (const status of THREAD_STATUSES) assert.equal(rudderThreadStatus(lgThreadStatus(status)), status);
  });

  test("multitask: reject by default, interrupt and rollback cancel the previous run; the LangGraph name is kept", () => {
    assert.equal(rudderMultitask(undefined), "reject");
    assert.equal(rudderMultitask(null), "reject");
    assert.equal(rudderMultitask("enqueue"), "enqueue");
    assert.equal(rudderMultitask("interrupt"), "cancel_previous");
    assert.equal(rudderMultitask("rollback"), "cancel_previous");
    assert.equal(lgMultitask(run({ multitask_strategy: "cancel_previous" })), "interrupt");
    const rolledBack = run({
      multitask_strategy: "cancel_previous",
      config: { configurable: { [LG_KWARGS_KEY]: { multitask_strategy: "rollback" } } },
    });
    assert.equal(lgMultitask(rolledBack), "rollback");
  });

  test("a run shows LangGraph's fields; the facade's bookkeeping stays out of kwargs.config", () => {
    const shown = lgRun(
      run({ status: "cancelled", config: { recursion_limit: 5, configurable: { a: 1, [LG_KWARGS_KEY]: { stream_mode: ["updates"] } } } }),
    );
    assert.equal(shown.status, "interrupted");
    assert.deepEqual(shown.kwargs.config, { recursion_limit: 5, configurable: { a: 1 } });
    assert.deepEqual(shown.kwargs.stream_mode, ["updates"]);
    assert.deepEqual(kwargsOf(run()), {});
  });

  test("wait bodies: values, interrupts, or __error__", () => {
    assert.deepEqual(waitBody(run()), { reply: "hi" });
    const interrupts = [{ id: "i1", value: { question: "ok?" } }];
    assert.deepEqual(waitBody(run({ status: "paused", output: { draft: "d", __interrupt__: interrupts } })), {
      draft: "d",
      __interrupt__: interrupts,
    });
    const error = { code: "run_failed", message: "node exploded", retryable: false };
    assert.deepEqual(waitBody(run({ status: "failed", output: null, error })), {
      __error__: { error: "run_failed", message: "node exploded" },
    });
    assert.deepEqual(waitBody(run({ status: "timed_out", output: null, error: { ...error, code: "run_timed_out" } })), {
      __error__: { error: "run_timed_out", message: "node exploded" },
    });
    assert.deepEqual(waitBody(run({ status: "cancelled", output: null })), {});
  });

  test("fields the facade cannot honour are named; the SDK's harmless defaults pass", () => {
    assert.deepEqual(
      unsupportedRunFields({ assistant_id: "a", interrupt_before: [], feedback_keys: [], after_seconds: 0, on_completion: "delete" }),
      [],
    );
    const refused = unsupportedRunFields({ assistant_id: "a", webhook: "http://x", interrupt_after: "*", after_seconds: 5 });
    assert.equal(refused.length, 1);
    assert.match(refused.join(), /webhook/);
  });

  test("stream modes: values by default, deduplicated; unserved ones are named", () => {
    assert.deepEqual(requestedStreamModes(undefined), ["values"]);
    assert.deepEqual(requestedStreamModes("updates"), ["updates"]);
    assert.deepEqual(requestedStreamModes(["values", "values", "custom"]), ["values", "custom"]);
    assert.deepEqual(unservedStreamModes(["values", "events", "tools", "lifecycle", "debug", "checkpoints", "messages-tuple"]), [
      "lifecycle",
    ]);
  });

  test("Last-Event-ID: none or -1 replays from the start; n continues after n", () => {
    assert.equal(replayAfter(undefined), undefined);
    assert.equal(replayAfter(-1), undefined);
    assert.equal(replayAfter(0), 0);
    assert.equal(replayAfter(7), 7);
  });

  test("checkpoint ids come from a string, a checkpoint or a config", () => {
    assert.equal(checkpointIdOf("c1"), "c1");
    assert.equal(checkpointIdOf({ checkpoint_id: "c2", thread_id: "t" }), "c2");
    assert.equal(checkpointIdOf({ configurable: { checkpoint_id: "c3" } }), "c3");
    assert.equal(checkpointIdOf({}), undefined);
    assert.equal(checkpointIdOf(null), undefined);
  });

  test("log events become the asked modes' SSE events; Rudder's own events are not sent", () => {
    const mapper = new LgEventMapper(["values", "updates", "custom", "messages-tuple", "tasks"]);
    const log = [
      event("run_started", { attempt: 1, worker: "w" }),
      event("node_started", { node: "talk", task_id: "t1", triggers: ["start"] }),
      event("custom", { data: { progress: "thinking" } }),
      event("messages", { message: { type: "ai", content: "hel", id: "m1" }, node: "talk", metadata: { langgraph_node: "talk" } }),
      event("run.steer.accepted", { steering_event_id: "s", sequence: 1, kind: "k" }),
      event("updates", { updates: { talk: { answer: "hello" } } }),
      event("node_completed", { node: "talk", task_id: "t1", error: null, interrupts: [] }),
      event("values", { values: { answer: "hello" } }),
      event("run_succeeded", {}),
    ];
    const sent = log.flatMap((entry) => mapper.map(entry));
    assert.deepEqual(
      sent.map((sse) => sse.event),
      ["tasks", "custom", "messages", "updates", "tasks", "values"],
    );
    assert.deepEqual(sent[2]!.data, [{ type: "ai", content: "hel", id: "m1" }, { langgraph_node: "talk" }]);
    assert.deepEqual(sent[5]!.data, { answer: "hello" });
    // Ids are the log's sequences, so a reconnect continues after any of them.
    assert.equal(sent[5]!.id, String(log[7]!.sequence));
  });

  test("messages mode: metadata once per message, partials that accumulate, complete at the end of the step", () => {
    const mapper = new LgEventMapper(["messages"]);
    const chunk = (content: string) =>
      event("messages", { message: { type: "AIMessageChunk", content, id: "m1" }, node: "talk", metadata: { langgraph_node: "talk" } });
    const sent = [chunk("hel"), chunk("lo"), event("updates", { updates: {} })].flatMap((entry) => mapper.map(entry));
    assert.deepEqual(
      sent.map((sse) => sse.event),
      ["messages/metadata", "messages/partial", "messages/partial", "messages/complete"],
    );
    assert.equal((sent[2]!.data as { content: string }[])[0]!.content, "hello");
    assert.equal((sent[3]!.data as { content: string }[])[0]!.content, "hello");
  });

  test("checkpoints and debug: checkpoint events as recorded; debug wraps checkpoints and tasks with their step", () => {
    const mapper = new LgEventMapper(["checkpoints", "debug"]);
    const checkpoint = {
      config: { configurable: { checkpoint_id: "c1" } },
      parent_config: null,
      values: { a: 1 },
      metadata: { step: 0 },
      next: ["n"],
      tasks: [],
    };
    const sent = [
      event("checkpoint", checkpoint),
      event("node_started", { node: "n", task_id: "t1", triggers: ["start"] }),
      event("node_completed", { node: "n", task_id: "t1", error: null, interrupts: [] }),
    ].flatMap((entry) => mapper.map(entry));
    assert.deepEqual(
      sent.map((sse) => [sse.event, (sse.data as { type?: string }).type, (sse.data as { step?: number }).step]),
      [
        ["checkpoints", undefined, undefined],
        ["debug", "checkpoint", 0],
        ["debug", "task", 1],
        ["debug", "task_result", 1],
      ],
    );
    assert.deepEqual(sent[0]!.data, checkpoint);
    assert.deepEqual((sent[2]!.data as { payload: unknown }).payload, { id: "t1", name: "n", triggers: ["start"], interrupts: [] });
  });

  test("a failure is an error event whatever the modes; the metadata event is first with id 0", () => {
    const mapper = new LgEventMapper(["values"]);
    const [failure] = mapper.map(event("run_failed", { error: { code: "run_failed", message: "node exploded", retryable: false } }));
    assert.deepEqual(failure!.data, { error: "run_failed", message: "node exploded" });
    assert.equal(failure!.event, "error");
    assert.deepEqual(metadataEvent(run()), { id: "0", event: "metadata", data: { run_id: run().run_id, attempt: 1 } });
    assert.deepEqual(metadataEvent(run({ attempt: 0, status: "pending" })).data, { run_id: run().run_id, attempt: 1 });
    assert.equal(formatSse({ id: "3", event: "values", data: undefined }), "event: values\ndata: null\nid: 3\n\n");
  });
  test("a createBatch item's camelCase keys are read as their snake_case fields; a snake_case field given wins", () => {
    assert.deepEqual(
      snakeCaseKeys({ assistantId: "echo", assistant_id: "echo", input: { a: 1 }, streamMode: ["values"], afterSeconds: 2 }),
      {
        assistant_id: "echo",
        input: { a: 1 },
        stream_mode: ["values"],
        after_seconds: 2,
      },
    );
    assert.deepEqual(snakeCaseKeys({ checkpointId: "x", checkpoint_id: "y" }), { checkpoint_id: "y" });
    assert.deepEqual(snakeCaseKeys({ Weird: 1 }), { _weird: 1 }, "anything else still meets the body's rules");
    assert.equal(snakeCaseKeys("not an object"), "not an object");
  });
});
