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
  const fault = findJsonFault(params, MAX_PARAMS_DEPTH);
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
  return typeProblem(params);
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
