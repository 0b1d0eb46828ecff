import { after, before, describe, test } from "node:test";
import type { StoreOperation } from "@rudder/api";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { ConfigError, DEFAULT_STORE_CONFIG, resolveConfig, type StoreConfig } from "../src/config/config.ts";
import { loadEmbedder } from "../src/store/embedder.ts";
import { TenantStore } from "../src/store/langgraph-store.ts";
import { StoreService } from "../src/store/service.ts";
import { StoreSweeper } from "../src/store/sweeper.ts";
import { createTestDatabase, TEST_DRIVER, type TestDatabase } from "./support/db.ts";
import { assertProblem } from "./support/problem.ts";
import { startTestServer, type RequestOptions, type TestServer } from "./support/server.ts";

const EMBED_FIXTURE = fileURLToPath(new URL("./fixtures/embed.ts", import.meta.url));
const SEMANTIC: StoreConfig = { ...DEFAULT_STORE_CONFIG, index: { file: EMBED_FIXTURE, exportName: "embed", dims: 4, fields: ["text"] } };

type Op = Record<string, unknown>;

/** POST /v1/store/batch as `tenant` (default t1, admin). */
async function batch(server: TestServer, operations: Op[], options: RequestOptions = {}) {
  return server.request("POST", "/v1/store/batch", { ...options, body: { operations } });
}
async function results(server: TestServer, operations: Op[], options: RequestOptions = {}) {
  const response = await batch(server, operations, options);
  assert.equal(response.status, 200, JSON.stringify(response.body));
  return response.body.results as unknown[];
}
const put = (namespace: string[], key: string, value: Op, extra: Op = {}): Op => ({ kind: "put", namespace, key, value, ...extra });
const get = (namespace: string[], key: string, extra: Op = {}): Op => ({ kind: "get", namespace, key, ...extra });
const search = (namespace: string[], extra: Op = {}): Op => ({ kind: "search", namespace, ...extra });
const keys = (hits: unknown) => (hits as { key: string }[]).map((hit) => hit.key);

describe(`store (${TEST_DRIVER})`, () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer();
  });
  after(() => server.close());

  test("put, get, replace, delete: item shape, created_at kept, results in order", async () => {
    const [putResult, item] = await results(server, [put(["users", "ada"], "prefs", { theme: "dark" }), get(["users", "ada"], "prefs")]);
    assert.equal(putResult, null);
    const first = item as { namespace: string[]; key: string; value: Op; created_at: string; updated_at: string };
    assert.deepEqual([first.namespace, first.key, first.value], [["users", "ada"], "prefs", { theme: "dark" }]);
    assert.ok(Date.parse(first.created_at) > 0 && first.created_at === first.updated_at);
    const [, replaced] = await results(server, [put(["users", "ada"], "prefs", { theme: "light" }), get(["users", "ada"], "prefs")]);
    const second = replaced as typeof first;
    assert.deepEqual(second.value, { theme: "light" });
    assert.equal(second.created_at, first.created_at, "a replace keeps created_at");
    assert.ok(second.updated_at > first.updated_at);
    const [deleted, gone, deletedAgain] = await results(server, [
      { kind: "delete", namespace: ["users", "ada"], key: "prefs" },
      get(["users", "ada"], "prefs"),
      { kind: "delete", namespace: ["users", "ada"], key: "prefs" },
    ]);
    assert.deepEqual([deleted, gone, deletedAgain], [null, null, null], "deleting a missing item is not an error");
  });

  test("a batch is one transaction: later operations see earlier writes; a bad operation writes nothing", async () => {
    const ns = ["batch", "visible"];
    const [, seen, found, , after] = await results(server, [
      put(ns, "k", { n: 1 }),
      get(ns, "k"),
      search(ns),
      { kind: "delete", namespace: ns, key: "k" },
      get(ns, "k"),
    ]);
    assert.deepEqual((seen as { value: Op }).value, { n: 1 });
    assert.deepEqual(keys(found), ["k"]);
    assert.equal(after, null);

    const refused = await batch(server, [
      put(["batch", "atomic"], "a", { n: 1 }),
      put(["batch", "atomic"], "b", { n: 2 }),
      search(["batch"], { filter: { n: { $regex: "x" } } }),
    ]);
    assertProblem(refused, 422, "validation_error");
    assert.match(refused.body.detail, /operations\/2\/filter/);
    const [left] = await results(server, [search(["batch", "atomic"])]);
    assert.deepEqual(left, [], "nothing of the refused batch was written");
  });

  test("validation: every schema fault is a 422 naming the operation's index and field", async () => {
    const cases: [Op[] | unknown, RegExp][] = [
      [[], /operations/],
      [[{ kind: "upsert", namespace: ["a"], key: "k" }], /operations\/0.*kind/],
      [[get(["a"], "k"), put(["a"], "k", { x: 1 }, { colour: "red" })], /operations\/1/],
      [[get(["a"], "k"), get(["a"], "")], /operations\/1\/key/],
      [[put([], "k", { x: 1 })], /operations\/0\/namespace/],
      [[put(["a/b"], "k", { x: 1 })], /operations\/0\/namespace\/0/],
      [[put(["a", ""], "k", { x: 1 })], /operations\/0\/namespace\/1/],
      [[put(["a"], "k", null as unknown as Op)], /operations\/0\/value/],
      [[put(["a"], "k", [1, 2] as unknown as Op)], /operations\/0\/value/],
      [[put(["a"], "k", { x: 1 }, { ttl: -1 })], /operations\/0\/ttl/],
      [[put(["a"], "k", { x: 1 }, { index: true })], /operations\/0\/index/],
      [[search(["a"], { limit: 1001 })], /operations\/0\/limit/],
      [[search(["a"], { filter: { n: { $gt: { nested: 1 } } } })], /operations\/0\/filter\/n\/\$gt/],
      [[search(["a"], { filter: { "": 1 } })], /operations\/0\/filter: a field name must not be empty/],
      [[{ kind: "list_namespaces", max_depth: 0 }], /operations\/0\/max_depth/],
      [
        [put(["a"], "x".repeat(1024), { x: 1 }), put(["é".repeat(256)], "é".repeat(1000), { x: 1 })],
        /operations\/1: namespace and key together/,
      ],
    ];
    for (const [operations, detail] of cases) {
      const response = await batch(server, operations as Op[]);
      assertProblem(response, 422, "validation_error");
      assert.match(response.body.detail, detail, JSON.stringify(operations).slice(0, 200));
    }
    const tooMany = await batch(
      server,
      Array.from({ length: 1001 }, (_, i) => get(["a"], `k${i}`)),
    );
    assertProblem(tooMany, 422, "validation_error");
    const notArray = await server.request("POST", "/v1/store/batch", { body: { operations: {} } });
    assertProblem(notArray, 422, "validation_error");
  });

  test("search: namespace prefix, newest first, paging, filters", async () => {
    // One batch per put: items of one transaction share its timestamp.
    for (const operation of [
      put(["shop"], "root", { kind: "root", price: 0 }),
      put(["shop", "fruit"], "apple", { kind: "fruit", price: 3, colour: "red", tag: "2024-01-05" }),
      put(["shop", "fruit"], "pear", { kind: "fruit", price: 5, colour: "green", tag: "2024-03-01" }),
      put(["shop", "fruit", "exotic"], "mango", { kind: "fruit", price: 9, colour: "yellow" }),
      put(["shopping"], "list", { kind: "list", price: 1 }),
    ]) {
      await results(server, [operation]);
    }
    const [all, fruit, page1, page2, eq, ne, range, strings, none] = await results(server, [
      search(["shop"]),
      search(["shop", "fruit"]),
      search(["shop"], { limit: 2 }),
      search(["shop"], { limit: 2, offset: 2 }),
      search(["shop"], { filter: { colour: "red" } }),
      search(["shop", "fruit"], { filter: { colour: { $ne: "red" } } }),
      search(["shop"], { filter: { price: { $gte: 3, $lt: 9 } } }),
      search(["shop"], { filter: { tag: { $gt: "2024-02-01" } } }),
      search(["shop"], { filter: { price: { $gt: 100 } } }),
    ]);
    assert.deepEqual(keys(all), ["mango", "pear", "apple", "root"], "newest first; ['shopping'] is not under ['shop']");
    for (const hit of all as { score: unknown }[]) assert.equal(hit.score, null, "no query: score is null");
    assert.deepEqual(keys(fruit), ["mango", "pear", "apple"]);
    assert.deepEqual([...keys(page1), ...keys(page2)], keys(all));
    assert.deepEqual(keys(eq), ["apple"]);
    assert.deepEqual(keys(ne), ["mango", "pear"]);
    assert.deepEqual(keys(range).sort(), ["apple", "pear"]);
    assert.deepEqual(keys(strings), ["pear"]);
    assert.deepEqual(none, []);
    const [everything] = await results(server, [search([], { limit: 1000 })]);
    assert.ok(keys(everything).includes("list"), "[] is the whole store");

    const viaGet = await server.request(
      "GET",
      `/v1/store/search?namespace=shop/fruit&filter=${encodeURIComponent('{"price":{"$lte":5}}')}&limit=10`,
    );
    assert.equal(viaGet.status, 200);
    assert.deepEqual(keys(viaGet.body), ["pear", "apple"]);
    assertProblem(await server.request("GET", "/v1/store/search?namespace=shop//fruit"), 422, "validation_error");
    assertProblem(await server.request("GET", "/v1/store/search?filter=[1]"), 422, "validation_error");
    assertProblem(await server.request("GET", "/v1/store/search?limit=0"), 422, "validation_error");
    assertProblem(await server.request("GET", "/v1/store/search?colour=red"), 422, "validation_error");
  });

  test("full-text search: only matching items, ranked, with a numeric score; index false and field lists", async () => {
    await results(server, [
      put(["notes"], "a", { text: "The user prefers dark mode in every editor" }),
      put(["notes"], "b", { text: "Dark roast coffee; dark chocolate; dark mode on the phone" }),
      put(["notes"], "c", { text: "Meeting on Tuesday about the budget" }),
      put(["notes"], "hidden", { text: "dark secrets" }, { index: false }),
      put(["notes"], "fields", { title: "dark", body: "unrelated words" }, { index: ["body"] }),
    ]);
    const [hits] = await results(server, [search(["notes"], { query: "dark mode" })]);
    const ranked = hits as { key: string; score: number }[];
    assert.deepEqual(keys(ranked).sort(), ["a", "b"], "only matching items; index:false and unindexed fields are not found by text");
    assert.equal(ranked[0]!.key, "b", "more occurrences rank higher");
    assert.ok(ranked.every((hit) => typeof hit.score === "number" && hit.score > 0));
    assert.ok(ranked[0]!.score >= ranked[1]!.score);
    const [byBody] = await results(server, [search(["notes"], { query: "unrelated" })]);
    assert.deepEqual(keys(byBody), ["fields"]);
    const viaGet = await server.request("GET", `/v1/store/search?namespace=notes&query=${encodeURIComponent("budget meeting")}`);
    assert.deepEqual(keys(viaGet.body), ["c"]);
  });

  test("a big value whose text PostgreSQL could not index whole is stored whole; its text is indexed up to a bound", async () => {
    // Hyphenated words index as the whole word and each part: 850 KB of them need a tsvector of
    // over 1 MiB, which PostgreSQL refuses (the put was a 500).
    const words = Array.from({ length: 42_000 }, (_, i) => `w${i}-x${i}-y${i}`);
    const text = words.join(" ");
    assert.ok(Buffer.byteLength(text) > 800_000 && Buffer.byteLength(text) < 1_000_000);
    assert.equal((await batch(server, [put(["big"], "hyphens", { text })])).status, 200);
    const [item] = await results(server, [{ kind: "get", namespace: ["big"], key: "hyphens" }]);
    assert.equal((item as { value: { text: string } }).value.text, text, "stored whole");
    const [early, late] = await results(server, [
      search(["big"], { query: "w10-x10-y10" }),
      search(["big"], { query: "w41999-x41999-y41999" }),
    ]);
    assert.deepEqual(keys(early), ["hyphens"], "found by a word of the indexed part");
    assert.deepEqual(keys(late), [], "a word past the bound is not indexed");
  });

  test("list_namespaces: prefix, suffix, wildcards, max_depth, paging", async () => {
    const t = { tenant: "ns-tenant" };
    await results(
      server,
      [
        put(["a", "b", "c"], "k", { x: 1 }),
        put(["a", "b", "d"], "k", { x: 1 }),
        put(["a", "x"], "k", { x: 1 }),
        put(["z", "b", "c"], "k", { x: 1 }),
      ],
      t,
    );
    const list = (extra: Op) => ({ kind: "list_namespaces", ...extra });
    const [all, prefixed, suffixed, wild, depth, paged] = await results(
      server,
      [
        list({}),
        list({ prefix: ["a", "b"] }),
        list({ suffix: ["c"] }),
        list({ prefix: ["*", "b"] }),
        list({ max_depth: 1 }),
        list({ limit: 2, offset: 1 }),
      ],
      t,
    );
    assert.deepEqual(all, [
      ["a", "b", "c"],
      ["a", "b", "d"],
      ["a", "x"],
      ["z", "b", "c"],
    ]);
    assert.deepEqual(prefixed, [
      ["a", "b", "c"],
      ["a", "b", "d"],
    ]);
    assert.deepEqual(suffixed, [
      ["a", "b", "c"],
      ["z", "b", "c"],
    ]);
    assert.deepEqual(wild, [
      ["a", "b", "c"],
      ["a", "b", "d"],
      ["z", "b", "c"],
    ]);
    assert.deepEqual(depth, [["a"], ["z"]]);
    assert.deepEqual(paged, [
      ["a", "b", "d"],
      ["a", "x"],
    ]);
  });

  test("TTL: an expired item is gone from every read at once; reads refresh; the sweeper deletes; defaults apply", async () => {
    const t = { tenant: "ttl-tenant" };
    const db = server.database.db;
    await results(
      server,
      [put(["ttl"], "short", { text: "ephemeral note" }, { ttl: 10 }), put(["ttl"], "forever", { text: "ephemeral too" })],
      t,
    );
    const expiry = async (key: string) =>
      (
        await db.query<{ e: string | null }>("select expires_at::text as e from store_items where tenant_id = $1 and key = $2", [
          "ttl-tenant",
          key,
        ])
      )[0]?.e;
    assert.equal(await expiry("forever"), null, "no ttl and no default: never expires");
    // Bring the expiry close, then read with and without refresh.
    await db.query("update store_items set expires_at = now() + interval '1 minute' where tenant_id = $1 and key = 'short'", [
      "ttl-tenant",
    ]);
    const close = await expiry("short");
    await results(server, [get(["ttl"], "short", { refresh_ttl: false })], t);
    assert.equal(await expiry("short"), close, "refresh_ttl false leaves the expiry");
    await results(server, [get(["ttl"], "short")], t);
    const refreshed = (
      await db.query<{ left: number }>(
        "select extract(epoch from expires_at - now())::float8 as left from store_items where key = 'short' and tenant_id = $1",
        ["ttl-tenant"],
      )
    )[0]!.left;
    assert.ok(refreshed > 9 * 60, `refresh_on_read restarts the 10 minutes (left ${refreshed}s)`);
    await db.query("update store_items set expires_at = now() + interval '1 minute' where tenant_id = $1 and key = 'short'", [
      "ttl-tenant",
    ]);
    await results(server, [search(["ttl"], { query: "ephemeral" })], t);
    assert.notEqual(await expiry("short"), close, "a search refreshes what it returns");

    await db.query("update store_items set expires_at = now() - interval '1 second' where tenant_id = $1 and key = 'short'", [
      "ttl-tenant",
    ]);
    const [item, listed, found, spaces] = await results(
      server,
      [get(["ttl"], "short"), search(["ttl"]), search(["ttl"], { query: "ephemeral" }), { kind: "list_namespaces", prefix: ["ttl"] }],
      t,
    );
    assert.equal(item, null);
    assert.deepEqual(keys(listed), ["forever"]);
    assert.deepEqual(keys(found), ["forever"]);
    assert.deepEqual(spaces, [["ttl"]]);
    // A put over an expired, unswept item makes a new item.
    await db.query("update store_items set expires_at = now() - interval '1 second' where tenant_id = $1 and key = 'forever'", [
      "ttl-tenant",
    ]);
    await new StoreSweeper(db, 60_000, () => {}).sweep();
    const rows = await db.query<{ key: string }>("select key from store_items where tenant_id = $1", ["ttl-tenant"]);
    assert.deepEqual(rows, [], "the sweeper deleted both expired rows");

    const withDefault = await startTestServer({
      database: server.database,
      worker: false,
      config: { store: { ...DEFAULT_STORE_CONFIG, defaultTtl: 5, refreshOnRead: false } },
    });
    try {
      await results(withDefault, [put(["ttl"], "d", { x: 1 }), put(["ttl"], "none", { x: 1 }, { ttl: null })], t);
      const minutes = await db.query<{ key: string; ttl_minutes: number | null }>(
        "select key, ttl_minutes from store_items where tenant_id = $1 order by key",
        ["ttl-tenant"],
      );
      assert.deepEqual(minutes, [
        { key: "d", ttl_minutes: 5 },
        { key: "none", ttl_minutes: null },
      ]);
    } finally {
      await withDefault.server.close();
    }
  });

  test("sweepers in parallel delete each expired row once", async () => {
    const db = server.database.db;
    await results(
      server,
      Array.from({ length: 50 }, (_, i) => put(["sweep"], `k${i}`, { i }, { ttl: 1 })),
      { tenant: "sweep-tenant" },
    );
    await db.query("update store_items set expires_at = now() - interval '1 second' where tenant_id = 'sweep-tenant'");
    const counts = await Promise.all([1, 2, 3].map(() => new StoreSweeper(db, 60_000, () => {}).sweep()));
    const swept = (await db.query<{ n: number }>("select count(*)::int as n from store_items where tenant_id = 'sweep-tenant'"))[0]!.n;
    assert.equal(swept, 0);
    assert.ok(counts.reduce((a, b) => a + b, 0) >= 50);
  });

  test("roles: viewer gets, searches and lists; a batch with put or delete needs operator", async () => {
    const viewer: RequestOptions = { tenant: "roles", roles: ["viewer"] };
    await results(server, [put(["r"], "k", { x: 1 })], { tenant: "roles", roles: ["operator"] });
    const reads = await results(server, [get(["r"], "k"), search(["r"]), { kind: "list_namespaces" }], viewer);
    assert.deepEqual((reads[0] as { value: Op }).value, { x: 1 });
    assertProblem(await batch(server, [get(["r"], "k"), put(["r"], "k2", { x: 2 })], viewer), 403, "forbidden");
    assertProblem(await batch(server, [{ kind: "delete", namespace: ["r"], key: "k" }], viewer), 403, "forbidden");
    assert.equal((await server.request("GET", "/v1/store/search?namespace=r", viewer)).status, 200);
    const [left, missing] = await results(server, [get(["r"], "k"), get(["r"], "k2")], viewer);
    assert.ok(left !== null && missing === null, "the refused batches wrote nothing");
    assertProblem(await batch(server, [search(["r"])], { token: null }), 401, "unauthorized");
  });

  test("tenant isolation: another tenant's items are never seen or touched, by any operation", async () => {
    const a = { tenant: "tenant-a" };
    const b = { tenant: "tenant-b" };
    await results(server, [put(["shared", "ns"], "k", { owner: "a", text: "alpha secret" })], a);
    await results(server, [put(["shared", "ns"], "k", { owner: "b", text: "bravo secret" }), put(["only-b"], "x", { text: "secret" })], b);
    const [got, listed, searched, spaces] = await results(
      server,
      [get(["shared", "ns"], "k"), search([], { limit: 1000 }), search([], { query: "secret", limit: 1000 }), { kind: "list_namespaces" }],
      a,
    );
    assert.equal((got as { value: Op }).value.owner, "a");
    assert.deepEqual(
      (listed as { value: Op }[]).map((hit) => hit.value.owner),
      ["a"],
    );
    assert.deepEqual(
      (searched as { value: Op }[]).map((hit) => hit.value.owner),
      ["a"],
    );
    assert.deepEqual(spaces, [["shared", "ns"]]);
    const viaGet = await server.request("GET", "/v1/store/search?query=secret", a);
    assert.deepEqual(keys(viaGet.body), ["k"]);
    // A's delete of the same address leaves B's item.
    await results(
      server,
      [
        { kind: "delete", namespace: ["shared", "ns"], key: "k" },
        { kind: "delete", namespace: ["only-b"], key: "x" },
      ],
      a,
    );
    const [bItem, bOther] = await results(server, [get(["shared", "ns"], "k"), get(["only-b"], "x")], b);
    assert.equal((bItem as { value: Op }).value.owner, "b");
    assert.notEqual(bOther, null);
  });

  test("the OpenAPI document has both routes, with the operation kinds", async () => {
    const openapi = (await server.request("GET", "/openapi.json", { token: null })).body;
    assert.ok(openapi.paths["/v1/store/batch"]?.post, "POST /v1/store/batch");
    assert.ok(openapi.paths["/v1/store/search"]?.get, "GET /v1/store/search");
    const text = JSON.stringify(openapi.paths["/v1/store/batch"].post);
    for (const kind of ["put", "get", "delete", "search", "list_namespaces"])
      assert.ok(text.includes(`"const":"${kind}"`) || text.includes(`"enum":["${kind}"]`), kind);
  });

  test("graph code and HTTP share the tenant's store; a graph never reaches another tenant's", async () => {
    const run = async (tenant: string, input: Op) => {
      const created = await server.request("POST", "/v1/runs", { tenant, body: { assistant_id: "memory", input } });
      assert.equal(created.status, 202, JSON.stringify(created.body));
      const joined = await server.request("GET", `/v1/runs/${created.body.run_id}/join?timeout=30`, { tenant });
      assert.equal(joined.body.status, "succeeded", JSON.stringify(joined.body.error));
      return joined.body.output as { saved: string | null; recalled: string[] };
    };
    // A node's store.put, read back over HTTP.
    const saved = await run("graph-a", { user_id: "ada", message: "remember I prefer dark mode" });
    assert.equal(saved.saved, "I prefer dark mode");
    const [hits] = await results(server, [search(["memories", "ada"])], { tenant: "graph-a" });
    assert.deepEqual(
      (hits as { value: Op }[]).map((hit) => hit.value.text),
      ["I prefer dark mode"],
    );
    // An HTTP put, read by a node (on another thread: a stateless run).
    await results(server, [put(["memories", "ada"], "http", { text: "my cat is called Mog" })], { tenant: "graph-a" });
    const recalled = await run("graph-a", { user_id: "ada", message: "what is my cat called?" });
    assert.deepEqual(recalled.recalled, ["my cat is called Mog"]);
    // Tenant B's graph, same user id and namespace, sees nothing of A's; B's HTTP reads neither.
    const other = await run("graph-b", { user_id: "ada", message: "which mode do I prefer?" });
    assert.deepEqual(other.recalled, []);
    const [bHits] = await results(server, [search(["memories"])], { tenant: "graph-b" });
    assert.deepEqual(bHits, []);
    const mine = await run("graph-a", { user_id: "ada", message: "which mode do I prefer?" });
    assert.deepEqual(mine.recalled, ["I prefer dark mode"]);
  });

  test("graph code is held to the API's address rules: no segment with a /, none too long; the run fails, nothing is stored or aliased", async () => {
    const tenant = "graph-rules";
    const remember = async (userId: string) => {
      const created = await server.request("POST", "/v1/runs", {
        tenant,
        body: { assistant_id: "memory", input: { user_id: userId, message: "remember my hint is blue" } },
      });
      assert.equal(created.status, 202, JSON.stringify(created.body));
      const joined = await server.request("GET", `/v1/runs/${created.body.run_id}/join?timeout=30`, { tenant });
      return joined.body as { status: string; error?: { message?: string } };
    };
    // ["memories", "alice/x"] would be stored as ["memories", "alice", "x"]: another user's namespace.
    const slashed = await remember("alice/x");
    assert.notEqual(slashed.status, "succeeded");
    assert.match(JSON.stringify(slashed.error), /cannot contain \\"\/\\"/);
    const long = await remember("u".repeat(257));
    assert.notEqual(long.status, "succeeded");
    assert.match(JSON.stringify(long.error), /at most 256 characters/);
    const [everything, namespaces] = await results(server, [search([]), { kind: "list_namespaces" }], { tenant });
    assert.deepEqual(everything, []);
    assert.deepEqual(namespaces, []);
    // At the limit it is stored, and the API can name it.
    const edge = await remember("u".repeat(256));
    assert.equal(edge.status, "succeeded", JSON.stringify(edge.error));
    const [hits] = await results(server, [search(["memories", "u".repeat(256)])], { tenant });
    assert.equal((hits as unknown[]).length, 1);
  });
});

describe(`store semantic search (${TEST_DRIVER})`, () => {
  const seed = [
    put(["docs"], "pasta", { text: "I had pasta for dinner" }),
    put(["docs"], "tennis", { text: "We played tennis all afternoon" }),
    put(["docs"], "jazz", { text: "A jazz concert with a piano trio" }),
    put(["docs"], "mixed", { text: "Sushi lunch before the football match" }),
    put(["docs"], "unindexed", { text: "pizza pizza pizza" }, { index: false }),
  ];

  /** Puts the seed, then searches by meaning: "pizza" shares no word with "pasta" yet ranks it first. */
  async function rankingOn(server: TestServer) {
    await results(server, seed);
    const [food, sport, filtered] = await results(server, [
      search(["docs"], { query: "pizza" }),
      search(["docs"], { query: "soccer goal" }),
      search(["docs"], { query: "pizza", filter: { text: { $ne: "I had pasta for dinner" } } }),
    ]);
    return {
      food: food as { key: string; score: number }[],
      sport: sport as { key: string; score: number }[],
      filtered: filtered as { key: string }[],
    };
  }

  function assertRanking({ food, sport, filtered }: Awaited<ReturnType<typeof rankingOn>>) {
    assert.deepEqual(keys(food).slice(0, 2), ["pasta", "mixed"], "food first: pasta (all food), then mixed (half food)");
    assert.ok(food[0]!.score > food[1]!.score && food[1]!.score > food[2]!.score);
    assert.ok(Math.abs(food[0]!.score - 1) < 1e-6, "cosine similarity of parallel vectors is 1");
    assert.ok(!keys(food).includes("unindexed"), "index:false has no embedding and its text is not indexed");
    assert.deepEqual(keys(sport).slice(0, 2), ["tennis", "mixed"]);
    assert.equal(keys(filtered)[0], "mixed");
  }

  test("pgvector path (PGlite ships it) or exact scan (PostgreSQL without it): ranked by meaning", async () => {
    const server = await startTestServer({ worker: false, config: { store: SEMANTIC } });
    try {
      const path = await server.server.store.semanticPath();
      // PGlite always has pgvector; the CI PostgreSQL has not (a PostgreSQL with it takes that path).
      if (TEST_DRIVER === "pglite") assert.equal(path, "pgvector");
      assertRanking(await rankingOn(server));
    } finally {
      await server.close();
    }
  });

  test("exact-scan path, on any database (pgvector dropped): the same ranking", async () => {
    const database = await createTestDatabase();
    await database.db.exec("drop extension if exists vector");
    const server = await startTestServer({ database, worker: false, config: { store: SEMANTIC } });
    try {
      assert.equal(await server.server.store.semanticPath(), "exact-scan");
      assertRanking(await rankingOn(server));
    } finally {
      await server.close();
    }
  });

  const keyScores = (hits: unknown) => (hits as { key: string; score: number }[]).map((hit) => ({ key: hit.key, score: hit.score }));

  /** A zero vector (the fixture embeds a text with no topic word as one) in the data and as the query. */
  async function zeroVectorsOn(server: TestServer) {
    await results(server, [...seed, put(["docs"], "blank", { text: "nothing at all here" })]);
    // Two searches in one batch: its first semantic search runs inside the batch's transaction.
    const [food, blankQuery] = await results(server, [search(["docs"], { query: "pizza" }), search(["docs"], { query: "hello there" })]);
    // Graph code reads the same search through LangGraph's store.
    const graphHits = await new TenantStore(server.server.store, "t1").search(["docs"], { query: "pizza", limit: 10 });
    return {
      food: keyScores(food),
      blankQuery: keyScores(blankQuery),
      graph: graphHits.map((hit) => ({ key: hit.key, score: hit.score! })),
    };
  }

  test("a zero vector (an item's or the query's) has similarity 0 on both paths: never NaN, never a 500, never ranked first", async () => {
    const answers = [];
    for (const dropPgvector of [false, true]) {
      const database = await createTestDatabase();
      if (dropPgvector) await database.db.exec("drop extension if exists vector");
      const server = await startTestServer({ database, worker: false, config: { store: SEMANTIC } });
      try {
        if (dropPgvector) assert.equal(await server.server.store.semanticPath(), "exact-scan");
        const answer = await zeroVectorsOn(server);
        assert.equal(answer.food[0]!.key, "pasta");
        assert.equal(answer.food.find((hit) => hit.key === "blank")!.score, 0);
        assert.ok(answer.blankQuery.length > 0);
        for (const hit of [...answer.food, ...answer.blankQuery, ...answer.graph])
          assert.ok(Number.isFinite(hit.score), JSON.stringify(hit));
        assert.ok(answer.blankQuery.every((hit) => hit.score === 0));
        assert.deepEqual(answer.graph, answer.food);
        answers.push(answer);
      } finally {
        await server.close();
      }
    }
    // The same answer whichever path ranked it (scores to float precision: pgvector computes in real).
    const rounded = (hits: { key: string; score: number }[]) => hits.map((hit) => [hit.key, Math.round(hit.score * 1e5)]);
    assert.deepEqual(rounded(answers[0]!.food), rounded(answers[1]!.food));
    assert.deepEqual(rounded(answers[0]!.blankQuery), rounded(answers[1]!.blankQuery));
  });

  test("an embedder that fails makes the batch a 503 (retryable) and writes nothing", async () => {
    const server = await startTestServer({ worker: false, config: { store: SEMANTIC } });
    try {
      const failed = await batch(server, [put(["down"], "ok", { text: "pasta" }), put(["down"], "bad", { text: "EMBEDDER_DOWN" })]);
      assertProblem(failed, 503, "unavailable");
      assert.ok(failed.headers.get("retry-after"));
      assertProblem(await batch(server, [search(["down"], { query: "EMBEDDER_DOWN" })]), 503, "unavailable");
      const [left] = await results(server, [search(["down"])]);
      assert.deepEqual(left, []);
    } finally {
      await server.close();
    }
  });

  test("items put before an embedder was configured are still found by text, after the embedded ones", async () => {
    const plain = await startTestServer({ worker: false });
    try {
      await results(plain, [put(["late"], "old", { text: "pizza recipe from grandma" })]);
      const semantic = await startTestServer({ database: plain.database, worker: false, config: { store: SEMANTIC } });
      try {
        await results(semantic, [put(["late"], "new", { text: "pasta dinner" })]);
        const [hits] = await results(semantic, [search(["late"], { query: "pizza recipe" })]);
        assert.deepEqual(keys(hits), ["new", "old"]);
        assert.ok((hits as { score: number }[]).every((hit) => typeof hit.score === "number"));
      } finally {
        await semantic.server.close();
      }
    } finally {
      await plain.close();
    }
  });
});

describe(`store batches in parallel (${TEST_DRIVER}; on PostgreSQL, many connections)`, () => {
  let database: TestDatabase;
  let service: StoreService;
  before(async () => {
    database = await createTestDatabase();
    service = new StoreService(database.db, { defaultTtl: null, refreshOnRead: true });
  });
  after(() => database.drop());

  test("batches writing the same items in different orders never deadlock, and keep their order and answers", async () => {
    const tenant = "locks";
    const keys = ["k1", "k2", "k3", "k4"];
    const putAll = (order: string[], v: string, extra: Op = {}) =>
      order.map((key) => ({ kind: "put", namespace: ["dl"], key, value: { v }, ...extra }) as StoreOperation);
    for (let round = 0; round < 8; round++) {
      // New items (round 0) and existing ones (the rest); with TTLs, reads refresh rows others are writing.
      const batches: StoreOperation[][] = [];
      for (let i = 0; i < 6; i++) {
        batches.push(putAll(keys, `a${i}`, { ttl: 60 }), putAll([...keys].reverse(), `b${i}`, { ttl: 60 }));
        batches.push([
          { kind: "search", namespace: ["dl"], refresh_ttl: true },
          ...putAll(["k3", "k1"], `c${i}`),
          { kind: "get", namespace: ["dl"], key: "k2", refresh_ttl: true },
          { kind: "delete", namespace: ["dl"], key: "k4" },
        ]);
        batches.push([{ kind: "get", namespace: ["dl"], key: "k4", refresh_ttl: true }, ...putAll(["k4", "k2"], `d${i}`)]);
      }
      const settled = await Promise.allSettled(batches.map((operations) => service.batch(tenant, operations)));
      const failures = settled.flatMap((result) => (result.status === "rejected" ? [String(result.reason)] : []));
      assert.deepEqual(failures, [], `round ${round}`);
    }
    // The operations still run in the batch's order (a later one sees an earlier one's write), with answers in that order.
    const answers = await service.batch(tenant, [
      { kind: "put", namespace: ["dl"], key: "k2", value: { v: "first" } },
      { kind: "get", namespace: ["dl"], key: "k2" },
      { kind: "put", namespace: ["dl"], key: "k1", value: { v: "second" } },
      { kind: "delete", namespace: ["dl"], key: "k2" },
      { kind: "get", namespace: ["dl"], key: "k2" },
      { kind: "get", namespace: ["dl"], key: "k1" },
    ]);
    assert.deepEqual(
      answers.map((answer) => (answer === null ? null : (answer as { value: unknown }).value)),
      [null, { v: "first" }, null, null, null, { v: "second" }],
    );
  });
});

describe("store configuration", () => {
  const configWith = (store: unknown) => {
    const dir = mkdtempSync(join(tmpdir(), "rudder-store-config-"));
    const file = join(dir, "rudder.json");
    writeFileSync(file, JSON.stringify({ graphs: {}, store }));
    return () => resolveConfig({ config: file }, {}).store;
  };

  test("store.index and store.ttl resolve; defaults apply; bad shapes stop startup with a ConfigError", async () => {
    assert.deepEqual(configWith(undefined)(), DEFAULT_STORE_CONFIG);
    const resolved = configWith({ index: { embed: "./embed.ts:embed", dims: 8 }, ttl: { default_ttl: 1.5, refresh_on_read: false } })();
    assert.deepEqual(
      [
        resolved.index?.exportName,
        resolved.index?.dims,
        resolved.index?.fields,
        resolved.defaultTtl,
        resolved.refreshOnRead,
        resolved.sweepIntervalMinutes,
      ],
      ["embed", 8, ["$"], 1.5, false, 60],
    );
    assert.ok(resolved.index?.file.endsWith("/embed.ts"));
    for (const bad of [
      "x",
      { index: { embed: "./e.ts:e", dims: 0 } },
      { index: { embed: "", dims: 4 } },
      { index: { embed: "./e.ts:e", dims: 4, fields: [] } },
      { ttl: { default_ttl: -1 } },
      { ttl: { refresh_on_read: "yes" } },
      { ttl: { sweep_interval_minutes: 0 } },
    ]) {
      assert.throws(configWith(bad), ConfigError, JSON.stringify(bad));
    }
    await assert.rejects(loadEmbedder({ file: EMBED_FIXTURE, exportName: "DIMS", dims: 4, fields: ["$"] }), ConfigError);
    await assert.rejects(loadEmbedder({ file: "/nonexistent/embed.ts", exportName: "embed", dims: 4, fields: ["$"] }), ConfigError);
    const embedder = await loadEmbedder({ file: EMBED_FIXTURE, exportName: "embed", dims: 4, fields: ["$"] });
    assert.deepEqual(await embedder.embedQuery("pizza and jazz"), [1, 0, 1, 0]);
  });
});
