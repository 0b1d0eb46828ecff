import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startTestServer, type TestServer } from "./support/server.ts";

describe("assistants", () => {
  let server: TestServer;
  const developer = { tenant: "acme", roles: ["developer" as const] };
  before(async () => {
    server = await startTestServer();
  });
  after(() => server.close());

  test("every configured graph has a default assistant whose id is the graph id; declared ones follow", async () => {
    const listed = await server.request("GET", "/v1/assistants", { roles: ["viewer"] });
    assert.equal(listed.status, 200);
    assert.deepEqual(
      listed.body.slice(0, 4).map((a: { assistant_id: string }) => a.assistant_id),
      ["echo", "approval", "memory", "echo-loud"],
    );
    const echo = await server.request("GET", "/v1/assistants/echo", { roles: ["viewer"] });
    assert.equal(echo.body.graph_id, "echo");
    const loud = await server.request("GET", "/v1/assistants/echo-loud");
    assert.deepEqual(loud.body.metadata, { mcp_expose: true, mcp_tool_name: "loud_echo" });
    assert.deepEqual(loud.body.context, { suffix: "!!!" });
  });

  test("create, get, patch, delete a tenant's own assistant", async () => {
    const created = await server.request("POST", "/v1/assistants", {
      ...developer,
      body: { graph_id: "echo", name: "Shouty", config: { recursion_limit: 5 }, metadata: { mcp_expose: true, name: "shout" } },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.assistant_id;
    assert.match(id, /^[0-9a-f-]{36}$/);
    assert.deepEqual(
      { ...created.body, assistant_id: undefined, created_at: undefined, updated_at: undefined },
      {
        assistant_id: undefined,
        graph_id: "echo",
        name: "Shouty",
        description: null,
        config: { recursion_limit: 5 },
        context: {},
        metadata: { mcp_expose: true, name: "shout" },
        created_at: undefined,
        updated_at: undefined,
      },
    );
    const patched = await server.request("PATCH", `/v1/assistants/${id}`, {
      ...developer,
      body: { description: "loud", context: { suffix: "?" } },
    });
    assert.equal(patched.status, 200);
    assert.equal(patched.body.name, "Shouty", "fields not given keep their values");
    assert.deepEqual([patched.body.description, patched.body.context], ["loud", { suffix: "?" }]);
    const listed = await server.request("GET", "/v1/assistants?graph_id=echo", developer);
    assert.ok(listed.body.some((a: { assistant_id: string }) => a.assistant_id === id));
    assert.ok(listed.body.every((a: { graph_id: string }) => a.graph_id === "echo"));
    const byMeta = await server.request("GET", `/v1/assistants?metadata=${encodeURIComponent('{"mcp_expose":true}')}`, developer);
    assert.deepEqual(
      byMeta.body.map((a: { assistant_id: string }) => a.assistant_id),
      ["echo-loud", id],
    );
    assert.equal((await server.request("DELETE", `/v1/assistants/${id}`, developer)).status, 204);
    assert.equal((await server.request("GET", `/v1/assistants/${id}`, developer)).status, 404);
  });

  test("a chosen assistant_id is kept; reusing it is 409", async () => {
    const first = await server.request("POST", "/v1/assistants", {
      ...developer,
      body: { assistant_id: "helper.v1", graph_id: "approval" },
    });
    assert.deepEqual(
      [first.status, first.body.assistant_id, first.body.name],
      [201, "helper.v1", "helper.v1"],
      "without a name, named by its id",
    );
    const again = await server.request("POST", "/v1/assistants", { ...developer, body: { assistant_id: "helper.v1", graph_id: "echo" } });
    assert.deepEqual([again.status, again.body.code], [409, "conflict"]);
    const shadow = await server.request("POST", "/v1/assistants", { ...developer, body: { assistant_id: "echo", graph_id: "echo" } });
    assert.deepEqual([shadow.status, shadow.body.code], [409, "conflict"]);
  });

  test("config-declared assistants are read-only through the API", async () => {
    for (const [method, body] of [
      ["PATCH", { name: "x" }],
      ["DELETE", undefined],
    ] as const) {
      const answer = await server.request(method, "/v1/assistants/echo-loud", { ...developer, body });
      assert.deepEqual([answer.status, answer.body.code], [409, "conflict"]);
    }
  });

  test("an unknown graph, unknown field or bad id is 422", async () => {
    const unknownGraph = await server.request("POST", "/v1/assistants", { ...developer, body: { graph_id: "nope" } });
    assert.deepEqual([unknownGraph.status, unknownGraph.body.code], [422, "validation_error"]);
    assert.match(unknownGraph.body.detail, /nope/);
    assert.equal((await server.request("POST", "/v1/assistants", { ...developer, body: { graph_id: "echo", colour: 1 } })).status, 422);
    assert.equal(
      (await server.request("POST", "/v1/assistants", { ...developer, body: { graph_id: "echo", assistant_id: "has space" } })).status,
      422,
    );
    assert.equal(
      (await server.request("POST", "/v1/assistants", { ...developer, body: { graph_id: "echo", metadata: { mcp_expose: "yes" } } }))
        .status,
      422,
    );
  });

  test("roles: viewer and operator cannot write assistants; developer and admin can", async () => {
    for (const roles of [["viewer"], ["operator"]] as const) {
      const answer = await server.request("POST", "/v1/assistants", { tenant: "acme", roles: [...roles], body: { graph_id: "echo" } });
      assert.deepEqual([answer.status, answer.body.code], [403, "forbidden"], roles.join());
    }
    const admin = await server.request("POST", "/v1/assistants", { tenant: "acme", roles: ["admin"], body: { graph_id: "echo" } });
    assert.equal(admin.status, 201);
  });

  test("tenant isolation: another tenant's assistant is 404 and not listed", async () => {
    const mine = await server.request("POST", "/v1/assistants", {
      tenant: "iso-a",
      roles: ["developer"],
      body: { graph_id: "echo", name: "mine" },
    });
    const id = mine.body.assistant_id;
    const other = { tenant: "iso-b", roles: ["admin" as const] };
    assert.equal((await server.request("GET", `/v1/assistants/${id}`, other)).status, 404);
    assert.equal((await server.request("PATCH", `/v1/assistants/${id}`, { ...other, body: { name: "theirs" } })).status, 404);
    assert.equal((await server.request("DELETE", `/v1/assistants/${id}`, other)).status, 404);
    const listed = await server.request("GET", "/v1/assistants", other);
    assert.ok(!listed.body.some((a: { assistant_id: string }) => a.assistant_id === id));
    assert.equal((await server.request("GET", `/v1/assistants/${id}`, { tenant: "iso-a" })).body.name, "mine");
  });

  test("pagination runs across declared and stored assistants", async () => {
    const tenant = "paging";
    for (const name of ["p1", "p2", "p3"]) {
      await server.request("POST", "/v1/assistants", { tenant, body: { graph_id: "echo", name } });
    }
    const ids = async (query: string) =>
      (await server.request("GET", `/v1/assistants?${query}`, { tenant })).body.map((a: { name: string }) => a.name);
    assert.deepEqual(await ids(""), ["echo", "approval", "memory", "Loud echo", "p3", "p2", "p1"]);
    assert.deepEqual(await ids("limit=2&offset=3"), ["Loud echo", "p3"]);
    assert.deepEqual(await ids("limit=2&offset=5"), ["p2", "p1"]);
  });
});
