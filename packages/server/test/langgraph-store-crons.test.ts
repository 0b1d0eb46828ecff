import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import type { Client } from "@langchain/langgraph-sdk";
import { TEST_DRIVER } from "./support/db.ts";
import { lgClient, rejectsWith } from "./support/langgraph.ts";
import { startTestServer, type TestServer } from "./support/server.ts";

/**
 * The store and crons of the LangGraph Platform API, driven only through
 * `@langchain/langgraph-sdk`'s Client (the /v1 run list only to find a stateless cron's runs):
 * every store call, a node's writes read back, crons over Rudder's schedules that really fire,
 * tenants and roles. Waits are for conditions, never for a length of time.
 */

const EVERY_SECOND = "* * * * * *";
const YEARLY = "0 0 1 1 *";

/** Polls until `check` returns a value (a condition; the bound only ends a hung test). */
async function until<T>(what: string, check: () => Promise<T | undefined>, boundMs = 60_000): Promise<T> {
  const giveUp = Date.now() + boundMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > giveUp) assert.fail(`gave up waiting: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe(`LangGraph API through the SDK: store and crons on ${TEST_DRIVER}`, () => {
  let server: TestServer;
  let client: Client;
  before(async () => {
    server = await startTestServer();
    client = await lgClient(server, "t1", ["operator"]);
  });
  after(() => server.close());

  test("/info says the store and crons are served; openapi lists their paths", async () => {
    const info = (await (await fetch(`${server.url}/info`)).json()) as { flags: { store: boolean; crons: boolean } };
    assert.equal(info.flags.store, true);
    assert.equal(info.flags.crons, true);
    const openapi = (await (await fetch(`${server.url}/openapi.json`)).json()) as { paths: Record<string, object> };
    for (const path of [
      "/store/items",
      "/store/items/search",
      "/store/namespaces",
      "/runs/crons",
      "/runs/crons/{cron_id}",
      "/runs/crons/search",
    ])
      assert.ok(openapi.paths[path], path);
  });

  test("store: put, get (a missing item is null), search, list namespaces, delete", async () => {
    const user = `u-${randomUUID()}`;
    assert.equal(await client.store.getItem(["prefs", user], "theme"), null, "a missing item is null");
    const wire = await fetch(`${server.url}/store/items?namespace=prefs.${user}&key=theme`, {
      headers: { authorization: `Bearer ${await server.token()}` },
    });
    assert.equal(wire.status, 200);
    assert.equal(await wire.text(), "null", "200 with a JSON null body");
    const put = await server.request("PUT", "/store/items", { body: { namespace: ["rawput", user], key: "k", value: { a: 1 } } });
    assert.equal(put.status, 204, "a put answers 204 (the SDK reads no body)");
    await client.store.putItem(["prefs", user], "theme", { color: "dark", score: 3 });
    await client.store.putItem(["prefs", user], "lang", { code: "fr", score: 5 }, { index: false, ttl: null });
    await client.store.putItem(["prefs", user, "deep"], "font", { name: "mono sans", score: 1 }, { index: ["name"], ttl: 60 });

    const item = await client.store.getItem(["prefs", user], "theme");
    assert.ok(item);
    assert.deepEqual(item.namespace, ["prefs", user]);
    assert.equal(item.key, "theme");
    assert.deepEqual(item.value, { color: "dark", score: 3 });
    assert.match(item.createdAt, /^\d{4}-\d\d-\d\dT/);
    assert.match(item.updatedAt, /^\d{4}-\d\d-\d\dT/);
    const refreshed = await client.store.getItem(["prefs", user], "theme", { refreshTtl: false });
    assert.deepEqual(refreshed?.value, { color: "dark", score: 3 });

    // A second put replaces the value; created_at stays.
    await client.store.putItem(["prefs", user], "theme", { color: "light", score: 4 });
    const replaced = await client.store.getItem(["prefs", user], "theme");
    assert.deepEqual(replaced?.value, { color: "light", score: 4 });
    assert.equal(replaced?.createdAt, item.createdAt);

    const all = await client.store.searchItems(["prefs", user]);
    assert.deepEqual(all.items.map((hit) => hit.key).sort(), ["font", "lang", "theme"]);
    assert.ok(all.items.every((hit) => typeof hit.createdAt === "string"));
    const filtered = await client.store.searchItems(["prefs", user], { filter: { score: { $gte: 4 } } });
    assert.deepEqual(filtered.items.map((hit) => hit.key).sort(), ["lang", "theme"]);
    const page = await client.store.searchItems(["prefs", user], { limit: 2, offset: 2 });
    assert.equal(page.items.length, 1);
    const byQuery = await client.store.searchItems(["prefs", user], { query: "mono" });
    assert.equal(byQuery.items[0]?.key, "font", JSON.stringify(byQuery.items));
    assert.equal(typeof byQuery.items[0]?.score, "number");

    const namespaces = await client.store.listNamespaces({ prefix: ["prefs", user] });
    assert.deepEqual(namespaces.namespaces.map((ns) => ns.join("/")).sort(), [`prefs/${user}`, `prefs/${user}/deep`]);
    const shallow = await client.store.listNamespaces({ prefix: ["prefs", user], maxDepth: 2 });
    assert.deepEqual(shallow.namespaces, [["prefs", user]]);
    const bySuffix = await client.store.listNamespaces({ prefix: ["prefs"], suffix: ["deep"] });
    assert.deepEqual(bySuffix.namespaces, [["prefs", user, "deep"]]);
    const wildcard = await client.store.listNamespaces({ prefix: ["prefs", "*", "deep"] });
    assert.ok(wildcard.namespaces.some((ns) => ns[1] === user));

    await client.store.deleteItem(["prefs", user], "theme");
    assert.equal(await client.store.getItem(["prefs", user], "theme"), null);
    await client.store.deleteItem(["prefs", user], "theme"); // deleting nothing is fine
    // The same data as /v1/store.
    const v1 = await server.request("GET", `/v1/store/search?namespace=${encodeURIComponent(`prefs/${user}`)}`);
    assert.deepEqual(v1.body.map((hit: { key: string }) => hit.key).sort(), ["font", "lang"]);
  });

  test("store: bad input is a 422 problem", async () => {
    const bad = [
      ["PUT", "/store/items", { namespace: [], key: "k", value: {} }],
      ["PUT", "/store/items", { namespace: ["a.b"], key: "k", value: {} }],
      ["PUT", "/store/items", { namespace: ["a"], key: "k", value: [1] }],
      ["PUT", "/store/items", { namespace: ["a"], key: "k", value: {}, ttl: -1 }],
      ["POST", "/store/items/search", { namespace_prefix: ["a"], filter: { score: { $near: 1 } } }],
      ["POST", "/store/items/search", { limit: 0 }],
      ["POST", "/store/namespaces", { max_depth: 0 }],
      ["DELETE", "/store/items", { namespace: ["a"] }],
      ["GET", "/store/items?namespace=a..b&key=k", undefined],
      ["GET", "/store/items?namespace=a", undefined],
    ] as const;
    for (const [method, path, body] of bad) {
      const answer = await server.request(method, path, body === undefined ? {} : { body });
      assert.equal(answer.status, 422, `${method} ${path} ${JSON.stringify(body)}: ${JSON.stringify(answer.body)}`);
      assert.equal(answer.body.code, "validation_error");
    }
    const filterProblem = await server.request("POST", "/store/items/search", { body: { filter: { score: { $near: 1 } } } });
    assert.match(filterProblem.body.detail, /\$near/);
  });

  test("a node's store writes (the memory graph) are read through the SDK", async () => {
    const user = `ada-${randomUUID()}`;
    const thread = await client.threads.create();
    const first = (await client.runs.wait(thread.thread_id, "memory", {
      input: { user_id: user, message: "remember I prefer dark mode" },
    })) as { saved: string; recalled: string[] };
    assert.equal(first.saved, "I prefer dark mode");
    const found = await client.store.searchItems(["memories", user]);
    assert.equal(found.items.length, 1);
    assert.equal(found.items[0]!.value.text, "I prefer dark mode");
    const item = await client.store.getItem(["memories", user], found.items[0]!.key);
    assert.equal(item?.value.text, "I prefer dark mode");
    assert.ok((await client.store.listNamespaces({ prefix: ["memories"] })).namespaces.some((ns) => ns[1] === user));
    // And what the SDK puts, the graph recalls.
    await client.store.putItem(["memories", user], "sdk", { text: "my editor is vim" });
    const other = await client.threads.create();
    const second = (await client.runs.wait(other.thread_id, "memory", { input: { user_id: user, message: "editor vim" } })) as {
      recalled: string[];
    };
    assert.ok(second.recalled.includes("my editor is vim"), JSON.stringify(second.recalled));
  });

  test("store: tenants are isolated; viewers read, operators write", async () => {
    const ns = ["shared", randomUUID()];
    await client.store.putItem(ns, "k", { owner: "t1" });
    const stranger = await lgClient(server, "t2", ["operator"]);
    assert.equal(await stranger.store.getItem(ns, "k"), null, "another tenant's item is not there");
    assert.deepEqual((await stranger.store.searchItems(ns)).items, []);
    assert.deepEqual((await stranger.store.listNamespaces({ prefix: ns })).namespaces, []);
    await stranger.store.putItem(ns, "k", { owner: "t2" });
    assert.deepEqual((await client.store.getItem(ns, "k"))?.value, { owner: "t1" });
    await stranger.store.deleteItem(ns, "k");
    assert.deepEqual((await client.store.getItem(ns, "k"))?.value, { owner: "t1" }, "another tenant's delete touches its own store");

    const viewer = await lgClient(server, "t1", ["viewer"]);
    assert.deepEqual((await viewer.store.getItem(ns, "k"))?.value, { owner: "t1" });
    assert.equal((await viewer.store.searchItems(ns)).items.length, 1);
    assert.equal((await viewer.store.listNamespaces({ prefix: ns })).namespaces.length, 1);
    await rejectsWith(viewer.store.putItem(ns, "k2", { no: true }), 403);
    await rejectsWith(viewer.store.deleteItem(ns, "k"), 403);
    assert.ok(await client.store.getItem(ns, "k"));
    const anonymous = await fetch(`${server.url}/store/items?namespace=${ns.join(".")}&key=k`);
    assert.equal(anonymous.status, 401);
  });

  test("crons: create, search (filters, sort, select), count, update, delete; 404 for unknown", async () => {
    const tag = randomUUID();
    const cron = await client.crons.create("echo", {
      schedule: YEARLY,
      input: { message: "yearly" },
      metadata: { tag, kind: "a" },
    });
    assert.match(cron.cron_id, /^[0-9a-f-]{36}$/);
    assert.equal(cron.assistant_id, "echo");
    assert.equal(cron.schedule, YEARLY);
    assert.equal(cron.thread_id, null);
    assert.deepEqual(cron.metadata, { tag, kind: "a" });
    assert.deepEqual(cron.payload, { assistant_id: "echo", input: { message: "yearly" } });
    assert.equal(cron.next_run_date, `${new Date().getUTCFullYear() + 1}-01-01T00:00:00.000Z`);
    // The same schedule on /v1.
    const v1 = await server.request("GET", `/v1/schedules/${cron.cron_id}`);
    assert.equal(v1.status, 200);
    assert.equal(v1.body.cron, YEARLY);

    const second = await client.crons.create("echo-loud", {
      schedule: "0 9 * * 1",
      timezone: "Europe/Paris",
      metadata: { tag, kind: "b" },
    });
    assert.equal((second as { timezone?: string }).timezone, "Europe/Paris");
    const mine = await client.crons.search({ metadata: { tag } });
    assert.deepEqual(
      mine.map((found) => found.cron_id),
      [second.cron_id, cron.cron_id],
      "newest first",
    );
    assert.deepEqual(
      (await client.crons.search({ metadata: { tag }, sortBy: "created_at", sortOrder: "asc" })).map((found) => found.cron_id),
      [cron.cron_id, second.cron_id],
    );
    assert.deepEqual(
      (await client.crons.search({ metadata: { tag }, assistantId: "echo-loud" })).map((found) => found.cron_id),
      [second.cron_id],
    );
    assert.deepEqual(await client.crons.search({ metadata: { tag }, limit: 1, offset: 1, select: ["cron_id", "schedule"] }), [
      { cron_id: cron.cron_id, schedule: YEARLY },
    ]);
    assert.equal(await client.crons.count({ metadata: { tag } }), 2);
    assert.equal(await client.crons.count({ metadata: { tag }, assistantId: "echo" }), 1);

    const paused = await client.crons.update(cron.cron_id, { enabled: false });
    assert.equal(paused.enabled, false);
    assert.equal(paused.next_run_date, null);
    assert.deepEqual(
      (await client.crons.search({ metadata: { tag }, enabled: false })).map((found) => found.cron_id),
      [cron.cron_id],
    );
    const moved = await client.crons.update(cron.cron_id, { enabled: true, schedule: "0 0 1 6 *", input: { message: "june" } });
    assert.equal(moved.schedule, "0 0 1 6 *");
    assert.match(moved.next_run_date!, /-06-01T00:00:00\.000Z$/);
    assert.deepEqual(moved.payload, { assistant_id: "echo", input: { message: "june" } });

    await client.crons.delete(cron.cron_id);
    await client.crons.delete(second.cron_id);
    assert.deepEqual(await client.crons.search({ metadata: { tag } }), []);
    await rejectsWith(client.crons.delete(cron.cron_id), 404);
    await rejectsWith(client.crons.update(randomUUID(), { enabled: false }), 404);
    await rejectsWith(client.crons.create("no-such-assistant", { schedule: YEARLY }), 404);
    await rejectsWith(client.crons.createForThread(randomUUID(), "echo", { schedule: YEARLY }), 404);
  });

  test("crons: what a schedule cannot carry is a 422 naming it", async () => {
    const refused = async (payload: Parameters<Client["crons"]["create"]>[1], field: RegExp) => {
      await assert.rejects(client.crons.create("echo", payload), (error: { status?: number; message?: string }) => {
        assert.equal(error.status, 422, error.message);
        assert.match(error.message ?? "", field);
        return true;
      });
    };
    await refused({ schedule: YEARLY, config: { configurable: { a: 1 } } }, /config/);
    await refused({ schedule: YEARLY, webhook: "http://example.invalid/hook" }, /webhook/);
    await refused({ schedule: YEARLY, interruptBefore: ["echo"], endTime: new Date().toISOString() }, /interrupt_before, end_time/);
    await refused({ schedule: YEARLY, multitaskStrategy: "reject" }, /multitask_strategy/);
    await refused({ schedule: YEARLY, onRunCompleted: "keep" }, /on_run_completed/);
    await refused({ schedule: "not a cron" }, /cron|schedule/i);
    await refused({ schedule: YEARLY, timezone: "Mars/Olympus" }, /Mars/);
    // Empty or default values are accepted.
    const accepted = await client.crons.create("echo", { schedule: YEARLY, config: {}, interruptBefore: [], onRunCompleted: "delete" });
    assert.equal((accepted as { on_run_completed?: string }).on_run_completed, "delete");
    await client.crons.delete(accepted.cron_id);
  });

  test("a thread cron fires: its runs appear in the thread's runs.list with the cron's metadata", async () => {
    const thread = await client.threads.create();
    const tag = randomUUID();
    const cron = await client.crons.createForThread(thread.thread_id, "echo", {
      schedule: EVERY_SECOND,
      input: { message: "tick" },
      metadata: { tag },
      multitaskStrategy: "enqueue",
    });
    assert.equal(cron.thread_id, thread.thread_id);
    assert.deepEqual(
      (await client.crons.search({ threadId: thread.thread_id })).map((found) => found.cron_id),
      [cron.cron_id],
    );
    const fired = await until("a run of the cron on its thread", async () => {
      const runs = await client.runs.list(thread.thread_id, { limit: 100 });
      const mine = runs.filter((run) => run.metadata?.schedule_id === cron.cron_id);
      return mine.length ? mine : undefined;
    });
    await client.crons.delete(cron.cron_id);
    const run = fired.at(-1)!;
    assert.equal(run.metadata?.tag, tag);
    assert.equal(run.assistant_id, "echo");
    assert.match(String(run.metadata?.scheduled_at), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$/);
    // The fired run executes like any other: its values are on the thread.
    const values = (await client.runs.join(thread.thread_id, run.run_id)) as { reply?: string };
    assert.ok(values.reply?.includes("tick"), JSON.stringify(values));
  });

  test("a stateless cron fires runs with its input and metadata (found through /v1)", async () => {
    const cron = await client.crons.create("echo", {
      schedule: EVERY_SECOND,
      input: { message: "stateless tick" },
      metadata: { origin: "lg" },
    });
    const runs = await until("a run of the stateless cron", async () => {
      const listed = await server.request(
        "GET",
        `/v1/runs?limit=100&metadata=${encodeURIComponent(JSON.stringify({ schedule_id: cron.cron_id }))}`,
      );
      return listed.body.length
        ? (listed.body as { thread_id: string | null; input: unknown; metadata: Record<string, unknown> }[])
        : undefined;
    });
    await client.crons.delete(cron.cron_id);
    assert.equal(runs[0]!.thread_id, null);
    assert.deepEqual(runs[0]!.input, { message: "stateless tick" });
    assert.equal(runs[0]!.metadata.origin, "lg");
  });

  test("crons: tenants are isolated; viewers search, operators manage", async () => {
    const cron = await client.crons.create("echo", { schedule: YEARLY, metadata: { owner: "t1" } });
    const stranger = await lgClient(server, "t2", ["operator"]);
    assert.ok((await stranger.crons.search({ limit: 1000 })).every((found) => found.cron_id !== cron.cron_id));
    assert.equal(await stranger.crons.count({ metadata: { owner: "t1" } }), 0);
    await rejectsWith(stranger.crons.delete(cron.cron_id), 404);
    await rejectsWith(stranger.crons.update(cron.cron_id, { enabled: false }), 404);
    const t1Thread = await client.threads.create();
    await rejectsWith(stranger.crons.createForThread(t1Thread.thread_id, "echo", { schedule: YEARLY }), 404);

    const viewer = await lgClient(server, "t1", ["viewer"]);
    assert.ok((await viewer.crons.search({ metadata: { owner: "t1" } })).some((found) => found.cron_id === cron.cron_id));
    assert.ok((await viewer.crons.count({ metadata: { owner: "t1" } })) >= 1);
    await rejectsWith(viewer.crons.create("echo", { schedule: YEARLY }), 403);
    await rejectsWith(viewer.crons.update(cron.cron_id, { enabled: false }), 403);
    await rejectsWith(viewer.crons.delete(cron.cron_id), 403);
    await client.crons.delete(cron.cron_id);
  });
});
