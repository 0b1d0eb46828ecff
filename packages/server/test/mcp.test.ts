import { after, before, describe, test } from "node:test";
import { createHash, randomUUID } from "node:crypto";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, existsSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError, type CallToolResult, type Tool } from "@modelcontextprotocol/sdk/types.js";
import { mintToken } from "../src/auth/authenticator.ts";
import { resolveConfig, type DeclaredAssistant } from "../src/config/config.ts";
import { TEST_DRIVER } from "./support/db.ts";
import { initializeRequest, mcpClient, rawMcp } from "./support/mcp.ts";
import { startTestServer, TEST_SECRET, type TestServer } from "./support/server.ts";

/**
 * The MCP endpoint with the official SDK client (`Client` + `StreamableHTTPClientTransport`)
 * against a real server: initialize, tools (names, schemas, pages, tenants, roles), calls
 * (results, errors, pauses, progress, cancellation), elicitation, and the transport's answers.
 */

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));
/** The testing config's graphs and the MCP tests' own. */
const GRAPHS = [
  ...resolveConfig({ config: TESTING_CONFIG, port: 0 }, {}).graphs,
  { graphId: "ask_value", file: fileURLToPath(new URL("./fixtures/graphs/mcp.ts", import.meta.url)), exportName: "askValue" },
];

const exposed = (
  assistant_id: string,
  graph_id: string,
  metadata: Record<string, unknown> = {},
  extra: Partial<DeclaredAssistant> = {},
): DeclaredAssistant => ({
  assistant_id,
  graph_id,
  ...extra,
  metadata: { mcp_expose: true, ...metadata },
});

const ASSISTANTS: DeclaredAssistant[] = [
  exposed("mcp-steps", "steps", { mcp_tool_name: "count steps!" }, { name: "Steps", description: "Counts steps, one node per step" }),
  exposed("mcp-failing", "failing"),
  exposed("mcp-chat", "chat_messages", { name: "chat" }),
  exposed("mcp-typed", "typed", { mcp_tool_name: "write" }, { description: "Writes about a topic" }),
  exposed("mcp-approval", "approval", { mcp_tool_name: "approve" }),
  exposed("mcp-form", "form_ask", { mcp_tool_name: "form" }),
  exposed("mcp-hops", "two_hops", { mcp_tool_name: "hops" }),
  exposed("mcp-dup-1", "echo", { mcp_tool_name: "dup" }),
  exposed("mcp-dup-2", "echo", { mcp_tool_name: "dup" }),
  exposed("mcp-ask", "ask_value", { mcp_tool_name: "ask" }),
  { assistant_id: "mcp-hidden", graph_id: "echo", metadata: { mcp_expose: "true", mcp_tool_name: "hidden" } },
];

/** The tag of a tool name whose plain form another assistant has: the first 8 hex digits of the SHA-256 of the assistant id. */
const tagOf = (assistantId: string) => createHash("sha256").update(assistantId).digest("hex").slice(0, 8);
const text = (result: CallToolResult) => result.content.map((part) => (part.type === "text" ? part.text : "")).join("");
const runIdOf = (result: CallToolResult) => (result._meta as Record<string, string>)["rudder/run_id"]!;

async function joinRun(
  server: TestServer,
  runId: string,
  tenant = "t1",
): Promise<{ status: string; output: Record<string, unknown>; error: { code: string } | null; metadata: Record<string, unknown> }> {
  for (;;) {
    const joined = await server.request("GET", `/v1/runs/${runId}/join?timeout=60`, { tenant });
    if (joined.status === 408) continue;
    assert.equal(joined.status, 200, JSON.stringify(joined.body));
    return joined.body;
  }
}

/** Waits until `file` has a line, and returns the run id the steps graph wrote in it. */
async function firstRunIdIn(file: string): Promise<string> {
  for (;;) {
    if (existsSync(file)) {
      const line = readFileSync(file, "utf8").split("\n")[0];
      if (line) return line.split(" ")[0]!;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * A raw tools/call in a new session that answers elicitation: resolves once the server asks
 * (`elicitation/create` on the call's stream), with the request's id and the call's final message
 * to come. The call gives up after 30 s, so a call that never answers fails the test instead of hanging it.
 */
async function elicitingCall(
  server: TestServer,
  token: string,
  name: string,
  args: Record<string, unknown>,
): Promise<{ headers: Record<string, string>; elicitationId: string; final: Promise<Record<string, unknown>> }> {
  const init = await rawMcp(server.url, initializeRequest("2025-11-25", { elicitation: { form: {} } }), { token });
  const headers = { "mcp-session-id": init.headers.get("mcp-session-id")!, "mcp-protocol-version": "2025-11-25" };
  const response = await fetch(`${server.url}/mcp`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      authorization: `Bearer ${token}`,
      ...headers,
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args } }),
    signal: AbortSignal.timeout(30_000),
  });
  assert.equal(response.status, 200);
  const messages = (async function* () {
    const decoder = new TextDecoder();
    let buffered = "";
    for await (const chunk of response.body!) {
      buffered += decoder.decode(chunk as Uint8Array, { stream: true });
      for (let end = buffered.indexOf("\n"); end >= 0; end = buffered.indexOf("\n")) {
        const line = buffered.slice(0, end);
        buffered = buffered.slice(end + 1);
        if (line.startsWith("data: ")) yield JSON.parse(line.slice(6)) as Record<string, unknown>;
      }
    }
  })();
  // Read by hand: leaving a for-await loop would close the stream.
  for (let next = await messages.next(); !next.done; next = await messages.next()) {
    const message = next.value;
    if (message.method !== "elicitation/create") continue;
    const final = (async () => {
      for await (const later of messages) if (later.id === 1) return later;
      throw new Error("the call's stream ended without its answer");
    })();
    final.catch(() => undefined);
    return { headers, elicitationId: message.id as string, final };
  }
  throw new Error("the call answered without asking");
}

describe(`MCP endpoint on ${TEST_DRIVER}`, () => {
  let server: TestServer;
  let scratch: string;
  before(async () => {
    server = await startTestServer({ configFile: TESTING_CONFIG, assistants: ASSISTANTS, config: { graphs: GRAPHS } });
    scratch = mkdtempSync(join(tmpdir(), "rudder-mcp-"));
  });
  after(async () => {
    await server?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  test("initialize: the SDK client negotiates 2025-11-25 and gets a session; 2025-06-18 is spoken too", async () => {
    const { client, transport } = await mcpClient(server);
    try {
      assert.equal(client.getServerVersion()?.name, "rudder");
      assert.deepEqual(client.getServerCapabilities()?.tools, { listChanged: false });
      assert.equal(transport.protocolVersion, "2025-11-25");
      assert.match(transport.sessionId ?? "", /^[0-9a-f-]{36}\.[0-9a-f]{32}$/);
    } finally {
      await client.close();
    }
    const token = await server.token();
    const older = await rawMcp(server.url, initializeRequest("2025-06-18"), { token });
    assert.equal(older.status, 200);
    assert.equal((older.messages[0]!.result as { protocolVersion: string }).protocolVersion, "2025-06-18");
    const session = older.headers.get("mcp-session-id")!;
    const listed = await rawMcp(
      server.url,
      { jsonrpc: "2.0", id: 2, method: "tools/list" },
      { token, headers: { "mcp-protocol-version": "2025-06-18", "mcp-session-id": session } },
    );
    assert.equal(listed.status, 200);
    assert.ok(Array.isArray((listed.messages[0]!.result as { tools: unknown[] }).tools));
    const ancient = await rawMcp(server.url, initializeRequest("2024-11-05"), { token });
    assert.equal(
      (ancient.messages[0]!.result as { protocolVersion: string }).protocolVersion,
      "2025-11-25",
      "an unspoken version gets the latest",
    );
    const refused = await rawMcp(
      server.url,
      { jsonrpc: "2.0", id: 3, method: "tools/list" },
      { token, headers: { "mcp-protocol-version": "2025-03-26" } },
    );
    assert.equal(refused.status, 400);
    assert.equal((refused.messages[0]!.error as { code: number }).code, -32000);
  });

  test("a session is its principal's: another tenant's or subject's token with it, or an id this server never gave, is 404 and the client starts over", async () => {
    const { client, transport } = await mcpClient(server);
    try {
      const sessionId = transport.sessionId!;
      // The SDK client reconnecting to a session it was handed (it does not initialize again).
      const reuse = async (token: string, id: string) => {
        const other = new Client({ name: "rudder-test", version: "1.0.0" });
        await other.connect(
          new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
            sessionId: id,
            requestInit: { headers: { authorization: `Bearer ${token}` } },
          }),
        );
        return other;
      };
      const isNotFound = (error: unknown) => error instanceof StreamableHTTPError && error.code === 404;
      const otherTenant = await server.token("t2");
      const otherSubject = await mintToken(TEST_SECRET, { tenantId: "t1", roles: ["admin"], subject: "someone-else" });
      for (const [token, id, who] of [
        [otherTenant, sessionId, "another tenant"],
        [otherSubject, sessionId, "another subject of the tenant"],
        [await server.token(), randomUUID(), "a UUID this server never gave"],
        [
          await server.token(),
          `${sessionId.split(".")[0]}.elicit.${sessionId.split(".")[1]}`,
          "a capability the session was not opened with",
        ],
      ] as const) {
        const other = await reuse(token, id);
        try {
          await assert.rejects(other.listTools(), isNotFound, who);
        } finally {
          await other.close();
        }
      }
      // What the transport answers an unknown session: a JSON-RPC error body, so a client starts over.
      const refused = await rawMcp(
        server.url,
        { jsonrpc: "2.0", id: 2, method: "tools/list" },
        { token: otherTenant, headers: { "mcp-session-id": sessionId, "mcp-protocol-version": "2025-11-25" } },
      );
      assert.equal(refused.status, 404);
      assert.equal(refused.messages[0]!.id, null);
      assert.equal((refused.messages[0]!.error as { code: number }).code, -32001);
      // Which it can: initialize answers a new session of its own.
      const fresh = await rawMcp(server.url, initializeRequest("2025-11-25"), {
        token: otherTenant,
        headers: { "mcp-session-id": sessionId },
      });
      assert.equal(fresh.status, 200);
      assert.notEqual(fresh.headers.get("mcp-session-id"), sessionId);
      // The session's own principal goes on, with any token it is given (a refreshed one included).
      assert.ok((await client.listTools()).tools.length > 0);
      const refreshed = await mintToken(TEST_SECRET, { tenantId: "t1", roles: ["viewer"], expiresIn: "5m" });
      const again = await reuse(refreshed, sessionId);
      try {
        assert.ok((await again.listTools()).tools.length > 0);
      } finally {
        await again.close();
      }
    } finally {
      await client.close();
    }
  });

  test("an elicitation answer or a cancellation sent with another principal's session is 404 and leaves the run alone; the asker's answer still resumes it", async () => {
    const token = await server.token();
    const { headers, elicitationId, final } = await elicitingCall(server, token, "approve", { request: "ship it" });
    const runId = elicitationId.split(":")[1]!;
    const answer = (result: Record<string, unknown>) => ({ jsonrpc: "2.0", id: elicitationId, result });
    for (const intruder of [
      await server.token("t2"),
      await mintToken(TEST_SECRET, { tenantId: "t1", roles: ["admin"], subject: "mallory" }),
    ]) {
      for (const body of [
        answer({ action: "accept", content: { answer: "yes" } }),
        answer({ action: "decline" }),
        { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 1 } },
      ]) {
        const refused = await rawMcp(server.url, body, { token: intruder, headers });
        assert.equal(refused.status, 404, JSON.stringify(body));
        assert.equal((refused.messages[0]!.error as { code: number }).code, -32001);
      }
    }
    const paused = await server.request("GET", `/v1/runs/${runId}`);
    assert.equal(paused.body.status, "paused");
    assert.equal(paused.body.superseded_by_run_id, null);
    const accepted = await rawMcp(server.url, answer({ action: "accept", content: { answer: "yes" } }), { token, headers });
    assert.equal(accepted.status, 202);
    const result = (await final).result as CallToolResult;
    assert.equal(result.isError, undefined, text(result));
  });

  test("the transport's answers: 401 problem+json before MCP, 405 for GET and DELETE, JSON-RPC errors for bad bodies, never a 500", async () => {
    const noToken = await rawMcp(server.url, initializeRequest("2025-11-25"), { token: null });
    assert.equal(noToken.status, 401);
    assert.match(noToken.headers.get("content-type") ?? "", /application\/problem\+json/);
    assert.equal(JSON.parse(noToken.text).code, "unauthorized");
    const token = await server.token();
    for (const method of ["GET", "DELETE"]) {
      const answer = await rawMcp(server.url, undefined, { token, method, headers: { accept: "text/event-stream" } });
      assert.equal(answer.status, 405, method);
      assert.equal(answer.headers.get("allow"), "POST");
      assert.equal(JSON.parse(answer.text).code, "method_not_allowed");
      assert.equal((await rawMcp(server.url, undefined, { token: null, method })).status, 401);
    }
    const malformed = await rawMcp(server.url, undefined, { token, rawBody: "{not json" });
    assert.equal(malformed.status, 400);
    assert.equal((malformed.messages[0]!.error as { code: number }).code, -32700);
    const poisoned = await rawMcp(server.url, undefined, {
      token,
      rawBody: '{"jsonrpc":"2.0","id":1,"method":"tools/list","__proto__":{"x":1}}',
    });
    assert.equal(poisoned.status, 400);
    const notRpc = await rawMcp(server.url, { hello: "world" }, { token });
    assert.ok(notRpc.status >= 400 && notRpc.status < 500, `status ${notRpc.status}`);
    const wrongType = await rawMcp(server.url, undefined, { token, rawBody: "{}", headers: { "content-type": "text/plain" } });
    assert.equal(wrongType.status, 415);
    const notAccepting = await rawMcp(
      server.url,
      { jsonrpc: "2.0", id: 1, method: "tools/list" },
      { token, headers: { accept: "application/json" } },
    );
    assert.equal(notAccepting.status, 406);
    const unknownMethod = await rawMcp(server.url, { jsonrpc: "2.0", id: 9, method: "resources/list" }, { token });
    assert.equal((unknownMethod.messages[0]!.error as { code: number }).code, -32601);
    const badCall = await rawMcp(server.url, { jsonrpc: "2.0", id: 10, method: "tools/call", params: { name: 5 } }, { token });
    assert.equal((badCall.messages[0]!.error as { code: number }).code, -32602);
    const notification = await rawMcp(server.url, { jsonrpc: "2.0", method: "notifications/initialized" }, { token });
    assert.equal(notification.status, 202);
    assert.equal(notification.text, "", "202 without a body");
    const strayAnswer = await rawMcp(
      server.url,
      {
        jsonrpc: "2.0",
        id: "rudder-elicit:00000000-0000-4000-8000-000000000000:answer",
        result: { action: "accept", content: { answer: "yes" } },
      },
      { token },
    );
    assert.equal(strayAnswer.status, 202, "an answer naming no run of the session changes nothing");
    assert.equal(strayAnswer.text, "");
    const openapi = await server.request("GET", "/openapi.json", { token: null });
    assert.deepEqual(Object.keys(openapi.body.paths["/mcp"]), ["post"], "GET and DELETE are no operations (405)");
  });

  test("tools/list: exposed assistants, named by the rule, with schemas; others never", async () => {
    const { client } = await mcpClient(server, { roles: ["viewer"] });
    try {
      const { tools, nextCursor } = await client.listTools();
      assert.equal(nextCursor, undefined);
      const byName = new Map(tools.map((tool) => [tool.name, tool]));
      assert.deepEqual(
        tools.map((tool) => tool.name),
        ["count_steps_", "mcp-failing", "chat", "write", "approve", "form", "hops", "dup", "dup_2", "ask"],
        "config order; invalid characters become _; a clash gets _2; not exposed (mcp_expose not true, or absent) is not listed",
      );
      const steps = byName.get("count_steps_")!;
      assert.equal(steps.description, "Counts steps, one node per step");
      assert.equal(steps.title, "Steps");
      assert.equal(steps.inputSchema.type, "object");
      assert.deepEqual(Object.keys(steps.inputSchema.properties ?? {}).sort(), ["count", "delayMs", "label", "sideEffectFile", "steps"]);
      assert.equal(steps.outputSchema, undefined, "an Annotation graph declares no output types");
      assert.match(byName.get("mcp-failing")!.description ?? "", /mcp-failing/);
      const write: Tool = byName.get("write")!;
      assert.deepEqual(write.inputSchema.properties?.topic, { type: "string", description: "what to write about" });
      assert.equal(write.inputSchema.$schema, undefined);
      assert.ok(write.outputSchema, "a zod graph's output schema is known");
      assert.equal(write.outputSchema.type, "object");
    } finally {
      await client.close();
    }
  });

  test("tools/list pages with nextCursor; a tenant sees its own assistants and never another's", async () => {
    const tenant = "mcp-pager";
    for (let i = 0; i < 55; i++) {
      const created = await server.request("POST", "/v1/assistants", {
        tenant,
        body: { assistant_id: `own-${String(i).padStart(2, "0")}`, graph_id: "echo", name: "mine", metadata: { mcp_expose: true } },
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
    }
    const { client } = await mcpClient(server, { tenant });
    const other = await mcpClient(server, { tenant: "mcp-other" });
    try {
      const first = await client.listTools();
      assert.equal(first.tools.length, 50);
      assert.ok(first.nextCursor);
      const second = await client.listTools({ cursor: first.nextCursor });
      assert.equal(second.nextCursor, undefined);
      const names = [...first.tools, ...second.tools].map((tool) => tool.name);
      assert.equal(names.length, 10 + 55);
      assert.equal(new Set(names).size, names.length, "unique names");
      assert.deepEqual(
        names.slice(10, 13),
        ["mine", `mine_${tagOf("own-01")}`, `mine_${tagOf("own-02")}`],
        "the tenant's own, oldest first, after the config's: the oldest keeps the name, the others are tagged",
      );
      await assert.rejects(client.listTools({ cursor: "bm9wZQ" }), (error: unknown) => error instanceof McpError && error.code === -32602);

      const theirs = await other.client.listTools();
      assert.equal(theirs.tools.length, 10, "another tenant's assistants never appear");
      await assert.rejects(
        other.client.callTool({ name: "mine_55", arguments: {} }),
        (error: unknown) => error instanceof McpError && error.code === -32602,
      );
      await assert.rejects(other.client.callTool({ name: "no-such-tool", arguments: {} }), /Unknown tool: no-such-tool/);
    } finally {
      await client.close();
      await other.client.close();
    }
  });

  test("tools/call answers with the run's result, marked as an MCP run, visible only to its tenant", async () => {
    const { client } = await mcpClient(server);
    try {
      const result = (await client.callTool({ name: "count_steps_", arguments: { steps: 3 } })) as CallToolResult;
      assert.equal(result.isError, undefined);
      assert.equal((result.structuredContent as { count: number }).count, 3);
      assert.equal(JSON.parse(text(result)).count, 3, "no messages: the output as JSON");
      const runId = runIdOf(result);
      const run = await server.request("GET", `/v1/runs/${runId}`);
      assert.equal(run.body.status, "succeeded");
      assert.equal(run.body.thread_id, null, "a stateless run");
      assert.equal(run.body.metadata.mcp.tool, "count_steps_");
      assert.equal((await server.request("GET", `/v1/runs/${runId}`, { tenant: "t2" })).status, 404);

      const chat = (await client.callTool({ name: "chat", arguments: { messages: [{ role: "user", content: "hi" }] } })) as CallToolResult;
      assert.equal(text(chat), "You said: hi (turn 1)", "the last AI message's content");

      const written = (await client.callTool({ name: "write", arguments: { topic: "sea", words: 2 } })) as CallToolResult;
      assert.equal(
        (written.structuredContent as { text: string }).text,
        "sea sea",
        "structured content valid against the declared output schema",
      );
    } finally {
      await client.close();
    }
  });

  test("the same request id sent again in a session gets the same run, not a second one", async () => {
    const token = await server.token();
    const init = await rawMcp(server.url, initializeRequest("2025-11-25"), { token });
    const headers = { "mcp-session-id": init.headers.get("mcp-session-id")!, "mcp-protocol-version": "2025-11-25" };
    const call = { jsonrpc: "2.0", id: 42, method: "tools/call", params: { name: "count_steps_", arguments: { steps: 2 } } };
    const first = await rawMcp(server.url, call, { token, headers });
    const again = await rawMcp(server.url, call, { token, headers });
    const runOf = (answer: { messages: Record<string, unknown>[] }) =>
      ((answer.messages.at(-1)!.result as CallToolResult)._meta as Record<string, string>)["rudder/run_id"];
    assert.ok(runOf(first));
    assert.equal(runOf(again), runOf(first));
  });

  test("errors are results with isError: a failed run, bad arguments (no run), and a viewer may not call (403)", async () => {
    const { client } = await mcpClient(server);
    try {
      const failed = (await client.callTool({ name: "mcp-failing", arguments: { mode: "plain" } })) as CallToolResult;
      assert.equal(failed.isError, true);
      assert.match(text(failed), /^run_failed: .*node exploded/);
      assert.equal((failed.structuredContent as { error: { code: string } }).error.code, "run_failed");
      assert.equal((await joinRun(server, runIdOf(failed))).status, "failed");

      const unknownKey = (await client.callTool({ name: "count_steps_", arguments: { stepz: 3 } })) as CallToolResult;
      assert.equal(unknownKey.isError, true);
      assert.match(text(unknownKey), /^validation_error: .*stepz/);
      assert.equal(unknownKey._meta, undefined, "no run was created");
      const wrongType = (await client.callTool({ name: "write", arguments: { topic: 5 } })) as CallToolResult;
      assert.equal(wrongType.isError, true);
      assert.match(text(wrongType), /validation_error: .*topic/);
      const unstorable = (await client.callTool({ name: "count_steps_", arguments: { label: "a\u0000b" } })) as CallToolResult;
      assert.equal(unstorable.isError, true);
      assert.match(text(unstorable), /validation_error/);
    } finally {
      await client.close();
    }
    const viewer = await mcpClient(server, { roles: ["viewer"] });
    try {
      await assert.rejects(viewer.client.callTool({ name: "count_steps_", arguments: { steps: 1 } }), /403/);
    } finally {
      await viewer.client.close();
    }
  });

  test("a paused run answers with its interrupts; resuming it over the API finishes it", async () => {
    const { client } = await mcpClient(server);
    try {
      const paused = (await client.callTool({ name: "approve", arguments: { request: "ship it" } })) as CallToolResult;
      assert.equal(paused.isError, undefined);
      const content = paused.structuredContent as { status: string; run_id: string; interrupts: { value: { question: string } }[] };
      assert.equal(content.status, "paused");
      assert.equal(content.interrupts[0]!.value.question, "Approve this plan?");
      assert.match(text(paused), new RegExp(`POST /v1/runs/${content.run_id}/resume`));
      const resumed = await server.request("POST", `/v1/runs/${content.run_id}/resume`, { body: { resume: { approved: true } } });
      assert.equal(resumed.status, 202, JSON.stringify(resumed.body));
      const done = await joinRun(server, resumed.body.run_id);
      assert.equal(done.status, "succeeded", JSON.stringify(done));
      assert.equal(done.output.outcome, "done: Plan for: ship it", "the stateless run continued from its interrupt");
    } finally {
      await client.close();
    }
  });

  test("progress: one notification per completed node, increasing, naming the node", async () => {
    const { client } = await mcpClient(server);
    try {
      const seen: { progress: number; message?: string }[] = [];
      const result = (await client.callTool({ name: "count_steps_", arguments: { steps: 4 } }, undefined, {
        onprogress: (progress) => seen.push(progress),
      })) as CallToolResult;
      assert.equal((result.structuredContent as { count: number }).count, 4);
      assert.deepEqual(
        seen.map((progress) => [progress.progress, progress.message]),
        [
          [1, "step"],
          [2, "step"],
          [3, "step"],
          [4, "step"],
        ],
      );
    } finally {
      await client.close();
    }
  });

  test("cancel: aborting the call (notifications/cancelled) cancels its run", async () => {
    const { client } = await mcpClient(server);
    try {
      const file = join(scratch, "cancel-notify.log");
      const aborted = new AbortController();
      const call = client.callTool({ name: "count_steps_", arguments: { steps: 20, delayMs: 500, sideEffectFile: file } }, undefined, {
        signal: aborted.signal,
      });
      const runId = await firstRunIdIn(file);
      aborted.abort("the user changed their mind");
      await assert.rejects(call);
      const run = await joinRun(server, runId);
      assert.equal(run.status, "cancelled");
      assert.ok(readFileSync(file, "utf8").trim().split("\n").length < 20, "it stopped before its last step");
    } finally {
      await client.close();
    }
  });

  test("cancel: the call's connection closing cancels its run", async () => {
    const token = await server.token();
    const file = join(scratch, "cancel-close.log");
    const closed = new AbortController();
    const call = rawMcp(
      server.url,
      {
        jsonrpc: "2.0",
        id: 7,
        method: "tools/call",
        params: { name: "count_steps_", arguments: { steps: 20, delayMs: 500, sideEffectFile: file } },
      },
      { token, signal: closed.signal },
    );
    const runId = await firstRunIdIn(file);
    closed.abort();
    await assert.rejects(call);
    assert.equal((await joinRun(server, runId)).status, "cancelled");
  });

  test("elicitation: a paused run's question goes to the user, the answer resumes it, and the call returns the final result", async () => {
    const asked: { message: string; requestedSchema?: unknown }[] = [];
    const { client } = await mcpClient(server, {
      elicitation: (request) => {
        asked.push(request);
        if (request.message.startsWith("Approve")) return { action: "accept", content: { approved: true, note: "fine" } };
        return { action: "accept", content: { answer: `answer to ${request.message}` } };
      },
    });
    try {
      const form = (await client.callTool({ name: "form", arguments: { request: "deploy" } })) as CallToolResult;
      assert.equal(form.isError, undefined, text(form));
      assert.deepEqual((form.structuredContent as { decision: unknown }).decision, { approved: true, note: "fine" });
      assert.equal(asked[0]!.message, 'Approve "deploy"?');
      assert.deepEqual((asked[0]!.requestedSchema as { required: string[] }).required, ["approved"]);

      const hops = (await client.callTool({ name: "hops", arguments: {} })) as CallToolResult;
      assert.equal(hops.isError, undefined, text(hops));
      assert.deepEqual((hops.structuredContent as { answers: unknown[] }).answers, [
        "answer to first question",
        "answer to second question",
      ]);
      const last = await server.request("GET", `/v1/runs/${runIdOf(hops)}`);
      assert.ok(last.body.metadata.resumed_from_run_id, "the result is the resumed run's");
    } finally {
      await client.close();
    }
    const declining = await mcpClient(server, { elicitation: () => ({ action: "decline" }) });
    try {
      const declined = (await declining.client.callTool({ name: "form", arguments: { request: "nope" } })) as CallToolResult;
      assert.equal(declined.isError, true);
      assert.match(text(declined), /run_cancelled/);
    } finally {
      await declining.client.close();
    }
  });
  test("an elicitation answer that cannot be stored (U+0000, a lone surrogate, too deep) or does not fill in the form asked for is a 400 -32602, and the call ends run_cancelled", async () => {
    const token = await server.token();
    const deep = JSON.parse(`${"[".repeat(3000)}${"]".repeat(3000)}`) as unknown;
    const answers: [string, unknown, RegExp][] = [
      ["U+0000", "a\u0000b", /result\.content\/answer contains U\+0000/],
      ["a lone surrogate", "\ud800", /result\.content\/answer contains a lone surrogate/],
      // The free-text question's form asks for a string: anything else would resume the run with it.
      ["3000 levels", deep, /result\.content\/answer must be a string/],
      ["no answer", undefined, /result\.content\/answer must be a string/],
    ];
    for (const [label, answer, reason] of answers) {
      const call = await elicitingCall(server, token, "hops", {});
      const refused = await rawMcp(
        server.url,
        { jsonrpc: "2.0", id: call.elicitationId, result: { action: "accept", content: { answer } } },
        { token, headers: call.headers },
      );
      assert.equal(refused.status, 400, `${label}: ${refused.text}`);
      const error = refused.messages[0]!.error as { code: number; message: string };
      assert.equal(error.code, -32602, label);
      assert.match(error.message, reason, label);
      const final = (await call.final).result as CallToolResult;
      assert.equal(final.isError, true, label);
      assert.match(text(final), /^run_cancelled/, label);
      assert.equal((await joinRun(server, runIdOf(final))).status, "cancelled", label);
    }
    // A form's answer is held to the same rules.
    const form = await elicitingCall(server, token, "form", { request: "nul" });
    const refused = await rawMcp(
      server.url,
      { jsonrpc: "2.0", id: form.elicitationId, result: { action: "accept", content: { approved: true, note: "a\u0000" } } },
      { token, headers: form.headers },
    );
    assert.equal(refused.status, 400);
    assert.match((refused.messages[0]!.error as { message: string }).message, /result\.content\/note contains U\+0000/);
    assert.match(text((await form.final).result as CallToolResult), /^run_cancelled/);
    const deepForm = await elicitingCall(server, token, "form", { request: "deep" });
    const tooDeep = await rawMcp(
      server.url,
      { jsonrpc: "2.0", id: deepForm.elicitationId, result: { action: "accept", content: { approved: true, note: deep } } },
      { token, headers: deepForm.headers },
    );
    assert.equal(tooDeep.status, 400);
    assert.match(
      (tooDeep.messages[0]!.error as { message: string }).message,
      /result\.content\/note.* nests objects and arrays deeper than/,
    );
    assert.match(text((await deepForm.final).result as CallToolResult), /^run_cancelled/);
    // And to the form the question asked for: a field of the wrong type, a required field missing.
    const unfilled: [string, Record<string, unknown>, RegExp][] = [
      ["a string for a boolean", { approved: "yes" }, /result\.content\/approved must be boolean/],
      ["no approved", { note: "fine" }, /result\.content must have required property 'approved'/],
    ];
    for (const [label, content, reason] of unfilled) {
      const call = await elicitingCall(server, token, "form", { request: label });
      const wrong = await rawMcp(
        server.url,
        { jsonrpc: "2.0", id: call.elicitationId, result: { action: "accept", content } },
        { token, headers: call.headers },
      );
      assert.equal(wrong.status, 400, `${label}: ${wrong.text}`);
      assert.equal((wrong.messages[0]!.error as { code: number }).code, -32602, label);
      assert.match((wrong.messages[0]!.error as { message: string }).message, reason, label);
      const final = (await call.final).result as CallToolResult;
      assert.match(text(final), /^run_cancelled/, label);
      assert.equal((await joinRun(server, runIdOf(final))).status, "cancelled", label);
    }
  });

  test("an SDK client whose elicitation answer cannot be stored gets a cancelled result, not a hang", async () => {
    const { client } = await mcpClient(server, { elicitation: () => ({ action: "accept", content: { answer: "a\u0000b" } }) });
    try {
      const result = (await client.callTool({ name: "hops", arguments: {} }, undefined, { timeout: 30_000 })) as CallToolResult;
      assert.equal(result.isError, true);
      assert.match(text(result), /^run_cancelled/);
    } finally {
      await client.close();
    }
  });

  test("a JSON-RPC batch (an array body) is -32600 Invalid Request, and nothing in it runs", async () => {
    const token = await server.token();
    const file = join(scratch, "batch.log");
    const call = {
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: { name: "count_steps_", arguments: { steps: 1, sideEffectFile: file } },
    };
    for (const body of [[call], [call, { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: 5 } }], [], [1]]) {
      const batch = await rawMcp(server.url, body, { token });
      assert.equal(batch.status, 400, JSON.stringify(body));
      const error = batch.messages[0]!.error as { code: number; message: string };
      assert.equal(error.code, -32600, JSON.stringify(body));
      assert.equal(existsSync(file), false, "no run was made");
    }
  });

  test("valid JSON that is not a JSON-RPC message is -32600 Invalid Request (-32700 is for invalid JSON only)", async () => {
    const token = await server.token();
    const bodies: unknown[] = [
      { id: 1, method: "tools/list" },
      { jsonrpc: "1.0", id: 1, method: "tools/list" },
      { jsonrpc: "2.0", id: 1, method: 5 },
      { jsonrpc: "2.0", id: { a: 1 }, method: "tools/list" },
      { jsonrpc: "2.0", id: 1.5, method: "tools/list" },
      { jsonrpc: "2.0", id: 1 },
      { jsonrpc: "2.0", id: 1, method: "tools/list", extra: true },
      { jsonrpc: "2.0", id: 1, method: "resources/list", params: 5 },
      { hello: "world" },
      "tools/list",
      5,
      null,
    ];
    for (const body of bodies) {
      const answer = await rawMcp(server.url, body, { token });
      assert.equal(answer.status, 400, JSON.stringify(body));
      assert.equal((answer.messages[0]!.error as { code: number }).code, -32600, JSON.stringify(body));
    }
  });

  test("malformed params of a known method are -32602 with a readable message", async () => {
    const token = await server.token();
    const calls: [string, unknown][] = [
      ["tools/call", { name: 5 }],
      ["tools/call", 5],
      ["tools/call", []],
      ["tools/call", { name: "count_steps_", arguments: [] }],
      ["tools/list", { cursor: 5 }],
      ["initialize", { protocolVersion: 2025 }],
    ];
    for (const [method, params] of calls) {
      const answer = await rawMcp(server.url, { jsonrpc: "2.0", id: 3, method, params }, { token });
      const error = answer.messages[0]!.error as { code: number; message: string };
      assert.equal(error.code, -32602, `${method} ${JSON.stringify(params)}`);
      assert.equal(answer.messages[0]!.id, 3);
      assert.doesNotMatch(error.message, /\n/, "a sentence, not a dump");
    }
    const named = await rawMcp(server.url, { jsonrpc: "2.0", id: 4, method: "tools/call", params: { name: 5 } }, { token });
    assert.match(
      (named.messages[0]!.error as { message: string }).message,
      /^Invalid params for tools\/call: params\.name: /,
      "names the field",
    );
  });

  test("a task-augmented tools/call (2025-11-25) is an ordinary call: this server declares no tasks", async () => {
    const token = await server.token();
    const answer = await rawMcp(
      server.url,
      { jsonrpc: "2.0", id: 4, method: "tools/call", params: { name: "count_steps_", arguments: { steps: 2 }, task: { ttl: 1000 } } },
      { token },
    );
    assert.equal(answer.status, 200);
    const result = answer.messages.at(-1)!.result as CallToolResult;
    assert.equal(result.isError, undefined, JSON.stringify(answer.messages));
    assert.equal((result.structuredContent as { count: number }).count, 2);
  });

  test('error messages carry no "MCP error <code>:" prefix on the wire (the SDK client adds it once)', async () => {
    const token = await server.token();
    const unknownTool = await rawMcp(server.url, { jsonrpc: "2.0", id: 5, method: "tools/call", params: { name: "nope" } }, { token });
    assert.deepEqual(unknownTool.messages[0]!.error, { code: -32602, message: "Unknown tool: nope" });
    const badCursor = await rawMcp(server.url, { jsonrpc: "2.0", id: 6, method: "tools/list", params: { cursor: "bm9wZQ" } }, { token });
    assert.doesNotMatch((badCursor.messages[0]!.error as { message: string }).message, /MCP error/);
    const { client } = await mcpClient(server);
    try {
      await assert.rejects(client.callTool({ name: "nope", arguments: {} }), (error: unknown) => {
        assert.ok(error instanceof McpError);
        assert.equal(error.message, "MCP error -32602: Unknown tool: nope");
        return true;
      });
    } finally {
      await client.close();
    }
  });

  test("outputSchema admits what a call with valid arguments gives: a state field the caller omitted is absent, and the SDK client accepts it", async () => {
    const { client } = await mcpClient(server);
    try {
      const { tools } = await client.listTools();
      const write = tools.find((tool) => tool.name === "write")!;
      assert.deepEqual(write.inputSchema.required, undefined, "the input schema lets a caller omit topic");
      const output = (write.outputSchema!.anyOf as Record<string, unknown>[])[0]!;
      assert.equal(output.required, undefined, "so the output schema does not require it");
      assert.deepEqual(Object.keys(output.properties as object).sort(), ["text", "topic", "words"], "the types stay");
      for (const args of [{}, { words: 2 }]) {
        const result = (await client.callTool({ name: "write", arguments: args })) as CallToolResult;
        assert.equal(result.isError, undefined, JSON.stringify(args));
        assert.equal(typeof (result.structuredContent as { text: unknown }).text, "string", JSON.stringify(args));
        assert.equal("topic" in (result.structuredContent as object), false);
      }
    } finally {
      await client.close();
    }
  });

  test("a request id with U+0000 or a lone surrogate is a valid id: the call works, and the run keeps the id as its JSON text", async () => {
    const token = await server.token();
    const init = await rawMcp(server.url, initializeRequest("2025-11-25"), { token });
    const session = { "mcp-session-id": init.headers.get("mcp-session-id")!, "mcp-protocol-version": "2025-11-25" };
    const runs = new Set<string>();
    for (const headers of [{}, session]) {
      for (const id of ["a\u0000b", "a\ud800b", "a\udbffb"]) {
        const call = { jsonrpc: "2.0", id, method: "tools/call", params: { name: "count_steps_", arguments: { steps: 1 } } };
        const answer = await rawMcp(server.url, call, { token, headers });
        assert.equal(answer.status, 200, answer.text);
        const last = answer.messages.at(-1)!;
        assert.equal(last.id, id, "the id comes back as sent");
        assert.equal(last.error, undefined, JSON.stringify(last.error));
        const result = last.result as CallToolResult;
        assert.equal(result.isError, undefined, text(result));
        const run = await server.request("GET", `/v1/runs/${runIdOf(result)}`);
        assert.equal(run.body.status, "succeeded");
        assert.equal(run.body.metadata.mcp.request_id, undefined);
        assert.equal(run.body.metadata.mcp.request_id_json, JSON.stringify(id));
        runs.add(runIdOf(result));
      }
    }
    assert.equal(runs.size, 6, "ids that differ only in a lone surrogate name different runs");
  });

  test("an interrupt whose requestedSchema is no form MCP allows is asked as JSON with a free-text answer, and the run goes on", async () => {
    const asked: { message: string; requestedSchema?: unknown }[] = [];
    const { client } = await mcpClient(server, {
      elicitation: (request) => {
        asked.push(request);
        return { action: "accept", content: { answer: "eu-west" } };
      },
    });
    const nested = {
      message: "Where to deploy?",
      requestedSchema: { type: "object", properties: { target: { type: "object", properties: { region: { type: "string" } } } } },
    };
    const listed = {
      message: "Which?",
      requestedSchema: { type: "object", properties: { picks: { type: "array", items: { type: "string" } } } },
    };
    try {
      for (const ask of [nested, listed]) {
        const result = (await client.callTool({ name: "ask", arguments: { ask } })) as CallToolResult;
        assert.equal(result.isError, undefined, text(result));
        assert.equal((result.structuredContent as { answer: unknown }).answer, "eu-west");
        const question = asked.at(-1)!;
        assert.equal(question.message, JSON.stringify(ask), "shown as JSON");
        assert.deepEqual(Object.keys((question.requestedSchema as { properties: object }).properties), ["answer"]);
      }
      // A flat form is still asked as its form.
      const flat = { message: "OK?", requestedSchema: { type: "object", properties: { ok: { type: "boolean" } } } };
      const formClient = await mcpClient(server, { elicitation: () => ({ action: "accept", content: { ok: true } }) });
      try {
        const result = (await formClient.client.callTool({ name: "ask", arguments: { ask: flat } })) as CallToolResult;
        assert.deepEqual((result.structuredContent as { answer: unknown }).answer, { ok: true });
      } finally {
        await formClient.client.close();
      }
    } finally {
      await client.close();
    }
  });

  test("a tool name never passes to another assistant while its holder is a tool under it", async () => {
    const tenant = "mcp-names";
    const create = async (assistant_id: string, metadata: Record<string, unknown>) => {
      const created = await server.request("POST", "/v1/assistants", {
        tenant,
        body: { assistant_id, graph_id: "echo", name: assistant_id, metadata },
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
    };
    const patch = async (assistant_id: string, metadata: Record<string, unknown>) => {
      const patched = await server.request("PATCH", `/v1/assistants/${assistant_id}`, { tenant, body: { metadata } });
      assert.equal(patched.status, 200, JSON.stringify(patched.body));
    };
    const { client } = await mcpClient(server, { tenant });
    const owners = async () => {
      const { tools } = await client.listTools();
      return Object.fromEntries(tools.filter((tool) => tool.name.startsWith("greet")).map((tool) => [tool.name, tool.title]));
    };
    try {
      await create("older", { mcp_tool_name: "greet" });
      await create("newer", { mcp_expose: true, mcp_tool_name: "greet" });
      assert.deepEqual(await owners(), { greet: "newer" });
      // Exposing an older assistant under the same name: "greet" never names "older".
      await patch("older", { mcp_expose: true, mcp_tool_name: "greet" });
      assert.deepEqual(await owners(), { [`greet_${tagOf("older")}`]: "older", [`greet_${tagOf("newer")}`]: "newer" });
      await assert.rejects(client.callTool({ name: "greet", arguments: { message: "hi" } }), /Unknown tool: greet/);
      // A new assistant asking for a name another has never renames it.
      await create("solo", { mcp_expose: true, mcp_tool_name: "greet_solo" });
      await create("late", { mcp_expose: true, mcp_tool_name: "greet_solo" });
      const named = await owners();
      assert.equal(named.greet_solo, "solo");
      assert.equal(named[`greet_solo_${tagOf("late")}`], "late");
      // Renaming the later one to the older one's name does not take it either.
      await patch("late", { mcp_expose: true, mcp_tool_name: "greet_solo" });
      assert.equal((await owners()).greet_solo, "solo");
    } finally {
      await client.close();
    }
  });

  test("metadata.mcp_tool_name takes up to 128 characters, as MCP tool names do", async () => {
    const tenant = "mcp-long";
    const long = "L".repeat(128);
    const created = await server.request("POST", "/v1/assistants", {
      tenant,
      body: { graph_id: "echo", name: "n", metadata: { mcp_expose: true, mcp_tool_name: long } },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const tooLong = await server.request("POST", "/v1/assistants", {
      tenant,
      body: { graph_id: "echo", name: "n", metadata: { mcp_expose: true, mcp_tool_name: `${long}L` } },
    });
    assert.equal(tooLong.status, 422);
    const { client } = await mcpClient(server, { tenant });
    try {
      assert.ok((await client.listTools()).tools.some((tool) => tool.name === long));
    } finally {
      await client.close();
    }
  });

  test("valid JSON with a prototype member is refused as a message (-32602 in params, naming where; -32600 elsewhere), not as a parse error", async () => {
    const token = await server.token();
    for (const args of ['{"__proto__":{"x":1}}', '{"constructor":{"prototype":{"x":1}}}']) {
      const answer = await rawMcp(server.url, undefined, {
        token,
        rawBody: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"count_steps_","arguments":${args}}}`,
      });
      assert.equal(answer.status, 200, answer.text);
      assert.equal(answer.messages[0]!.id, 3);
      const error = answer.messages[0]!.error as { code: number; message: string };
      assert.equal(error.code, -32602, args);
      assert.match(error.message, /^Invalid params for tools\/call: params\.arguments has a "__proto__" member/);
    }
    const top = await rawMcp(server.url, undefined, {
      token,
      rawBody: '{"jsonrpc":"2.0","id":1,"method":"tools/list","__proto__":{"x":1}}',
    });
    assert.equal(top.status, 400);
    assert.equal((top.messages[0]!.error as { code: number }).code, -32600);
  });

  test("a body without Content-Type, or in another charset, is 415 with the transport's JSON-RPC error body", async () => {
    const token = await server.token();
    const body = new TextEncoder().encode(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }));
    for (const contentType of [undefined, "application/json; charset=latin1"]) {
      const response = await fetch(`${server.url}/mcp`, {
        method: "POST",
        headers: {
          accept: "application/json, text/event-stream",
          authorization: `Bearer ${token}`,
          ...(contentType ? { "content-type": contentType } : {}),
        },
        body,
      });
      const answer = (await response.json()) as { jsonrpc: string; id: unknown; error: { code: number; message: string } };
      assert.equal(response.status, 415, String(contentType));
      assert.match(response.headers.get("content-type") ?? "", /^application\/json/);
      assert.equal(answer.jsonrpc, "2.0");
      assert.equal(answer.id, null);
      assert.equal(answer.error.code, -32000);
    }
    const noToken = await fetch(`${server.url}/mcp`, { method: "POST", body });
    assert.equal(noToken.status, 401, "auth still comes first");
  });

  test("notifications/cancelled sent as a request (with an id) is answered -32601, and cancels nothing", async () => {
    const token = await server.token();
    const init = await rawMcp(server.url, initializeRequest("2025-11-25"), { token });
    const headers = { "mcp-session-id": init.headers.get("mcp-session-id")!, "mcp-protocol-version": "2025-11-25" };
    const file = join(scratch, "cancel-as-request.log");
    const call = rawMcp(
      server.url,
      {
        jsonrpc: "2.0",
        id: "c1",
        method: "tools/call",
        params: { name: "count_steps_", arguments: { steps: 3, delayMs: 300, sideEffectFile: file } },
      },
      { token, headers },
    );
    await firstRunIdIn(file);
    const asRequest = await rawMcp(
      server.url,
      { jsonrpc: "2.0", id: 5, method: "notifications/cancelled", params: { requestId: "c1" } },
      { token, headers },
    );
    assert.equal(asRequest.messages[0]!.id, 5);
    assert.equal((asRequest.messages[0]!.error as { code: number }).code, -32601);
    const result = (await call).messages.at(-1)!.result as CallToolResult;
    assert.equal(result.isError, undefined, text(result));
    assert.equal((result.structuredContent as { count: number }).count, 3);
  });

  test("CORS: a browser client may read Mcp-Session-Id", async () => {
    const token = await server.token();
    const init = await rawMcp(server.url, initializeRequest("2025-11-25"), { token, headers: { origin: "http://localhost:6274" } });
    assert.ok(init.headers.get("mcp-session-id"));
    assert.match(init.headers.get("access-control-expose-headers") ?? "", /\bmcp-session-id\b/);
  });
});

/** Its own servers, after the others closed: two servers in one process share the example graphs' module objects (and so their checkpointer). */
describe(`MCP endpoint at shutdown on ${TEST_DRIVER}`, () => {
  let scratch: string;
  before(() => {
    scratch = mkdtempSync(join(tmpdir(), "rudder-mcp-"));
  });
  after(() => rmSync(scratch, { recursive: true, force: true }));

  test("a closing server ends a waiting call at once with a retryable error; the run is not cancelled", async () => {
    const closing = await startTestServer({ configFile: TESTING_CONFIG, assistants: ASSISTANTS, config: { graphs: GRAPHS } });
    let reopened: TestServer | undefined;
    try {
      const { client } = await mcpClient(closing);
      const file = join(scratch, "shutdown.log");
      const call = client.callTool({ name: "count_steps_", arguments: { steps: 20, delayMs: 500, sideEffectFile: file } });
      call.catch(() => undefined);
      const runId = await firstRunIdIn(file);
      const closed = closing.server.close();
      const result = (await call) as CallToolResult;
      await closed;
      assert.equal(result.isError, true);
      assert.match(text(result), new RegExp(`^unavailable: .*run ${runId} goes on.*\\(run ${runId} is running\\)$`));
      assert.equal((result.structuredContent as { status: string }).status, "running", "the run as it is, not as it was created");
      assert.equal((result.structuredContent as { error: { retryable: boolean } }).error.retryable, true);
      // The run was not cancelled: it runs to its end (on the closing server's worker, in its grace period, or on the next one).
      reopened = await startTestServer({
        configFile: TESTING_CONFIG,
        assistants: ASSISTANTS,
        database: closing.database,
        config: { graphs: GRAPHS },
      });
      const finished = await joinRun(reopened, runId);
      assert.equal(finished.status, "succeeded");
      assert.equal(finished.output.count, 20);
    } finally {
      await reopened?.server.close();
      await closing.database.drop();
    }
  });
});
