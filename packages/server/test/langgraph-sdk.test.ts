import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { Client } from "@langchain/langgraph-sdk";
import { collect, lgClient, rejectsWith, waitUntilRunning, type Part } from "./support/langgraph.ts";
import { startTestServer, type TestServer } from "./support/server.ts";

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));
const API_KEY = "lg-sdk-test-key";

/**
 * The LangGraph Platform API at the root, driven only through `@langchain/langgraph-sdk`'s Client
 * (plus plain fetch for /ok, /info and CORS, which the Client does not call): assistants, threads,
 * state, runs, waits, streams with their modes, joinStream and Last-Event-ID replay.
 */
describe("LangGraph API through the SDK: assistants, threads, runs, streams", () => {
  let server: TestServer;
  let client: Client;
  before(async () => {
    server = await startTestServer({
      configFile: TESTING_CONFIG,
      auth: { apiKeys: [{ sha256: createHash("sha256").update(API_KEY).digest("hex"), tenantId: "t1", roles: ["operator"] }] },
    });
    client = await lgClient(server);
  });
  after(() => server.close());

  test("/ok and /info answer without a token; CORS lets a browser read Content-Location", async () => {
    assert.deepEqual(await (await fetch(`${server.url}/ok`)).json(), { ok: true });
    const info = (await (await fetch(`${server.url}/info`)).json()) as { flags: { assistants: boolean } };
    assert.equal(info.flags.assistants, true);
    const preflight = await fetch(`${server.url}/threads/search`, {
      method: "OPTIONS",
      headers: {
        origin: "http://ui.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type",
      },
    });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get("access-control-allow-origin"), "http://ui.example");
    assert.match(preflight.headers.get("access-control-allow-methods")!, /POST/);
    const answer = await fetch(`${server.url}/info`, { headers: { origin: "http://ui.example" } });
    assert.match(answer.headers.get("access-control-expose-headers")!, /content-location.*x-pagination-total/);
    const openapi = (await (await fetch(`${server.url}/openapi.json`)).json()) as { paths: Record<string, object> };
    for (const path of ["/threads/{thread_id}/runs/stream", "/runs/wait", "/assistants/search", "/threads/{thread_id}/history"])
      assert.ok(openapi.paths[path], path);
  });

  test("wire details the SDK relies on: SSE headers, Location, empty cancel bodies, problem bodies, bad Last-Event-ID", async () => {
    const thread = (await server.request("POST", "/threads", { body: {} })).body as { thread_id: string };
    const token = await server.token();
    const response = await fetch(`${server.url}/threads/${thread.thread_id}/runs/stream`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", origin: "http://ui.example" },
      body: JSON.stringify({ assistant_id: "echo", input: { message: "w" }, stream_mode: "values" }),
    });
    assert.equal(response.status, 200);
    assert.match(response.headers.get("content-type")!, /^text\/event-stream/);
    const location = response.headers.get("content-location")!;
    assert.match(location, new RegExp(`^/threads/${thread.thread_id}/runs/[0-9a-f-]{36}$`));
    assert.equal(response.headers.get("location"), `${location}/stream`);
    assert.equal(response.headers.get("access-control-allow-origin"), "http://ui.example", "CORS headers on a stream too");
    const text = await response.text();
    assert.match(text, /^event: metadata\ndata: \{"run_id":"[0-9a-f-]{36}","attempt":1\}\nid: 0\n\n/);
    assert.ok(!/event: end/.test(text));

    const runId = location.split("/").at(-1)!;
    const cancel = await fetch(`${server.url}${location}/cancel`, { method: "POST", headers: { authorization: `Bearer ${token}` } });
    assert.equal(cancel.status, 202, "cancelling a finished run changes nothing, as on the Platform (a stop button races the run's end)");
    assert.equal(await cancel.text(), "");
    assert.equal((await server.request("GET", `/v1/runs/${runId}`)).body.status, "succeeded");
    const unknown = await fetch(`${server.url}/threads/${thread.thread_id}/runs/${randomUUID()}/cancel`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.headers.get("content-type"), "application/problem+json; charset=utf-8");
    const badCursor = await server.request("GET", `/threads/${thread.thread_id}/runs/${runId}/stream`, {
      headers: { "last-event-id": "abc" },
    });
    assert.equal(badCursor.status, 422);
    assert.equal(badCursor.body.code, "validation_error");
    const badMode = await server.request("POST", `/threads/${thread.thread_id}/runs`, {
      body: { assistant_id: "echo", stream_mode: "everything" },
    });
    assert.equal(badMode.status, 422);
    const running = await server.request("POST", `/threads/${thread.thread_id}/runs`, {
      body: { assistant_id: "steps", input: { steps: 40, delayMs: 250 } },
    });
    assert.equal(running.status, 200);
    const accepted = await fetch(`${server.url}/threads/${thread.thread_id}/runs/${running.body.run_id}/cancel`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(accepted.status, 202);
    assert.equal(await accepted.text(), "");
  });

  test("the SDK authenticates with X-Api-Key as well as a bearer token", async () => {
    const keyed = new Client({ apiUrl: server.url, apiKey: API_KEY, callerOptions: { maxRetries: 0 } });
    const thread = await keyed.threads.create();
    assert.equal((await client.threads.get(thread.thread_id)).thread_id, thread.thread_id);
    const anonymous = new Client({ apiUrl: server.url, apiKey: null, callerOptions: { maxRetries: 0 } });
    await rejectsWith(anonymous.threads.create(), 401);
    // The SDK sends LANGSMITH_API_KEY (set for tracing) as X-Api-Key by itself, beside the bearer
    // token the docs tell users to pass: the token decides (this was a 401 "unknown API key").
    const traced = new Client({
      apiUrl: server.url,
      apiKey: "lsv2_pt_0123456789abcdef_tracing_key",
      defaultHeaders: { authorization: `Bearer ${await server.token()}` },
      callerOptions: { maxRetries: 0 },
    });
    const tracedThread = await traced.threads.create();
    assert.equal((await client.threads.get(tracedThread.thread_id)).thread_id, tracedThread.thread_id);
  });

  test("assistants: search, get (a graph id is an assistant id), graph, schemas, version; 404 for unknown", async () => {
    const found = await client.assistants.search({ graphId: "echo", limit: 10 });
    assert.deepEqual(found.map((assistant) => assistant.assistant_id).sort(), ["echo", "echo-loud", "echo-text"]);
    const echo = await client.assistants.get("echo");
    assert.equal(echo.graph_id, "echo");
    assert.equal(echo.version, 1);
    const byName = await client.assistants.search({ name: "Loud echo" });
    assert.deepEqual(
      byName.map((assistant) => assistant.assistant_id),
      ["echo-loud"],
    );
    const byPart = await client.assistants.search({ name: "LOUD" });
    assert.deepEqual(
      byPart.map((assistant) => assistant.assistant_id),
      ["echo-loud"],
      "a name matches as a part, in any case, as on the Platform",
    );
    assert.equal(await client.assistants.count({ graphId: "echo" }), 3);
    assert.equal(await client.assistants.count({ graphId: "echo", name: "loud" }), 1);
    assert.ok((await client.assistants.count()) > 3);
    const graph = await client.assistants.getGraph("echo-loud");
    assert.ok(
      graph.nodes.some((node) => node.id === "echo"),
      JSON.stringify(graph.nodes),
    );
    assert.ok(graph.edges.some((edge) => edge.source === "__start__" && edge.target === "echo"));
    const schemas = await client.assistants.getSchemas("echo");
    assert.equal(schemas.graph_id, "echo");
    assert.deepEqual(Object.keys((schemas.input_schema as { properties: object }).properties).sort(), ["message", "reply"]);
    await rejectsWith(client.assistants.get("no-such-assistant"), 404);
  });

  test("assistants.getSubgraphs: each subgraph's schemas by namespace; none for a flat graph; 404 for unknown", async () => {
    const subgraphs = await client.assistants.getSubgraphs("subgraph_drain");
    assert.deepEqual(Object.keys(subgraphs), ["outer"]);
    assert.equal(subgraphs.outer!.graph_id, "subgraph_drain");
    assert.ok(Object.keys((subgraphs.outer!.state_schema as { properties: object }).properties).includes("received"));
    assert.deepEqual(Object.keys(await client.assistants.getSubgraphs("subgraph_drain", { namespace: "outer", recurse: true })), ["outer"]);
    assert.deepEqual(await client.assistants.getSubgraphs("subgraph_drain", { namespace: "nowhere" }), {});
    assert.deepEqual(await client.assistants.getSubgraphs("echo"), {});
    await rejectsWith(client.assistants.getSubgraphs("no-such-assistant"), 404);
  });

  test("threads: create, get, update (metadata merges), search by metadata and status, delete; 404 after", async () => {
    const thread = await client.threads.create({ metadata: { team: "blue", tag: "lg-sdk" }, graphId: "echo" });
    assert.equal(thread.status, "idle");
    assert.deepEqual(thread.metadata, { team: "blue", tag: "lg-sdk", graph_id: "echo" });
    const updated = await client.threads.update(thread.thread_id, { metadata: { stage: "two" } });
    assert.deepEqual(updated.metadata, { team: "blue", tag: "lg-sdk", graph_id: "echo", stage: "two" });
    // Concurrent merges of different keys lose none of them (the merge is one statement, not read-then-write).
    const keys = Array.from({ length: 10 }, (_, i) => `k${i}`);
    await Promise.all(keys.map((key) => client.threads.update(thread.thread_id, { metadata: { [key]: true } })));
    const merged = (await client.threads.get(thread.thread_id)).metadata as Record<string, unknown>;
    assert.deepEqual(
      keys.filter((key) => merged[key] !== true),
      [],
    );
    const other = await client.threads.create({ metadata: { tag: "lg-sdk" } });
    const tagged = await client.threads.search({ metadata: { tag: "lg-sdk" } });
    assert.deepEqual(
      tagged.map((found) => found.thread_id),
      [other.thread_id, thread.thread_id],
    );
    assert.equal((await client.threads.search({ metadata: { tag: "lg-sdk" }, status: "busy" })).length, 0);
    assert.equal((await client.threads.search({ metadata: { tag: "lg-sdk" }, status: "idle", limit: 1 })).length, 1);
    // count: the search's filters, without paging (a POST the SDK sends to /threads/count).
    assert.equal(await client.threads.count({ metadata: { tag: "lg-sdk" } }), 2);
    assert.equal(await client.threads.count({ metadata: { tag: "lg-sdk" }, status: "busy" }), 0);
    assert.equal(await client.threads.count({ metadata: { team: "blue", tag: "lg-sdk" }, status: "idle" }), 1);
    const byIds = await client.threads.search({
      ids: [thread.thread_id, other.thread_id, "00000000-0000-4000-8000-000000000000"],
      metadata: { team: "blue" },
    });
    assert.deepEqual(
      byIds.map((found) => found.thread_id),
      [thread.thread_id],
    );
    await client.threads.delete(other.thread_id);
    await rejectsWith(client.threads.get(other.thread_id), 404);
    await rejectsWith(client.threads.delete(other.thread_id), 404);
  });

  test("thread and assistant searches apply sort_by and sort_order, by the search and by ids", async () => {
    const tag = `sort-${randomUUID()}`;
    const made = [];
    for (let i = 0; i < 3; i++) made.push(await client.threads.create({ metadata: { tag } }));
    // The middle one is written last: it leads by updated_at, not by created_at.
    await client.threads.update(made[1]!.thread_id, { metadata: { touched: true } });
    const ids = (threads: { thread_id: string }[]) => threads.map((thread) => thread.thread_id);
    const byUuid = [...ids(made)].sort();
    assert.deepEqual(ids(await client.threads.search({ metadata: { tag }, sortBy: "thread_id", sortOrder: "asc" })), byUuid);
    assert.deepEqual(
      ids(await client.threads.search({ metadata: { tag }, sortBy: "thread_id", sortOrder: "desc" })),
      [...byUuid].reverse(),
    );
    assert.deepEqual(ids(await client.threads.search({ metadata: { tag }, sortBy: "created_at", sortOrder: "asc" })), ids(made));
    assert.equal((await client.threads.search({ metadata: { tag }, sortBy: "updated_at" }))[0]!.thread_id, made[1]!.thread_id);
    const byIdsAsc = await client.threads.search({ ids: ids(made), sortBy: "thread_id", sortOrder: "asc", limit: 2, offset: 1 });
    assert.deepEqual(ids(byIdsAsc), byUuid.slice(1));

    const names = (await client.assistants.search({ graphId: "echo", sortBy: "name", sortOrder: "asc" })).map((a) => a.name);
    assert.deepEqual(names, [...names].sort());
    assert.equal(names.length, 3);
    const desc = (await client.assistants.search({ graphId: "echo", sortBy: "assistant_id", sortOrder: "desc", limit: 2 })).map(
      (a) => a.assistant_id,
    );
    assert.deepEqual(desc, ["echo-text", "echo-loud"]);

    // select: only those fields (a field the record does not have is left out); an unknown one is 422.
    const selected = await client.threads.search({ metadata: { tag }, select: ["thread_id", "status", "config"], limit: 1 });
    assert.deepEqual(Object.keys(selected[0]!).sort(), ["status", "thread_id"]);
    const [assistant] = await client.assistants.search({ graphId: "echo", select: ["assistant_id", "version"], limit: 1 });
    assert.deepEqual(Object.keys(assistant!).sort(), ["assistant_id", "version"]);
    await rejectsWith(client.threads.search({ select: ["nonsense" as "thread_id"] }), 422);
    const run = await client.runs.create(made[0]!.thread_id, "echo", { input: { message: "s" } });
    const [listed] = await client.runs.list(made[0]!.thread_id, { select: ["run_id", "status"] });
    assert.deepEqual(Object.keys(listed!).sort(), ["run_id", "status"]);
    assert.equal(listed!.run_id, run.run_id);
  });

  test("runs.wait on a thread answers the values; state, history and updateState follow the thread", async () => {
    const thread = await client.threads.create();
    let created: { run_id: string; thread_id?: string | undefined } | undefined;
    const values = await client.runs.wait(thread.thread_id, "echo-loud", {
      input: { message: "hi" },
      onRunCreated: (meta) => (created = meta),
    });
    assert.deepEqual(values, { message: "hi", reply: "hi!!!" });
    assert.equal(created?.thread_id, thread.thread_id, "Content-Location names the run");
    const run = await client.runs.get(thread.thread_id, created!.run_id);
    assert.equal(run.status, "success");
    assert.equal(run.assistant_id, "echo-loud");
    assert.equal(run.multitask_strategy, "reject");

    const state = await client.threads.getState(thread.thread_id);
    assert.deepEqual(state.values, { message: "hi", reply: "hi!!!" });
    assert.deepEqual(state.next, []);
    assert.ok(state.checkpoint.checkpoint_id);
    const fetched = await client.threads.get(thread.thread_id);
    assert.equal(fetched.status, "idle");
    assert.deepEqual(fetched.values, { message: "hi", reply: "hi!!!" });

    const history = await client.threads.getHistory(thread.thread_id);
    assert.ok(history.length >= 2);
    assert.equal(history[0]!.checkpoint.checkpoint_id, state.checkpoint.checkpoint_id);
    const older = await client.threads.getState(thread.thread_id, history[1]!.checkpoint.checkpoint_id!);
    assert.equal(older.checkpoint.checkpoint_id, history[1]!.checkpoint.checkpoint_id);

    const written = await client.threads.updateState(thread.thread_id, { values: { reply: "edited" }, asNode: "echo" });
    assert.ok(written.configurable?.checkpoint_id);
    assert.equal((await client.threads.getState<{ reply: string }>(thread.thread_id)).values.reply, "edited");
    assert.equal((await client.threads.getHistory(thread.thread_id, { limit: 1 })).length, 1);
  });

  test("a paused step's state: the task that finished carries its result, the one that asked its interrupt (both surfaces)", async () => {
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, "split_ask", { input: {} });
    const state = await client.threads.getState(thread.thread_id);
    assert.deepEqual(state.next.toSorted(), ["answer", "ask"]);
    const byName = Object.fromEntries(state.tasks.map((task) => [task.name, task]));
    assert.deepEqual(byName.answer!.result, { reply: "42" });
    assert.deepEqual(byName.answer!.interrupts, []);
    assert.equal(byName.ask!.result, null, "the Platform answers null for a task without a result");
    assert.equal(byName.ask!.interrupts[0]!.value, "go on?");

    const v1 = await server.request("GET", `/v1/threads/${thread.thread_id}/state`);
    const v1ByName = Object.fromEntries(v1.body.tasks.map((task: { name: string }) => [task.name, task]));
    assert.deepEqual(v1ByName.answer.result, { reply: "42" });
    assert.equal("result" in v1ByName.ask, false, "/v1 leaves result out while a task has none");

    // The run has ended on this surface (success, its thread interrupted): a cancel changes nothing, as on the Platform.
    const [paused] = await client.runs.list(thread.thread_id);
    assert.equal(paused!.status, "success");
    await client.runs.cancel(thread.thread_id, paused!.run_id, true);
    assert.equal((await server.request("GET", `/v1/runs/${paused!.run_id}`)).body.status, "paused");
    assert.equal((await client.threads.get(thread.thread_id)).status, "interrupted");
    await client.runs.wait(thread.thread_id, "split_ask", { command: { resume: "yes" } });
    assert.equal((await client.threads.getState<{ decision: unknown }>(thread.thread_id)).values.decision, "yes");
  });

  test('ifNotExists "create" makes the thread a run names, with the graph, assistant and run metadata; "reject" is 404', async () => {
    const threadId = randomUUID();
    await rejectsWith(client.runs.wait(threadId, "echo", { input: { message: "x" } }), 404);
    await rejectsWith(client.runs.create(threadId, "echo", { input: { message: "x" }, ifNotExists: "reject" }), 404);
    const values = await client.runs.wait(threadId, "echo-loud", {
      input: { message: "new" },
      ifNotExists: "create",
      metadata: { by: "sdk" },
    });
    assert.deepEqual(values, { message: "new", reply: "new!!!" });
    const thread = await client.threads.get(threadId);
    assert.deepEqual(thread.metadata, { graph_id: "echo", assistant_id: "echo-loud", by: "sdk" });
    // On a thread that exists it changes nothing but the run's own thread metadata.
    await client.runs.wait(threadId, "echo", { input: { message: "again" }, ifNotExists: "create" });
    assert.equal((await client.threads.getState<{ message: string }>(threadId)).values.message, "again");
    assert.equal((await client.runs.list(threadId)).length, 2);
    const other = await lgClient(server, "t2");
    await rejectsWith(other.threads.get(threadId), 404);
  });

  test("threads.patchState adds keys to the latest state's metadata; 404 for a thread without state", async () => {
    const thread = await client.threads.create();
    await rejectsWith(client.threads.patchState(thread.thread_id, { reviewed: true }), 404);
    await client.runs.wait(thread.thread_id, "echo", { input: { message: "p" } });
    const before = await client.threads.getState(thread.thread_id);
    await client.threads.patchState(thread.thread_id, { reviewed: true });
    await client.threads.patchState({ configurable: { thread_id: thread.thread_id } }, { by: "qa" });
    const after = await client.threads.getState(thread.thread_id);
    assert.equal(after.checkpoint.checkpoint_id, before.checkpoint.checkpoint_id, "the same checkpoint, not a new one");
    assert.deepEqual(after.metadata, { ...before.metadata, reviewed: true, by: "qa" });
    assert.deepEqual(after.values, before.values);
    await rejectsWith(client.threads.patchState(randomUUID(), { x: 1 }), 404);
  });

  test("threads.create with the client's thread id: if_exists raise (409) or do_nothing; one id in two tenants is two threads", async () => {
    const threadId = randomUUID();
    const created = await client.threads.create({ threadId, metadata: { owner: "t1" } });
    assert.equal(created.thread_id, threadId);
    await rejectsWith(client.threads.create({ threadId }), 409);
    await rejectsWith(client.threads.create({ threadId, ifExists: "raise" }), 409);
    const again = await client.threads.create({ threadId, ifExists: "do_nothing", metadata: { owner: "someone else" } });
    assert.deepEqual([again.thread_id, again.metadata?.owner], [threadId, "t1"], "the existing thread, unchanged");
    const fresh = randomUUID();
    assert.equal(
      (await client.threads.create({ threadId: fresh, ifExists: "do_nothing" })).thread_id,
      fresh,
      "do_nothing creates one that is missing",
    );

    // Another tenant takes the same id: its own thread, with its own runs, state and lifetime.
    const other = await lgClient(server, "t2");
    const theirs = await other.threads.create({ threadId, metadata: { owner: "t2" } });
    assert.deepEqual([theirs.thread_id, theirs.metadata?.owner], [threadId, "t2"]);
    assert.deepEqual(await client.runs.wait(threadId, "echo", { input: { message: "mine" } }), { message: "mine", reply: "mine" });
    assert.deepEqual(await other.runs.wait(threadId, "echo", { input: { message: "theirs" } }), { message: "theirs", reply: "theirs" });
    assert.equal((await client.threads.getState<{ message: string }>(threadId)).values.message, "mine");
    assert.equal((await other.threads.getState<{ message: string }>(threadId)).values.message, "theirs");
    assert.equal((await client.threads.getHistory(threadId)).length, (await other.threads.getHistory(threadId)).length);
    assert.deepEqual(
      (await client.runs.list(threadId)).map((run) => run.thread_id),
      [threadId],
      "each tenant sees only its own run on the thread",
    );
    await other.threads.delete(threadId);
    await rejectsWith(other.threads.get(threadId), 404);
    assert.equal((await client.threads.get<{ message: string }>(threadId)).values.message, "mine", "the first tenant's thread stays");

    // A run's id is not a thread id the tenant can take (a stateless run's checkpoints live under it).
    let runId = "";
    await client.runs.wait(null, "approval", { input: { request: "x" }, onRunCreated: (meta) => (runId = meta.run_id) });
    await rejectsWith(client.threads.create({ threadId: runId }), 409);
    await rejectsWith(client.threads.create({ threadId: runId, ifExists: "do_nothing" }), 409);
    assert.equal((await other.threads.create({ threadId: runId })).thread_id, runId, "another tenant's run does not reserve it");
    assert.equal((await other.threads.getState(runId)).checkpoint, null, "and that thread does not see the run's checkpoints");
  });

  test("runs.create, join, get and list on a thread; a stateless runs.wait", async () => {
    const thread = await client.threads.create();
    let location: { run_id: string; thread_id?: string | undefined } | undefined;
    const run = await client.runs.create(thread.thread_id, "echo", {
      input: { message: "one" },
      onRunCreated: (meta) => (location = meta),
    });
    assert.equal(location?.run_id, run.run_id);
    assert.ok(run.status === "pending" || run.status === "running");
    assert.deepEqual(await client.runs.join(thread.thread_id, run.run_id), { message: "one", reply: "one" });
    assert.equal((await client.runs.get(thread.thread_id, run.run_id)).status, "success");
    const second = await client.runs.create(thread.thread_id, "echo", { input: { message: "two" } });
    await client.runs.join(thread.thread_id, second.run_id);
    const listed = await client.runs.list(thread.thread_id);
    assert.deepEqual(
      listed.map((found) => found.run_id),
      [second.run_id, run.run_id],
    );
    assert.equal((await client.runs.list(thread.thread_id, { status: "error" })).length, 0);

    let stateless: { run_id: string; thread_id?: string | undefined } | undefined;
    assert.deepEqual(await client.runs.wait(null, "echo", { input: { message: "alone" }, onRunCreated: (meta) => (stateless = meta) }), {
      message: "alone",
      reply: "alone",
    });
    assert.ok(stateless?.run_id);
    assert.equal(stateless.thread_id, undefined);
  });

  test("runs.stream: metadata first, then values, updates, messages-tuple, custom and tasks from a graph streaming tokens", async () => {
    const thread = await client.threads.create();
    const parts = await collect(
      client.runs.stream(thread.thread_id, "chat", {
        input: { prompt: "hi" },
        streamMode: ["values", "updates", "messages-tuple", "custom", "tasks"],
      }),
    );
    assert.equal(parts[0]!.event, "metadata");
    const runId = (parts[0]!.data as { run_id: string }).run_id;
    assert.equal((await client.runs.get(thread.thread_id, runId)).status, "success");
    const names = new Set(parts.map((part) => part.event));
    for (const name of ["values", "updates", "messages", "custom", "tasks"]) assert.ok(names.has(name), `${name} in ${[...names]}`);
    assert.ok(!names.has("error") && !names.has("end"));
    const tokens = parts
      .filter((part) => part.event === "messages")
      .map((part) => (part.data as [{ content: string }, Record<string, unknown>])[0].content);
    assert.ok(tokens.length > 1, "one event per token");
    assert.equal(tokens.join(""), "hello there friend");
    const [, metadata] = parts.find((part) => part.event === "messages")!.data as [unknown, { langgraph_node?: string }];
    assert.equal(metadata.langgraph_node, "talk");
    assert.deepEqual(parts.find((part) => part.event === "custom")!.data, { progress: "thinking", prompt: "hi" });
    assert.deepEqual(parts.find((part) => part.event === "updates")!.data, { talk: { answer: "hello there friend" } });
    assert.deepEqual(parts.filter((part) => part.event === "values").at(-1)!.data, { prompt: "hi", answer: "hello there friend" });
    // Every event carries an id, increasing.
    const ids = parts.map((part) => Number(part.id));
    assert.deepEqual(
      ids,
      [...ids].sort((a, b) => a - b),
    );
  });

  test("runs.stream in messages mode: metadata, partials that grow, complete; stateless streams too", async () => {
    const parts = await collect(
      client.runs.stream(null, "chat_messages", { input: { messages: [{ role: "user", content: "yo" }] }, streamMode: "messages" }),
    );
    const names = parts.map((part) => part.event);
    assert.equal(names[0], "metadata");
    assert.ok(names.includes("messages/metadata"));
    const partials = parts
      .filter((part) => part.event === "messages/partial")
      .map((part) => (part.data as { content: string }[])[0]!.content);
    assert.ok(partials.length > 1);
    assert.equal(partials.at(-1), "You said: yo (turn 1)");
    const complete = parts.find((part) => part.event === "messages/complete")!.data as { content: string }[];
    assert.equal(complete[0]!.content, "You said: yo (turn 1)");
    // A mode this server cannot serve yet is refused, not silently dropped.
    await assert.rejects(collect(client.runs.stream(null, "echo", { input: { message: "x" }, streamMode: "lifecycle" })), /422/);
  });

  test("checkpoints and debug modes: recorded for a run that asks, one checkpoint per step", async () => {
    const thread = await client.threads.create();
    const parts = await collect(
      client.runs.stream(thread.thread_id, "echo", { input: { message: "cp" }, streamMode: ["checkpoints", "debug"] }),
    );
    const checkpoints = parts
      .filter((part) => part.event === "checkpoints")
      .map(
        (part) =>
          part.data as { config: { configurable: { checkpoint_id: string } }; metadata: { step: number }; values: unknown; next: string[] },
      );
    assert.deepEqual(
      checkpoints.map((found) => found.metadata.step),
      [-1, 0, 1],
    );
    assert.deepEqual(checkpoints.at(-1)!.values, { message: "cp", reply: "cp" });
    assert.deepEqual(checkpoints[1]!.next, ["echo"]);
    const history = await client.threads.getHistory(thread.thread_id);
    assert.equal(checkpoints.at(-1)!.config.configurable.checkpoint_id, history[0]!.checkpoint.checkpoint_id);
    const debug = parts.filter((part) => part.event === "debug").map((part) => (part.data as { type: string }).type);
    assert.deepEqual(debug, ["checkpoint", "checkpoint", "task", "task_result", "checkpoint"]);
    // Debug views key on the payload's checkpoint and its parent, as the Platform sends them.
    const lastDebug = parts.filter((part) => part.event === "debug").at(-1)!.data as { payload: Record<string, unknown> };
    assert.deepEqual(lastDebug.payload.checkpoint, history[0]!.checkpoint);
    assert.deepEqual(lastDebug.payload.parent_checkpoint, history[0]!.parent_checkpoint);
    // A run that did not ask has no checkpoints in its log: its log stays small.
    let plain = "";
    await client.runs.wait(thread.thread_id, "echo", { input: { message: "no" }, onRunCreated: (meta) => (plain = meta.run_id) });
    const events = await server.request("GET", `/v1/runs/${plain}/events?limit=1000`);
    assert.ok(!events.body.some((event: { kind: string }) => event.kind === "checkpoint"));
  });

  test("joinStream of a running run, then replay after Last-Event-ID while running and after the run ended", async () => {
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, "steps", {
      input: { steps: 3, delayMs: 300 },
      streamMode: ["values", "updates"],
    });
    await waitUntilRunning(server, run.run_id);
    // Joined mid-run without Last-Event-ID: everything from the start, in the run's own modes.
    const live: Part[] = [];
    for await (const part of client.runs.joinStream(thread.thread_id, run.run_id)) {
      live.push({ event: part.event, data: part.data, id: part.id });
      if (part.event === "updates") break; // leave after the first step
    }
    assert.equal(live[0]!.event, "metadata");
    const lastSeen = live.at(-1)!.id!;
    const rest = await collect(client.runs.joinStream(thread.thread_id, run.run_id, { lastEventId: lastSeen }));
    assert.ok(rest.length > 0 && rest.every((part) => Number(part.id) > Number(lastSeen)), "only what followed");
    assert.equal(rest.filter((part) => part.event === "updates").length, 2, "the two remaining steps");
    assert.deepEqual(rest.filter((part) => part.event === "values").at(-1)!.data, { steps: 3, delayMs: 300, count: 3 });
    assert.equal((await client.runs.get(thread.thread_id, run.run_id)).status, "success");

    // After the end: the whole stream again, from -1 or from any id; a mode filter applies.
    const whole = await collect(client.runs.joinStream(thread.thread_id, run.run_id, { lastEventId: "-1" }));
    assert.deepEqual(
      whole.slice(0, live.length).map((part) => part.id),
      live.map((part) => part.id),
    );
    assert.deepEqual(
      whole.slice(live.length).map((part) => part.id),
      rest.map((part) => part.id),
    );
    const again = await collect(client.runs.joinStream(thread.thread_id, run.run_id, { lastEventId: lastSeen }));
    assert.deepEqual(again, rest);
    const onlyUpdates = await collect(client.runs.joinStream(thread.thread_id, run.run_id, { streamMode: "updates" }));
    assert.deepEqual(
      onlyUpdates.map((part) => part.event),
      ["metadata", "updates", "updates", "updates"],
    );
    // Stateless runs are joined at /runs/{id}/stream.
    let stateless: string | undefined;
    await client.runs.wait(null, "echo", { input: { message: "s" }, onRunCreated: (meta) => (stateless = meta.run_id) });
    const replayed = await collect(client.runs.joinStream(null, stateless!));
    assert.deepEqual(
      replayed.map((part) => part.event),
      ["metadata", "values", "values"],
    );
  });
});
