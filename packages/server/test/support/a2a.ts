import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import {
  Role,
  TaskState,
  type Message,
  type Part,
  type SendMessageRequest,
  type StreamResponse,
  type Task,
  type TaskArtifactUpdateEvent,
} from "@a2a-js/sdk";
import { parseLegacyAgentCard } from "@a2a-js/sdk/compat/v0_3/client";
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  createAuthenticatingFetchWithRetry,
  type Client,
} from "@a2a-js/sdk/client";
import type { Role as RudderRole } from "../../src/domain/roles.ts";
import type { TestServer } from "./server.ts";

/** The A2A protocol versions Rudder's gateway speaks; tests run in both. */
export const A2A_VERSIONS = ["1.0", "0.3"] as const;
export type A2AVersion = (typeof A2A_VERSIONS)[number];

export const cardUrl = (server: TestServer, assistantId: string) => `${server.url}/a2a/${assistantId}/.well-known/agent-card.json`;

/** fetch that sends the bearer token of (tenant, roles), as an A2A client of Rudder would. */
export async function authFetch(server: TestServer, tenant = "t1", roles: RudderRole[] = ["admin"]): Promise<typeof fetch> {
  const token = await server.token(tenant, roles);
  return createAuthenticatingFetchWithRetry(fetch, {
    headers: async () => ({ authorization: `Bearer ${token}` }),
    shouldRetryWithHeaders: async () => undefined,
  });
}

/**
 * The official SDK client for an assistant: in 1.0 the standard client built from the card
 * (which the resolver asks for in 1.0); in 0.3 the 0.3 card, read as a 0.3 client reads it,
 * driving the SDK's 0.3 compat JSON-RPC transport.
 */
export async function a2aClient(
  server: TestServer,
  assistantId: string,
  version: A2AVersion,
  who: { tenant?: string; roles?: RudderRole[] } = {},
): Promise<Client> {
  const fetchImpl = await authFetch(server, who.tenant, who.roles);
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: version === "0.3" } })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    }),
  );
  if (version === "1.0") return factory.createFromUrl(cardUrl(server, assistantId), "");
  const response = await fetchImpl(cardUrl(server, assistantId));
  if (!response.ok) throw new Error(`card of ${assistantId}: HTTP ${response.status}`);
  return factory.createFromAgentCard(parseLegacyAgentCard(await response.json()));
}

export const text = (value: string): Part => ({
  content: { $case: "text", value },
  metadata: undefined,
  filename: "",
  mediaType: "text/plain",
});
export const data = (value: Record<string, unknown>): Part => ({
  content: { $case: "data", value },
  metadata: undefined,
  filename: "",
  mediaType: "application/json",
});

/** A user message of `parts`, optionally in a context or answering a task. */
export function userMessage(parts: Part[], options: { contextId?: string; taskId?: string; messageId?: string } = {}): Message {
  return {
    messageId: options.messageId ?? randomUUID(),
    contextId: options.contextId ?? "",
    taskId: options.taskId ?? "",
    role: Role.ROLE_USER,
    parts,
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

export function sendRequest(message: Message, options: { returnImmediately?: boolean } = {}): SendMessageRequest {
  return {
    tenant: "",
    message,
    configuration:
      options.returnImmediately === undefined
        ? undefined
        : { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: options.returnImmediately },
    metadata: undefined,
  };
}

/** The text of parts (text parts only, joined). */
export const textOf = (parts: readonly Part[]): string =>
  parts.map((part) => (part.content?.$case === "text" ? part.content.value : "")).join("");

/** The data parts' values. */
export const dataOf = (parts: readonly Part[]): unknown[] =>
  parts.flatMap((part) => (part.content?.$case === "data" ? [part.content.value] : []));

/** Reads a stream to its end (it must end by itself). */
export async function collect(stream: AsyncIterable<StreamResponse>): Promise<StreamResponse[]> {
  const events: StreamResponse[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

/** A raw JSON-RPC call, for the wire details an SDK client hides (error codes, 0.3 `final`). */
export async function rpc(
  server: TestServer,
  assistantId: string,
  body: unknown,
  options: { version?: string; tenant?: string; roles?: RudderRole[]; rawBody?: string; contentType?: string } = {},
): Promise<{
  status: number;
  contentType: string | null;
  body: { id?: unknown; result?: unknown; error?: { code: number; message: string } };
  text: string;
}> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${await server.token(options.tenant, options.roles)}`,
    "content-type": options.contentType ?? "application/json",
  };
  if (options.version) headers["a2a-version"] = options.version;
  const response = await fetch(`${server.url}/a2a/${assistantId}`, {
    method: "POST",
    headers,
    body: options.rawBody ?? JSON.stringify(body),
  });
  const textBody = await response.text();
  const contentType = response.headers.get("content-type");
  return { status: response.status, contentType, body: contentType?.includes("json") ? JSON.parse(textBody) : {}, text: textBody };
}

/** The `data:` frames of an SSE body, parsed. */
export function sseData(body: string): { result?: Record<string, unknown>; error?: { code: number } }[] {
  return body
    .split("\n\n")
    .flatMap((frame) => frame.split("\n").filter((line) => line.startsWith("data: ")))
    .map((line) => JSON.parse(line.slice("data: ".length)));
}

/** The state a stream event reports (a task or a status update). */
export const stateOf = (event: StreamResponse): TaskState | undefined =>
  event.payload?.$case === "task"
    ? event.payload.value.status?.state
    : event.payload?.$case === "statusUpdate"
      ? event.payload.value.status?.state
      : undefined;
/** The artifact updates among a stream's events. */
export const artifactUpdates = (events: StreamResponse[]): TaskArtifactUpdateEvent[] =>
  events.flatMap((event) => (event.payload?.$case === "artifactUpdate" ? [event.payload.value] : []));
/** A send's result, which Rudder always answers with a task. */
export const asTask = (result: unknown): Task => {
  assert.ok(result && typeof result === "object" && "status" in result, `expected a task, got ${JSON.stringify(result)}`);
  return result as Task;
};
/** A completed task's output: the data part of its artifact. */
export const outputOf = (task: Task): Record<string, unknown> => dataOf(task.artifacts[0]?.parts ?? [])[0] as Record<string, unknown>;
/** A completed task's answer: the text part of its artifact. */
export const answerOf = (task: Task): string => textOf(task.artifacts[0]?.parts ?? []);
/** GetTask params. */
export const get = (id: string) => ({ tenant: "", id, historyLength: undefined });

/** Reads a task's stream until `until` holds for an event (the stream stays open), returning what it read. */
export async function readUntil(
  stream: AsyncGenerator<StreamResponse>,
  until: (event: StreamResponse) => boolean,
): Promise<StreamResponse[]> {
  const seen: StreamResponse[] = [];
  // next() rather than for-await: leaving a for-await loop would close the stream.
  for (let next = await stream.next(); !next.done; next = await stream.next()) {
    seen.push(next.value);
    if (until(next.value)) return seen;
  }
  throw new Error(`the stream ended before the awaited event: ${JSON.stringify(seen.map(stateOf))}`);
}
