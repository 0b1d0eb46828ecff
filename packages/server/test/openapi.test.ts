import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { beginShutdown } from "../src/http/shutdown.ts";
import { startTestServer, type TestServer } from "./support/server.ts";

/**
 * The OpenAPI document against the server's real answers: every operation it lists is asked in
 * the ways any route can be refused (a body of another type, malformed or too large; a path
 * parameter too long; an undecodable query string; a server shutting down), and each answer must
 * be a status that operation documents, under the media type it documents, with a body its schema
 * accepts.
 */

type Media = Record<string, { schema?: object }>;
type Operation = { requestBody?: { content: Media }; responses: Record<string, { content?: Media }> };
type Document = { paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, object> } };
interface Op {
  readonly name: string;
  readonly method: string;
  readonly path: string;
  readonly operation: Operation;
}

const BODY_LIMIT = 64 * 1024;
const BODY_METHODS = new Set(["POST", "PUT", "PATCH", "DELETE"]);
/** The operations that answer Server-Sent Events. */
const STREAMS = [
  "GET /v1/runs/{run_id}/stream",
  "POST /threads/{thread_id}/runs/stream",
  "POST /runs/stream",
  "GET /threads/{thread_id}/runs/{run_id}/stream",
  "GET /runs/{run_id}/stream",
];

const operationsOf = (doc: Document): Op[] =>
  Object.entries(doc.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, operation]) => ({
      name: `${method.toUpperCase()} ${path}`,
      method: method.toUpperCase(),
      path,
      operation,
    })),
  );

/**
 * The path with every parameter filled: `first` for the first one when given; otherwise an
 * assistant that exists (so a JSON-RPC gateway reads the body) and fresh UUIDs.
 */
const fill = (path: string, first?: string): string => {
  let index = 0;
  return path.replace(/\{([^}]+)\}/g, (_match, name: string) =>
    index++ === 0 && first !== undefined ? first : name === "assistant_id" ? "echo" : randomUUID(),
  );
};

describe("the OpenAPI document describes the real answers", () => {
  let server: TestServer;
  let doc: Document;
  let operations: Op[];
  let validProblem: (body: unknown) => boolean;
  let token: string;

  before(async () => {
    server = await startTestServer({ worker: false, scheduler: false, config: { bodyLimitBytes: BODY_LIMIT } });
    token = await server.token();
    doc = (await server.request("GET", "/openapi.json", { token: null })).body;
    operations = operationsOf(doc);
    const ajv = new Ajv2020({ strict: false });
    addFormats.default(ajv);
    validProblem = ajv.compile({ ...doc.components.schemas.Problem, $id: undefined });
  });
  after(() => server.close());

  /**
   * Sends the request and checks that the answer is one the operation documents: its status, under
   * its media type, and for a problem a body the Problem schema accepts; and that it has `status`
   * when that is given.
   */
  async function assertDocumented(op: Op, status: number | undefined, url: string, init: RequestInit = {}): Promise<void> {
    const headers = { authorization: `Bearer ${token}`, ...(init.headers as Record<string, string>) };
    const response = await fetch(`${server.url}${url}`, { method: op.method, ...init, headers });
    const text = await response.text();
    const what = `${op.name} (${url.slice(0, 80)}) answered ${response.status}`;
    if (status !== undefined) assert.equal(response.status, status, `${what}: ${text.slice(0, 300)}`);
    const documented = op.operation.responses[String(response.status)];
    assert.ok(documented, `${what}, which its responses (${Object.keys(op.operation.responses)}) do not list`);
    const media = (response.headers.get("content-type") ?? "").split(";")[0]!;
    assert.ok(documented.content?.[media], `${what} as ${media}; documented as ${Object.keys(documented.content ?? {})}`);
    if (response.status >= 400 && media !== "application/problem+json")
      assert.ok(op.path === "/mcp", `${what}: only MCP's transport answers an error that is not a problem (a JSON-RPC error)`);
    if (media === "application/problem+json")
      assert.ok(validProblem(JSON.parse(text)), `${what}: the body is a documented Problem: ${text.slice(0, 300)}`);
  }

  /** A route whose body is JSON: it documents one, or it is of a method with a body and says it refuses other types. */
  const takesJson = (op: Op): boolean => op.operation.requestBody?.content["application/json"] !== undefined;

  test("every error answer is application/problem+json with the Problem schema; event streams are text/event-stream", () => {
    assert.ok(operations.length >= 80, `${operations.length} operations`);
    for (const { name, operation } of operations) {
      for (const [status, answer] of Object.entries(operation.responses).filter(([status]) => Number(status) >= 400)) {
        const media = Object.keys(answer.content ?? {}).filter((type) => type !== "application/json");
        // MCP's transport answers some errors as JSON-RPC errors (its spec's), beside problems or alone.
        if (name === "POST /mcp" && media.length === 0) continue;
        assert.deepEqual(media, ["application/problem+json"], `${name} ${status}`);
        if (answer.content?.["application/json"]) assert.equal(name, "POST /mcp", `${name} ${status}: an error as application/json`);
        assert.deepEqual(
          answer.content!["application/problem+json"]!.schema,
          { $ref: "#/components/schemas/Problem" },
          `${name} ${status}`,
        );
      }
    }
    const byName = new Map(operations.map((op) => [op.name, op.operation]));
    for (const name of STREAMS) {
      const content = byName.get(name)?.responses["200"]?.content;
      assert.ok(content, `${name} is documented`);
      assert.deepEqual(Object.keys(content), ["text/event-stream"], name);
    }
    // The JSON-RPC gateways answer one message, or a stream of them for a streaming method.
    for (const name of ["POST /a2a/{assistant_id}", "POST /mcp"])
      assert.deepEqual(Object.keys(byName.get(name)?.responses["200"]?.content ?? {}), ["application/json", "text/event-stream"], name);
  });

  test("Problem.code is open (new codes can appear), the known codes are its examples, errors and superseded_by_run_id are described", () => {
    const problem = doc.components.schemas.Problem as { properties: Record<string, Record<string, unknown>> };
    const { code, errors, superseded_by_run_id } = problem.properties;
    assert.equal(code!.type, "string");
    for (const closed of ["enum", "const", "anyOf", "oneOf"]) assert.equal(code![closed], undefined, `code has no ${closed}`);
    assert.ok((code!.examples as string[]).includes("validation_error"));
    assert.equal(errors!.type, "array");
    assert.deepEqual((errors!.items as { required: string[] }).required, ["location", "path", "message"]);
    assert.equal(superseded_by_run_id!.type, "string");
    const fromTheFuture = {
      type: "about:blank",
      title: "t",
      status: 409,
      detail: "d",
      code: "new_code",
      request_id: "r",
      retryable: false,
    };
    assert.ok(validProblem(fromTheFuture), "a problem with a code this document does not know is valid");
  });

  test("a body that is not JSON is 415 on every JSON-body route, and every answer to one is documented", async () => {
    const withBody = operations.filter((op) => BODY_METHODS.has(op.method));
    assert.ok(withBody.filter(takesJson).length >= 40, `${withBody.filter(takesJson).length} JSON-body routes`);
    for (const op of withBody) {
      // A route of a method with a body refuses any other type whether it declares a body or not;
      // a JSON-RPC gateway takes any (and may answer 200 with a JSON-RPC error): what it documents must hold.
      const expected = takesJson(op) || op.operation.responses["415"] ? 415 : undefined;
      await assertDocumented(op, expected, fill(op.path), { headers: { "content-type": "text/plain" }, body: "hello" });
    }
  });

  test("malformed JSON is 400, a body over the limit 413, on every JSON-body route, as documented", async () => {
    for (const op of operations.filter((op) => BODY_METHODS.has(op.method))) {
      const json = { "content-type": "application/json" };
      const expected = takesJson(op) || op.operation.responses["415"] ? 400 : undefined;
      await assertDocumented(op, expected, fill(op.path), { headers: json, body: '{"unterminated": ' });
      await assertDocumented(op, 413, fill(op.path), { headers: json, body: JSON.stringify({ pad: "x".repeat(BODY_LIMIT) }) });
    }
  });

  test("a path parameter over the router's limit is 414 on every route with one", async () => {
    const withParams = operations.filter((op) => op.path.includes("{"));
    assert.ok(withParams.length >= 40, `${withParams.length} operations with a path parameter`);
    for (const op of withParams) await assertDocumented(op, 414, fill(op.path, "a".repeat(2_100)));
  });

  test("a query string that is not percent-encoded UTF-8 is 400 on every route", async () => {
    for (const op of operations) await assertDocumented(op, 400, `${fill(op.path)}?bad=%ZZ`);
  });

  test("an instance shutting down answers 503 on every route, as documented", async () => {
    const closing = await startTestServer({ worker: false, scheduler: false });
    try {
      beginShutdown(closing.server.app!.server);
      for (const op of operations) {
        const response = await fetch(`${closing.url}${fill(op.path)}`, {
          method: op.method,
          headers: { authorization: `Bearer ${token}` },
        });
        await response.text();
        assert.equal(response.status, 503, op.name);
        assert.ok(op.operation.responses["503"], `${op.name} answered 503, which it does not document`);
      }
    } finally {
      await closing.close();
    }
  });
});
