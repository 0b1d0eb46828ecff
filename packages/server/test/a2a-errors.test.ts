import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { a2aClient, asTask, cardUrl, data, rpc, sendRequest, sseData, userMessage } from "./support/a2a.ts";
import { parseSse, type SseItem } from "./support/sse.ts";
import { startTestServer, type TestServer } from "./support/server.ts";

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));

/** The A2A gateway's JSON-RPC errors, 0.3 `final` flags and heartbeats on the wire, and the HTTP refusals before any JSON-RPC. */
describe("A2A gateway errors", () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ configFile: TESTING_CONFIG });
  });
  after(() => server.close());

  describe("JSON-RPC errors", () => {
    const send1 = (message: Record<string, unknown>) => ({
      jsonrpc: "2.0",
      id: 7,
      method: "SendMessage",
      params: { message: { messageId: crypto.randomUUID(), role: "ROLE_USER", ...message } },
    });
    const send03 = (message: Record<string, unknown>) => ({
      jsonrpc: "2.0",
      id: 7,
      method: "message/send",
      params: { message: { kind: "message", messageId: crypto.randomUUID(), role: "user", ...message } },
    });
    const code = async (assistantId: string, body: unknown, options: Parameters<typeof rpc>[3] = {}) => {
      const answer = await rpc(server, assistantId, body, options);
      assert.equal(answer.status, 200, answer.text);
      return answer.body.error?.code;
    };

    test("malformed JSON is -32700; a body that is not a request is -32600; an unknown method is -32601", async () => {
      for (const version of [undefined, "1.0"]) {
        const parse = await rpc(server, "echo", undefined, { version, rawBody: "{not json" });
        assert.deepEqual([parse.status, parse.body.error?.code, parse.body.id], [200, -32700, null]);
        assert.equal(await code("echo", { jsonrpc: "2.0", id: 1 }, { version }), -32600);
        assert.equal(await code("echo", [{ jsonrpc: "2.0", id: 1, method: "tasks/get" }], { version }), -32600);
        assert.equal(await code("echo", { jsonrpc: "1.0", id: 1, method: "tasks/get", params: {} }, { version }), -32600);
        assert.equal(await code("echo", { jsonrpc: "2.0", id: 1, method: "NoSuchMethod", params: {} }, { version }), -32601);
      }
      // Each version serves its own method names.
      assert.equal(await code("echo", { jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "x" } }), -32601);
      assert.equal(await code("echo", { jsonrpc: "2.0", id: 1, method: "tasks/get", params: { id: "x" } }, { version: "1.0" }), -32601);
      assert.equal(await code("echo", { jsonrpc: "2.0", id: 1, method: "tasks/list", params: {} }), -32601);
      assert.equal(await code("echo", { jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "x" } }, { version: "2.0" }), -32009);
      assert.equal(await code("echo", send1({ parts: [{ text: "x" }] }), { version: "1.0", contentType: "text/plain" }), -32005);
    });

    test("bad params are -32602", async () => {
      for (const [version, send] of [
        ["1.0", send1],
        [undefined, send03],
      ] as const) {
        const method = version ? "SendMessage" : "message/send";
        assert.equal(await code("echo", { jsonrpc: "2.0", id: 1, method, params: 5 }, { version }), -32602);
        assert.equal(await code("echo", { jsonrpc: "2.0", id: 1, method, params: {} }, { version }), -32602);
        const dataPart = (value: unknown) => (version ? { data: value } : { kind: "data", data: value });
        const textPart = (value: string) => (version ? { text: value } : { kind: "text", text: value });
        assert.equal(await code("echo", send({ parts: [] }), { version }), -32602);
        assert.equal(await code("echo", send({ parts: [dataPart({ nope: 1 })] }), { version }), -32602, "not an input field of the graph");
        assert.equal(await code("echo", send({ parts: [textPart("hi")] }), { version }), -32602, "echo has no `input` field for text");
        assert.equal(await code("echo", send({ parts: [textPart("hi")], contextId: "not-a-context" }), { version }), -32602);
        assert.equal(await code("echo", send({ parts: [textPart("hi")], contextId: crypto.randomUUID() }), { version }), -32602);
      }
      assert.equal(await code("echo", send1({ parts: [{ data: [1, 2] }] }), { version: "1.0" }), -32602, "a data part must be an object");
      assert.equal(await code("echo", send1({ parts: [{ url: "https://example.com/a.pdf" }] }), { version: "1.0" }), -32005, "file parts");
    });

    test("unknown tasks are -32001, ended ones -32002 to cancel and -32004 to message or subscribe", async () => {
      const done = asTask(await (await a2aClient(server, "echo", "1.0")).sendMessage(sendRequest(userMessage([data({ message: "end" })]))));
      const plain = await server.request("POST", "/v1/runs", { body: { assistant_id: "echo", input: { message: "not a task" } } });
      for (const version of [undefined, "1.0"]) {
        const [getTask, cancelTask, subscribe] = version
          ? ["GetTask", "CancelTask", "SubscribeToTask"]
          : ["tasks/get", "tasks/cancel", "tasks/resubscribe"];
        const call = (method: string, id: string) => code("echo", { jsonrpc: "2.0", id: 1, method, params: { id } }, { version });
        assert.equal(await call(getTask, crypto.randomUUID()), -32001);
        assert.equal(await call(getTask, "not-a-uuid"), -32001);
        assert.equal(await call(getTask, plain.body.run_id), -32001, "a run not started over A2A is no task");
        assert.equal(await call(cancelTask, crypto.randomUUID()), -32001);
        assert.equal(await call(cancelTask, done.id), -32002);
        assert.equal(await call(subscribe, done.id), -32004);
        const answer = version
          ? send1({ parts: [{ text: "more" }], taskId: done.id })
          : send03({ parts: [{ kind: "text", text: "more" }], taskId: done.id });
        assert.equal(await code("echo", answer, { version }), -32004);
      }
    });

    test("push notifications are -32003 in both versions; there is no extended card", async () => {
      const config = { taskId: "t", url: "https://example.com/hook" };
      for (const method of [
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
      ]) {
        assert.equal(
          await code("echo", { jsonrpc: "2.0", id: 1, method, params: { ...config, id: "c" } }, { version: "1.0" }),
          -32003,
          method,
        );
      }
      for (const method of [
        "tasks/pushNotificationConfig/set",
        "tasks/pushNotificationConfig/get",
        "tasks/pushNotificationConfig/list",
        "tasks/pushNotificationConfig/delete",
      ]) {
        const params = method.endsWith("set")
          ? { taskId: "t", pushNotificationConfig: { url: "https://example.com/hook" } }
          : { id: "t", pushNotificationConfigId: "c" };
        assert.equal(await code("echo", { jsonrpc: "2.0", id: 1, method, params }), -32003, method);
        // Whatever the params: the 0.3 SDK read a missing config's id first and answered -32603 with its TypeError.
        for (const odd of [{}, { id: null }, { message: {} }, undefined])
          assert.equal(await code("echo", { jsonrpc: "2.0", id: 1, method, params: odd }), -32003, `${method} ${JSON.stringify(odd)}`);
      }
      const withPush = send1({ parts: [{ data: { message: "x" } }] });
      (withPush.params as Record<string, unknown>).configuration = { taskPushNotificationConfig: { url: "https://example.com/hook" } };
      assert.equal(await code("echo", withPush, { version: "1.0" }), -32003);
      // 1.0 §3.3.4: a card with extendedAgentCard false makes the call unsupported; 0.3 says the card is not configured.
      assert.equal(await code("echo", { jsonrpc: "2.0", id: 1, method: "GetExtendedAgentCard", params: {} }, { version: "1.0" }), -32004);
      assert.equal(await code("echo", { jsonrpc: "2.0", id: 1, method: "GetExtendedAgentCard" }, { version: "1.0.0" }), -32004);
      assert.equal(await code("echo", { jsonrpc: "2.0", id: 1, method: "agent/getAuthenticatedExtendedCard" }), -32007);
    });

    test("0.3 streams mark the last update final, for an ended task and for one that needs input", async () => {
      const stream = (assistantId: string, parts: unknown[]) =>
        rpc(server, assistantId, {
          jsonrpc: "2.0",
          id: "s",
          method: "message/stream",
          params: { message: { kind: "message", messageId: crypto.randomUUID(), role: "user", parts } },
        });
      for (const [assistantId, state] of [
        ["echo", "completed"],
        ["approval", "input-required"],
      ] as const) {
        const answer = await stream(assistantId, [{ kind: "data", data: assistantId === "echo" ? { message: "f" } : { request: "f" } }]);
        assert.match(answer.contentType ?? "", /text\/event-stream/);
        const frames = sseData(answer.text);
        assert.ok(frames.every((frame) => (frame as { id?: unknown }).id === "s"));
        const last = frames.at(-1)!.result as { kind: string; status: { state: string }; final: boolean };
        assert.deepEqual([last.kind, last.status.state, last.final], ["status-update", state, true]);
        assert.ok(frames.slice(0, -1).every((frame) => frame.result?.final !== true));
      }
      // 1.0 has no `final`: its stream ends after the terminal update.
      const v1 = await rpc(server, "echo", send1({ parts: [{ data: { message: "g" } }] }), { version: "1.0" });
      assert.equal(v1.body.error, undefined);
      const streamed = await rpc(
        server,
        "echo",
        { ...send1({ parts: [{ data: { message: "g2" } }] }), method: "SendStreamingMessage" },
        { version: "1.0" },
      );
      const frames = sseData(streamed.text);
      assert.deepEqual(Object.keys(frames.at(-1)!.result!), ["statusUpdate"]);
    });

    test("a stream of a task that had already ended or was waiting for input is that task alone: it never goes back to working", async () => {
      const streamOf = async (assistantId: string, body: Record<string, unknown>) =>
        sseData((await rpc(server, assistantId, body)).text).map((frame) => frame.result as { kind: string; status: { state: string } });
      const message = {
        kind: "message",
        messageId: crypto.randomUUID(),
        role: "user",
        parts: [{ kind: "data", data: { message: "once" } }],
      };
      const sendStream = { jsonrpc: "2.0", id: "s", method: "message/stream", params: { message } };
      const first = await streamOf("echo", sendStream);
      assert.deepEqual([first[0]!.kind, first.at(-1)!.status.state], ["task", "completed"]);
      assert.ok(first.length > 2, "a new task's stream carries its updates");
      // The same message again (a retry whose first answer was lost): the completed task, and the end.
      const again = await streamOf("echo", sendStream);
      assert.deepEqual(
        again.map((event) => [event.kind, event.status.state]),
        [["task", "completed"]],
      );
      const asked = asTask((await rpc(server, "approval", send03({ parts: [{ kind: "data", data: { request: "sub" } }] }))).body.result);
      const subscribed = await streamOf("approval", { jsonrpc: "2.0", id: "r", method: "tasks/resubscribe", params: { id: asked.id } });
      assert.deepEqual(
        subscribed.map((event) => [event.kind, event.status.state]),
        [["task", "input-required"]],
      );
    });

    test("the card's endpoint is an http(s) origin: forwarded headers that make no origin are not used", async () => {
      const token = await server.token();
      const endpointOf = async (headers: Record<string, string>) => {
        const response = await fetch(cardUrl(server, "echo"), { headers: { authorization: `Bearer ${token}`, ...headers } });
        return ((await response.json()) as { url: string }).url;
      };
      const own = `${server.url}/a2a/echo`;
      assert.equal(await endpointOf({}), own);
      assert.equal(
        await endpointOf({ "x-forwarded-host": "rudder.example.com", "x-forwarded-proto": "https" }),
        "https://rudder.example.com/a2a/echo",
      );
      assert.equal(await endpointOf({ "x-forwarded-host": "[::1]:8443", "x-forwarded-proto": "HTTPS" }), "https://[::1]:8443/a2a/echo");
      assert.equal(await endpointOf({ "x-forwarded-host": "evil.example/steal?x=" }), own);
      assert.equal(await endpointOf({ "x-forwarded-host": "ex ample.com" }), own);
      assert.equal(await endpointOf({ "x-forwarded-host": "user@evil.example" }), own);
      assert.equal(await endpointOf({ "x-forwarded-proto": "javascript" }), own);
    });

    test("a quiet stream carries heartbeat comments until its task ends", async () => {
      const steerable = await a2aClient(server, "steerable", "1.0");
      const started = asTask(
        await steerable.sendMessage(sendRequest(userMessage([data({ rounds: 1, waitMs: 60_000 })]), { returnImmediately: true })),
      );
      const response = await fetch(`${server.url}/a2a/steerable`, {
        method: "POST",
        headers: { authorization: `Bearer ${await server.token()}`, "content-type": "application/json", "a2a-version": "1.0" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "SubscribeToTask", params: { id: started.id } }),
      });
      assert.match(response.headers.get("content-type") ?? "", /text\/event-stream/);
      const items = parseSse(response.body as unknown as AsyncIterable<Uint8Array>);
      const seen: SseItem[] = [];
      for (let item = await items.next(); !item.done; item = await items.next()) {
        seen.push(item.value);
        if (item.value.type === "comment" && seen.some((found) => found.type === "event")) break;
      }
      assert.deepEqual(seen.at(-1), { type: "comment", text: "heartbeat" });
      await server.request("POST", `/v1/runs/${started.id}/steer`, { body: { kind: "stop", payload: {} } });
      const rest: SseItem[] = [];
      for (let item = await items.next(); !item.done; item = await items.next()) rest.push(item.value);
      const last = rest.filter((item) => item.type === "event").at(-1) as { data: string };
      assert.equal(JSON.parse(last.data).result.statusUpdate.status.state, "TASK_STATE_COMPLETED");
    });

    test("refusals before JSON-RPC: no token or a bad one is 401, no role 403, another tenant's assistant 404, as problem+json", async () => {
      for (const url of [cardUrl(server, "echo"), `${server.url}/a2a/echo`]) {
        const method = url.endsWith(".json") ? "GET" : "POST";
        const anonymous = await fetch(url, {
          method,
          headers: { "content-type": "application/json" },
          body: method === "POST" ? "{}" : undefined,
        });
        assert.equal(anonymous.status, 401);
        assert.match(anonymous.headers.get("content-type") ?? "", /application\/problem\+json/);
        const forged = await fetch(url, {
          method,
          headers: { authorization: "Bearer nope", "content-type": "application/json" },
          body: method === "POST" ? "{}" : undefined,
        });
        assert.equal(forged.status, 401);
        const roleless = await fetch(url, {
          method,
          headers: { authorization: `Bearer ${await server.token("t1", [])}`, "content-type": "application/json" },
          body: method === "POST" ? "{}" : undefined,
        });
        assert.equal(roleless.status, 403);
        assert.equal(((await roleless.json()) as { code: string }).code, "forbidden");
      }
      const created = await server.request("POST", "/v1/assistants", { body: { assistant_id: "private-echo", graph_id: "echo" } });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const mine = await fetch(cardUrl(server, "private-echo"), { headers: { authorization: `Bearer ${await server.token()}` } });
      assert.equal(mine.status, 200);
      const theirs = await fetch(cardUrl(server, "private-echo"), { headers: { authorization: `Bearer ${await server.token("t2")}` } });
      assert.equal(theirs.status, 404);
      assert.equal(((await theirs.json()) as { code: string }).code, "not_found");
      const post = await rpc(server, "private-echo", send03({ parts: [{ kind: "data", data: { message: "x" } }] }), { tenant: "t2" });
      assert.equal(post.status, 404);
      assert.equal(post.body.error, undefined);
    });
  });
});
