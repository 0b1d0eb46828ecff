import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { startTestServer, type TestServer } from "./support/server.ts";

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));

describe("budgets (a fake chat model that reports token usage; no network)", () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ configFile: TESTING_CONFIG });
  });
  after(() => server.close());

  async function run(assistant: string, input: Record<string, unknown>, limits: Record<string, number> = {}) {
    const { body } = await server.request("POST", "/v1/runs", { body: { assistant_id: assistant, input, ...limits } });
    return (await server.request("GET", `/v1/runs/${body.run_id}/join?timeout=20`)).body;
  }

  test("within budget the run succeeds and its usage shows what was spent", async () => {
    const done = await run(
      "budget",
      { calls: 3, toolCalls: 2, costPerCall: 0.5 },
      { max_model_calls: 3, max_tool_calls: 2, max_tokens: 30, max_cost: 1.5 },
    );
    assert.equal(done.status, "succeeded");
    assert.deepEqual(done.usage, { model_calls: 3, tool_calls: 2, tokens: 30, cost: 1.5 });
  });

  test("usage is counted without budgets too", async () => {
    const done = await run("budget", { calls: 2, toolCalls: 1 });
    assert.deepEqual(done.usage, { model_calls: 2, tool_calls: 1, tokens: 20, cost: 0 });
  });

  for (const [name, input, limits, expected] of [
    ["max_model_calls refuses the call past it", { calls: 5 }, { max_model_calls: 2 }, { model_calls: 2, tokens: 20 }],
    ["max_tool_calls refuses the tool call past it", { calls: 0, toolCalls: 3 }, { max_tool_calls: 1 }, { tool_calls: 1 }],
    ["max_tokens ends the run at the call that crosses it", { calls: 5 }, { max_tokens: 25 }, { model_calls: 3, tokens: 30 }],
    [
      "max_cost counts what graph code reports with recordUsage",
      { calls: 5, costPerCall: 1 },
      { max_cost: 2.5 },
      { model_calls: 3, cost: 3 },
    ],
  ] as const) {
    test(`${name}: failed with budget_exceeded, not retried`, async () => {
      const ended = await run("budget", input, limits);
      assert.equal(ended.status, "failed");
      assert.equal(ended.error.code, "budget_exceeded");
      assert.equal(ended.error.retryable, false);
      assert.equal(ended.attempt, 1);
      for (const [key, value] of Object.entries(expected)) assert.equal(ended.usage[key], value, key);
    });
  }

  for (const [name, input, limits, expected] of [
    ["a refused model call", { calls: 4, swallow: true }, { max_model_calls: 1 }, { model_calls: 1, tokens: 10 }],
    ["a refused tool call (as ToolNode does)", { calls: 0, toolCalls: 3, swallow: true }, { max_tool_calls: 1 }, { tool_calls: 1 }],
    ["the call that crosses max_tokens", { calls: 4, swallow: true }, { max_tokens: 15 }, { model_calls: 2, tokens: 20 }],
  ] as const) {
    test(`${name} ends the run though graph code catches the error: failed with budget_exceeded, no more calls`, async () => {
      const ended = await run("budget", input, limits);
      assert.equal(ended.status, "failed", JSON.stringify(ended));
      assert.equal(ended.error.code, "budget_exceeded");
      assert.equal(ended.error.retryable, false);
      for (const [key, value] of Object.entries(expected)) assert.equal(ended.usage[key], value, key);
    });
  }

  test("subgraphs share the run's one budget", async () => {
    const ok = await run("budget_parent", { calls: 2 }, { max_model_calls: 4 });
    assert.equal(ok.status, "succeeded");
    assert.equal(ok.usage.model_calls, 4);
    const over = await run("budget_parent", { calls: 2 }, { max_model_calls: 3 });
    assert.deepEqual([over.status, over.error.code, over.usage.model_calls], ["failed", "budget_exceeded", 3]);
  });
});
