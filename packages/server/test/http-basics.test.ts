import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { EventEmitter } from "node:events";
import type { Server } from "node:http";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FastifyRequest } from "fastify";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import * as api from "@rudder/api";
import { mintToken } from "../src/auth/authenticator.ts";
import { ERROR_CODES } from "../src/domain/errors.ts";
import { beginShutdown, openWaits, requestWait } from "../src/http/shutdown.ts";
import { startTestServer, TEST_SECRET, type TestResponse, type TestServer } from "./support/server.ts";

type PrivateKey = Awaited<ReturnType<typeof generateKeyPair>>["privateKey"];
type OpenApiAnswer = { content?: Record<string, { schema?: { $ref?: string } }> };
type OpenApiOperation = { requestBody?: unknown; responses: Record<string, OpenApiAnswer> };

const PROBLEM_FIELDS = ["type", "title", "status", "detail", "code", "request_id", "retryable"];

function assertProblem(response: TestResponse, status: number, code: string): void {
  assert.equal(response.status, status, JSON.stringify(response.body));
  assert.match(response.headers.get("content-type") ?? "", /^application\/problem\+json/);
  for (const field of PROBLEM_FIELDS) assert.ok(field in response.body, `problem has ${field}`);
  assert.equal(response.body.type, "about:blank");
  assert.equal(response.body.status, status);
  assert.equal(response.body.code, code);
  assert.equal(response.body.request_id, response.headers.get("x-request-id"));
  assert.equal(response.body.retryable, ERROR_CODES[code as keyof typeof ERROR_CODES].retryable);
}

describe("HTTP basics", () => {
  let server: TestServer;
  const API_KEY = "rk_test_operator_key";
  let rsaKey: PrivateKey;
  let jwksFile: string;

  before(async () => {
    const { publicKey, privateKey } = await generateKeyPair("RS256");
    rsaKey = privateKey;
    jwksFile = join(mkdtempSync(join(tmpdir(), "rudder-jwks-")), "jwks.json");
    writeFileSync(jwksFile, JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: "k1", alg: "RS256" }] }));
    server = await startTestServer({
      auth: {
        jwksFile,
        apiKeys: [{ sha256: createHash("sha256").update(API_KEY).digest("hex"), tenantId: "t-key", roles: ["operator"] }],
      },
    });
  });
  after(() => server.close());

  test("health, readiness and the OpenAPI document need no token", async () => {
    const health = await server.request("GET", "/health", { token: null });
    assert.deepEqual([health.status, health.body], [200, { ok: true }]);
    const ready = await server.request("GET", "/ready", { token: null });
    assert.equal(ready.status, 200);
    assert.deepEqual(ready.body.graphs, ["echo", "approval", "memory"]);
    const openapi = await server.request("GET", "/openapi.json", { token: null });
    assert.equal(openapi.status, 200);
    assert.equal(openapi.body.openapi, "3.1.0");
    for (const path of [
      "/v1/threads",
      "/v1/threads/{thread_id}",
      "/v1/threads/{thread_id}/state",
      "/v1/threads/{thread_id}/history",
      "/v1/threads/{thread_id}/fork",
      "/v1/assistants",
      "/v1/assistants/{assistant_id}",
    ]) {
      assert.ok(openapi.body.paths[path], `OpenAPI documents ${path}`);
    }
    assert.ok(openapi.body.components.schemas.Problem, "the Problem schema is a named component");
    const docs = await fetch(`${server.url}/docs/`, { redirect: "follow" });
    assert.equal(docs.status, 200);
    assert.match(await docs.text(), /swagger/i);
  });

  test("/openapi.json documents every operation from the @rudder/api schemas", async () => {
    const { body: openapi } = await server.request("GET", "/openapi.json", { token: null });
    // The named components are @rudder/api's schemas, field for field.
    const { Run, RunEvent, Thread, CheckpointRef, ThreadState, Assistant, Problem } = api;
    for (const [name, schema] of Object.entries({ Run, RunEvent, Thread, CheckpointRef, ThreadState, Assistant, Problem })) {
      const component = openapi.components.schemas[name];
      assert.ok(component, `component ${name}`);
      assert.deepEqual(Object.keys(component.properties), Object.keys(schema.properties), `fields of ${name}`);
    }
    // Every operation answers with a schema (or 204), and every error answer is a Problem.
    const operations = Object.entries(openapi.paths as Record<string, Record<string, OpenApiOperation>>).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, operation]) => ({ name: `${method.toUpperCase()} ${path}`, operation })),
    );
    assert.ok(operations.length >= 26, `${operations.length} operations`);
    for (const { name, operation } of operations) {
      const [success, answer] = Object.entries(operation.responses).find(([status]) => status.startsWith("2"))!;
      // JSON everywhere but /metrics (Prometheus text) and event streams (openapi.test.ts).
      const media =
        name === "GET /metrics" ? "text/plain; version=0.0.4" : name.endsWith("/stream") ? "text/event-stream" : "application/json";
      if (success !== "204") assert.ok(answer.content?.[media]?.schema, `${name} documents its ${success} body`);
      for (const [status, problem] of Object.entries(operation.responses).filter(([status]) => Number(status) >= 400)) {
        if (name === "POST /mcp" && !problem.content?.["application/problem+json"]) continue; // a JSON-RPC error (openapi.test.ts)
        assert.equal(problem.content?.["application/problem+json"]?.schema?.$ref, "#/components/schemas/Problem", `${name} ${status}`);
      }
    }
    const bodies = new Set(operations.filter(({ operation }) => operation.requestBody).map(({ name }) => name));
    for (const name of [
      "PATCH /v1/assistants/{assistant_id}",
      "PATCH /v1/threads/{thread_id}",
      "POST /v1/assistants",
      "POST /v1/runs",
      "POST /v1/runs/{run_id}/resume",
      "POST /v1/runs/{run_id}/steer",
      "POST /v1/threads",
      "POST /v1/threads/{thread_id}/fork",
      "POST /v1/threads/{thread_id}/runs",
    ]) {
      assert.ok(bodies.has(name), `${name} documents its request body`);
    }
  });

  test("every answer carries X-Request-Id; a sane incoming id is echoed", async () => {
    const response = await server.request("GET", "/v1/threads", { headers: { "x-request-id": "trace-abc.1" } });
    assert.equal(response.headers.get("x-request-id"), "trace-abc.1");
    const generated = await server.request("GET", "/v1/threads", { headers: { "x-request-id": "bad id with spaces" } });
    assert.match(generated.headers.get("x-request-id") ?? "", /^[0-9a-f-]{36}$/);
  });

  test("missing, malformed, forged and expired tokens are 401 problem+json", async () => {
    assertProblem(await server.request("GET", "/v1/threads", { token: null }), 401, "unauthorized");
    assertProblem(await server.request("GET", "/v1/threads", { token: "not-a-jwt" }), 401, "unauthorized");
    const forged = await mintToken("another-secret-another-secret", { tenantId: "t1", roles: ["admin"] });
    assertProblem(await server.request("GET", "/v1/threads", { token: forged }), 401, "unauthorized");
    const expired = await mintToken(TEST_SECRET, { tenantId: "t1", roles: ["admin"], expiresIn: "-1m" });
    const expiredAnswer = await server.request("GET", "/v1/threads", { token: expired });
    assertProblem(expiredAnswer, 401, "unauthorized");
    assert.match(expiredAnswer.body.detail, /expired/);
    const noTenant = await new SignJWT({ roles: ["admin"] })
      .setProtectedHeader({ alg: "HS256" })
      .setExpirationTime("1h")
      .sign(new TextEncoder().encode(TEST_SECRET));
    assertProblem(await server.request("GET", "/v1/threads", { token: noTenant }), 401, "unauthorized");
    const basic = await fetch(`${server.url}/v1/threads`, { headers: { authorization: "Basic abc" } });
    assert.equal(basic.status, 401);
  });

  test("RS256 tokens verify against the JWKS file", async () => {
    const sign = (key: PrivateKey, kid: string) =>
      new SignJWT({ tenant_id: "t-rsa", roles: ["viewer"] }).setProtectedHeader({ alg: "RS256", kid }).setExpirationTime("1h").sign(key);
    const ok = await server.request("GET", "/v1/threads", { token: await sign(rsaKey, "k1") });
    assert.deepEqual([ok.status, ok.body], [200, []]);
    const stranger = (await generateKeyPair("RS256")).privateKey;
    assertProblem(await server.request("GET", "/v1/threads", { token: await sign(stranger, "k1") }), 401, "unauthorized");
  });

  test("API keys authenticate as their tenant and roles, by bearer or X-Api-Key", async () => {
    const created = await server.request("POST", "/v1/threads", { token: API_KEY, body: { metadata: { via: "key" } } });
    assert.equal(created.status, 201);
    const viaHeader = await server.request("GET", `/v1/threads/${created.body.thread_id}`, {
      token: null,
      headers: { "x-api-key": API_KEY },
    });
    assert.equal(viaHeader.status, 200);
    const otherTenant = await server.request("GET", `/v1/threads/${created.body.thread_id}`, { tenant: "t1" });
    assertProblem(otherTenant, 404, "not_found");
    assertProblem(await server.request("POST", "/v1/assistants", { token: API_KEY, body: { graph_id: "echo" } }), 403, "forbidden");
    assertProblem(await server.request("GET", "/v1/threads", { token: null, headers: { "x-api-key": "wrong" } }), 401, "unauthorized");
  });

  test("with Authorization and X-Api-Key both sent, Authorization decides; a Rudder key naming someone else is refused", async () => {
    // The key's tenant ("keyed", viewer-only) and the bearer token's ("t1", admin) differ. The key
    // used to win: a proxy that checked the token let the key through, and a viewer's token beside
    // an admin's key could write.
    const both = await server.request("POST", "/v1/threads", { headers: { "x-api-key": API_KEY }, body: {} });
    assertProblem(both, 400, "invalid_request");
    assert.match(both.body.detail, /Authorization and X-Api-Key name different credentials/);
    const viewer = await server.request("POST", "/v1/threads", { roles: ["viewer"], headers: { "x-api-key": API_KEY }, body: {} });
    assertProblem(viewer, 400, "invalid_request");
    // A key that is not Rudder's (the LangGraph SDK sends LANGSMITH_API_KEY as X-Api-Key by itself) is not a credential here.
    const langsmith = await server.request("POST", "/v1/threads", { headers: { "x-api-key": "lsv2_pt_not_a_rudder_key" }, body: {} });
    assert.equal(langsmith.status, 201, JSON.stringify(langsmith.body));
    // The same key in both headers is one credential.
    assert.equal((await server.request("GET", "/v1/threads", { token: API_KEY, headers: { "x-api-key": API_KEY } })).status, 200);
    // A forged token is refused whatever key comes with it.
    const forged = await server.request("GET", "/v1/threads", { token: "e30.e30.forged", headers: { "x-api-key": API_KEY } });
    assertProblem(forged, 401, "unauthorized");
  });

  test("malformed JSON is 400 invalid_request", async () => {
    assertProblem(await server.request("POST", "/v1/threads", { rawBody: '{"metadata": ' }), 400, "invalid_request");
  });

  test("a body over 1 MiB is 413 payload_too_large", async () => {
    const big = { metadata: { blob: "x".repeat(1024 * 1024 + 10) } };
    assertProblem(await server.request("POST", "/v1/threads", { body: big }), 413, "payload_too_large");
  });

  test("unknown fields, wrong types and bad parameters are 422 validation_error", async () => {
    const unknown = await server.request("POST", "/v1/threads", { body: { metadata: {}, colour: "red" } });
    assertProblem(unknown, 422, "validation_error");
    assert.match(unknown.body.detail, /colour/);
    assert.deepEqual(unknown.body.errors[0].location, "body");
    assertProblem(await server.request("POST", "/v1/threads", { body: { metadata: [1, 2] } }), 422, "validation_error");
    assertProblem(await server.request("POST", "/v1/threads", { body: { metadata: "yes" } }), 422, "validation_error");
    assertProblem(await server.request("GET", "/v1/threads?limit=0"), 422, "validation_error");
    assertProblem(await server.request("GET", "/v1/threads?limit=1001"), 422, "validation_error");
    assertProblem(await server.request("GET", "/v1/threads?sort=up"), 422, "validation_error");
    assertProblem(await server.request("GET", "/v1/threads?metadata=not-json"), 422, "validation_error");
    assertProblem(await server.request("GET", "/v1/threads/not-a-uuid"), 422, "validation_error");
  });

  test("a non-JSON content type is 415, an unknown route 404, both problem+json", async () => {
    const form = await server.request("POST", "/v1/threads", { rawBody: "a=b", headers: { "content-type": "text/plain" } });
    assertProblem(form, 415, "unsupported_media_type");
    assertProblem(await server.request("GET", "/v1/nothing-here"), 404, "not_found");
  });
});

describe("requestWait: the signal of a request waiting for a run", () => {
  const fakeRequest = () => {
    const raw = new EventEmitter();
    const server = new EventEmitter() as unknown as Server;
    return { raw, server, request: { raw, server: { server } } as unknown as FastifyRequest };
  };

  test("aborts when the client goes away, or when the server starts closing", () => {
    const closing = fakeRequest();
    const left = requestWait(closing.request);
    closing.raw.emit("close");
    assert.equal(left.signal.aborted, true);
    left.release();
    const shut = fakeRequest();
    const ended = requestWait(shut.request);
    beginShutdown(shut.server);
    assert.equal(ended.signal.aborted, true);
  });

  test("once released it leaves no close listener and no registered wait, and a later close aborts nothing", () => {
    const { raw, server, request } = fakeRequest();
    const wait = requestWait(request);
    assert.deepEqual([raw.listenerCount("close"), openWaits(server)], [1, 1]);
    wait.release();
    assert.deepEqual([raw.listenerCount("close"), openWaits(server)], [0, 0]);
    raw.emit("close");
    assert.equal(wait.signal.aborted, false);
  });
});
