import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { resolve } from "node:path";
import type { CreateRunBody } from "@rudder/api";
import { ConfigError, parseDotEnv, resolveConfig } from "../src/config/config.ts";
import { contains } from "../src/domain/containment.ts";
import { ApiError, ERROR_CODES } from "../src/domain/errors.ts";
import { grants, isRole } from "../src/domain/roles.ts";
import { BudgetExceededError, UsageMeter } from "../src/domain/budget.ts";
import {
  canonicalJson,
  isRetryableError,
  isSettled,
  requestFingerprint,
  retryDelayMs,
  runErrorOf,
  withRunDefaults,
} from "../src/domain/runs.ts";
import { DrainedExecutions, UnsettledTasks } from "../src/domain/steering.ts";
import { indexableText, STORE_MAX_INDEXED_TEXT_BYTES } from "../src/domain/store.ts";
import { toApiError } from "../src/http/problem.ts";
import { SPELLED_OUT_DEFAULTS } from "./support/runs.ts";

describe("roles", () => {
  test("grants are cumulative and match DESIGN.md", () => {
    assert.ok(grants(["viewer"], "read"));
    assert.ok(!grants(["viewer"], "operate") && !grants(["viewer"], "develop"));
    assert.ok(grants(["operator"], "operate") && !grants(["operator"], "develop"));
    assert.ok(grants(["developer"], "develop") && !grants(["developer"], "operate"));
    assert.ok(["read", "operate", "develop"].every((p) => grants(["admin"], p as "read")));
    assert.ok(grants(["viewer", "developer"], "develop"));
    assert.ok(!grants([], "read"));
    assert.ok(isRole("admin") && !isRole("root"));
  });
});

describe("JSON containment (the in-memory twin of jsonb @>)", () => {
  test("objects, nested objects, arrays and scalars", () => {
    assert.ok(contains({ a: 1, b: { c: 2, d: 3 } }, { b: { c: 2 } }));
    assert.ok(!contains({ a: 1 }, { a: 2 }));
    assert.ok(contains({ tags: ["x", "y"] }, { tags: ["y"] }));
    assert.ok(!contains({ tags: ["x"] }, { tags: ["z"] }));
    assert.ok(contains({ a: 1 }, {}));
    assert.ok(!contains({ a: [1] }, { a: 1 }));
    assert.ok(!contains(null, { a: 1 }));
  });
});

describe("error codes", () => {
  test("the spec's codes have the spec's statuses", () => {
    const expected = {
      idempotency_conflict: 409,
      quota_exceeded: 429,
      join_timeout: 408,
      run_terminal: 409,
      run_superseded: 409,
      payload_too_large: 413,
      run_resume_conflict: 409,
      run_finalizing: 409,
      invalid_request: 400,
      unauthorized: 401,
      forbidden: 403,
      not_found: 404,
      conflict: 409,
      concurrent_run: 409,
      validation_error: 422,
      rate_limited: 429,
      internal: 500,
    } as const;
    for (const [code, status] of Object.entries(expected)) assert.equal(ERROR_CODES[code as keyof typeof ERROR_CODES].status, status, code);
    assert.equal(ERROR_CODES.quota_exceeded.retryable, true);
    assert.equal(ERROR_CODES.validation_error.retryable, false);
  });

  test("toApiError passes ApiErrors through and hides unexpected errors", () => {
    const own = new ApiError("conflict", "busy");
    assert.deepEqual(toApiError(own), { apiError: own, unexpected: false });
    const hidden = toApiError(new Error("secret stack detail"));
    assert.equal(hidden.unexpected, true);
    assert.equal(hidden.apiError.code, "internal");
    assert.doesNotMatch(hidden.apiError.message, /secret/);
    const tooLarge = Object.assign(new Error("big"), { code: "FST_ERR_CTP_BODY_TOO_LARGE" });
    assert.equal(toApiError(tooLarge).apiError.code, "payload_too_large");
  });
});

describe("config", () => {
  const dir = resolve("/srv/app");

  test("graph targets resolve relative to the config file; no export means default", () => {
    const config = resolveConfig({ config: "packages/server/test/fixtures/bad-graph.rudder.json" }, {});
    assert.equal(config.graphs[0]!.graphId, "lonely");
    assert.match(config.graphs[0]!.file, /test\/fixtures\/graphs\/broken\.ts$/);
    assert.equal(config.graphs[0]!.exportName, "noEntry");
  });

  test("flags win over the environment, which wins over defaults", () => {
    const env = { PORT: "3000", HOST: "0.0.0.0", RUDDER_DATA_DIR: "data", DATABASE_URL: "" };
    const fromEnv = resolveConfig({}, env, dir);
    assert.deepEqual(
      [fromEnv.port, fromEnv.host, fromEnv.dataDir, fromEnv.databaseUrl],
      [3000, "0.0.0.0", resolve(dir, "data"), undefined],
    );
    const fromFlags = resolveConfig({ port: 4000, host: "::1", dataDir: "/tmp/x" }, env, dir);
    assert.deepEqual([fromFlags.port, fromFlags.host, fromFlags.dataDir], [4000, "::1", "/tmp/x"]);
    const defaults = resolveConfig({}, {}, dir);
    assert.deepEqual(
      [defaults.port, defaults.host, defaults.dataDir, defaults.auth.tenantClaim],
      [2024, "127.0.0.1", resolve(dir, ".rudder"), "tenant_id"],
    );
  });

  test("a missing explicit config file and an invalid port are ConfigErrors", () => {
    assert.throws(() => resolveConfig({ config: "/nope/rudder.json" }, {}), ConfigError);
    assert.throws(() => resolveConfig({}, { PORT: "70000" }, dir), ConfigError);
    assert.throws(() => resolveConfig({}, { PORT: "abc" }, dir), /invalid port from PORT="abc": a whole number from 0 to 65535/);
    assert.throws(() => resolveConfig({}, { RUDDER_PGLITE_THREAD: "both" }, dir), ConfigError);
    assert.equal(resolveConfig({}, {}, dir).pgliteThread, "worker");
    assert.equal(resolveConfig({}, { RUDDER_PGLITE_THREAD: "main" }, dir).pgliteThread, "main");
  });

  test(".env files: comments, quotes, export prefixes", () => {
    assert.deepEqual(parseDotEnv("# c\nA=1\nexport B='two words'\nC=\"q\" \nD=x # trailing\n bad line"), {
      A: "1",
      B: "two words",
      C: "q",
      D: "x",
    });
  });
});

describe("run rules", () => {
  /** The fingerprint a create of `request` stores (`RunService.create`). */
  const fingerprint = (request: CreateRunBody, threadId: string | null = null) => requestFingerprint(threadId, withRunDefaults(request));

  test("retryable errors: marked, network codes, undici codes, causes; not plain errors", () => {
    assert.ok(isRetryableError(Object.assign(new Error("x"), { retryable: true })));
    assert.ok(isRetryableError(Object.assign(new Error("x"), { code: "ECONNRESET" })));
    assert.ok(isRetryableError(Object.assign(new Error("x"), { code: "UND_ERR_SOCKET" })));
    assert.ok(isRetryableError(new Error("wrapped", { cause: Object.assign(new Error("x"), { code: "ETIMEDOUT" }) })));
    assert.ok(!isRetryableError(new Error("plain")));
    assert.ok(!isRetryableError("a string"));
  });

  test("error codes of run failures", () => {
    assert.equal(runErrorOf(Object.assign(new Error("bad"), { name: "InvalidUpdateError" })).code, "invalid_update");
    assert.equal(runErrorOf(new BudgetExceededError("tokens", 11, 10)).code, "budget_exceeded");
    assert.deepEqual(runErrorOf(new Error("boom")), { code: "run_failed", message: "boom", retryable: false });
  });

  test("backoff doubles from the base and is bounded", () => {
    assert.deepEqual(
      [1, 2, 3, 4].map((a) => retryDelayMs(a)),
      [1000, 2000, 4000, 8000],
    );
    assert.equal(retryDelayMs(30), 60_000);
    assert.equal(retryDelayMs(2, 10), 20);
  });

  test("request fingerprints ignore key order and undefined members", () => {
    assert.equal(canonicalJson({ b: 1, a: [{ d: 2, c: 3 }] }), '{"a":[{"c":3,"d":2}],"b":1}');
    assert.equal(
      fingerprint({ assistant_id: "a", input: { x: 1, y: [{ d: 2, c: 3 }] }, metadata: undefined }),
      fingerprint({ input: { y: [{ c: 3, d: 2 }], x: 1 }, assistant_id: "a" }),
    );
    assert.notEqual(fingerprint({ assistant_id: "a", input: { x: 1 } }), fingerprint({ assistant_id: "a", input: { x: 2 } }));
  });

  test("request fingerprints compare requests with their defaults applied: a default spelled out is the same request", () => {
    const bare = { assistant_id: "echo", input: { message: "i" } };
    const spelled: CreateRunBody = { ...bare, ...SPELLED_OUT_DEFAULTS };
    assert.equal(fingerprint(spelled), fingerprint(bare));
    for (const [field, value] of Object.entries(spelled)) {
      if (field in bare) continue;
      assert.equal(fingerprint({ ...bare, [field]: value }), fingerprint(bare), `${field}: ${JSON.stringify(value)}`);
    }
    assert.equal(fingerprint({ assistant_id: "echo", input: null }), fingerprint({ assistant_id: "echo" }), "input: null");
    // A request that spells no default keeps the fingerprint older binaries stored for it
    // (the hash of its canonical JSON with its thread), so a retry across an upgrade replays.
    const thread = "00000000-0000-4000-8000-000000000001";
    const stored = createHash("sha256")
      .update(canonicalJson({ thread_id: thread, ...bare, durability: "async" }))
      .digest("hex");
    assert.equal(fingerprint({ ...bare, durability: "async" }, thread), stored);

    // A value other than the default is another request, and so is another thread.
    for (const other of [
      { durability: "async" },
      { multitask_strategy: "reject" },
      { context: { k: 1 } },
      { config: { recursion_limit: 5 } },
      { metadata: { team: "ops" } },
      { resume: false },
      { resume: 0 },
      { update: {} },
      { goto: "act" },
      { run_timeout: 10 },
      { max_cost: 1 },
      { input: {} },
    ] as const) {
      assert.notEqual(fingerprint({ ...bare, ...other }), fingerprint(bare), JSON.stringify(other));
    }
    assert.notEqual(fingerprint({ assistant_id: "echo" }), fingerprint({ assistant_id: "echo", input: {} }));
    assert.notEqual(fingerprint({ assistant_id: "echo" }), fingerprint({ assistant_id: "echo-loud" }));
    assert.notEqual(fingerprint(bare, thread), fingerprint(bare));
  });

  test("the defaults a run is created with are the spec's", () => {
    assert.deepEqual(withRunDefaults({ assistant_id: "echo" }), { assistant_id: "echo", input: null, ...SPELLED_OUT_DEFAULTS });
    const sent: CreateRunBody = { assistant_id: "echo", input: 0, durability: "exit", resume: false, max_tokens: 5, context: { k: 1 } };
    assert.deepEqual(
      withRunDefaults(sent),
      { ...withRunDefaults({ assistant_id: "echo" }), ...sent },
      "a value sent is kept, falsy or not",
    );
  });

  test("settled states: terminal and paused", () => {
    assert.ok(isSettled("paused") && isSettled("dead_letter") && !isSettled("cancelling") && !isSettled("pending"));
  });
});

describe("usage meter", () => {
  const budget = { model_calls: 2, tool_calls: 1, tokens: 25, cost: 1 };

  test("calls are refused past their budget; tokens and cost end the run when crossed", () => {
    const meter = new UsageMeter(budget);
    meter.beforeModelCall();
    meter.record({ tokens: 10 });
    meter.beforeModelCall();
    assert.throws(() => meter.beforeModelCall(), BudgetExceededError);
    meter.beforeToolCall();
    assert.throws(() => meter.beforeToolCall(), /max_tool_calls budget of 1/);
    assert.throws(() => meter.record({ tokens: 20 }), /max_tokens/);
    assert.deepEqual(meter.usage, { model_calls: 2, tool_calls: 1, tokens: 30, cost: 0 });
  });

  test("a model call is refused once tokens or cost are used up; usage carries over", () => {
    const meter = new UsageMeter(budget, { model_calls: 0, tool_calls: 0, tokens: 25, cost: 0 });
    assert.throws(() => meter.beforeModelCall(), /max_tokens/);
    const unlimited = new UsageMeter({ model_calls: null, tool_calls: null, tokens: null, cost: null });
    unlimited.record({ tokens: 1e9, cost: -5, model_calls: Number.NaN });
    assert.deepEqual(
      unlimited.usage,
      { model_calls: 0, tool_calls: 0, tokens: 1e9, cost: 0 },
      "negative and non-finite amounts are ignored",
    );
  });
});

describe("steering executions and settlement", () => {
  test("a task's execution is its scratchpad at one node attempt: later drains of it are not its first", () => {
    const drained = new DrainedExecutions();
    const pad = {};
    const first = { scope: pad, attempt: 1 };
    assert.equal(drained.hasDrained(first, "t"), false);
    drained.markDrained(first, "t");
    assert.equal(drained.hasDrained(first, "t"), true, "the same execution drains again");
    assert.equal(drained.hasDrained({ scope: pad, attempt: null }, "t"), true, "a config without executionInfo is the current execution");
    assert.equal(drained.hasDrained({ scope: pad, attempt: 2 }, "t"), false, "retryPolicy's next attempt is a new execution");
    assert.equal(drained.hasDrained({ scope: {}, attempt: 1 }, "t"), false, "a task prepared again (new scratchpad) is a new execution");
    drained.markDrained({ scope: pad, attempt: 2 }, "t");
    drained.markDrained({ scope: pad, attempt: null }, "t");
    assert.equal(drained.hasDrained({ scope: pad, attempt: 2 }, "t"), true, "a read without an attempt keeps the scope's attempt");
    assert.equal(drained.hasDrained({ scope: null, attempt: null }, "t"), false);
    drained.markDrained({ scope: null, attempt: null }, "t");
    assert.equal(
      drained.hasDrained({ scope: null, attempt: null }, "t"),
      true,
      "without a scratchpad the task id stands for the execution",
    );
    assert.equal(drained.hasDrained({ scope: null, attempt: null }, "u"), false);
  });

  test("a task's consumption settles with its completed writes, or a checkpoint of its namespace at its step or later", () => {
    const tasks = new UnsettledTasks();
    tasks.add("a", "", 1);
    tasks.add("b", "", 2);
    tasks.add("inner", "outer:x", 1);
    assert.deepEqual(
      tasks.settledBy({ kind: "writes", taskId: "a", channels: ["__interrupt__"] }),
      [],
      "an interrupt: the task runs again",
    );
    assert.deepEqual(tasks.settledBy({ kind: "writes", taskId: "a", channels: ["__error__"] }), [], "an error: the task runs again");
    assert.deepEqual(tasks.settledBy({ kind: "writes", taskId: "a", channels: ["__resume__", "log"] }), ["a"], "completed after a resume");
    assert.deepEqual(tasks.settledBy({ kind: "writes", taskId: "other", channels: ["log"] }), [], "a task that consumed nothing");
    assert.deepEqual(
      tasks.settledBy({ kind: "checkpoint", checkpointNs: "", step: 1 }),
      ["a"],
      "the checkpoint after step 1 holds step 1's writes, not step 2's",
    );
    assert.deepEqual(tasks.settledBy({ kind: "checkpoint", checkpointNs: "", step: 2 }).sort(), ["a", "b"]);
    assert.deepEqual(tasks.settledBy({ kind: "checkpoint", checkpointNs: "outer:x", step: 5 }), ["inner"], "a subgraph's own namespace");
    assert.deepEqual(tasks.settledBy({ kind: "checkpoint", checkpointNs: "", step: undefined }), []);
    tasks.settled(["a", "b"]);
    assert.deepEqual(tasks.settledBy({ kind: "checkpoint", checkpointNs: "", step: 9 }), [], "settled once");
  });
});

describe("store index text", () => {
  test("a text is indexed whole up to the bound, and cut at a whole character past it", () => {
    assert.equal(indexableText("short"), "short");
    const ascii = "a".repeat(STORE_MAX_INDEXED_TEXT_BYTES + 10);
    assert.equal(indexableText(ascii).length, STORE_MAX_INDEXED_TEXT_BYTES);
    // "é" is two bytes, "😀" four (a surrogate pair): the cut never splits one.
    for (const char of ["é", "😀"]) {
      const cut = indexableText(`x${char.repeat(STORE_MAX_INDEXED_TEXT_BYTES)}`);
      assert.ok(Buffer.byteLength(cut) <= STORE_MAX_INDEXED_TEXT_BYTES);
      assert.ok(Buffer.byteLength(cut) > STORE_MAX_INDEXED_TEXT_BYTES - 4);
      assert.equal(cut.slice(1).replaceAll(char, ""), "", `only whole ${char}`);
    }
  });
});
