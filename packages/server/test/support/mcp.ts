import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, type ElicitResult } from "@modelcontextprotocol/sdk/types.js";
import type { Role } from "../../src/domain/roles.ts";
import type { TestServer } from "./server.ts";

/** What an elicitation handler sees and answers. */
export type ElicitationAnswer = (request: { message: string; requestedSchema?: unknown }) => {
  action: "accept" | "decline" | "cancel";
  content?: Record<string, unknown>;
};

export interface McpClientOptions {
  tenant?: string;
  roles?: Role[];
  /** Declares the elicitation capability and answers with this. */
  elicitation?: ElicitationAnswer;
  /** Replaces fetch (to spread requests over several servers). */
  fetch?: typeof fetch;
  /** The MCP endpoint (default: the test server's /mcp). */
  url?: string;
}

/** The official MCP SDK client, connected (initialized) to Rudder's /mcp with a bearer token of (tenant, roles). */
export async function mcpClient(
  server: Pick<TestServer, "url" | "token">,
  options: McpClientOptions = {},
): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const token = await server.token(options.tenant, options.roles);
  const client = new Client(
    { name: "rudder-test", version: "1.0.0" },
    { capabilities: options.elicitation ? { elicitation: { form: {} } } : {} },
  );
  if (options.elicitation) {
    const answer = options.elicitation;
    client.setRequestHandler(
      ElicitRequestSchema,
      async (request) => answer(request.params as { message: string; requestedSchema?: unknown }) as ElicitResult,
    );
  }
  const transport = new StreamableHTTPClientTransport(new URL(options.url ?? `${server.url}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
  await client.connect(transport);
  return { client, transport };
}

/** A raw JSON-RPC POST to /mcp, for what the SDK client hides (status codes, headers, versions). */
export async function rawMcp(
  url: string,
  body: unknown,
  options: { token?: string | null; headers?: Record<string, string>; method?: string; rawBody?: string; signal?: AbortSignal } = {},
): Promise<{ status: number; headers: Headers; text: string; messages: Record<string, unknown>[] }> {
  const headers: Record<string, string> = {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    ...options.headers,
  };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  const response = await fetch(`${url}/mcp`, {
    method: options.method ?? "POST",
    headers,
    body: options.method && options.method !== "POST" ? undefined : (options.rawBody ?? JSON.stringify(body)),
    signal: options.signal,
  });
  const text = await response.text();
  const type = response.headers.get("content-type") ?? "";
  const messages = type.includes("text/event-stream")
    ? text
        .split("\n")
        .filter((line) => line.startsWith("data: "))
        .map((line) => JSON.parse(line.slice(6)) as Record<string, unknown>)
    : type.includes("json") && text
      ? [JSON.parse(text) as Record<string, unknown>]
      : [];
  return { status: response.status, headers: response.headers, text, messages };
}

export const initializeRequest = (protocolVersion: string, capabilities: Record<string, unknown> = {}) => ({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion, capabilities, clientInfo: { name: "raw", version: "1" } },
});
