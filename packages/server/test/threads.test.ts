import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Command } from "@langchain/langgraph";
import { graph as approvalGraph } from "../../../examples/graphs/approval.ts";
import { RudderCheckpointSaver } from "../src/storage/checkpointer.ts";
import { startTestServer, type TestServer } from "./support/server.ts";

describe("threads", () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer();
  });
  after(() => server.close());

  test("create, get, patch (metadata replaced wholesale), delete", async () => {
    const created = await server.request("POST", "/v1/threads", { body: { metadata: { user: "ada", topic: "x" } } });
    assert.equal(created.status, 201);
    const thread = created.body;
    assert.match(thread.thread_id, /^[0-9a-f-]{36}$/);
    assert.deepEqual(thread.metadata, { user: "ada", topic: "x" });
    assert.equal(thread.status, "idle");
    assert.ok(Date.parse(thread.created_at) > 0 && thread.created_at === thread.updated_at);

    const fetched = await server.request("GET", `/v1/threads/${thread.thread_id}`);
    assert.deepEqual(fetched.body, thread);

    const patched = await server.request("PATCH", `/v1/threads/${thread.thread_id}`, { body: { metadata: { user: "grace" } } });
    assert.equal(patched.status, 200);
    assert.deepEqual(patched.body.metadata, { user: "grace" }, "PATCH replaces, it does not merge");
    assert.ok(patched.body.updated_at >= thread.updated_at);

    const deleted = await server.request("DELETE", `/v1/threads/${thread.thread_id}`);
    assert.equal(deleted.status, 204);
    assert.equal((await server.request("GET", `/v1/threads/${thread.thread_id}`)).status, 404);
    assert.equal((await server.request("DELETE", `/v1/threads/${thread.thread_id}`)).status, 404);
    assert.equal((await server.request("PATCH", `/v1/threads/${randomUUID()}`, { body: { metadata: {} } })).status, 404);
  });

  test("create takes metadata only, and defaults it to {}", async () => {
    const bare = await server.request("POST", "/v1/threads", { body: {} });
    assert.deepEqual([bare.status, bare.body.metadata], [201, {}]);
    const extra = await server.request("POST", "/v1/threads", { body: { metadata: {}, thread_id: randomUUID() } });
    assert.equal(extra.status, 422);
    const patchWithout = await server.request("PATCH", `/v1/threads/${bare.body.thread_id}`, { body: {} });
    assert.equal(patchWithout.status, 422, "PATCH needs the metadata that replaces the old");
  });

  test("list: newest first, paginated, filtered by metadata containment", async () => {
    const tenant = `list-${randomUUID()}`;
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const created = await server.request("POST", "/v1/threads", {
        tenant,
        body: { metadata: { i, even: i % 2 === 0, tags: ["a", `t${i}`] } },
      });
      ids.push(created.body.thread_id);
    }
    const all = await server.request("GET", "/v1/threads", { tenant });
    assert.deepEqual(
      all.body.map((t: { thread_id: string }) => t.thread_id),
      [...ids].reverse(),
    );
    const page = await server.request("GET", "/v1/threads?limit=2&offset=1", { tenant });
    assert.deepEqual(
      page.body.map((t: { thread_id: string }) => t.thread_id),
      [ids[3], ids[2]],
    );
    const even = await server.request("GET", `/v1/threads?metadata=${encodeURIComponent('{"even":true}')}`, { tenant });
    assert.deepEqual(
      even.body.map((t: { metadata: { i: number } }) => t.metadata.i),
      [4, 2, 0],
    );
    const tagged = await server.request("GET", `/v1/threads?metadata=${encodeURIComponent('{"tags":["t3"]}')}`, { tenant });
    assert.deepEqual(
      tagged.body.map((t: { metadata: { i: number } }) => t.metadata.i),
      [3],
    );
  });

  test("tenant isolation: tenant B cannot read, patch, delete, list or read the state of A's thread", async () => {
    const a = await server.request("POST", "/v1/threads", { tenant: "tenant-a", body: { metadata: { secret: true } } });
    const id = a.body.thread_id;
    for (const [method, path, body] of [
      ["GET", `/v1/threads/${id}`, undefined],
      ["PATCH", `/v1/threads/${id}`, { metadata: {} }],
      ["DELETE", `/v1/threads/${id}`, undefined],
      ["GET", `/v1/threads/${id}/state`, undefined],
      ["GET", `/v1/threads/${id}/history`, undefined],
      ["POST", `/v1/threads/${id}/fork`, {}],
    ] as const) {
      const answer = await server.request(method, path, { tenant: "tenant-b", body });
      assert.equal(answer.status, 404, `${method} ${path} by another tenant`);
      assert.equal(answer.body.code, "not_found");
    }
    const listed = await server.request("GET", "/v1/threads", { tenant: "tenant-b" });
    assert.ok(!listed.body.some((t: { thread_id: string }) => t.thread_id === id));
    assert.equal((await server.request("GET", `/v1/threads/${id}`, { tenant: "tenant-a" })).body.metadata.secret, true);
  });

  test("roles: a viewer reads but cannot create, patch, delete or fork", async () => {
    const own = await server.request("POST", "/v1/threads", { tenant: "roles", body: {} });
    const viewer = { tenant: "roles", roles: ["viewer" as const] };
    assert.equal((await server.request("GET", `/v1/threads/${own.body.thread_id}`, viewer)).status, 200);
    assert.equal((await server.request("GET", "/v1/threads", viewer)).status, 200);
    for (const [method, path, body] of [
      ["POST", "/v1/threads", {}],
      ["PATCH", `/v1/threads/${own.body.thread_id}`, { metadata: {} }],
      ["DELETE", `/v1/threads/${own.body.thread_id}`, undefined],
      ["POST", `/v1/threads/${own.body.thread_id}/fork`, {}],
    ] as const) {
      const answer = await server.request(method, path, { ...viewer, body });
      assert.deepEqual([answer.status, answer.body.code], [403, "forbidden"], `${method} ${path} as viewer`);
    }
    const developer = await server.request("POST", "/v1/threads", { tenant: "roles", roles: ["developer"], body: {} });
    assert.equal(developer.status, 403, "developer does not operate threads");
    const operator = await server.request("POST", "/v1/threads", { tenant: "roles", roles: ["operator"], body: {} });
    assert.equal(operator.status, 201);
    const none = await server.request("GET", "/v1/threads", { tenant: "roles", roles: [] });
    assert.equal(none.status, 403);
  });

  describe("state, history and fork (checkpoints written through a compiled graph)", () => {
    let threadId: string;
    let graph: ReturnType<typeof approvalGraph.compile>;

    before(async () => {
      threadId = (await server.request("POST", "/v1/threads", { body: { metadata: {} } })).body.thread_id;
      graph = approvalGraph.compile({ checkpointer: new RudderCheckpointSaver(server.database.db, { tenantId: "t1" }) }); // the thread's tenant
      // As a Rudder run does: the graph id rides in the run metadata, so it lands in checkpoint metadata.
      await graph.invoke({ request: "ship it" }, { configurable: { thread_id: threadId }, metadata: { graph_id: "approval" } });
    });

    test("a new thread's state is empty", async () => {
      const fresh = (await server.request("POST", "/v1/threads", { body: {} })).body.thread_id;
      const state = await server.request("GET", `/v1/threads/${fresh}/state`);
      assert.deepEqual(state.body, {
        values: {},
        next: [],
        tasks: [],
        checkpoint: null,
        parent_checkpoint: null,
        metadata: {},
        created_at: null,
      });
      assert.deepEqual((await server.request("GET", `/v1/threads/${fresh}/history`)).body, []);
    });

    test("state at an interrupt shows values, next node and the interrupt", async () => {
      const state = await server.request("GET", `/v1/threads/${threadId}/state`);
      assert.equal(state.status, 200);
      assert.deepEqual(state.body.values, { request: "ship it", draft: "Plan for: ship it" });
      assert.deepEqual(state.body.next, ["review"]);
      assert.equal(state.body.tasks[0].name, "review");
      assert.equal(state.body.tasks[0].interrupts[0].value.question, "Approve this plan?");
      assert.equal(state.body.checkpoint.thread_id, threadId);
      assert.equal(state.body.metadata.graph_id, "approval");
    });

    test("history is newest first, honours limit and before, and reads any checkpoint", async () => {
      await graph.invoke(new Command({ resume: { approved: true } }), {
        configurable: { thread_id: threadId },
        metadata: { graph_id: "approval" },
      });
      const history = await server.request("GET", `/v1/threads/${threadId}/history`);
      assert.equal(history.status, 200);
      const steps = history.body.map((s: { metadata: { step: number } }) => s.metadata.step);
      assert.deepEqual(
        steps,
        [...steps].sort((a, b) => b - a),
        "newest first",
      );
      assert.equal(history.body[0].values.outcome, "done: Plan for: ship it");
      assert.deepEqual(history.body[0].next, []);

      const limited = await server.request("GET", `/v1/threads/${threadId}/history?limit=2`);
      assert.equal(limited.body.length, 2);
      const before = await server.request(
        "GET",
        `/v1/threads/${threadId}/history?limit=2&before=${limited.body[1].checkpoint.checkpoint_id}`,
      );
      assert.deepEqual(before.body[0].checkpoint, history.body[2].checkpoint);
      const skipped = await server.request("GET", `/v1/threads/${threadId}/history?limit=2&offset=1`);
      assert.deepEqual(
        skipped.body.map((s: { checkpoint: unknown }) => s.checkpoint),
        history.body.slice(1, 3).map((s: { checkpoint: unknown }) => s.checkpoint),
        "offset skips the newest",
      );

      const old = history.body.find((s: { next: string[] }) => s.next.includes("review"));
      const atOld = await server.request("GET", `/v1/threads/${threadId}/state?checkpoint_id=${old.checkpoint.checkpoint_id}`);
      assert.deepEqual(atOld.body.values, old.values);
      const missing = await server.request("GET", `/v1/threads/${threadId}/state?checkpoint_id=nope`);
      assert.equal(missing.status, 404);
    });

    test("fork without values starts a lineage at the checkpoint; with values writes a new checkpoint", async () => {
      const history = (await server.request("GET", `/v1/threads/${threadId}/history`)).body;
      const atReview = history.find((s: { next: string[] }) => s.next.includes("review"));
      const plain = await server.request("POST", `/v1/threads/${threadId}/fork`, {
        body: { checkpoint_id: atReview.checkpoint.checkpoint_id },
      });
      assert.equal(plain.status, 200);
      assert.deepEqual(plain.body, { configurable: atReview.checkpoint });

      const updated = await server.request("POST", `/v1/threads/${threadId}/fork`, {
        body: { checkpoint_id: atReview.checkpoint.checkpoint_id, values: { draft: "A better plan" }, as_node: "plan" },
      });
      assert.equal(updated.status, 200, JSON.stringify(updated.body));
      const forkedId = updated.body.configurable.checkpoint_id;
      assert.notEqual(forkedId, atReview.checkpoint.checkpoint_id);
      const forked = await server.request("GET", `/v1/threads/${threadId}/state?checkpoint_id=${forkedId}`);
      assert.equal(forked.body.values.draft, "A better plan");
      assert.deepEqual(forked.body.parent_checkpoint, atReview.checkpoint, "the fork's parent is the checkpoint it forked");
      assert.deepEqual(forked.body.next, ["review"]);

      // The new lineage runs on from the forked checkpoint.
      await graph.invoke(new Command({ resume: { approved: true } }), {
        configurable: updated.body.configurable,
        metadata: { graph_id: "approval" },
      });
      const latest = await server.request("GET", `/v1/threads/${threadId}/state`);
      assert.equal(latest.body.values.outcome, "done: A better plan");
    });

    test("fork errors: unknown checkpoint 404, bad node 422, empty thread 409", async () => {
      assert.equal((await server.request("POST", `/v1/threads/${threadId}/fork`, { body: { checkpoint_id: "nope" } })).status, 404);
      const badNode = await server.request("POST", `/v1/threads/${threadId}/fork`, {
        body: { values: { draft: "x" }, as_node: "no_such_node" },
      });
      assert.equal(badNode.status, 422, JSON.stringify(badNode.body));
      const fresh = (await server.request("POST", "/v1/threads", { body: {} })).body.thread_id;
      const empty = await server.request("POST", `/v1/threads/${fresh}/fork`, { body: {} });
      assert.deepEqual([empty.status, empty.body.code], [409, "conflict"]);
    });

    test("a thread written without a known graph is read straight from its checkpoints", async () => {
      const raw = (await server.request("POST", "/v1/threads", { body: {} })).body.thread_id;
      await graph.invoke({ request: "no graph id" }, { configurable: { thread_id: raw } });
      const state = await server.request("GET", `/v1/threads/${raw}/state`);
      assert.equal(state.body.values.draft, "Plan for: no graph id");
      assert.ok(state.body.checkpoint.checkpoint_id);
      const update = await server.request("POST", `/v1/threads/${raw}/fork`, { body: { values: { draft: "y" }, as_node: "plan" } });
      assert.deepEqual([update.status, update.body.code], [409, "conflict"]);
    });

    test("deleting a thread deletes its checkpoints", async () => {
      const doomed = (await server.request("POST", "/v1/threads", { body: {} })).body.thread_id;
      await graph.invoke({ request: "bye" }, { configurable: { thread_id: doomed }, metadata: { graph_id: "approval" } });
      const countRows = async () =>
        (
          await server.database.db.query<{ n: number }>(
            "select (select count(*) from checkpoints where thread_id = $1)::int + (select count(*) from checkpoint_writes where thread_id = $1)::int as n",
            [doomed],
          )
        )[0]!.n;
      assert.ok((await countRows()) > 0);
      assert.equal((await server.request("DELETE", `/v1/threads/${doomed}`)).status, 204);
      assert.equal(await countRows(), 0);
    });
  });
});
