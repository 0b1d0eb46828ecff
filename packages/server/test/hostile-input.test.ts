import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { connect } from "node:net";
import { fileURLToPath } from "node:url";
import { MAX_INT32, MAX_RUN_TIMEOUT_SECONDS } from "@rudder/api";
import { MAX_REQUEST_JSON_DEPTH } from "../src/domain/limits.ts";
import { assertProblem } from "./support/problem.ts";
import { startTestServer, type TestResponse, type TestServer } from "./support/server.ts";

/**
 * Issue 13, rows 1-9: hostile input answers 4xx problem+json naming what to change, never a 500,
 * and writes nothing; graph output the database cannot store fails its run once.
 */

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));

const NUL = "a\u0000b";
const HIGH = "a\ud800b";
const LOW = "a\udfffb";

/** A 422 validation_error whose detail and errors[0] name the field. */
function assertFieldRefused(response: TestResponse, location: string, path: string, what: RegExp): void {
  assertProblem(response, 422, "validation_error");
  assert.match(response.body.detail, new RegExp(`^${location}${path.replace(/[/]/g, "\\/")} `), response.body.detail);
  assert.match(response.body.detail, what);
  assert.deepEqual([response.body.errors[0].location, response.body.errors[0].path], [location, path]);
}

function nested(depth: number): unknown {
  let value: unknown = "bottom";
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

describe("hostile input", () => {
  let server: TestServer;
  let threadId: string;
  let runId: string;

  before(async () => {
    server = await startTestServer({ configFile: TESTING_CONFIG });
    threadId = (await server.request("POST", "/v1/threads", { body: { metadata: { kept: true } } })).body.thread_id;
    runId = (await server.request("POST", `/v1/threads/${threadId}/runs`, { body: { assistant_id: "echo", input: { message: "hi" } } }))
      .body.run_id;
    assert.equal((await server.request("GET", `/v1/runs/${runId}/join?timeout=20`)).body.status, "succeeded");
  });
  after(() => server.close());

  const runsOfThread = async () => (await server.request("GET", `/v1/threads/${threadId}/runs`)).body.length as number;

  test("row 1: U+0000 in any JSON string or member name is a 422 naming the field, and nothing is written", async () => {
    const threadsBefore = (await server.request("GET", "/v1/threads?limit=1000")).body.length;
    const runsBefore = await runsOfThread();
    const cases: [string, string, unknown, string][] = [
      ["POST", "/v1/threads", { metadata: { note: NUL } }, "/metadata/note"],
      ["POST", "/v1/threads", { metadata: { [NUL]: 1 } }, "/metadata"],
      ["PATCH", `/v1/threads/${threadId}`, { metadata: { list: ["ok", NUL] } }, "/metadata/list/1"],
      ["POST", `/v1/threads/${threadId}/runs`, { assistant_id: "echo", input: { message: NUL } }, "/input/message"],
      ["POST", `/v1/threads/${threadId}/runs`, { assistant_id: "echo", input: { message: "hi" }, metadata: { who: NUL } }, "/metadata/who"],
      [
        "POST",
        `/v1/threads/${threadId}/runs`,
        { assistant_id: "echo", input: { message: "hi" }, config: { configurable: { x: NUL } } },
        "/config/configurable/x",
      ],
      ["POST", `/v1/threads/${threadId}/runs`, { assistant_id: NUL }, "/assistant_id"],
      ["POST", "/v1/runs", { assistant_id: "echo", input: { message: "hi" }, context: { c: NUL } }, "/context/c"],
      ["POST", `/v1/runs/${runId}/steer`, { kind: NUL, payload: {} }, "/kind"],
      ["POST", `/v1/runs/${runId}/steer`, { kind: "note", payload: { text: NUL } }, "/payload/text"],
      ["POST", `/v1/runs/${runId}/steer`, { kind: "note", payload: 1, idempotency_key: NUL }, "/idempotency_key"],
      ["POST", `/v1/runs/${runId}/resume`, { resume: NUL }, "/resume"],
      ["POST", `/v1/threads/${threadId}/fork`, { values: { message: NUL } }, "/values/message"],
      ["POST", "/v1/assistants", { graph_id: "echo", name: NUL }, "/name"],
      ["POST", "/v1/assistants", { graph_id: "echo", assistant_id: "ok-id", config: { k: [{ v: NUL }] } }, "/config/k/0/v"],
    ];
    for (const [method, path, body, field] of cases) {
      assertFieldRefused(await server.request(method, path, { body }), "body", field, /U\+0000/);
    }
    assertFieldRefused(await server.request("GET", "/v1/assistants/a%00b"), "params", "/assistant_id", /U\+0000/);
    assertFieldRefused(await server.request("GET", "/v1/assistants?graph_id=%00"), "querystring", "/graph_id", /U\+0000/);
    assertFieldRefused(
      await server.request("GET", `/v1/threads/${threadId}/state?checkpoint_id=x%00`),
      "querystring",
      "/checkpoint_id",
      /U\+0000/,
    );
    const escapedInJson = encodeURIComponent(JSON.stringify({ user: NUL }));
    assertFieldRefused(await server.request("GET", `/v1/threads?metadata=${escapedInJson}`), "querystring", "/metadata/user", /U\+0000/);

    assert.equal((await server.request("GET", "/v1/threads?limit=1000")).body.length, threadsBefore, "no thread was created");
    assert.equal(await runsOfThread(), runsBefore, "no run was created");
    assert.deepEqual((await server.request("GET", `/v1/threads/${threadId}`)).body.metadata, { kept: true }, "the PATCH wrote nothing");
    assert.equal(
      (await server.request("GET", `/v1/runs/${runId}/events`)).body.filter((e: { kind: string }) => e.kind === "run.steer.accepted")
        .length,
      0,
    );
  });

  test("row 2: a lone surrogate (high or low) in any JSON string is a 422 naming the field", async () => {
    assertFieldRefused(
      await server.request("POST", "/v1/threads", { body: { metadata: { a: HIGH } } }),
      "body",
      "/metadata/a",
      /lone surrogate \(U\+D800\)/,
    );
    assertFieldRefused(
      await server.request("POST", "/v1/threads", { body: { metadata: { a: LOW } } }),
      "body",
      "/metadata/a",
      /lone surrogate \(U\+DFFF\)/,
    );
    assertFieldRefused(
      await server.request("POST", "/v1/threads", { body: { metadata: { [HIGH]: true } } }),
      "body",
      "/metadata",
      /member name/,
    );
    assertFieldRefused(
      await server.request("POST", `/v1/runs/${runId}/steer`, { body: { kind: "k", payload: [HIGH] } }),
      "body",
      "/payload/0",
      /lone surrogate/,
    );
    assertFieldRefused(
      await server.request("POST", "/v1/runs", { body: { assistant_id: "echo", input: { message: "\udc00\ud800" } } }),
      "body",
      "/input/message",
      /lone surrogate/,
    );
    // A whole pair is ordinary text and is stored as sent.
    const emoji = await server.request("POST", "/v1/threads", { body: { metadata: { a: "rudder \ud83d\udea2" } } });
    assert.equal(emoji.status, 201);
    assert.equal((await server.request("GET", `/v1/threads/${emoji.body.thread_id}`)).body.metadata.a, "rudder \ud83d\udea2");
  });

  test("row 3: ids are canonical UUIDs: urn:uuid, braces, upper case and missing hyphens are 422", async () => {
    const spellings = [`urn:uuid:${threadId}`, `{${threadId}}`, threadId.toUpperCase(), threadId.replaceAll("-", ""), ` ${threadId}`];
    for (const spelling of spellings) {
      const answer = await server.request("GET", `/v1/threads/${encodeURIComponent(spelling)}`);
      assertProblem(answer, 422, "validation_error");
      assert.match(answer.body.detail, /params\/thread_id must be a canonical UUID/);
      assertProblem(
        await server.request("GET", `/v1/runs/${encodeURIComponent(spelling.replace(threadId, runId))}`),
        422,
        "validation_error",
      );
    }
    assertProblem(await server.request("POST", `/v1/runs/urn:uuid:${runId}/cancel`), 422, "validation_error");
    assert.equal((await server.request("GET", `/v1/threads/${threadId}`)).status, 200, "the canonical spelling works");
  });

  test("row 4: offset, limit, after and Last-Event-ID beyond 2^31 are 422; at the bound the answer is the right (empty) page", async () => {
    for (const huge of ["2147483648", "9223372036854775808", "1e400", "99999999999999999999999"]) {
      assertProblem(await server.request("GET", `/v1/threads?offset=${huge}`), 422, "validation_error");
      assertProblem(await server.request("GET", `/v1/threads?limit=${huge}`), 422, "validation_error");
      assertProblem(await server.request("GET", `/v1/runs/${runId}/events?after=${huge}`), 422, "validation_error");
      assertProblem(await server.request("GET", `/v1/threads/${threadId}/runs?offset=${huge}`), 422, "validation_error");
      assertProblem(
        await server.request("GET", `/v1/runs/${runId}/stream`, { headers: { "last-event-id": huge } }),
        422,
        "validation_error",
      );
    }
    assertProblem(await server.request("GET", `/v1/runs/${runId}/stream`, { headers: { "last-event-id": "-1" } }), 422, "validation_error");
    assert.deepEqual((await server.request("GET", `/v1/threads?offset=${MAX_INT32}`)).body, []);
    assert.deepEqual((await server.request("GET", `/v1/runs/${runId}/events?after=${MAX_INT32}`)).body, []);
    const all = (await server.request("GET", `/v1/runs/${runId}/events?after=0`)).body;
    assert.ok(all.length > 2);
    const rest = (await server.request("GET", `/v1/runs/${runId}/events?after=${all.length - 2}`)).body;
    assert.deepEqual(
      rest.map((e: { sequence: number }) => e.sequence),
      [all.length - 1, all.length],
    );
    const atBound = await fetch(`${server.url}/v1/runs/${runId}/stream`, {
      headers: { authorization: `Bearer ${await server.token()}`, "last-event-id": String(MAX_INT32) },
      signal: AbortSignal.timeout(20_000),
    });
    assert.equal(atBound.status, 200);
    assert.doesNotMatch(await atBound.text(), /^id:/m, "a finished run's stream after the last possible sequence has no events and ends");
  });

  test(`row 5: JSON nested deeper than ${MAX_REQUEST_JSON_DEPTH} levels is a 422 with the limit; at the limit it is stored`, async () => {
    const deep = await server.request("POST", "/v1/threads", { rawBody: `{"metadata":{"a":${"[".repeat(5000)}${"]".repeat(5000)}}}` });
    assertProblem(deep, 422, "validation_error");
    assert.match(deep.body.detail, new RegExp(`^body/metadata/a.* nests objects and arrays deeper than ${MAX_REQUEST_JSON_DEPTH} levels`));
    // metadata and "a" are two levels: the array may nest MAX - 2 more and still fit.
    const fits = await server.request("POST", "/v1/threads", { body: { metadata: { a: nested(MAX_REQUEST_JSON_DEPTH - 2) } } });
    assert.equal(fits.status, 201, JSON.stringify(fits.body).slice(0, 300));
    assert.deepEqual(
      (await server.request("GET", `/v1/threads/${fits.body.thread_id}`)).body.metadata.a,
      nested(MAX_REQUEST_JSON_DEPTH - 2),
    );
    assertProblem(
      await server.request("POST", "/v1/threads", { body: { metadata: { a: nested(MAX_REQUEST_JSON_DEPTH - 1) } } }),
      422,
      "validation_error",
    );
    const deepQuery = encodeURIComponent(`{"a":${"[".repeat(300)}${"]".repeat(300)}}`);
    assertProblem(await server.request("GET", `/v1/threads?metadata=${deepQuery}`), 422, "validation_error");
  });

  test("row 6: 1e400 and other non-finite numbers are a 422 before anything is written", async () => {
    const before = await runsOfThread();
    const base = '"assistant_id":"echo","input":{"message":"hi"}';
    for (const field of ["run_timeout", "max_model_calls", "max_tool_calls", "max_tokens", "max_cost"]) {
      for (const value of ["1e400", "-1e400"]) {
        const answer = await server.request("POST", `/v1/threads/${threadId}/runs`, { rawBody: `{${base},"${field}":${value}}` });
        assertFieldRefused(answer, "body", `/${field}`, /not a finite number/);
      }
    }
    assertFieldRefused(
      await server.request("POST", `/v1/threads/${threadId}/runs`, { rawBody: `{${base},"metadata":{"n":1e999}}` }),
      "body",
      "/metadata/n",
      /finite/,
    );
    assertFieldRefused(
      await server.request("POST", `/v1/runs/${runId}/steer`, { rawBody: '{"kind":"k","payload":[1,1.5e308,-5e400]}' }),
      "body",
      "/payload/2",
      /finite/,
    );
    assert.equal(await runsOfThread(), before, "no run was stored");
    assertProblem(await server.request("GET", `/v1/runs/${runId}/join?timeout=1e400`), 422, "validation_error");
    assertProblem(await server.request("GET", `/v1/runs/${runId}/join?timeout=NaN`), 422, "validation_error");
    assertProblem(await server.request("GET", `/v1/runs/${runId}/join?timeout=Infinity`), 422, "validation_error");
    assert.equal(
      (await server.request("GET", `/v1/threads/${threadId}/runs`)).status,
      200,
      "every read of the thread's runs still answers",
    );
  });

  test("row 7: run_timeout beyond the timer range is honoured; above the documented maximum it is a 422", async () => {
    const beyondTimer = 2_147_484; // seconds: one more than a single Node timer can hold
    const created = await server.request("POST", "/v1/runs", {
      body: { assistant_id: "steps", input: { steps: 2, delayMs: 50 }, run_timeout: beyondTimer },
    });
    assert.equal(created.status, 202);
    const done = await server.request("GET", `/v1/runs/${created.body.run_id}/join?timeout=20`);
    assert.deepEqual([done.body.status, done.body.run_timeout], ["succeeded", beyondTimer], "not timed out at once");
    const atMax = await server.request("POST", "/v1/runs", {
      body: { assistant_id: "echo", input: { message: "x" }, run_timeout: MAX_RUN_TIMEOUT_SECONDS },
    });
    assert.equal(atMax.status, 202);
    assert.equal((await server.request("GET", `/v1/runs/${atMax.body.run_id}/join?timeout=20`)).body.status, "succeeded");
    const above = await server.request("POST", "/v1/runs", {
      body: { assistant_id: "echo", input: { message: "x" }, run_timeout: MAX_RUN_TIMEOUT_SECONDS + 1 },
    });
    assertProblem(above, 422, "validation_error");
    assert.match(above.body.detail, new RegExp(`run_timeout must be <= ${MAX_RUN_TIMEOUT_SECONDS}`));
  });

  test("row 8: every assistant id that can be created can be used; long paths are a 414 problem", async () => {
    for (const length of [101, 127, 128]) {
      const id = `a${"b".repeat(length - 1)}`;
      assert.equal((await server.request("POST", "/v1/assistants", { body: { graph_id: "echo", assistant_id: id } })).status, 201);
      assert.equal((await server.request("GET", `/v1/assistants/${id}`)).body.assistant_id, id);
      assert.equal((await server.request("PATCH", `/v1/assistants/${id}`, { body: { name: "renamed" } })).body.name, "renamed");
      const run = await server.request("POST", "/v1/runs", { body: { assistant_id: id, input: { message: "long" } } });
      assert.equal((await server.request("GET", `/v1/runs/${run.body.run_id}/join?timeout=20`)).body.status, "succeeded");
      assert.equal((await server.request("DELETE", `/v1/assistants/${id}`)).status, 204);
    }
    assertProblem(
      await server.request("POST", "/v1/assistants", { body: { graph_id: "echo", assistant_id: "c".repeat(129) } }),
      422,
      "validation_error",
    );
    assertProblem(await server.request("GET", `/v1/assistants/${"c".repeat(129)}`), 422, "validation_error");
    assertProblem(await server.request("GET", `/v1/assistants/${"c".repeat(5000)}`), 414, "uri_too_long");
  });

  test("row 8: every 4xx the framework and Node give is problem+json (404, 405, 400, 413, 415, 431)", async () => {
    assertProblem(await server.request("GET", "/v1/nowhere"), 404, "not_found");
    const wrongMethod = await server.request("PUT", "/v1/threads");
    assertProblem(wrongMethod, 405, "method_not_allowed");
    assert.equal(wrongMethod.headers.get("allow"), "GET, HEAD, POST");
    const wrongOnParam = await server.request("POST", `/v1/runs/${runId}`);
    assertProblem(wrongOnParam, 405, "method_not_allowed");
    assert.equal(wrongOnParam.headers.get("allow"), "GET, HEAD");
    assertProblem(await server.request("GET", "/v1/assistants/%E0%A4%A"), 400, "invalid_request");
    assertProblem(await server.request("GET", "/v1/assistants/%ED%A0%80"), 400, "invalid_request");
    // The query string too (its parser decodes such bytes leniently): root and /v1 routes alike.
    for (const query of ["assistant_id=%ED%A0%80", "assistant_id=%ZZ", "%E0%A4%A=x", "limit=1&assistant_id=%"]) {
      assertProblem(await server.request("GET", `/v1/runs?${query}`), 400, "invalid_request");
    }
    assertProblem(await server.request("GET", "/store/items?namespace=a&key=%ED%A0%80"), 400, "invalid_request");
    assert.equal((await server.request("GET", "/v1/runs?assistant_id=%C3%A9cho&limit=1")).status, 200, "valid UTF-8 passes");
    assertProblem(await server.request("POST", "/v1/threads", { rawBody: '{"metadata":' }), 400, "invalid_request");
    assertProblem(await server.request("POST", "/v1/threads", { rawBody: '{"__proto__":{"x":1}}' }), 400, "invalid_request");
    assertProblem(
      await server.request("POST", "/v1/threads", { body: { metadata: { blob: "x".repeat(1024 * 1024) } } }),
      413,
      "payload_too_large",
    );
    assertProblem(
      await server.request("POST", "/v1/threads", { rawBody: "<a/>", headers: { "content-type": "application/xml" } }),
      415,
      "unsupported_media_type",
    );
    assertProblem(
      await server.request("GET", "/v1/threads", { headers: { "x-padding": "p".repeat(20_000) } }),
      431,
      "header_fields_too_large",
    );
    assertProblem(await server.request("GET", `/v1/threads/${"x".repeat(20_000)}`), 431, "header_fields_too_large");

    // Two Authorization headers: Node keeps the first, a proxy may check the other; refused.
    const token = await server.token();
    const twice = await rawHttp(
      server.url,
      `GET /v1/threads HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nAuthorization: Bearer other\r\nConnection: close\r\n\r\n`,
    );
    assert.match(twice, /^HTTP\/1\.1 400 /);
    assert.match(twice, /"code":"invalid_request"/);
    const once = await rawHttp(
      server.url,
      `GET /v1/threads HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nConnection: close\r\n\r\n`,
    );
    assert.match(once, /^HTTP\/1\.1 200 /);

    const garbage = await rawHttp(server.url, "GARBAGE\r\n\r\n");
    assert.match(garbage, /^HTTP\/1\.1 400 /);
    assert.match(garbage, /content-type: application\/problem\+json/i);
    assert.equal(JSON.parse(garbage.slice(garbage.indexOf("\r\n\r\n") + 4)).code, "invalid_request");

    // CONNECT never reaches a route (Node gives it its own event): it was answered by a closed socket.
    for (const target of [`/v1/runs/${runId}`, "127.0.0.1:443"]) {
      const connect = await rawHttp(server.url, `CONNECT ${target} HTTP/1.1\r\nHost: x\r\n\r\n`);
      assert.match(connect, /^HTTP\/1\.1 405 /, target);
      assert.equal(JSON.parse(connect.slice(connect.indexOf("\r\n\r\n") + 4)).code, "method_not_allowed");
    }
    assert.match(await rawHttp(server.url, `CONNECT /v1/runs/${runId} HTTP/1.1\r\nHost: x\r\n\r\n`), /allow: GET, HEAD/i);
  });

  test("row 9: state serde cannot write (a BigInt) is refused, not stored as serde's placeholder: the thread's state still reads", async () => {
    // LangGraph's serde answers a value JSON cannot hold with a placeholder string instead of
    // throwing; stored, that string became the thread's newest checkpoint and every state read a 500.
    const thread = (await server.request("POST", "/v1/threads", { body: {} })).body.thread_id;
    const first = await server.request("POST", `/v1/threads/${thread}/runs`, {
      body: { assistant_id: "unstorable", input: { mode: "ok" } },
    });
    assert.equal((await server.request("GET", `/v1/runs/${first.body.run_id}/join?timeout=20`)).body.status, "succeeded");
    const created = await server.request("POST", `/v1/threads/${thread}/runs`, {
      body: { assistant_id: "unstorable", input: { mode: "bigint" } },
    });
    const done = (await server.request("GET", `/v1/runs/${created.body.run_id}/join?timeout=20`)).body;
    assert.deepEqual([done.status, done.attempt, done.error.code], ["failed", 1, "run_failed"]);
    assert.match(done.error.message, /is not JSON/);
    const state = await server.request("GET", `/v1/threads/${thread}/state`);
    assert.equal(state.status, 200, JSON.stringify(state.body));
    assert.equal(state.body.values.result.text, "fine", "the state before the refused step");
    const next = await server.request("POST", `/v1/threads/${thread}/runs`, {
      body: { assistant_id: "unstorable", input: { mode: "ok" } },
    });
    assert.equal((await server.request("GET", `/v1/runs/${next.body.run_id}/join?timeout=20`)).body.status, "succeeded");
  });

  test("row 9: graph output the database cannot store fails the run once, saying what and where; it is not retried", async () => {
    // Whichever event carries the value first names it: the node's update or the new state.
    const at = String.raw`"(?:updates|values)" event at \/(?:updates\/produce|values)\/result`;
    const expectations: [string, RegExp][] = [
      ["nul", new RegExp(`${at}\\/text contains U\\+0000`)],
      ["surrogate", new RegExp(`${at}\\/text contains a lone surrogate \\(U\\+D800\\)`)],
      ["key", new RegExp(`${at} has a member name that contains U\\+0000`)],
      ["bigint", /is not JSON/],
    ];
    for (const [mode, message] of expectations) {
      const created = await server.request("POST", `/v1/threads/${threadId}/runs`, {
        body: { assistant_id: "unstorable", input: { mode } },
      });
      assert.equal(created.status, 202);
      const done = await server.request("GET", `/v1/runs/${created.body.run_id}/join?timeout=20`);
      assert.equal(done.body.status, "failed", `${mode}: ${JSON.stringify(done.body.error)}`);
      assert.equal(done.body.attempt, 1, "failed on its first attempt");
      assert.equal(done.body.error.code, "run_failed");
      assert.equal(done.body.error.retryable, false);
      assert.match(done.body.error.message, /^the graph's (output|state) cannot be stored: /);
      assert.match(done.body.error.message, message);
      const kinds = (await server.request("GET", `/v1/runs/${created.body.run_id}/events`)).body.map((e: { kind: string }) => e.kind);
      assert.equal(kinds.filter((kind: string) => kind === "run_failed").length, 1);
      assert.ok(!kinds.includes("run_retrying") && !kinds.includes("run_dead_letter"), kinds.join(","));
    }
    // The refused value never became the thread's state, so the thread goes on working.
    const state = await server.request("GET", `/v1/threads/${threadId}/state`);
    // Its values only: the body also holds ids, and a random hex id can spell "bad".
    assert.doesNotMatch(JSON.stringify(state.body.values), /before|bad/, "the thread's state holds none of it");
    const next = await server.request("POST", `/v1/threads/${threadId}/runs`, {
      body: { assistant_id: "unstorable", input: { mode: "ok" } },
    });
    assert.equal((await server.request("GET", `/v1/runs/${next.body.run_id}/join?timeout=20`)).body.status, "succeeded");

    const thrown = await server.request("POST", "/v1/runs", { body: { assistant_id: "unstorable", input: { mode: "throw" } } });
    const failed = (await server.request("GET", `/v1/runs/${thrown.body.run_id}/join?timeout=20`)).body;
    assert.deepEqual(
      [failed.status, failed.attempt, failed.error.message],
      ["failed", 1, "exploded with \ufffd and \ufffd inside"],
      "an error message is stored with U+FFFD in place of what cannot be",
    );
    const fine = await server.request("POST", "/v1/runs", { body: { assistant_id: "unstorable", input: { mode: "ok" } } });
    assert.equal((await server.request("GET", `/v1/runs/${fine.body.run_id}/join?timeout=20`)).body.status, "succeeded");
  });

  test("row 10: an unknown query parameter is a 422 on every /v1 route, not ignored", async () => {
    const scheduleId = (await server.request("POST", "/v1/schedules", { body: { assistant_id: "echo", cron: "0 0 1 1 *" } })).body
      .schedule_id;
    const cases: [string, string, unknown][] = [
      ["POST", "/v1/threads?bogus=1", {}],
      ["GET", `/v1/threads/${threadId}?bogus=1`, undefined],
      ["PATCH", `/v1/threads/${threadId}?bogus=1`, { metadata: { kept: true } }],
      ["DELETE", `/v1/threads/${threadId}?bogus=1`, undefined],
      ["POST", `/v1/threads/${threadId}/fork?bogus=1`, {}],
      ["POST", `/v1/threads/${threadId}/runs?bogus=1`, { assistant_id: "echo", input: { message: "x" } }],
      ["POST", "/v1/runs?bogus=1", { assistant_id: "echo", input: { message: "x" } }],
      ["GET", `/v1/runs/${runId}?bogus=1`, undefined],
      ["GET", `/v1/runs/${runId}/stream?bogus=1`, undefined],
      ["GET", `/v1/runs/${runId}/stream?after=5`, undefined],
      ["POST", `/v1/runs/${runId}/cancel?bogus=1`, undefined],
      ["POST", `/v1/runs/${runId}/resume?bogus=1`, {}],
      ["POST", `/v1/runs/${runId}/redrive?bogus=1`, undefined],
      ["POST", `/v1/runs/${runId}/steer?bogus=1`, { kind: "note", payload: {} }],
      ["POST", "/v1/assistants?bogus=1", { graph_id: "echo" }],
      ["GET", "/v1/assistants/echo?bogus=1", undefined],
      ["PATCH", "/v1/assistants/echo?bogus=1", { name: "x" }],
      ["DELETE", "/v1/assistants/echo?bogus=1", undefined],
      ["POST", "/v1/schedules?bogus=1", { assistant_id: "echo", cron: "0 0 1 1 *" }],
      ["GET", `/v1/schedules/${scheduleId}?bogus=1`, undefined],
      ["PATCH", `/v1/schedules/${scheduleId}?bogus=1`, { enabled: false }],
      ["DELETE", `/v1/schedules/${scheduleId}?bogus=1`, undefined],
      ["POST", "/v1/store/batch?bogus=1", { operations: [{ kind: "get", namespace: ["a"], key: "k" }] }],
    ];
    const threadsBefore = (await server.request("GET", "/v1/threads?limit=1000")).body.length;
    for (const [method, path, body] of cases) {
      const answer = await server.request(method, path, body === undefined ? {} : { body });
      assertProblem(answer, 422, "validation_error");
      assert.match(answer.body.detail, /^querystring has unknown property "(bogus|after)"/, `${method} ${path}: ${answer.body.detail}`);
    }
    assert.equal((await server.request("GET", "/v1/threads?limit=1000")).body.length, threadsBefore, "no thread was created");
    assert.equal((await server.request("GET", `/v1/threads/${threadId}`)).status, 200, "nor deleted");
    assert.equal((await server.request("GET", `/v1/schedules/${scheduleId}`)).body.enabled, true, "nor a schedule changed");
    assert.equal((await server.request("DELETE", `/v1/schedules/${scheduleId}`)).status, 204);
  });

  test("row 11: numbers in a query or Last-Event-ID are decimal digits: hex, exponents, signs and fractions are 422", async () => {
    for (const loose of ["0x3", "1e0", "%2B3", "%203", "3.0", "0b1", "Infinity"]) {
      assertFieldRefused(await server.request("GET", `/v1/threads?limit=${loose}`), "querystring", "/limit", /decimal digits/);
      assertFieldRefused(await server.request("GET", `/v1/runs/${runId}/events?after=${loose}`), "querystring", "/after", /decimal/);
    }
    for (const loose of ["0x3", "1e2", "+3", "3.5", "three"]) {
      assertFieldRefused(
        await server.request("GET", `/v1/runs/${runId}/stream`, { headers: { "last-event-id": loose } }),
        "headers",
        "/last-event-id",
        /decimal digits/,
      );
    }
    assertFieldRefused(await server.request("GET", `/v1/runs/${runId}/join?timeout=0x10`), "querystring", "/timeout", /decimal/);
    // Plain decimal text still works, fractions where the field is a number.
    assert.equal((await server.request("GET", "/v1/threads?limit=3&offset=007")).status, 200);
    assert.equal((await server.request("GET", `/v1/runs/${runId}/join?timeout=0.5`)).body.status, "succeeded");
    const events = (await server.request("GET", `/v1/runs/${runId}/events?after=1&limit=1`)).body;
    assert.deepEqual(
      events.map((e: { sequence: number }) => e.sequence),
      [2],
    );
    const stream = await fetch(`${server.url}/v1/runs/${runId}/stream`, {
      headers: { authorization: `Bearer ${await server.token()}`, "last-event-id": "2" },
      signal: AbortSignal.timeout(20_000),
    });
    assert.equal(stream.status, 200);
    assert.match(await stream.text(), /^id: 3$/m, "a finished run's stream replays from after Last-Event-ID");
  });

  test("row 12: LangGraph searches sort only by the SDK's fields; anything else is a 422", async () => {
    for (const [path, fields] of [
      ["/threads/search", ["thread_id", "status", "created_at", "updated_at", "state_updated_at"]],
      ["/assistants/search", ["assistant_id", "graph_id", "name", "created_at", "updated_at"]],
    ] as const) {
      for (const sortBy of fields) assert.equal((await server.request("POST", path, { body: { sort_by: sortBy } })).status, 200, sortBy);
      const answer = await server.request("POST", path, { body: { sort_by: "bogus" } });
      assertProblem(answer, 422, "validation_error");
      assert.match(answer.body.detail, /^body\/sort_by /);
    }
  });

  test("row 13: config.configurable keys reserved for LangGraph and Rudder are a 422 wherever a config is given", async () => {
    const runsBefore = await runsOfThread();
    const assistant = (await server.request("POST", "/v1/assistants", { body: { graph_id: "echo" } })).body.assistant_id;
    for (const key of ["__pregel_checkpointer", "__pregel_send", "__rudder_tenant_id", "__rudder_checkpoint_hook"]) {
      const config = { configurable: { [key]: null } };
      const run = { assistant_id: "echo", input: { message: "x" }, config };
      for (const [method, path, body] of [
        ["POST", `/v1/threads/${threadId}/runs`, run],
        ["POST", "/v1/runs", run],
        ["POST", `/threads/${threadId}/runs`, run],
        ["POST", "/runs/wait", run],
        ["POST", "/v1/assistants", { graph_id: "echo", config }],
        ["PATCH", `/v1/assistants/${assistant}`, { config }],
      ] as const) {
        const answer = await server.request(method, path, { body });
        assertProblem(answer, 422, "validation_error");
        assert.match(answer.body.detail, new RegExp(`config/configurable/${key} is reserved`), `${method} ${path}: ${answer.body.detail}`);
      }
    }
    assert.equal(await runsOfThread(), runsBefore, "no run was created");
    // Other configurable keys, double underscores included, are the graph's to read.
    const fine = await server.request("POST", `/v1/threads/${threadId}/runs`, {
      body: { assistant_id: "echo", input: { message: "x" }, config: { configurable: { __mine: 1, pregel: 2 } } },
    });
    assert.equal(fine.status, 202, JSON.stringify(fine.body));
    assert.equal((await server.request("GET", `/v1/runs/${fine.body.run_id}/join?timeout=20`)).body.status, "succeeded");
  });

  test("row 14: a schedule's input is checked against its graph at create and update, as a run's is", async () => {
    const refused = await server.request("POST", "/v1/schedules", { body: { assistant_id: "echo", cron: "* * * * *", input: { zzz: 1 } } });
    assertProblem(refused, 422, "validation_error");
    assert.match(refused.body.detail, /input has unknown key\(s\) zzz/);
    const refusedCron = await server.request("POST", "/runs/crons", {
      body: { assistant_id: "echo", schedule: "* * * * *", input: { zzz: 1 } },
    });
    assertProblem(refusedCron, 422, "validation_error");
    const created = await server.request("POST", "/v1/schedules", {
      body: { assistant_id: "echo", cron: "0 0 1 1 *", input: { message: "hi" } },
    });
    assert.equal(created.status, 201);
    const patched = await server.request("PATCH", `/v1/schedules/${created.body.schedule_id}`, { body: { input: { zzz: 1 } } });
    assertProblem(patched, 422, "validation_error");
    assert.deepEqual((await server.request("GET", `/v1/schedules/${created.body.schedule_id}`)).body.input, { message: "hi" });
    // A cron is a schedule under LangGraph's names.
    const cronPatch = await server.request("PATCH", `/runs/crons/${created.body.schedule_id}`, { body: { input: { zzz: 1 } } });
    assertProblem(cronPatch, 422, "validation_error");
    assert.equal((await server.request("DELETE", `/v1/schedules/${created.body.schedule_id}`)).status, 204);
  });

  test("row 15: a __proto__ member is refused saying so (400); a compressed body is a 415", async () => {
    for (const raw of ['{"__proto__":{"x":1}}', '{"metadata":{"constructor":{"prototype":{"x":1}}}}']) {
      const answer = await server.request("POST", "/v1/threads", { rawBody: raw });
      assertProblem(answer, 400, "invalid_request");
      assert.match(answer.body.detail, /"__proto__" member, or a "constructor" member holding "prototype"/);
    }
    assert.match((await server.request("POST", "/v1/threads", { rawBody: '{"metadata":' })).body.detail, /not valid JSON/);
    for (const encoding of ["gzip", "deflate", "br", "GZIP"]) {
      const answer = await server.request("POST", "/v1/threads", { rawBody: "{}", headers: { "content-encoding": encoding } });
      assertProblem(answer, 415, "unsupported_media_type");
      assert.match(answer.body.detail, /Content-Encoding/);
    }
    const identity = await server.request("POST", "/v1/threads", { rawBody: "{}", headers: { "content-encoding": "identity" } });
    assert.equal(identity.status, 201);
    // A body is read as UTF-8: another charset is refused, not decoded as if it were UTF-8.
    for (const charset of ["utf-16", "ISO-8859-1", '"latin1"']) {
      const answer = await server.request("POST", "/v1/threads", {
        rawBody: "{}",
        headers: { "content-type": `application/json; charset=${charset}` },
      });
      assertProblem(answer, 415, "unsupported_media_type");
      assert.match(answer.body.detail, /send the body as UTF-8/);
    }
    for (const charset of ["utf-8", "UTF-8", '"utf-8"', "utf8"]) {
      const answer = await server.request("POST", "/v1/threads", {
        rawBody: "{}",
        headers: { "content-type": `application/json; charset=${charset}` },
      });
      assert.equal(answer.status, 201, charset);
    }
  });

  test("row 18: a body whose bytes are not UTF-8 is a 400 (a parse error in the JSON-RPC gateways), not decoded to U+FFFD", async () => {
    const token = await server.token();
    const post = (path: string, bytes: Uint8Array, headers: Record<string, string> = {}) =>
      fetch(`${server.url}${path}`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...headers,
        },
        body: bytes,
      });
    const json = (before: string, raw: number[], after: string) => new Uint8Array([...Buffer.from(before), ...raw, ...Buffer.from(after)]);
    const threadsBefore = (await server.request("GET", "/v1/threads?limit=100")).body.length as number;
    // An invalid byte, an overlong NUL, a lone surrogate's bytes, a truncated sequence.
    for (const raw of [
      [0xff, 0xfe],
      [0xc0, 0x80],
      [0xed, 0xa0, 0x80],
      [0xe2, 0x82],
    ]) {
      const answer = await post("/v1/threads", json('{"metadata":{"a":"', raw, '"}}'));
      assert.equal(answer.status, 400, JSON.stringify(raw));
      assert.match(answer.headers.get("content-type") ?? "", /application\/problem\+json/);
      const problem = (await answer.json()) as { code: string; detail: string };
      assert.equal(problem.code, "invalid_request");
      assert.match(problem.detail, /not valid UTF-8/);
    }
    assert.equal((await server.request("GET", "/v1/threads?limit=100")).body.length, threadsBefore, "nothing was created");
    // Two keys that differ only in their invalid bytes would have been one key.
    const steer = await post(`/v1/runs/${runId}/steer`, json('{"kind":"k","payload":{},"idempotency_key":"x', [0xff], '"}'));
    assert.equal(steer.status, 400);
    const a2a = await post("/a2a/echo", json('{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"', [0xff], '"}}'));
    assert.equal(((await a2a.json()) as { error: { code: number } }).error.code, -32700);
    const mcp = await post(
      "/mcp",
      json(
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"',
        [0xff],
        '","version":"1"}}}',
      ),
    );
    assert.equal(mcp.status, 400);
    assert.equal(((await mcp.json()) as { error: { code: number } }).error.code, -32700);
    // Valid UTF-8 beyond ASCII is text like any other.
    const accepted = await post("/v1/threads", new Uint8Array(Buffer.from('{"metadata":{"a":"é😀"}}')));
    assert.equal(accepted.status, 201);
    assert.equal(((await accepted.json()) as { metadata: { a: string } }).metadata.a, "é😀");
  });

  test("row 19: a /v1 route that takes no body refuses one with content (422), as it refuses an unknown query parameter", async () => {
    const { run_id } = (await server.request("POST", "/v1/runs", { body: { assistant_id: "echo", input: { message: "x" } } })).body;
    for (const [method, path] of [
      ["POST", `/v1/runs/${run_id}/cancel`],
      ["POST", `/v1/runs/${run_id}/redrive`],
      ["DELETE", `/v1/threads/${threadId}`],
    ] as const) {
      for (const rawBody of ['{"unknown":1}', "[1,2]", '"text"', "5"]) {
        const answer = await server.request(method, path, { rawBody });
        assertProblem(answer, 422, "validation_error");
        assert.match(answer.body.detail, /takes no body/);
      }
    }
    assert.equal((await server.request("GET", `/v1/threads/${threadId}`)).status, 200, "the thread was not deleted");
    // {} and no body are the same request.
    const cancelled = await server.request("POST", `/v1/runs/${run_id}/cancel`, { rawBody: "{}" });
    assert.ok([200, 409].includes(cancelled.status), JSON.stringify(cancelled.body));
  });

  test("row 19: no body sent with Content-Type: application/json is no body: cancel and redrive act, a route that needs one refuses it as before", async () => {
    const json = { "content-type": "application/json" };
    const join = async (id: string) => (await server.request("GET", `/v1/runs/${id}/join?timeout=20`)).body;
    const create = async (path: string, body: unknown) => (await server.request("POST", path, { body })).body.run_id as string;

    // fetch sends `Content-Length: 0`.
    const paused = await create("/v1/runs", { assistant_id: "approval", input: { request: "x" } });
    assert.equal((await join(paused)).status, "paused");
    const cancelled = await server.request("POST", `/v1/runs/${paused}/cancel`, { headers: json });
    assert.deepEqual([cancelled.status, cancelled.body.status], [200, "cancelled"], JSON.stringify(cancelled.body));
    assert.equal((await join(paused)).status, "cancelled");

    // curl -X POST -H 'content-type: application/json' sends no Content-Length at all.
    const pausedToo = await create("/v1/runs", { assistant_id: "approval", input: { request: "y" } });
    assert.equal((await join(pausedToo)).status, "paused");
    const answer = await rawHttp(
      server.url,
      `POST /v1/runs/${pausedToo}/cancel HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${await server.token()}\r\n` +
        "Content-Type: application/json\r\nConnection: close\r\n\r\n",
    );
    assert.match(answer, /^HTTP\/1\.1 200 /, answer);
    assert.equal((await join(pausedToo)).status, "cancelled");

    const failed = await create("/v1/runs", { assistant_id: "failing", input: { mode: "plain" } });
    assert.equal((await join(failed)).status, "failed");
    const redriven = await server.request("POST", `/v1/runs/${failed}/redrive`, { headers: json, rawBody: "" });
    assert.deepEqual([redriven.status, redriven.body.status], [202, "pending"], JSON.stringify(redriven.body));
    assert.equal((await join(failed)).status, "failed", "the redriven run ran again");

    // The LangGraph API's bodyless POSTs too: wait=1 answers once the run has stopped.
    const lgThread = (await server.request("POST", "/v1/threads", { body: {} })).body.thread_id as string;
    const running = await create(`/v1/threads/${lgThread}/runs`, { assistant_id: "steps", input: { steps: 50, delayMs: 100 } });
    const lgCancel = await server.request("POST", `/threads/${lgThread}/runs/${running}/cancel?wait=1`, { headers: json });
    assert.equal(lgCancel.status, 204, JSON.stringify(lgCancel.body));
    assert.equal((await join(running)).status, "cancelled");

    // A route that needs a body refuses an empty one exactly as it refuses none.
    for (const path of ["/v1/runs", `/v1/threads/${threadId}/runs`, `/v1/runs/${runId}/steer`, `/v1/runs/${runId}/resume`, "/threads"]) {
      const none = await server.request("POST", path);
      const empty = await server.request("POST", path, { headers: json, rawBody: "" });
      assertProblem(empty, 422, "validation_error");
      assert.deepEqual([empty.body.detail, empty.body.errors], [none.body.detail, none.body.errors], path);
    }
    // Whitespace is a body, and not JSON.
    assertProblem(await server.request("POST", `/v1/runs/${runId}/cancel`, { headers: json, rawBody: " " }), 400, "invalid_request");
  });

  test("row 20: an Idempotency-Key on a /v1 write that does not honour one is a 422, not ignored (a retry would double it)", async () => {
    const before = (await server.request("GET", "/v1/schedules")).body.length as number;
    const schedule = { assistant_id: "echo", cron: "0 0 1 1 *", input: { message: "x" } };
    for (let attempt = 0; attempt < 2; attempt++) {
      const answer = await server.request("POST", "/v1/schedules", { body: schedule, headers: { "idempotency-key": "once" } });
      assertProblem(answer, 422, "validation_error");
      assert.match(answer.body.detail, /takes no Idempotency-Key/);
    }
    assert.equal((await server.request("GET", "/v1/schedules")).body.length, before, "no schedule was made");
    const thread = await server.request("POST", "/v1/threads", { body: {}, headers: { "idempotency-key": "k" } });
    assertProblem(thread, 422, "validation_error");
    // Where it is honoured, it works as before; a read ignores it.
    const run = await server.request("POST", "/v1/runs", {
      body: { assistant_id: "echo", input: { message: "k" } },
      headers: { "idempotency-key": "row-20" },
    });
    assert.equal(run.status, 202);
    assert.equal((await server.request("GET", "/v1/schedules", { headers: { "idempotency-key": "k" } })).status, 200);
  });

  test("row 17: a goto that names no node of the graph is a 422, at creation and at resume; the paused run still resumes", async () => {
    const atCreation = await server.request("POST", "/v1/runs", {
      body: { assistant_id: "approval", input: { request: "x" }, goto: "nowhere" },
    });
    assertProblem(atCreation, 422, "validation_error");
    assert.match(atCreation.body.detail, /goto "nowhere" names no node of the graph; its nodes are plan, review, act, __end__/);
    const created = await server.request("POST", "/v1/runs", { body: { assistant_id: "approval", input: { request: "x" } } });
    assert.equal(created.status, 202);
    const paused = await server.request("GET", `/v1/runs/${created.body.run_id}/join?timeout=30`);
    assert.equal(paused.body.status, "paused");
    const refused = await server.request("POST", `/v1/runs/${created.body.run_id}/resume`, { body: { resume: {}, goto: "nowhere" } });
    assertProblem(refused, 422, "validation_error");
    const rootRefused = await server.request("POST", `/runs/wait`, {
      body: { assistant_id: "approval", input: { request: "x" }, command: { goto: "nowhere" } },
    });
    assertProblem(rootRefused, 422, "validation_error");
    assert.match(rootRefused.body.detail, /goto "nowhere" names no node/);
    // Nothing changed: the run is still paused, and a resume to a real node goes on from there.
    assert.equal((await server.request("GET", `/v1/runs/${created.body.run_id}`)).body.status, "paused");
    const resumed = await server.request("POST", `/v1/runs/${created.body.run_id}/resume`, {
      body: { resume: { approved: true }, goto: "act" },
    });
    assert.equal(resumed.status, 202, JSON.stringify(resumed.body));
    const done = await server.request("GET", `/v1/runs/${resumed.body.run_id}/join?timeout=30`);
    assert.equal(done.body.status, "succeeded", JSON.stringify(done.body.error));
  });
});

describe("a request that does not arrive in time", () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ configFile: TESTING_CONFIG, config: { requestTimeoutMs: 500 } });
  });
  after(() => server.close());

  test("row 16: a body shorter than its Content-Length is a 408 problem after the request timeout, not a hang", async () => {
    const token = await server.token();
    const started = Date.now();
    const answer = await rawHttp(
      server.url,
      `POST /v1/threads HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{}`,
    );
    assert.match(answer, /^HTTP\/1\.1 408 /);
    assert.match(answer, /content-type: application\/problem\+json/i);
    assert.equal(JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)).code, "request_timeout");
    assert.ok(Date.now() - started < 5_000, `answered after ${Date.now() - started} ms`);
    // Headers that never end are bounded too.
    assert.match(await rawHttp(server.url, "GET /v1/threads HTTP/1.1\r\nHost: x\r\n"), /^HTTP\/1\.1 408 /);
  });

  test("row 16: the timeout bounds receiving a request, not answering it: streams and joins last longer", async () => {
    const created = await server.request("POST", "/v1/runs", { body: { assistant_id: "steps", input: { steps: 8, delayMs: 200 } } });
    assert.equal(created.status, 202);
    const started = Date.now();
    const stream = await fetch(`${server.url}/v1/runs/${created.body.run_id}/stream`, {
      headers: { authorization: `Bearer ${await server.token()}` },
      signal: AbortSignal.timeout(30_000),
    });
    const text = await stream.text();
    assert.match(text, /run_succeeded/);
    assert.ok(Date.now() - started > 1_000, "the stream outlived the request timeout");
    const slow = await server.request("POST", "/v1/runs", { body: { assistant_id: "steps", input: { steps: 6, delayMs: 200 } } });
    const joined = await server.request("GET", `/v1/runs/${slow.body.run_id}/join?timeout=20`);
    assert.equal(joined.body.status, "succeeded");
  });
});

/** Sends raw bytes and returns what the server answers before it closes the connection. */
function rawHttp(url: string, request: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(request));
    let answer = "";
    socket.setTimeout(10_000, () => socket.destroy(new Error("no answer within 10 s")));
    socket.on("data", (chunk) => (answer += chunk.toString()));
    socket.on("close", () => resolve(answer));
    socket.on("error", reject);
  });
}
