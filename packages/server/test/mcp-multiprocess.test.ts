import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { mintToken } from "../src/auth/authenticator.ts";
import { apiClient } from "./support/api.ts";
import { TEST_DRIVER } from "./support/db.ts";
import { mcpClient } from "./support/mcp.ts";
import { setUpProcesses, startApi, startWorker } from "./support/processes.ts";

/**
 * One MCP client behind a round-robin "load balancer" over two `rudder serve` processes on one
 * PostgreSQL (a `rudder worker` runs the graphs): consecutive requests of the client alternate
 * between the processes, so the call, the answer to its elicitation and its cancellation land on
 * different processes. PostgreSQL only (PGlite is one process's database).
 */

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));
const SECRET = "rudder-mcp-multiprocess-secret-rudder-mcp";
const TENANT = "mcp-lb";

interface Sent {
  readonly origin: string;
  readonly method: string;
  readonly kind: string;
}

describe(`MCP behind a load balancer: two rudder serve processes on ${TEST_DRIVER}`, () => {
  test("consecutive requests of one client land on different processes, and every call works", { timeout: 120_000 }, async (t) => {
    const setup = await setUpProcesses(t, SECRET);
    if (!setup) return;
    const { database, processes } = setup;
    const scratch = mkdtempSync(join(tmpdir(), "rudder-mcp-lb-"));
    try {
      const first = await startApi(processes, TESTING_CONFIG);
      const banner = await processes.start("serve-2", ["serve", "--config", TESTING_CONFIG, "--port", "0"], /listening at http:\/\/\S+/);
      const second = /listening at (http:\/\/[^\s]+)/.exec(banner)![1]!;
      await startWorker(processes, "worker", TESTING_CONFIG);
      const origins = [new URL(first).origin, new URL(second).origin];
      const token = await mintToken(SECRET, { tenantId: TENANT, roles: ["operator", "developer"] });
      const api = apiClient(first, token);
      for (const [assistant_id, graph_id] of [
        ["lb-steps", "steps"],
        ["lb-form", "form_ask"],
      ]) {
        const created = await api("POST", "/v1/assistants", { assistant_id, graph_id, metadata: { mcp_expose: true } });
        assert.equal(created.status, 201, JSON.stringify(created.body));
      }

      // The load balancer: each request goes to the next process in turn.
      const sent: Sent[] = [];
      let turn = 0;
      const balanced: typeof fetch = async (input, init) => {
        const url = new URL(input instanceof Request ? input.url : String(input));
        const origin = origins[turn++ % origins.length]!;
        const body = typeof init?.body === "string" ? (JSON.parse(init.body) as Record<string, unknown>) : undefined;
        const kind = body === undefined ? "-" : typeof body.method === "string" ? body.method : "response";
        sent.push({ origin, method: init?.method ?? "GET", kind });
        return fetch(`${origin}${url.pathname}${url.search}`, init);
      };
      const server = { url: first, token: async () => token };
      const { client } = await mcpClient(server, {
        tenant: TENANT,
        fetch: balanced,
        elicitation: () => ({ action: "accept", content: { approved: true } }),
      });
      try {
        const { tools } = await client.listTools();
        assert.deepEqual(
          tools.map((tool) => tool.name).sort(),
          ["lb-form", "lb-steps"],
          "named by the assistants' ids (they have no name)",
        );

        const progress: number[] = [];
        const counted = (await client.callTool({ name: "lb-steps", arguments: { steps: 3 } }, undefined, {
          onprogress: (p) => progress.push(p.progress),
        })) as CallToolResult;
        assert.equal((counted.structuredContent as { count: number }).count, 3);
        assert.deepEqual(progress, [1, 2, 3]);

        // The question is asked on the call's stream (one process); the answer is POSTed to the other.
        const answered = (await client.callTool({ name: "lb-form", arguments: { request: "deploy" } })) as CallToolResult;
        assert.equal(answered.isError, undefined, JSON.stringify(answered));
        assert.deepEqual((answered.structuredContent as { decision: unknown }).decision, { approved: true });

        // The cancellation goes to the other process than the call.
        const file = join(scratch, "cancel.log");
        const aborted = new AbortController();
        const call = client.callTool({ name: "lb-steps", arguments: { steps: 20, delayMs: 500, sideEffectFile: file } }, undefined, {
          signal: aborted.signal,
        });
        let runId = "";
        while (!runId) {
          runId = existsSync(file) ? (readFileSync(file, "utf8").split(" ")[0] ?? "") : "";
          if (!runId) await new Promise((resolve) => setTimeout(resolve, 20));
        }
        aborted.abort("changed my mind");
        await assert.rejects(call);
        for (;;) {
          const joined = await api<{ status: string }>("GET", `/v1/runs/${runId}/join?timeout=60`);
          if (joined.status === 408) continue;
          assert.equal(joined.body.status, "cancelled");
          break;
        }
      } finally {
        await client.close();
      }

      const posts = sent.filter((request) => request.method === "POST");
      for (let i = 1; i < sent.length; i++) assert.notEqual(sent[i]!.origin, sent[i - 1]!.origin, "consecutive requests alternate");
      for (const origin of origins)
        assert.ok(
          posts.some((request) => request.origin === origin && request.kind === "tools/call"),
          `${origin} served a tool call`,
        );
      const originOf = (kind: string) => posts.filter((request) => request.kind === kind).map((request) => request.origin);
      const [elicitedCall] = posts.filter((request) => request.kind === "tools/call").slice(1, 2);
      const [answer] = originOf("response");
      assert.ok(answer && elicitedCall && answer !== elicitedCall.origin, "the elicitation answer reached the other process than its call");
      const lastCall = posts.filter((request) => request.kind === "tools/call").at(-1)!;
      const [cancel] = originOf("notifications/cancelled");
      assert.ok(cancel && cancel !== lastCall.origin, "the cancellation reached the other process than its call");
    } catch (error) {
      t.diagnostic(processes.stderr());
      throw error;
    } finally {
      await processes.stopAll();
      await database.drop();
      rmSync(scratch, { recursive: true, force: true });
    }
  });
});
