import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { TaskState } from "@a2a-js/sdk";
import { RequestMalformedError } from "@a2a-js/sdk/errors";
import { createLogger } from "../src/observability/logger.ts";
import { a2aClient, asTask, cardUrl, data, rpc, sendRequest, sseData, userMessage } from "./support/a2a.ts";
import { logLines } from "./support/log-lines.ts";
import { startTestServer, type TestServer } from "./support/server.ts";

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));
const TENANT = "t-a2a-input";

/** `{a: {a: … value}}`, `levels` objects deep. */
const nested = (levels: number, value: unknown = 1): unknown => {
  let current = value;
  for (let level = 0; level < levels; level++) current = { a: current };
  return current;
};

/**
 * What the A2A gateway takes before anything runs: values the database cannot store, unknown
 * methods, notifications, the version header, ids and filters of the wrong shape. Each is the
 * protocol's own JSON-RPC error, never -32603, and nothing is created.
 */
describe("A2A gateway input rules", () => {
  let server: TestServer;
  const { lines, destination } = logLines();
  before(async () => {
    server = await startTestServer({ configFile: TESTING_CONFIG, logger: createLogger({ level: "warn", format: "json", destination }) });
  });
  after(() => server.close());

  const call = (assistantId: string, body: unknown, version?: string, rawBody?: string) =>
    rpc(server, assistantId, body, { version, tenant: TENANT, rawBody });
  const errorOf = async (assistantId: string, body: unknown, version?: string, rawBody?: string) => {
    const answer = await call(assistantId, body, version, rawBody);
    assert.equal(answer.status, 200, answer.text);
    return answer.body.error;
  };
  const runCount = async () => {
    const [row] = await server.database.db.query<{ n: number }>("select count(*)::int as n from runs where tenant_id = $1", [TENANT]);
    return row!.n;
  };
  const failuresLogged = () => lines.filter((line) => line.includes("A2A request failed")).length;

  /** A send in either version's shapes: `parts` are given as [kind, value]. */
  const send = (version: string | undefined, message: Record<string, unknown>, parts: [kind: "data" | "text", value: unknown][]) => ({
    jsonrpc: "2.0",
    id: 1,
    method: version ? "SendMessage" : "message/send",
    params: {
      message: {
        ...(version ? { role: "ROLE_USER" } : { kind: "message", role: "user" }),
        messageId: crypto.randomUUID(),
        parts: parts.map(([kind, value]) => (version ? { [kind]: value } : { kind, [kind]: value })),
        ...message,
      },
    },
  });

  test("values the database cannot store are -32602 in every method and both versions; nothing runs and nothing fails", async () => {
    const runsBefore = await runCount();
    const failuresBefore = failuresLogged();
    for (const version of ["1.0", undefined]) {
      const [streamName, getName, cancelName, subscribeName] = version
        ? ["SendStreamingMessage", "GetTask", "CancelTask", "SubscribeToTask"]
        : ["message/stream", "tasks/get", "tasks/cancel", "tasks/resubscribe"];
      const refused = async (body: unknown, label: string, pattern: RegExp, rawBody?: string) => {
        const error = await errorOf("echo", body, version, rawBody);
        assert.equal(error?.code, -32602, `${version ?? "0.3"} ${label}: ${JSON.stringify(error)}`);
        assert.match(error!.message, pattern, label);
      };
      const nul = /U\+0000/;
      await refused(send(version, {}, [["data", { message: "a\u0000b" }]]), "NUL in data", nul);
      await refused(send(version, {}, [["data", { ["a\u0000"]: "b" }]]), "NUL in a member name", nul);
      await refused(send(version, {}, [["text", "a\u0000b"]]), "NUL in text", nul);
      // JSON.stringify writes a lone surrogate as the escape \ud800, which parses back to the lone surrogate.
      await refused(send(version, {}, [["data", { message: "\ud800" }]]), "a lone surrogate", /lone surrogate/);
      await refused(send(version, { messageId: "m\u0000" }, [["data", { message: "x" }]]), "NUL in messageId", nul);
      await refused(send(version, { contextId: "c\u0000" }, [["data", { message: "x" }]]), "NUL in contextId", nul);
      await refused(send(version, { metadata: { note: "a\u0000b" } }, [["data", { message: "x" }]]), "NUL in metadata", nul);
      await refused(send(version, {}, [["data", { message: "x", deep: nested(3000) }]]), "nested 3000 levels", /deeper than/);
      await refused({ ...send(version, {}, [["data", { message: "a\u0000b" }]]), method: streamName }, "NUL in a stream", nul);
      // Infinity is no JSON number: 1e400 parses to it.
      const infinite = JSON.stringify(send(version, {}, [["data", { message: "x", n: 7 }]])).replace('"n":7', '"n":1e400');
      await refused(undefined, "a number that is not finite", /finite/, infinite);
      for (const method of [getName, cancelName, subscribeName]) {
        await refused({ jsonrpc: "2.0", id: 1, method, params: { id: "a\u0000b" } }, `${method} of an id with NUL`, nul);
      }
    }
    const listed = await errorOf("echo", { jsonrpc: "2.0", id: 1, method: "ListTasks", params: { contextId: "a\u0000b" } }, "1.0");
    assert.equal(listed?.code, -32602);
    assert.equal(await runCount(), runsBefore, "no run was created");
    assert.equal(failuresLogged(), failuresBefore, "no request failed as an internal error");
  });

  test("the official SDK client gets RequestMalformedError for a NUL in its message, in both versions", async () => {
    for (const version of ["1.0", "0.3"] as const) {
      const echo = await a2aClient(server, "echo", version, { tenant: TENANT });
      await assert.rejects(
        echo.sendMessage(sendRequest(userMessage([data({ message: "a\u0000b" })]))),
        (error) => error instanceof RequestMalformedError,
        version,
      );
    }
  });

  test("a resume that cannot be stored is -32602 and the task still waits for input", async () => {
    const approval = await a2aClient(server, "approval", "1.0", { tenant: TENANT });
    const asked = asTask(await approval.sendMessage(sendRequest(userMessage([data({ request: "deploy" })]))));
    assert.equal(asked.status?.state, TaskState.TASK_STATE_INPUT_REQUIRED);
    for (const version of ["1.0", undefined]) {
      for (const [label, value] of [
        ["NUL", { approved: "a\u0000b" }],
        ["nested 3000 levels", { approved: nested(3000) }],
      ] as const) {
        const error = await errorOf("approval", send(version, { taskId: asked.id }, [["data", value]]), version);
        assert.equal(error?.code, -32602, `${version ?? "0.3"} ${label}: ${JSON.stringify(error)}`);
      }
    }
    const read = await approval.getTask({ tenant: "", id: asked.id, historyLength: undefined });
    assert.equal(read.status?.state, TaskState.TASK_STATE_INPUT_REQUIRED);
    assert.equal(read.metadata?.rudder_run_id, asked.id, "not resumed");
  });

  test("a data part's value may nest as deeply as a REST input: the envelope's levels do not count against it", async () => {
    // params(1) → message(2) → parts(3) → part(4) → data(5): the data object stands where a REST
    // body's `input` does (depth 2); 126 more levels under it pass, 127 do not, in both APIs.
    const deepest = { nope: nested(125, {}) };
    const tooDeep = { nope: nested(126, {}) };
    const within = await errorOf("echo", send("1.0", {}, [["data", deepest]]), "1.0");
    assert.equal(within?.code, -32602, "echo has no field `nope`");
    assert.doesNotMatch(within!.message, /deeper than/);
    const beyond = await errorOf("echo", send("1.0", {}, [["data", tooDeep]]), "1.0");
    assert.equal(beyond?.code, -32602);
    assert.match(beyond!.message, /deeper than/);
    const rest = async (input: unknown) =>
      JSON.stringify((await server.request("POST", "/v1/runs", { body: { assistant_id: "echo", input }, tenant: TENANT })).body);
    assert.doesNotMatch(await rest(deepest), /deeper than/);
    assert.match(await rest(tooDeep), /deeper than/);
  });

  test("an unknown method is -32601 with or without params", async () => {
    for (const version of [undefined, "1.0"]) {
      for (const method of ["foo", "tasks/list", version ? "tasks/get" : "GetTask"]) {
        for (const params of [undefined, {}, 5, { id: "a\u0000b" }]) {
          const body = { jsonrpc: "2.0", id: 3, method, ...(params === undefined ? {} : { params }) };
          const answer = await call("echo", body, version);
          assert.deepEqual(
            [answer.body.id, answer.body.error?.code],
            [3, -32601],
            `${version ?? "0.3"} ${method} ${JSON.stringify(params)}`,
          );
        }
      }
    }
    // A known method without the params it needs is still invalid params.
    assert.equal((await errorOf("echo", { jsonrpc: "2.0", id: 1, method: "tasks/get" }))?.code, -32602);
    assert.equal((await errorOf("echo", { jsonrpc: "2.0", id: 1, method: "GetTask" }, "1.0"))?.code, -32602);
  });

  test("a notification (no id) is refused with -32600 and runs nothing", async () => {
    const runsBefore = await runCount();
    for (const version of [undefined, "1.0"]) {
      const { id: _id, ...notification } = send(version, {}, [["data", { message: "nobody reads this" }]]);
      const answer = await call("echo", notification, version);
      assert.equal(answer.status, 200, answer.text);
      assert.deepEqual([answer.body.id, answer.body.error?.code], [null, -32600], answer.text);
      assert.equal("result" in answer.body, false);
      const unknown = await call("echo", { jsonrpc: "2.0", method: "foo" }, version);
      assert.deepEqual([unknown.body.id, unknown.body.error?.code], [null, -32600]);
    }
    // An explicit null id is a request (discouraged, but answered).
    const withNull = await call("echo", { ...send(undefined, {}, [["data", { message: "null id" }]]), id: null });
    assert.equal(withNull.body.id, null);
    assert.equal(withNull.body.error, undefined, withNull.text);
    assert.equal(await runCount(), runsBefore + 1, "only the request with an id ran");
  });

  test("an empty A2A-Version header is 0.3, as in the SDK's server", async () => {
    const headers = { authorization: `Bearer ${await server.token(TENANT)}`, "content-type": "application/json", "a2a-version": "" };
    const card = (await (await fetch(cardUrl(server, "echo"), { headers })).json()) as Record<string, unknown>;
    assert.equal(card.protocolVersion, "0.3");
    const response = await fetch(`${server.url}/a2a/echo`, {
      method: "POST",
      headers,
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tasks/get", params: { id: crypto.randomUUID() } }),
    });
    const body = (await response.json()) as { error?: { code: number } };
    assert.equal(body.error?.code, -32001, "a 0.3 method, served");
  });

  test("ids that are not strings, a malformed ListTasks filter and an over-long messageId are -32602", async () => {
    for (const version of [undefined, "1.0"]) {
      const getName = version ? "GetTask" : "tasks/get";
      for (const id of [{ a: 1 }, [1], 5, true]) {
        const error = await errorOf("echo", { jsonrpc: "2.0", id: 1, method: getName, params: { id } }, version);
        assert.equal(error?.code, -32602, `${version ?? "0.3"} ${JSON.stringify(id)}: ${JSON.stringify(error)}`);
      }
      const taskIdObject = await errorOf("echo", send(version, { taskId: { a: 1 } }, [["data", { message: "x" }]]), version);
      assert.equal(taskIdObject?.code, -32602);
      const long = await errorOf("echo", send(version, { messageId: "m".repeat(256) }, [["data", { message: "x" }]]), version);
      assert.equal(long?.code, -32602);
      assert.match(long!.message, /255/);
      const longest = await call(
        "echo",
        send(version, { messageId: `${version ?? "0.3"}:`.padEnd(255, "m") }, [["data", { message: `longest ${version}` }]]),
        version,
      );
      assert.equal(longest.body.error, undefined, longest.text);
    }
    const list = (params: unknown) => errorOf("echo", { jsonrpc: "2.0", id: 1, method: "ListTasks", params }, "1.0");
    assert.equal((await list({ status: "BOGUS" }))?.code, -32602);
    assert.equal((await list({ contextId: "garbage" }))?.code, -32602);
    assert.equal((await list({ contextId: { a: 1 } }))?.code, -32602);
    assert.equal(await list({ status: "TASK_STATE_REJECTED" }), undefined, "a state no run is in matches nothing");
    assert.equal(await list({ contextId: crypto.randomUUID() }), undefined, "a well-formed id of no context matches nothing");
    const answer = await call("echo", { jsonrpc: "2.0", id: 1, method: "ListTasks", params: { contextId: crypto.randomUUID() } }, "1.0");
    assert.deepEqual((answer.body.result as { tasks: unknown[] }).tasks, []);
    // Dates JavaScript parses and PostgreSQL cannot were -32603 from the database.
    for (const instant of ["0000-01-01T00:00:00Z", "-000001-01-01T00:00:00Z", "+275760-09-13T00:00:00Z", "yesterday"])
      assert.equal((await list({ statusTimestampAfter: instant }))?.code, -32602, instant);
    assert.equal(await list({ statusTimestampAfter: "0001-01-01T00:00:00Z" }), undefined);
    assert.equal(await list({ statusTimestampAfter: "2026-11-29T08:00:00+05:30" }), undefined);
    // Every field of a ListTasks request is optional: so are its params.
    const bare = await call("echo", { jsonrpc: "2.0", id: 1, method: "ListTasks" }, "1.0");
    assert.equal(bare.body.error, undefined, bare.text);
    assert.equal(failuresLogged(), 0);
  });

  test("a text that is not a string, a part with two contents, no role or a __proto__ member are -32602 and start nothing", async () => {
    const before = await runCount();
    for (const version of [undefined, "1.0"]) {
      for (const text of [5, { a: 1 }, true]) {
        const error = await errorOf("echo-text", send(version, {}, [["text", text]]), version);
        assert.equal(error?.code, -32602, `${version ?? "0.3"} text ${JSON.stringify(text)}`);
      }
      const both = send(version, {}, [["text", "hi"]]);
      const part = (both.params.message.parts as Record<string, unknown>[])[0]!;
      part.data = { message: "too" };
      assert.equal((await errorOf("echo", both, version))?.code, -32602);
      const roleless = send(version, {}, [["data", { message: "who" }]]);
      delete (roleless.params.message as Record<string, unknown>).role;
      assert.equal((await errorOf("echo", roleless, version))?.code, -32602);
      const body = JSON.stringify(send(version, {}, [["data", { reply: "r" }]])).replace(
        '{"reply":"r"}',
        '{"__proto__":{"message":"lost"},"reply":"r"}',
      );
      const poisoned = await errorOf("echo", undefined, version, body);
      assert.equal(poisoned?.code, -32602);
      assert.match(poisoned!.message, /__proto__/);
    }
    const missing = send(undefined, {}, []);
    (missing.params.message.parts as unknown[]).push({ kind: "text" });
    assert.equal((await errorOf("echo-text", missing))?.code, -32602, "a 0.3 text part without text");
    assert.equal(await runCount(), before);
  });

  test("a 0.3 message/send blocks unless configuration.blocking is false, also with a configuration that leaves it out", async () => {
    const body = send(undefined, { contextId: undefined }, [["data", { message: "blocks" }]]);
    const answer = await call("echo", {
      ...body,
      params: { ...body.params, configuration: { acceptedOutputModes: ["application/json"] } },
    });
    assert.equal((answer.body.result as { status: { state: string } }).status.state, "completed", answer.text);
  });

  test("a streaming send of NUL data is a plain JSON-RPC error, not a stream", async () => {
    for (const version of [undefined, "1.0"]) {
      const body = {
        ...send(version, {}, [["data", { message: "a\u0000b" }]]),
        method: version ? "SendStreamingMessage" : "message/stream",
      };
      const answer = await call("echo", body, version);
      assert.match(answer.contentType ?? "", /application\/json/);
      assert.equal(answer.body.error?.code, -32602);
      assert.deepEqual(sseData(answer.text), []);
    }
  });
});
