import { createHash } from "node:crypto";
import { MAX_INT32, type CreateRunBody, type RunError, type RunStatus } from "@rudder/api";
import { ApiError } from "./errors.ts";
import { storableText } from "./storable-json.ts";

// Run states, strategies, durabilities and the run error object are part of the wire contract.
export {
  DURABILITIES,
  MULTITASK_STRATEGIES,
  RUN_STATUSES,
  type Durability,
  type MultitaskStrategy,
  type RunError,
  type RunStatus,
} from "@rudder/api";

export const TERMINAL_STATUSES: ReadonlySet<RunStatus> = new Set(["succeeded", "failed", "cancelled", "timed_out", "dead_letter"]);

export const isTerminal = (status: RunStatus): boolean => TERMINAL_STATUSES.has(status);

/** join returns, and the stream closes, once a run is terminal or paused. */
export const isSettled = (status: RunStatus): boolean => isTerminal(status) || status === "paused";

/** Statuses that hold a thread: the next run on it waits (enqueue) or is refused (reject). */
export const ACTIVE_STATUSES: readonly RunStatus[] = ["pending", "running", "cancelling"];

/**
 * Whether a run going from `from` to `to` lets go of its thread: it held it (pending, running or
 * cancelling) and now does not. The change then releases the thread's next blocked run (docs/runs.md).
 */
export const freesThread = (from: RunStatus, to: RunStatus): boolean => ACTIVE_STATUSES.includes(from) && !ACTIVE_STATUSES.includes(to);

/**
 * Whether the fields make a Command LangGraph would act on. A null `resume` is no resume (the
 * spec's default; LangGraph also reads it as absent), and an empty `update` writes nothing, so a
 * Command of only those is empty: LangGraph refuses it ("Received empty Command input").
 */
export const carriesCommand = (fields: Pick<CreateRunBody, "resume" | "update" | "goto">): boolean =>
  fields.resume != null || (fields.update != null && Object.keys(fields.update).length > 0) || fields.goto != null;

/** Statuses in which a worker holds the run's lease. */
export const LEASED_STATUSES: readonly RunStatus[] = ["running", "cancelling"];

const NETWORK_ERROR_CODES = new Set(["ECONNRESET", "ECONNREFUSED", "ETIMEDOUT", "EPIPE", "EAI_AGAIN", "ENOTFOUND"]);

/**
 * DESIGN.md "Which failures are retried": an error marked `retryable: true`, a Node network
 * error, or an undici one. Everything else ends the run failed at once.
 */
export function isRetryableError(error: unknown): boolean {
  if (typeof error !== "object" || error === null) return false;
  const { retryable, code, cause } = error as { retryable?: unknown; code?: unknown; cause?: unknown };
  if (retryable === true) return true;
  if (typeof code === "string" && (NETWORK_ERROR_CODES.has(code) || code.startsWith("UND_ERR_"))) return true;
  return cause !== undefined && cause !== error && isRetryableError(cause);
}

/** The error object a run that failed in graph code ends with. */
export function runErrorOf(error: unknown): RunError {
  const name = error instanceof Error ? error.name : "";
  // Graph code writes the message; it is stored, so it must be storable text.
  const message = storableText(error instanceof Error ? error.message : String(error));
  const code = name === "InvalidUpdateError" ? "invalid_update" : name === "BudgetExceededError" ? "budget_exceeded" : "run_failed";
  return { code, message, retryable: isRetryableError(error) };
}

/**
 * Prefixes of the `config.configurable` keys that LangGraph (`__pregel_`: its checkpointer, send,
 * scratchpad …) and Rudder (`__rudder`: the tenant, the checkpoint hook, the usage meter) put
 * there for a run: a request that set one would replace the machinery with data.
 */
export const RESERVED_CONFIGURABLE_PREFIXES = ["__pregel_", "__rudder"] as const;

/** A recursion limit's ceiling: the largest 32-bit integer (long-lived loops ask for a million). */
export const MAX_RECURSION_LIMIT = MAX_INT32;

/**
 * The most supersteps a run may take: `config.recursion_limit` as LangGraph Platform takes it
 * (the SDK's `Config`), or LangChain's own `recursionLimit`; undefined leaves the graph's (25).
 */
export function recursionLimitOf(config: Record<string, unknown> | undefined): number | undefined {
  const limit = config?.recursion_limit ?? config?.recursionLimit;
  return typeof limit === "number" ? limit : undefined;
}

/** A checkpoint of a thread: which one a run's config starts it from. */
export interface StartCheckpoint {
  readonly checkpointId: string;
  readonly checkpointNs: string;
}

/**
 * The checkpoint a run's config starts it from, as LangGraph reads it (`configurable.checkpoint_id`,
 * in `checkpoint_ns`, the root's when none); undefined when it names none (the thread's newest).
 */
export function startCheckpointOf(config: Record<string, unknown> | undefined): StartCheckpoint | undefined {
  const configurable = config?.configurable;
  if (typeof configurable !== "object" || configurable === null) return undefined;
  const { checkpoint_id: checkpointId, checkpoint_ns: checkpointNs } = configurable as Record<string, unknown>;
  if (typeof checkpointId !== "string" || checkpointId === "") return undefined;
  return { checkpointId, checkpointNs: typeof checkpointNs === "string" ? checkpointNs : "" };
}

/** Why a request's config may not be used (a reserved `configurable` key, a bad recursion limit), or undefined when it may. */
export function configProblem(config: Record<string, unknown> | undefined, where = "config"): string | undefined {
  for (const key of ["recursion_limit", "recursionLimit"]) {
    const limit = config?.[key];
    if (limit !== undefined && !(Number.isInteger(limit) && (limit as number) >= 1 && (limit as number) <= MAX_RECURSION_LIMIT))
      return `${where}/${key} must be an integer from 1 to ${MAX_RECURSION_LIMIT}`;
  }
  const configurable = config?.configurable;
  if (typeof configurable !== "object" || configurable === null || Array.isArray(configurable)) return undefined;
  const reserved = Object.keys(configurable).find((key) => RESERVED_CONFIGURABLE_PREFIXES.some((prefix) => key.startsWith(prefix)));
  if (reserved === undefined) return undefined;
  return `${where}/configurable/${reserved} is reserved: keys starting with ${RESERVED_CONFIGURABLE_PREFIXES.join(" or ")} are set by the server`;
}

/** A config a run (or an assistant, whose config its runs take) may use; else a 422 (`configProblem`). */
export function requireUsableConfig(config: Record<string, unknown> | undefined): void {
  const problem = configProblem(config);
  if (problem) throw new ApiError("validation_error", problem);
}

/** Exponential backoff between delivery attempts, bounded: base, 2×base, 4×base … at most 60 s. */
export function retryDelayMs(attempt: number, baseMs = 1000): number {
  return Math.min(60_000, baseMs * 2 ** Math.max(0, attempt - 1));
}

/** A create-run request with every field set: what `withRunDefaults` answers. */
export type CompleteRunRequest = Readonly<Required<CreateRunBody>>;

/**
 * A create-run request with the spec's default (section 2 "Run creation request fields") in
 * place of every field left out or sent null: the one place those defaults are written. The run
 * a create makes is built from it, and Idempotency-Key replays compare requests through it
 * (`requestFingerprint`), so a client that spells a default out sends the same request.
 */
export function withRunDefaults(request: CreateRunBody): CompleteRunRequest {
  return {
    assistant_id: request.assistant_id,
    input: request.input ?? null,
    context: request.context ?? {},
    config: request.config ?? {},
    resume: request.resume ?? null,
    update: request.update ?? null,
    goto: request.goto ?? null,
    durability: request.durability ?? "sync",
    multitask_strategy: request.multitask_strategy ?? "enqueue",
    run_timeout: request.run_timeout ?? null,
    max_model_calls: request.max_model_calls ?? null,
    max_tool_calls: request.max_tool_calls ?? null,
    max_tokens: request.max_tokens ?? null,
    max_cost: request.max_cost ?? null,
    metadata: request.metadata ?? {},
  };
}

/** The defaults alone, by field: what a request holds in a field it left out. assistant_id has none. */
const { assistant_id: _required, ...RUN_DEFAULTS } = withRunDefaults({ assistant_id: "" });

/**
 * Whether a field holds its default. Every default is null, a word or {}, so a large value (an
 * input) is told apart by its type at once, never written out to be compared.
 */
function isDefault(value: unknown, fallback: unknown): boolean {
  return value === fallback || (isEmptyObject(fallback) && isEmptyObject(value));
}

const isEmptyObject = (value: unknown): boolean =>
  typeof value === "object" && value !== null && !Array.isArray(value) && Object.keys(value).length === 0;

/**
 * A stable fingerprint of a create-run request on a thread (null: stateless), for Idempotency-Key
 * replays: the same key with the same request returns the original run; with another request it
 * is a conflict. Two requests are the same when they are once their defaults are applied
 * (`withRunDefaults`). The fingerprint leaves out each field at its default rather than writing
 * it in: the relation is the same, and a request that spells no default keeps the fingerprint
 * binaries before this rule stored, so a retry across an upgrade still replays.
 */
export function requestFingerprint(threadId: string | null, request: CompleteRunRequest): string {
  const fields: Record<string, unknown> = { thread_id: threadId, assistant_id: request.assistant_id };
  for (const [field, fallback] of Object.entries(RUN_DEFAULTS)) {
    const value = request[field as keyof typeof RUN_DEFAULTS];
    if (!isDefault(value, fallback)) fields[field] = value;
  }
  return createHash("sha256").update(canonicalJson(fields)).digest("hex");
}

/** JSON with object keys sorted, so equal values have one text. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}
