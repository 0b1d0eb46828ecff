import type {
  Assistant,
  CheckpointRef,
  JsonObject,
  LgAssistant,
  LgAssistantVersion,
  LgCheckpoint,
  LgCron,
  LgMultitaskStrategy,
  LgRun,
  LgRunCreateBody,
  LgRunStatus,
  LgStreamMode,
  LgThread,
  LgThreadState,
  LgThreadStatus,
  MultitaskStrategy,
  Run,
  RunEvent,
  RunStatus,
  Schedule,
  Thread,
  ThreadState,
  ThreadStatus,
} from "@rudder/api";
import { LG_CRON_REFUSED_FIELDS } from "@rudder/api";
import { LANGGRAPH_KWARGS_KEY, langGraphKwargs } from "../../domain/langgraph-kwargs.ts";
import { plainMessages } from "../../domain/langchain-messages.ts";
import { snakeCase } from "../../domain/names.ts";
import { checkpointRefOf } from "../../graphs/thread-state.ts";

/**
 * The pure rules of the LangGraph Platform facade (DESIGN.md "LangGraph Platform API"): how
 * Rudder's names map to LangGraph's and which log events become which SSE events. No I/O.
 */

const RUN_STATUS: Record<RunStatus, LgRunStatus> = {
  pending: "pending",
  running: "running",
  cancelling: "running",
  // A paused run stopped at an interrupt; LangGraph calls that run a success and its thread interrupted.
  paused: "success",
  succeeded: "success",
  failed: "error",
  dead_letter: "error",
  cancelled: "interrupted",
  timed_out: "timeout",
};

export const lgRunStatus = (status: RunStatus): LgRunStatus => RUN_STATUS[status];

/** The Rudder statuses a LangGraph status filter selects. */
export const rudderRunStatuses = (status: LgRunStatus): RunStatus[] =>
  (Object.keys(RUN_STATUS) as RunStatus[]).filter((rudder) => RUN_STATUS[rudder] === status);

const THREAD_STATUS: Record<ThreadStatus, LgThreadStatus> = { idle: "idle", busy: "busy", paused: "interrupted", error: "error" };

export const lgThreadStatus = (status: ThreadStatus): LgThreadStatus => THREAD_STATUS[status];

export const rudderThreadStatus = (status: LgThreadStatus): ThreadStatus =>
  (Object.keys(THREAD_STATUS) as ThreadStatus[]).find((rudder) => THREAD_STATUS[rudder] === status)!;

/**
 * LangGraph's strategy as Rudder's: the default here is `reject` (LangGraph's), `interrupt` is
 * `cancel_previous`; `rollback` is `cancel_previous` too, and the facade starts the new run from
 * the checkpoint before the cancelled runs (`rollbackCheckpoint`).
 */
export function rudderMultitask(strategy: LgMultitaskStrategy | null | undefined): MultitaskStrategy {
  switch (strategy ?? "reject") {
    case "reject":
      return "reject";
    case "enqueue":
      return "enqueue";
    case "interrupt":
    case "rollback":
      return "cancel_previous";
  }
}

/** Where the run records what its LangGraph request asked (stream modes; the strategy, since Rudder's own has no `rollback`). */
export const LG_KWARGS_KEY = LANGGRAPH_KWARGS_KEY;

export function lgMultitask(run: Run): LgMultitaskStrategy {
  const recorded = kwargsOf(run).multitask_strategy;
  if (typeof recorded === "string") return recorded as LgMultitaskStrategy;
  return run.multitask_strategy === "cancel_previous" ? "interrupt" : run.multitask_strategy;
}

/** What a run created through the facade recorded about its request (stream modes, strategy), in its config. */
export const kwargsOf = (run: Pick<Run, "config">): JsonObject => langGraphKwargs(run.config);

export function lgRun(run: Run): LgRun {
  const kwargs = kwargsOf(run);
  return {
    run_id: run.run_id,
    thread_id: run.thread_id,
    assistant_id: run.assistant_id,
    created_at: run.created_at,
    updated_at: run.updated_at,
    status: lgRunStatus(run.status),
    metadata: run.metadata,
    multitask_strategy: lgMultitask(run),
    kwargs: { input: run.input, config: withoutKwargs(run.config), context: run.context, stream_mode: streamModesOf(run), ...kwargs },
  };
}

function withoutKwargs(config: JsonObject): JsonObject {
  const configurable = config.configurable;
  if (typeof configurable !== "object" || configurable === null || !(LG_KWARGS_KEY in configurable)) return config;
  const { [LG_KWARGS_KEY]: _dropped, ...rest } = configurable as JsonObject;
  return { ...config, configurable: rest };
}

/** Rudder keeps one version of an assistant, which an update replaces. */
export const LG_ASSISTANT_VERSION = 1;

export const lgAssistant = (assistant: Assistant): LgAssistant => ({ ...assistant, version: LG_ASSISTANT_VERSION });

/** The assistant as its one version (the SDK's `AssistantVersion`), made when it was last written. */
export const lgAssistantVersion = ({ updated_at, created_at: _created, ...assistant }: Assistant): LgAssistantVersion => ({
  ...assistant,
  created_at: updated_at,
  version: LG_ASSISTANT_VERSION,
});

/** Pending interrupts of a state, by task id (the SDK's `Thread.interrupts`). */
function interruptsByTask(state: ThreadState | undefined): Record<string, unknown[]> {
  const byTask: Record<string, unknown[]> = {};
  for (const task of state?.tasks ?? []) if (task.interrupts.length) byTask[task.id] = task.interrupts;
  return byTask;
}

export function lgThread(thread: Thread, state?: ThreadState): LgThread {
  return {
    thread_id: thread.thread_id,
    created_at: thread.created_at,
    updated_at: thread.updated_at,
    state_updated_at: state?.created_at ?? thread.updated_at,
    metadata: thread.metadata,
    status: lgThreadStatus(thread.status),
    values: state?.values ?? {},
    interrupts: interruptsByTask(state),
  };
}

export const lgCheckpoint = (ref: CheckpointRef | null): LgCheckpoint | null => (ref === null ? null : { ...ref, checkpoint_map: null });

export function lgThreadState(state: ThreadState): LgThreadState {
  return {
    values: state.values,
    next: state.next,
    checkpoint: lgCheckpoint(state.checkpoint),
    metadata: state.metadata,
    created_at: state.created_at,
    parent_checkpoint: lgCheckpoint(state.parent_checkpoint),
    tasks: state.tasks.map((task) => ({ ...task, checkpoint: null, state: null, result: task.result ?? null })),
    interrupts: state.tasks.flatMap((task) => task.interrupts),
  };
}

/** A `debug` checkpoint's payload: the recorded checkpoint with the checkpoints its configs name, as the Platform adds them. */
const debugCheckpoint = (data: JsonObject): JsonObject => ({
  ...data,
  checkpoint: lgCheckpoint(checkpointRefOf(data.config as Parameters<typeof checkpointRefOf>[0])),
  parent_checkpoint: lgCheckpoint(checkpointRefOf(data.parent_config as Parameters<typeof checkpointRefOf>[0])),
});

/** A checkpoint named by id, by a checkpoint object, or by a config's `configurable`. */
export function checkpointIdOf(value: string | JsonObject | null | undefined): string | undefined {
  if (value === null || value === undefined) return undefined;
  if (typeof value === "string") return value;
  const direct = value.checkpoint_id;
  if (typeof direct === "string") return direct;
  const configurable = value.configurable;
  if (typeof configurable === "object" && configurable !== null) {
    const nested = (configurable as JsonObject).checkpoint_id;
    if (typeof nested === "string") return nested;
  }
  return undefined;
}

/**
 * What `wait` and `join` answer (DESIGN.md): the run's last values; a paused run's carry its
 * `__interrupt__`; a run that failed or timed out answers `{__error__: {error, message}}`.
 */
export function waitBody(run: Run): unknown {
  if (run.error && (run.status === "failed" || run.status === "dead_letter" || run.status === "timed_out")) {
    return { __error__: { error: run.error.code, message: run.error.message } };
  }
  return run.output ?? {};
}

/** The fields of a run request this facade cannot honour yet, each with why (a 422 names them). */
export function unsupportedRunFields(body: LgRunCreateBody): string[] {
  const refused: string[] = [];
  if (body.webhook != null) refused.push("webhook (webhooks are not supported)");
  if (body.feedback_keys?.length) refused.push("feedback_keys (LangSmith feedback is not supported)");
  return refused;
}

const nonEmpty = (value: "*" | string[] | null | undefined): value is "*" | string[] =>
  value === "*" || (Array.isArray(value) && value.length > 0);

/**
 * What a LangGraph run request records about itself in the run's config (`LG_KWARGS_KEY`): its
 * stream modes, strategy, subgraph streaming and static breakpoints (the worker reads the last).
 */
export function requestKwargs(body: LgRunCreateBody, modes: readonly LgStreamMode[], strategy: LgMultitaskStrategy): JsonObject {
  return {
    stream_mode: [...modes],
    multitask_strategy: strategy,
    stream_subgraphs: body.stream_subgraphs ?? false,
    ...(nonEmpty(body.interrupt_before) ? { interrupt_before: body.interrupt_before } : {}),
    ...(nonEmpty(body.interrupt_after) ? { interrupt_after: body.interrupt_after } : {}),
  };
}

/** A config with its recorded LangGraph kwargs replaced. */
export function withKwargs(config: JsonObject, kwargs: JsonObject): JsonObject {
  const configurable = typeof config.configurable === "object" && config.configurable !== null ? (config.configurable as JsonObject) : {};
  return { ...config, configurable: { ...configurable, [LG_KWARGS_KEY]: kwargs } };
}

/** The breakpoint node names of a request that name no node of the graph (`*` names every node). */
export function unknownBreakpointNodes(body: LgRunCreateBody, nodes: readonly string[]): string[] {
  const named = [body.interrupt_before, body.interrupt_after].flatMap((value) => (Array.isArray(value) ? value : []));
  return [...new Set(named.filter((node) => !nodes.includes(node)))];
}

/** The modes a request asks for; LangGraph's default is `values`. */
export function requestedStreamModes(mode: LgStreamMode | LgStreamMode[] | null | undefined): LgStreamMode[] {
  if (mode === null || mode === undefined) return ["values"];
  const modes = Array.isArray(mode) ? mode : [mode];
  return modes.length ? [...new Set(modes)] : ["values"];
}

/** The modes this facade can serve from the run's event log. */
export const SERVED_STREAM_MODES: readonly LgStreamMode[] = [
  "values",
  "updates",
  "messages",
  "messages-tuple",
  "custom",
  "tasks",
  "checkpoints",
  "debug",
  "events",
  "tools",
];

export const unservedStreamModes = (modes: readonly LgStreamMode[]): LgStreamMode[] =>
  modes.filter((mode) => !SERVED_STREAM_MODES.includes(mode));

/** The stream modes a run was created with (recorded in its kwargs), for a join without `stream_mode`. */
export function streamModesOf(run: Pick<Run, "config">): LgStreamMode[] {
  const recorded = kwargsOf(run).stream_mode;
  return Array.isArray(recorded) ? (recorded as LgStreamMode[]) : ["values"];
}

/**
 * `Last-Event-ID` on this surface: absent or `-1` replays from the start (the `metadata` event
 * first); `n` continues after the event with id `n` (ids are the run's event sequences; the
 * metadata event is `0`).
 */
export const replayAfter = (lastEventId: number | undefined): number | undefined =>
  lastEventId === undefined || lastEventId < 0 ? undefined : lastEventId;

/** One SSE event of this surface. */
export interface LgSseEvent {
  readonly id: string;
  readonly event: string;
  readonly data: unknown;
}

/** The first event: the run and its attempt (1 for a run no worker has claimed yet, as LangGraph counts). */
export const metadataEvent = (run: Pick<Run, "run_id" | "attempt">): LgSseEvent => ({
  id: "0",
  event: "metadata",
  data: { run_id: run.run_id, attempt: Math.max(run.attempt, 1) },
});

/**
 * Turns a run's log events into LangGraph SSE events for the modes asked (DESIGN.md): `values`,
 * `updates`, `custom` as LangGraph streams them; `messages-tuple` as `messages` `[chunk,
 * metadata]`; `messages` as `messages/metadata` once per message, then `messages/partial` with the
 * message so far, and `messages/complete` at the end of the step; `tasks` from the node events;
 * a failure as `error`. Rudder's own events (lifecycle, steering) are not sent. Stateful: one per
 * stream, fed the log in order.
 */
export class LgEventMapper {
  private readonly modes: ReadonlySet<LgStreamMode>;
  private readonly partial = new Map<string, Map<string, JsonObject>>();
  /** The step of the last checkpoint seen: tasks that follow belong to the next step (for `debug`). */
  private step = -1;

  constructor(modes: readonly LgStreamMode[]) {
    this.modes = new Set(modes);
  }

  /**
   * A subgraph's events (recorded for runs created with `stream_subgraphs`) are named
   * `<event>|<namespace>` as LangGraph does, e.g. `updates|child:<task id>`.
   */
  map(event: RunEvent): LgSseEvent[] {
    const namespace = event.data.namespace;
    if (!Array.isArray(namespace) || namespace.length === 0) return this.mapRoot(event, "");
    const suffix = `|${namespace.join("|")}`;
    return this.mapRoot(event, suffix).map((sse) => ({ ...sse, event: sse.event + suffix }));
  }

  private mapRoot(event: RunEvent, scope: string): LgSseEvent[] {
    const id = String(event.sequence);
    const { namespace: _namespace, ...data } = event.data;
    switch (event.kind) {
      case "values":
        return this.modes.has("values") ? [{ id, event: "values", data: data.values }] : [];
      case "updates":
        return [...(this.modes.has("updates") ? [{ id, event: "updates", data: data.updates }] : []), ...this.completeMessages(id, scope)];
      case "custom":
        return this.modes.has("custom") ? [{ id, event: "custom", data: data.data }] : [];
      case "tools":
        return this.modes.has("tools") ? [{ id, event: "tools", data: data.data }] : [];
      case "langchain_event":
        return this.modes.has("events") ? [{ id, event: "events", data: data.event }] : [];
      case "messages":
        return this.messages(id, data, scope);
      case "node_started":
        return this.task(id, event, "task", {
          id: data.task_id,
          name: data.node,
          ...("input" in data ? { input: data.input } : {}),
          triggers: data.triggers,
          interrupts: [],
        });
      case "node_completed":
        return this.task(id, event, "task_result", {
          id: data.task_id,
          name: data.node,
          ...("result" in data ? { result: data.result } : {}),
          error: data.error,
          interrupts: data.interrupts,
        });
      case "checkpoint": {
        const step = (data.metadata as JsonObject | undefined)?.step;
        if (typeof step === "number" && scope === "") this.step = step;
        return [
          ...(this.modes.has("checkpoints") ? [{ id, event: "checkpoints", data }] : []),
          ...(this.modes.has("debug")
            ? [
                {
                  id,
                  event: "debug",
                  data: { type: "checkpoint", timestamp: event.created_at, step: this.step, payload: debugCheckpoint(data) },
                },
              ]
            : []),
        ];
      }
      case "run_failed":
      case "run_timed_out":
      case "run_dead_letter": {
        const error = data.error as { code?: string; message?: string } | undefined;
        return [{ id, event: "error", data: { error: error?.code ?? event.kind, message: error?.message ?? "the run failed" } }];
      }
      default:
        return [];
    }
  }

  private task(id: string, event: RunEvent, type: "task" | "task_result", payload: JsonObject): LgSseEvent[] {
    return [
      ...(this.modes.has("tasks") ? [{ id, event: "tasks", data: payload }] : []),
      ...(this.modes.has("debug")
        ? [{ id, event: "debug", data: { type, timestamp: event.created_at, step: this.step + 1, payload } }]
        : []),
    ];
  }

  private messages(id: string, data: JsonObject, scope: string): LgSseEvent[] {
    const out: LgSseEvent[] = [];
    const message = (typeof data.message === "object" && data.message !== null ? data.message : { content: data.message }) as JsonObject;
    const metadata = (data.metadata ?? {}) as JsonObject;
    if (this.modes.has("messages-tuple")) out.push({ id, event: "messages", data: [message, metadata] });
    if (this.modes.has("messages")) {
      const messageId = typeof message.id === "string" ? message.id : `run-message-${id}`;
      const partial = this.partialIn(scope);
      const previous = partial.get(messageId);
      if (!previous) out.push({ id, event: "messages/metadata", data: { [messageId]: { metadata } } });
      const merged = previous
        ? { ...previous, ...message, content: concatContent(previous.content, message.content) }
        : { ...message, id: messageId };
      partial.set(messageId, merged);
      out.push({ id, event: "messages/partial", data: [merged] });
    }
    return out;
  }

  /** Messages being streamed, by message id, in one graph or subgraph (`scope`: its event-name suffix). */
  private partialIn(scope: string): Map<string, JsonObject> {
    let partial = this.partial.get(scope);
    if (!partial) this.partial.set(scope, (partial = new Map()));
    return partial;
  }

  /** At the end of a step, the messages streamed in it (in the same graph or subgraph) are complete. */
  private completeMessages(id: string, scope: string): LgSseEvent[] {
    const partial = this.partial.get(scope);
    if (!this.modes.has("messages") || !partial?.size) return [];
    const done = [...partial.values()];
    this.partial.delete(scope);
    return [{ id, event: "messages/complete", data: done }];
  }
}

function concatContent(before: unknown, chunk: unknown): unknown {
  if (typeof before === "string" && typeof chunk === "string") return before + chunk;
  if (Array.isArray(before) && Array.isArray(chunk)) return [...before, ...chunk];
  return chunk ?? before;
}

/** One event in SSE wire format (LangGraph's field order: event, data, id); LangChain messages as plain dicts. */
export const formatSse = (event: LgSseEvent): string =>
  `event: ${event.event}\ndata: ${JSON.stringify(plainMessages(event.data ?? null))}\nid: ${event.id}\n\n`;

// Crons: Rudder's schedules under LangGraph's names.

/**
 * A schedule as the SDK's `Cron`: cron_id = schedule_id, schedule = cron, next_run_date =
 * next_run_at (null while disabled). `payload` is what each fire runs (assistant and input); a
 * stateless cron's runs have no thread, so `on_run_completed` reads "delete" (nothing is kept).
 */
export function lgCron(schedule: Schedule): LgCron {
  return {
    cron_id: schedule.schedule_id,
    assistant_id: schedule.assistant_id,
    thread_id: schedule.thread_id,
    on_run_completed: schedule.thread_id === null ? "delete" : null,
    end_time: null,
    schedule: schedule.cron,
    timezone: schedule.timezone,
    created_at: schedule.created_at,
    updated_at: schedule.updated_at,
    payload: { assistant_id: schedule.assistant_id, input: schedule.input },
    user_id: null,
    next_run_date: schedule.next_run_at,
    metadata: schedule.metadata,
    enabled: schedule.enabled,
  };
}

/** The cron fields LangGraph sends that a schedule cannot carry and that were given (not absent, null or empty). */
export function refusedCronFields(body: Partial<Record<(typeof LG_CRON_REFUSED_FIELDS)[number], unknown>>): string[] {
  return LG_CRON_REFUSED_FIELDS.filter((field) => {
    const value = body[field];
    if (value === undefined || value === null || value === false) return false;
    if (Array.isArray(value)) return value.length > 0;
    if (typeof value === "object") return Object.keys(value).length > 0;
    return true;
  });
}

/**
 * Why a cron body cannot become a schedule, or undefined when it can: refused fields are named;
 * a multitask strategy other than enqueue (a schedule's runs queue on their thread) and
 * `on_run_completed: "keep"` for a stateless cron (its runs have no thread to keep) are refused.
 */
export function cronRefusal(
  body: Partial<Record<(typeof LG_CRON_REFUSED_FIELDS)[number], unknown>> & {
    multitask_strategy?: LgMultitaskStrategy | null | undefined;
    on_run_completed?: "delete" | "keep" | null | undefined;
  },
  stateless: boolean,
): string | undefined {
  const refused = refusedCronFields(body);
  if (refused.length)
    return `${refused.join(", ")}: not supported on crons (Rudder schedules carry assistant, schedule, timezone, input, metadata, enabled)`;
  if (body.multitask_strategy != null && body.multitask_strategy !== "enqueue")
    return `multitask_strategy: a cron's runs are always enqueued on their thread ("${body.multitask_strategy}" is not supported)`;
  if (stateless && body.on_run_completed === "keep")
    return 'on_run_completed: a stateless cron\'s runs have no thread to keep ("delete" is what happens)';
  return undefined;
}

const CRON_SORT_COLUMN = {
  cron_id: "schedule_id",
  assistant_id: "assistant_id",
  thread_id: "thread_id",
  created_at: "created_at",
  updated_at: "updated_at",
  next_run_date: "next_run_at",
} as const;

/** LangGraph's cron sort field as the schedule column it names. */
export const cronSortColumn = (field: keyof typeof CRON_SORT_COLUMN) => CRON_SORT_COLUMN[field];

/** Only the `select`ed fields of a record (all without a select); a field it does not have is left out. */
export function selectFields(record: object, select: readonly string[] | null | undefined): Record<string, unknown> {
  const full = record as Record<string, unknown>;
  if (!select?.length) return full;
  return Object.fromEntries(select.filter((field) => field in full).map((field) => [field, full[field]]));
}

/** Only the `select`ed fields of a cron; `now` is the server's time. */
export const selectCronFields = (cron: LgCron, select: readonly string[] | null | undefined, now: Date): Record<string, unknown> =>
  selectFields(select?.length ? { ...cron, now: now.toISOString() } : cron, select);

/** A namespace from a get's query: LangGraph joins the segments with ".". */
export const lgNamespaceOf = (joined: string): string[] => joined.split(".");

/**
 * A batch item as the SDK's `runs.createBatch` sends it: its own camelCase payload spread beside
 * `assistant_id` (`{assistantId, assistant_id, input, streamMode, ...}`). Each camelCase key is
 * read as its snake_case field (the field given in snake_case wins), so every option means what it
 * means in `runs.create`; anything else still meets the body's rules.
 */
export function snakeCaseKeys(item: unknown): unknown {
  if (typeof item !== "object" || item === null || Array.isArray(item)) return item;
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(item)) {
    const snake = snakeCase(key);
    if (snake === key || !(snake in item)) fields[snake] = value;
  }
  return fields;
}

/** A boolean query flag as LangGraph clients send it: `true`, `"true"` or `"1"`. */
export const truthy = (value: string | boolean | undefined): boolean => value === true || value === "1" || value === "true";
