import { describe, mock, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, resolveConfig } from "../src/config/config.ts";
import { configProblem, isRetryableError, runErrorOf } from "../src/domain/runs.ts";
import { MAX_REQUEST_JSON_DEPTH, MAX_TENANT_ID_LENGTH } from "../src/domain/limits.ts";
import { findJsonFault, serializedFault, storableText, textProblem, UnstorableOutputError } from "../src/domain/storable-json.ts";
import { tenantIdProblem } from "../src/domain/tenants.ts";
import { toApiError } from "../src/http/problem.ts";
import { CANONICAL_UUID } from "../src/domain/names.ts";
import { isConnectionFailure } from "../src/storage/db.ts";
import { atDeadline, MAX_TIMER_MS } from "../src/worker/deadline.ts";

/** Unit tests of the pure rules behind issue 13: what can be stored, tenant ids, deadlines, outages. */

/** A directory without rudder.json, so configuration comes from the environment given. */
const NO_FILE = mkdtempSync(join(tmpdir(), "rudder-rules-"));

describe("storable JSON", () => {
  test("text: U+0000 and lone surrogates are refused, pairs and U+FFFD are text", () => {
    assert.match(textProblem("a\u0000") ?? "", /U\+0000/);
    assert.match(textProblem("\ud800") ?? "", /lone surrogate \(U\+D800\)/);
    assert.match(textProblem("x\udc00") ?? "", /U\+DC00/);
    assert.match(textProblem("\udc00\ud800") ?? "", /lone surrogate/, "a pair in the wrong order is two lone halves");
    for (const fine of ["", "plain", "\ud83d\udea2", "\ufffd", "tab\tnewline\n"])
      assert.equal(textProblem(fine), undefined, JSON.stringify(fine));
    assert.equal(storableText("a\u0000b\ud800c\ud83d\udea2"), "a\ufffdb\ufffdc\ud83d\udea2");
  });

  test("findJsonFault names the first fault by JSON Pointer", () => {
    assert.equal(findJsonFault({ a: [1, "ok", { b: null, c: true }] }), undefined);
    assert.deepEqual(findJsonFault({ a: [1, "x\u0000"] })?.path, "/a/1");
    assert.deepEqual(findJsonFault({ "a/b": { "c~d": "\ud800" } })?.path, "/a~1b/c~0d");
    assert.deepEqual(findJsonFault({ ok: 1, bad: Number.POSITIVE_INFINITY }), {
      path: "/bad",
      problem: "is not a finite number (JSON numbers must be finite)",
    });
    assert.match(findJsonFault(Number.NaN)?.problem ?? "", /finite/);
    assert.match(findJsonFault({ "k\u0000": 1 })?.problem ?? "", /member name/);
    assert.equal(findJsonFault("\u0000")?.path, "", "the value itself");
  });

  test(`depth: ${MAX_REQUEST_JSON_DEPTH} levels pass, one more is refused, and a hostile depth cannot overflow the walk`, () => {
    const nested = (depth: number) => {
      let value: unknown = 0;
      for (let i = 0; i < depth; i++) value = [value];
      return value;
    };
    assert.equal(findJsonFault(nested(MAX_REQUEST_JSON_DEPTH)), undefined);
    assert.match(findJsonFault(nested(MAX_REQUEST_JSON_DEPTH + 1))?.problem ?? "", /deeper than 128 levels/);
    assert.match(findJsonFault(JSON.parse("[".repeat(200_000) + "]".repeat(200_000)))?.problem ?? "", /deeper/);
    assert.equal(findJsonFault(nested(10_000), Number.POSITIVE_INFINITY), undefined);
  });

  test("serializedFault reads JSON.stringify's escapes, not escaped backslashes", () => {
    assert.equal(serializedFault(JSON.stringify({ a: "\\u0000 is six characters here" })), undefined);
    assert.match(serializedFault(JSON.stringify({ a: "\\\ud800" }))?.problem ?? "", /lone surrogate/, "a backslash, then a lone surrogate");
    assert.deepEqual(serializedFault(JSON.stringify({ a: ["x", "\\\u0000"] }))?.path, "/a/1");
    assert.deepEqual(serializedFault(JSON.stringify({ emoji: "\ud83d\udea2" })), undefined);
    assert.match(serializedFault(JSON.stringify({ s: "\ud800" }))?.problem ?? "", /lone surrogate/);
  });

  test("unstorable output is not retryable, and graph error messages are stored as text", () => {
    assert.equal(isRetryableError(new UnstorableOutputError("x")), false);
    assert.equal(runErrorOf(new Error("bad \u0000 \udfff")).message, "bad \ufffd \ufffd");
  });
});

describe("run configs", () => {
  test("configurable keys LangGraph and Rudder reserve are refused; others, and configs without configurable, pass", () => {
    for (const key of ["__pregel_checkpointer", "__pregel_send", "__pregel_", "__rudder_tenant_id", "__rudder"])
      assert.match(
        configProblem({ configurable: { ok: 1, [key]: null } }) ?? "",
        new RegExp(`^config/configurable/${key} is reserved`),
        key,
      );
    for (const fine of [
      undefined,
      {},
      { configurable: {} },
      { configurable: { __mine: 1, pregel: 2, thread_id: "t" } },
      { tags: ["__pregel_x"] },
    ])
      assert.equal(configProblem(fine as Record<string, unknown> | undefined), undefined, JSON.stringify(fine));
    assert.equal(configProblem({ configurable: "__pregel_x" }), undefined, "a configurable that is not an object holds no key");
  });
});

describe("tenant ids", () => {
  test("well-formed text up to the length limit; nothing that would alias another tenant", () => {
    // 128 emoji are 128 characters (256 UTF-16 units).
    for (const fine of ["acme", "t1", "tenant-ü", "org:42/team", "a".repeat(MAX_TENANT_ID_LENGTH), "😀".repeat(MAX_TENANT_ID_LENGTH)])
      assert.equal(tenantIdProblem(fine), undefined, fine);
    const refused: [unknown, RegExp][] = [
      ["", /non-empty/],
      [42, /string/],
      [["acme"], /string/],
      ["a".repeat(MAX_TENANT_ID_LENGTH + 1), /longer than 128/],
      ["😀".repeat(MAX_TENANT_ID_LENGTH + 1), /longer than 128/],
      ["acme\u0000", /U\+0000/],
      ["\ud800", /lone surrogate/],
      ["\udc00", /lone surrogate/],
      ["\ufffd", /U\+FFFD/],
      ["acme\n", /control/],
      ["acme\u0085", /control/],
    ];
    for (const [value, why] of refused) assert.match(tenantIdProblem(value) ?? "", why, JSON.stringify(value));
  });
});

describe("canonical UUIDs", () => {
  test("only the lowercase 8-4-4-4-12 spelling", () => {
    const id = "123e4567-e89b-12d3-a456-426614174000";
    assert.ok(CANONICAL_UUID.test(id));
    for (const other of [`urn:uuid:${id}`, `{${id}}`, id.toUpperCase(), id.replaceAll("-", ""), `${id}\n`, ` ${id}`])
      assert.ok(!CANONICAL_UUID.test(other), other);
  });
});

describe("deadlines beyond one timer", () => {
  test("a deadline past 2^31-1 ms re-arms instead of firing at once, and fires when due", () => {
    mock.timers.enable({ apis: ["setTimeout", "Date"], now: 0 });
    try {
      let fired = 0;
      const deadline = atDeadline(MAX_TIMER_MS * 2 + 5, () => fired++);
      mock.timers.tick(1);
      assert.equal(fired, 0, "not at once (a single timer would overflow and fire after 1 ms)");
      mock.timers.tick(MAX_TIMER_MS);
      mock.timers.tick(MAX_TIMER_MS);
      assert.equal(fired, 0);
      mock.timers.tick(4);
      assert.equal(fired, 1);
      const cancelled = atDeadline(Date.now() + MAX_TIMER_MS + 10, () => fired++);
      cancelled.cancel();
      mock.timers.tick(MAX_TIMER_MS + 20);
      assert.equal(fired, 1, "a cancelled deadline never fires");
      deadline.cancel();
    } finally {
      mock.timers.reset();
    }
  });
});

describe("database outages", () => {
  test("connection failures are told from statement failures", () => {
    for (const failure of [
      Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" }),
      Object.assign(new Error("terminating connection due to administrator command"), { code: "57P01" }),
      Object.assign(new Error("the database system is starting up"), { code: "57P03" }),
      Object.assign(new Error("connection failure"), { code: "08006" }),
      new Error("Connection terminated unexpectedly"),
      new Error("Connection terminated due to connection timeout"),
    ]) {
      assert.ok(isConnectionFailure(failure), failure.message);
    }
    for (const statement of [
      Object.assign(new Error("duplicate key"), { code: "23505" }),
      Object.assign(new Error("syntax"), { code: "42601" }),
      new Error("plain"),
      "text",
      // A full pool that stayed busy: the database answers, so it is not an outage (a 503 of its own).
      new Error("timeout exceeded when trying to connect"),
    ]) {
      assert.ok(!isConnectionFailure(statement), String(statement));
    }
  });

  test("Fastify's other client errors keep their status as problems", () => {
    assert.equal(toApiError(Object.assign(new Error("x"), { statusCode: 414 })).apiError.code, "uri_too_long");
    assert.equal(
      toApiError(Object.assign(new Error("x"), { statusCode: 400, code: "FST_ERR_SOMETHING_NEW" })).apiError.code,
      "invalid_request",
    );
    assert.equal(toApiError(Object.assign(new Error("x"), { statusCode: 500 })).apiError.code, "internal");
  });

  test("a transaction PostgreSQL rolled back (deadlock, serialization failure) is a retryable 503, not a 500", () => {
    for (const code of ["40P01", "40001"]) {
      const { apiError } = toApiError(Object.assign(new Error("deadlock detected"), { code }));
      assert.equal(apiError.code, "unavailable", code);
      assert.equal(apiError.status, 503, code);
      assert.equal(apiError.extra.retryAfterSeconds, 1, code);
    }
    assert.equal(toApiError(Object.assign(new Error("x"), { code: "23505" })).apiError.code, "internal");
  });
});

describe("configuration of tokens and shutdown", () => {
  test("tokens must expire unless RUDDER_JWT_REQUIRE_EXP=false or auth.require_exp is false", () => {
    assert.equal(resolveConfig({}, {}, NO_FILE).auth.requireExp, true);
    assert.equal(resolveConfig({}, { RUDDER_JWT_REQUIRE_EXP: "false" }, NO_FILE).auth.requireExp, false);
    assert.equal(resolveConfig({}, { RUDDER_JWT_REQUIRE_EXP: "1" }, NO_FILE).auth.requireExp, true);
    assert.throws(() => resolveConfig({}, { RUDDER_JWT_REQUIRE_EXP: "maybe" }, NO_FILE), ConfigError);
  });

  test("RUDDER_REQUEST_TIMEOUT_MS bounds how long a request may take to arrive (default 30 s)", () => {
    assert.equal(resolveConfig({}, {}, NO_FILE).requestTimeoutMs, 30_000);
    assert.equal(resolveConfig({}, { RUDDER_REQUEST_TIMEOUT_MS: "5000" }, NO_FILE).requestTimeoutMs, 5000);
    for (const bad of ["0", "-1", "1.5", "soon"])
      assert.throws(() => resolveConfig({}, { RUDDER_REQUEST_TIMEOUT_MS: bad }, NO_FILE), ConfigError, bad);
  });

  test("RUDDER_SHUTDOWN_GRACE_MS sets the worker's grace period (0 hands runs back at once)", () => {
    assert.equal(resolveConfig({}, {}, NO_FILE).shutdownGraceMs, 10_000);
    assert.equal(resolveConfig({}, { RUDDER_SHUTDOWN_GRACE_MS: "0" }, NO_FILE).shutdownGraceMs, 0);
    assert.throws(() => resolveConfig({}, { RUDDER_SHUTDOWN_GRACE_MS: "-5" }, NO_FILE), ConfigError);
  });
});
