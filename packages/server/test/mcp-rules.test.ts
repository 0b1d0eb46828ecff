import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Assistant, Run } from "@rudder/api";
import { answerProblem, elicitationFor, parseElicitationId, resumeValueOf } from "../src/gateways/mcp/elicitation.ts";
import { failure, resultOfRun, toolOutputSchema } from "../src/gateways/mcp/results.ts";
import { callRunId, McpSessions } from "../src/gateways/mcp/session.ts";
import {
  assignToolNames,
  decodeCursor,
  encodeCursor,
  isExposed,
  preferredName,
  taggedName,
  toolNamesOf,
  validName,
} from "../src/gateways/mcp/tools.ts";

/** The MCP gateway's pure rules: tool names, cursors, sessions, results, elicitation. */

const assistant = (assistant_id: string, name: string, metadata: Record<string, unknown> = {}): Assistant => ({
  assistant_id,
  graph_id: "g",
  name,
  description: null,
  config: {},
  context: {},
  metadata,
  created_at: "2026-01-01T00:00:00.000Z",
  updated_at: "2026-01-01T00:00:00.000Z",
});

const run = (fields: Partial<Run>): Run =>
  ({ run_id: "5f0c1c2e-0000-4000-8000-000000000001", status: "succeeded", output: null, error: null, ...fields }) as Run;

describe("MCP tool names", () => {
  test("the first non-empty of mcp_tool_name, metadata.name, name, id", () => {
    assert.equal(preferredName(assistant("id", "Name", { mcp_tool_name: "tool", name: "meta" })), "tool");
    assert.equal(preferredName(assistant("id", "Name", { mcp_tool_name: "", name: "meta" })), "meta");
    assert.equal(preferredName(assistant("id", "Name", { mcp_tool_name: 5 })), "Name");
    assert.equal(preferredName(assistant("id", "")), "id");
  });

  test("only mcp_expose === true exposes", () => {
    assert.equal(isExposed(assistant("a", "a", { mcp_expose: true })), true);
    for (const value of ["true", 1, null, false]) assert.equal(isExposed(assistant("a", "a", { mcp_expose: value })), false);
  });

  test("made valid: other characters become _, at most 128", () => {
    assert.equal(validName("Résumé writer 🚀/v2"), "R_sum__writer___v2");
    assert.equal(validName("a.b-c_D9"), "a.b-c_D9");
    assert.equal(validName("x".repeat(300)).length, 128);
  });

  test("clashes get _2, _3…, shortened to fit; order decides who keeps the name", () => {
    const long = "y".repeat(140);
    const names = assignToolNames([
      assistant("1", "dup"),
      assistant("2", "dup"),
      assistant("3", "dup_2"),
      assistant("4", "dup"),
      assistant("5", long),
      assistant("6", long),
    ]).map((entry) => entry.name);
    assert.deepEqual(names.slice(0, 4), ["dup", "dup_2", "dup_2_2", "dup_3"]);
    assert.equal(names[4], "y".repeat(128));
    assert.equal(names[5], `${"y".repeat(126)}_2`);
  });

  test("a tenant's names: the config's first; of several asking for a name, the oldest keeps it only when unchanged since the next was created", () => {
    const at = (created: string, updated = created) => ({
      created_at: `2026-01-0${created}T00:00:00.000Z`,
      updated_at: `2026-01-0${updated}T00:00:00.000Z`,
    });
    const own = (id: string, name: string, times: { created_at: string; updated_at: string }) => ({ ...assistant(id, name), ...times });
    const names = (declared: Assistant[], stored: Assistant[]) =>
      Object.fromEntries(toolNamesOf(declared, stored).map(({ name, assistant }) => [assistant.assistant_id, name]));
    const older = own("older", "greet", at("1"));
    const newer = own("newer", "greet", at("2"));
    assert.deepEqual(names([], [newer, older]), { older: "greet", newer: taggedName("greet", newer) }, "a new one never renames the old");
    const exposedLater = own("older", "greet", at("1", "3"));
    assert.deepEqual(
      names([], [newer, exposedLater]),
      { older: taggedName("greet", exposedLater), newer: taggedName("greet", newer) },
      "changed since the other was created: nobody has the plain name",
    );
    assert.deepEqual(names([], [exposedLater]), { older: "greet" }, "alone, it has it");
    assert.deepEqual(
      names([assistant("cfg", "greet")], [older]),
      { cfg: "greet", older: taggedName("greet", older) },
      "the config's come first",
    );
    assert.match(taggedName("greet", newer), /^greet_[0-9a-f]{8}$/);
    assert.equal(taggedName("x".repeat(128), newer).length, 128);
  });

  test("cursors round-trip; foreign ones are refused", () => {
    assert.equal(decodeCursor(encodeCursor(50)), 50);
    assert.equal(decodeCursor(undefined), 0);
    assert.equal(decodeCursor("garbage"), undefined);
  });
});

describe("MCP sessions", () => {
  const ada = { tenantId: "t1", subject: "ada" };
  test("a session carries the elicitation capability; the same call names the same run", () => {
    const sessions = new McpSessions("secret");
    const plain = sessions.open(ada, {});
    const asking = sessions.open(ada, { elicitation: {} });
    assert.equal(plain.elicitation, false);
    assert.equal(asking.elicitation, true);
    assert.equal(sessions.open(ada, { elicitation: { form: {} } }).elicitation, true);
    assert.equal(sessions.open(ada, { elicitation: { url: {} } }).elicitation, false, "URL mode only: no forms");
    assert.deepEqual(sessions.find(ada, asking.id), asking);
    assert.deepEqual(sessions.find(ada, plain.id), plain);
    assert.equal(sessions.find(ada, undefined), undefined, "no session sent: none");
    const id = callRunId("t1", plain, 7);
    assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(callRunId("t1", plain, 7), id);
    assert.notEqual(callRunId("t2", plain, 7), id, "the tenant is part of it");
    assert.notEqual(callRunId("t1", plain, "7"), id, "a string id is not the number");
  });

  test("a session is its owner's: another tenant or subject, a changed capability, a forged or unsigned id is unknown", () => {
    const sessions = new McpSessions("secret");
    const asking = sessions.open(ada, { elicitation: {} });
    assert.equal(sessions.find({ tenantId: "t2", subject: "ada" }, asking.id), "unknown", "another tenant");
    assert.equal(sessions.find({ tenantId: "t1", subject: "bob" }, asking.id), "unknown", "another subject of the tenant");
    assert.equal(sessions.find(ada, asking.id.replace(".elicit", "")), "unknown", "the capability is part of what is signed");
    const [nonce] = asking.id.split(".");
    assert.equal(sessions.find(ada, nonce), "unknown", "an id of the unbound kind, or a random UUID");
    assert.equal(sessions.find(ada, `${nonce}.elicit.${"0".repeat(32)}`), "unknown", "a made-up MAC");
    assert.equal(sessions.find(ada, "not-a-session"), "unknown");
    assert.equal(new McpSessions("rotated").find(ada, asking.id), "unknown", "another secret (a rotated one)");
    assert.deepEqual(new McpSessions("secret").find(ada, asking.id), asking, "the same secret (another process)");
    assert.notEqual(sessions.open(ada, {}).id, sessions.open(ada, {}).id, "random");
  });
});

describe("MCP results", () => {
  test("a succeeded run's output, text from the last AI message or the JSON", () => {
    const plain = resultOfRun(run({ output: { count: 2 } }));
    assert.deepEqual(plain.structuredContent, { count: 2 });
    assert.equal(plain.content[0]?.type === "text" && plain.content[0].text, '{"count":2}');
    const chat = resultOfRun(
      run({
        output: {
          messages: [
            { type: "human", content: "hi" },
            { type: "ai", content: [{ type: "text", text: "hello" }] },
          ],
        },
      }),
    );
    assert.equal(chat.content[0]?.type === "text" && chat.content[0].text, "hello");
    assert.deepEqual(resultOfRun(run({ output: 5 })).structuredContent, { output: 5 }, "structured content is always an object");
  });

  test("failures carry the code and message; the output schema admits all three shapes", () => {
    const failed = resultOfRun(run({ status: "timed_out", error: { code: "run_timed_out", message: "too slow", retryable: false } }));
    assert.equal(failed.isError, true);
    assert.deepEqual((failed.structuredContent as { error: unknown }).error, {
      code: "run_timed_out",
      message: "too slow",
      retryable: false,
    });
    const rejected = failure({ code: "validation_error", message: "bad", retryable: false });
    assert.deepEqual(rejected.structuredContent, {
      status: "rejected",
      run_id: null,
      error: { code: "validation_error", message: "bad", retryable: false },
    });
    assert.equal(toolOutputSchema(undefined), undefined);
    assert.equal((toolOutputSchema({ type: "object" })!.anyOf as unknown[]).length, 3);
    const output = { type: "object", properties: { topic: { type: "string" } }, required: ["topic"], additionalProperties: false };
    assert.deepEqual(
      (toolOutputSchema(output)!.anyOf as unknown[])[0],
      { type: "object", properties: { topic: { type: "string" } }, additionalProperties: false },
      "a final state holds only the fields that were set: none is required",
    );
    const going = failure({ code: "unavailable", message: "closing", retryable: true }, { run_id: "r", status: "running" });
    assert.match(
      going.content[0]?.type === "text" ? going.content[0].text : "",
      /\(run r is running\)$/,
      "a run that goes on has not ended",
    );
  });
});

describe("MCP elicitation", () => {
  const paused = (value: unknown, count = 1) =>
    run({ status: "paused", output: { __interrupt__: Array.from({ length: count }, () => ({ id: "i", value })) } });

  test("a string asks for a free-text answer; a requestedSchema asks for its form", () => {
    const text = elicitationFor(paused("Why?"))!;
    assert.equal(text.params.message, "Why?");
    assert.deepEqual(parseElicitationId(text.id), { runId: run({}).run_id, mode: "answer" });
    assert.deepEqual(resumeValueOf("answer", { action: "accept", content: { answer: "because" } }), { value: "because" });
    const schema = { type: "object", properties: { ok: { type: "boolean" } } };
    const form = elicitationFor(paused({ question: "OK?", requestedSchema: schema }))!;
    assert.equal(form.params.message, "OK?");
    assert.deepEqual(form.params.requestedSchema, schema);
    assert.deepEqual(resumeValueOf("content", { action: "accept", content: { ok: true } }), { value: { ok: true } });
    assert.equal(elicitationFor(paused({ draft: 1 }))!.params.message, '{"draft":1}');
    // A requestedSchema MCP does not allow (a nested object, an array) would be refused by the client: asked as JSON, free text.
    for (const property of [
      { type: "object", properties: { region: { type: "string" } } },
      { type: "array", items: { type: "string" } },
    ]) {
      const value = { message: "Where?", requestedSchema: { type: "object", properties: { target: property } } };
      const asked = elicitationFor(paused(value))!;
      assert.equal(parseElicitationId(asked.id)!.mode, "answer");
      assert.equal(asked.params.message, JSON.stringify(value));
      assert.deepEqual(Object.keys(asked.params.requestedSchema.properties), ["answer"]);
    }
  });

  test("an answer is the string a free-text question asks for, held to the storage rules and the resume body's nesting limit", () => {
    assert.equal(answerProblem("answer", "fine"), undefined);
    assert.equal(answerProblem("content", { ok: true, note: "ok" }), undefined);
    assert.match(answerProblem("answer", "a\u0000b")!, /^result\.content\/answer contains U\+0000/);
    assert.match(answerProblem("content", { note: "\udc00" })!, /^result\.content\/note contains a lone surrogate/);
    const nested = (depth: number): unknown => (depth === 0 ? 1 : [nested(depth - 1)]);
    assert.equal(answerProblem("content", { deep: nested(126) }), undefined, "as deep as POST /v1/runs/{id}/resume takes");
    assert.match(answerProblem("content", { deep: nested(127) })!, /nests objects and arrays deeper than 127 levels/);
    // A free-text question asks for a string: a missing or other answer would resume the run with it.
    assert.match(answerProblem("answer", null)!, /^result\.content\/answer must be a string/);
    assert.match(answerProblem("answer", { text: "yes" })!, /^result\.content\/answer must be a string/);
  });

  test("declines, dismissals and several interrupts are not answers", () => {
    assert.equal(resumeValueOf("answer", { action: "decline" }), undefined);
    assert.equal(resumeValueOf("content", { action: "cancel" }), undefined);
    assert.equal(elicitationFor(paused("a", 2)), undefined);
    assert.equal(parseElicitationId(3), undefined);
    assert.equal(parseElicitationId("rudder-elicit:nope:answer"), undefined);
  });
});
