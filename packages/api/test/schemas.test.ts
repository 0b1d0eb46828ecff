import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { Value } from "typebox/value";
import {
  CheckpointRef,
  ERROR_CODES,
  Problem,
  RUN_STATUSES,
  Run,
  RunStatus,
  SteerAccepted,
  SteeringEvent,
  THREAD_STATUSES,
  ThreadState,
  ThreadStatus,
  type ErrorCode,
  type Run as RunType,
  type ThreadState as ThreadStateType,
} from "../src/index.ts";

/** The named schemas a `$ref` may point at, as the server registers them with Fastify. */
const refs = { CheckpointRef };

/**
 * The schemas and their static types describe the same values: a value typed by the `Static<>`
 * type passes the schema, and the enumerations come from the one constant list each.
 */
const run: RunType = {
  run_id: "0d6f2e9c-52a3-4f5e-9c36-4d3b8a2f1e10",
  thread_id: null,
  assistant_id: "echo",
  status: "paused",
  input: { message: "hi" },
  context: {},
  config: {},
  metadata: {},
  output: { __interrupt__: [] },
  error: null,
  attempt: 1,
  multitask_strategy: "enqueue",
  durability: "sync",
  run_timeout: null,
  max_model_calls: null,
  max_tool_calls: null,
  max_tokens: null,
  max_cost: null,
  usage: { model_calls: 0, tool_calls: 0, tokens: 0, cost: 0 },
  superseded_by_run_id: null,
  steering_closed: false,
  created_at: "2025-01-01T00:00:00.000Z",
  started_at: "2025-01-01T00:00:01.000Z",
  finished_at: null,
  updated_at: "2025-01-01T00:00:02.000Z",
};

const state: ThreadStateType = {
  values: {},
  next: ["review"],
  tasks: [{ id: "t", name: "review", error: null, interrupts: [] }],
  // A $ref'd schema (CheckpointRef) is typed exactly, not as unknown.
  checkpoint: { thread_id: "th", checkpoint_ns: "", checkpoint_id: "c1" },
  parent_checkpoint: null,
  metadata: {},
  created_at: null,
};

// @ts-expect-error a status the spec does not name is not a RunStatus
const unknownStatus: RunType["status"] = "sleeping";
// A code missing from ERROR_CODES is still a problem code: new codes can appear (spec §9.2).
const unknownCode: Problem["code"] = "teapot";
// @ts-expect-error a problem code is a string
const numericCode: Problem["code"] = 409;
// @ts-expect-error a checkpoint reference has string fields
const badCheckpoint: ThreadStateType["checkpoint"] = { thread_id: 1, checkpoint_ns: "", checkpoint_id: "c" };

describe("@rudder/api", () => {
  test("a value of a static type passes its schema", () => {
    assert.ok(Value.Check(Run, run));
    assert.ok(Value.Check(refs, ThreadState, state));
  });

  test("a schema refuses what its type refuses", () => {
    assert.equal(Value.Check(Run, { ...run, status: unknownStatus }), false);
    assert.equal(Value.Check(refs, ThreadState, { ...state, checkpoint: badCheckpoint }), false);
    const { usage: _usage, ...withoutUsage } = run;
    assert.equal(Value.Check(Run, withoutUsage), false);
  });

  test("each enumeration comes from its one constant list", () => {
    const literalsOf = (schema: { anyOf: { const: string }[] }) => schema.anyOf.map((member) => member.const);
    assert.deepEqual(literalsOf(RunStatus), [...RUN_STATUSES]);
    assert.deepEqual(literalsOf(ThreadStatus), [...THREAD_STATUSES]);
    // The known problem codes are documented (examples), not enumerated: see the next test.
    assert.deepEqual((Problem.properties.code as { examples?: string[] }).examples, Object.keys(ERROR_CODES));
  });

  test("a problem's code is open: known codes and new ones pass, as clients must tolerate them", () => {
    const code: ErrorCode = "run_finalizing";
    assert.ok(Value.Check(Problem.properties.code, code));
    assert.ok(Value.Check(Problem.properties.code, unknownCode));
    assert.equal(Value.Check(Problem.properties.code, numericCode), false);
    assert.equal(Value.Check(Problem.properties.code, ""), false);
    const { description } = Problem.properties.code as { description?: string };
    for (const known of Object.keys(ERROR_CODES)) assert.match(description ?? "", new RegExp(`\\b${known}\\b`));
  });

  test("the members problems carry beyond RFC 9457's are described: errors (422), superseded_by_run_id (409)", () => {
    const base = { type: "about:blank", title: "t", status: 422, detail: "d", request_id: "r", retryable: false } as const;
    const invalid: Problem = {
      ...base,
      code: "validation_error",
      errors: [{ location: "body", path: "/", message: 'has unknown property "colour"' }],
    };
    assert.ok(Value.Check(Problem, invalid));
    assert.equal(Value.Check(Problem, { ...invalid, errors: [{ location: "body" }] }), false);
    assert.equal(Value.Check(Problem, { ...invalid, errors: "body is wrong" }), false);
    const superseded: Problem = { ...base, status: 409, code: "run_superseded", superseded_by_run_id: run.run_id };
    assert.ok(Value.Check(Problem, superseded));
    assert.equal(Value.Check(Problem, { ...superseded, superseded_by_run_id: 7 }), false);
    assert.ok(Value.Check(Problem, { ...base, code: "a_code_from_the_future", hint: "unknown members pass too" }));
  });

  test("the steer answer is the steering event's public fields", () => {
    assert.deepEqual(Object.keys(SteerAccepted.properties), ["id", "run_id", "sequence", "kind", "status", "created_at"]);
    for (const [name, schema] of Object.entries(SteerAccepted.properties)) {
      assert.deepEqual(schema, SteeringEvent.properties[name as keyof typeof SteeringEvent.properties]);
    }
  });
});
