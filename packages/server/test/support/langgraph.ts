import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";
import type { Role } from "../../src/domain/roles.ts";
import type { TestServer } from "./server.ts";

/** A LangGraph SDK client for (tenant, roles), with a bearer token; no retries, so a refusal is seen at once. */
export async function lgClient(server: TestServer, tenant = "t1", roles: Role[] = ["admin"]): Promise<Client> {
  return new Client({
    apiUrl: server.url,
    defaultHeaders: { authorization: `Bearer ${await server.token(tenant, roles)}` },
    callerOptions: { maxRetries: 0 },
  });
}

/** One streamed part as the SDK yields it. */
export interface Part {
  event: string;
  data: unknown;
  id?: string | undefined;
}

export async function collect(stream: AsyncIterable<Part>): Promise<Part[]> {
  const parts: Part[] = [];
  for await (const part of stream) parts.push({ event: part.event, data: part.data, id: part.id });
  return parts;
}

/** The SDK's HTTP error status of a rejected call. */
export async function rejectsWith(call: Promise<unknown>, status: number): Promise<void> {
  await assert.rejects(call, (error: { status?: number; message?: string }) => {
    assert.equal(error.status, status, error.message);
    return true;
  });
}

/** Waits (server-side, through /v1) until the run is running. */
export async function waitUntilRunning(server: TestServer, runId: string, tenant = "t1"): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const run = await server.request("GET", `/v1/runs/${runId}`, { tenant });
    if (run.body.status === "running") return;
    assert.equal(run.body.status, "pending", `run ${runId} is ${run.body.status}, expected to start running`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.fail(`run ${runId} never started`);
}
