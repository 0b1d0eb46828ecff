import { MAX_REQUEST_JSON_DEPTH } from "../../domain/limits.ts";
import { snakeCase } from "../../domain/names.ts";
import { findJsonFault } from "../../domain/storable-json.ts";
import { isObject } from "./parts.ts";

/**
 * What a JSON-RPC request must be before the SDK's transport handlers read it (docs/a2a.md
 * "Errors"). The SDK checks `params` before it looks the method up, and its 1.0 handler turns any
 * id into a string (`{"a": 1}` becomes "[object Object]"), so these checks come first, in one
 * place for every method. Pure rules: no I/O.
 */

/** The methods each version's SDK transport handler dispatches; any other is -32601 there. */
const METHODS: Readonly<Record<"1.0" | "0.3", ReadonlySet<string>>> = {
  "1.0": new Set([
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
  ]),
  "0.3": new Set([
    "message/send",
    "message/stream",
    "tasks/get",
    "tasks/cancel",
    "tasks/resubscribe",
    "tasks/pushNotificationConfig/set",
    "tasks/pushNotificationConfig/get",
    "tasks/pushNotificationConfig/list",
    "tasks/pushNotificationConfig/delete",
    "agent/getAuthenticatedExtendedCard",
  ]),
};

export const isMethodOf = (method: string, legacy: boolean): boolean => METHODS[legacy ? "0.3" : "1.0"].has(method);

/** The push-notification methods of both versions: Rudder has none, whatever their params (-32003). */
const PUSH_METHODS: ReadonlySet<string> = new Set([
  ...[...METHODS["1.0"]].filter((method) => method.includes("PushNotification")),
  ...[...METHODS["0.3"]].filter((method) => method.startsWith("tasks/pushNotificationConfig/")),
]);

export const isPushNotificationMethod = (method: string): boolean => PUSH_METHODS.has(method);

/**
 * The levels the JSON-RPC envelope adds above the value a data part carries (params → message →
 * parts → part), so that value may nest as deeply as a REST request's `input` or `resume`.
 */
const ENVELOPE_DEPTH = 3;
export const MAX_PARAMS_DEPTH = MAX_REQUEST_JSON_DEPTH + ENVELOPE_DEPTH;

/** Members that name a task, context, message or page: strings (or absent) in both versions, also in snake case as the 1.0 SDK reads them. */
const STRING_MEMBERS = [
  "id",
  "taskId",
  "task_id",
  "contextId",
  "context_id",
  "messageId",
  "message_id",
  "pageToken",
  "page_token",
  "statusTimestampAfter",
  "status_timestamp_after",
  "tenant",
];

/**
 * Why a request's `params` cannot be taken (-32602 Invalid params), or undefined. Every value a
 * client sends may reach storage (a message's data and text become the run's input or resume
 * value, its id the run's metadata, ids are compared in SQL), so `params` as a whole is held to
 * the storage rules the REST API holds request bodies to: no U+0000, no lone surrogate, finite
 * numbers, bounded nesting. Ids must be strings. Absent `params` passes: the SDK says which
 * methods need them.
 */
export function paramsProblem(params: unknown): string | undefined {
  if (params === undefined) return undefined;
  // The body was parsed here, not by Fastify's parser, which refuses prototype members in a REST body.
  const fault = findJsonFault(params, MAX_PARAMS_DEPTH, { refusePrototypeMembers: true });
  if (fault) {
    // A fault deep down has a long pointer: the message shows its start.
    const path = fault.path.length > 120 ? `${fault.path.slice(0, 120)}…` : fault.path;
    return `params${path} ${fault.problem}`;
  }
  if (!isObject(params)) return undefined;
  for (const [where, holder] of [
    ["params", params],
    ["params.message", params.message],
  ] as const) {
    if (!isObject(holder)) continue;
    for (const member of STRING_MEMBERS) {
      const value = holder[member];
      if (value !== undefined && value !== null && typeof value !== "string") return `${where}.${member} must be a string`;
    }
  }
  return typeProblem(params) ?? messageProblem(params.message);
}

/** A part's content members: 1.0's `oneof` (text, raw, url, data) and 0.3's file; a part holds one. */
const PART_CONTENTS = ["text", "raw", "url", "data", "file"] as const;

/**
 * What the SDK would take from a message and change silently: a missing role (0.3's handler
 * refuses it, 1.0's would not), a part with two contents (one is dropped), a text that is not a
 * string (it would be turned into one: `{"a": 1}` into "[object Object]").
 */
function messageProblem(message: unknown): string | undefined {
  if (!isObject(message)) return undefined;
  if (message.role === undefined || message.role === null) return 'params.message.role is required ("user", or ROLE_USER in 1.0)';
  if (!Array.isArray(message.parts)) return undefined;
  for (const [index, part] of message.parts.entries()) {
    if (!isObject(part)) continue;
    const where = `params.message.parts[${index}]`;
    const contents = PART_CONTENTS.filter((member) => part[member] !== undefined && part[member] !== null);
    if (contents.length > 1) return `${where} holds ${contents.join(" and ")}: a part holds one content`;
    if ((part.kind === "text" || contents[0] === "text") && typeof part.text !== "string") return `${where}.text must be a string`;
  }
  return undefined;
}

/**
 * Members whose type the SDK does not check and a wrong one would silently change what a call
 * does; each also in snake case, as the 1.0 SDK reads them.
 */
const TYPED_MEMBERS: readonly (readonly [holder: "params" | "configuration" | "message", member: string, rule: Rule])[] = (
  [
    ["params", "configuration", "object"],
    ["params", "metadata", "object"],
    ["params", "historyLength", "count"],
    ["configuration", "blocking", "boolean"],
    ["configuration", "returnImmediately", "boolean"],
    ["configuration", "historyLength", "count"],
    ["configuration", "acceptedOutputModes", "strings"],
    ["message", "metadata", "object"],
    ["message", "role", "role"],
  ] as const
).flatMap(([holder, member, rule]) => {
  const snake = snakeCase(member);
  return snake === member ? [[holder, member, rule] as const] : [[holder, member, rule] as const, [holder, snake, rule] as const];
});

type Rule = "object" | "boolean" | "count" | "strings" | "role";

/** A message's role: 0.3's names, 1.0's enum names, or 1.0's enum numbers. */
const ROLES: ReadonlySet<unknown> = new Set(["user", "agent", "ROLE_USER", "ROLE_AGENT", 1, 2]);

const RULES: Record<Rule, { holds: (value: unknown) => boolean; must: string }> = {
  object: { holds: isObject, must: "be an object" },
  boolean: { holds: (value) => typeof value === "boolean", must: "be true or false" },
  count: { holds: (value) => Number.isInteger(value) && (value as number) >= 0, must: "be a whole number, 0 or more" },
  strings: { holds: (value) => Array.isArray(value) && value.every((item) => typeof item === "string"), must: "be an array of strings" },
  role: { holds: (value) => ROLES.has(value), must: 'be "user" or "agent" (ROLE_USER or ROLE_AGENT in 1.0)' },
};

function typeProblem(params: Record<string, unknown>): string | undefined {
  const holders = { params, configuration: params.configuration, message: params.message };
  for (const [holder, member, rule] of TYPED_MEMBERS) {
    const container = holders[holder];
    if (!isObject(container)) continue;
    const value = container[member];
    if (value === undefined || value === null || RULES[rule].holds(value)) continue;
    return `${holder === "params" ? "params" : `params.${holder}`}.${member} must ${RULES[rule].must}`;
  }
  return undefined;
}

/**
 * `params` with what the protocol leaves out filled in where the SDK would read it otherwise: a
 * 0.3 `message/send` blocks unless `configuration.blocking` is false (the SDK's compat layer
 * returns at once when `blocking` is absent; 0.3 servers and 1.0's `returnImmediately` default to
 * blocking), and 1.0 `ListTasks`, whose request's fields are all optional, may come without params.
 */
export function withProtocolDefaults(method: string, params: unknown, legacy: boolean): unknown {
  if (!legacy && method === "ListTasks" && params === undefined) return {};
  if (
    legacy &&
    method === "message/send" &&
    isObject(params) &&
    isObject(params.configuration) &&
    params.configuration.blocking === undefined
  )
    return { ...params, configuration: { ...params.configuration, blocking: true } };
  return params;
}

/** The protocol version an `A2A-Version` header asks for, as major.minor: a patch number does not count (A2A 1.0 §3.6). */
export function protocolVersionOf(header: string | undefined): string | undefined {
  const match = header === undefined ? null : /^(\d+)\.(\d+)\.\d+$/.exec(header.trim());
  return match ? `${match[1]}.${match[2]}` : header?.trim();
}
