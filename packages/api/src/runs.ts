import { Type, type Static } from "typebox";
import { JsonObject, literals, Pagination, Timestamp, Uuid } from "./common.ts";

/** Run states (spec section 3). */
export const RUN_STATUSES = [
  "pending",
  "running",
  "cancelling",
  "paused",
  "succeeded",
  "failed",
  "cancelled",
  "timed_out",
  "dead_letter",
] as const;
export const RunStatus = literals(RUN_STATUSES);
export type RunStatus = Static<typeof RunStatus>;

export const MULTITASK_STRATEGIES = ["enqueue", "reject", "cancel_previous"] as const;
export const MultitaskStrategy = literals(MULTITASK_STRATEGIES);
export type MultitaskStrategy = Static<typeof MultitaskStrategy>;

export const DURABILITIES = ["sync", "async", "exit"] as const;
export const Durability = literals(DURABILITIES);
export type Durability = Static<typeof Durability>;

/** The spec's run error object. */
export const RunError = Type.Object({ code: Type.String(), message: Type.String(), retryable: Type.Boolean() });
export type RunError = Static<typeof RunError>;

/** What a run has spent: counted for chat models and tools, plus what graph code reports. */
export const RunUsage = Type.Object({ model_calls: Type.Number(), tool_calls: Type.Number(), tokens: Type.Number(), cost: Type.Number() });
export type RunUsage = Static<typeof RunUsage>;

/**
 * A run's `run_timeout` is at most one year, in seconds. The worker honours any value up to it
 * (its timer re-arms past Node's 24.8-day limit); beyond it is a 422.
 */
export const MAX_RUN_TIMEOUT_SECONDS = 365 * 24 * 60 * 60;

const NumberOrNull = Type.Union([Type.Number(), Type.Null()]);
const PositiveOrNull = (description: string) =>
  Type.Optional(Type.Union([Type.Number({ exclusiveMinimum: 0 }), Type.Null()], { description }));

/** A run as the API shows it (DESIGN.md "Run"). */
export const Run = Type.Object(
  {
    run_id: Uuid,
    thread_id: Type.Union([Uuid, Type.Null()]),
    assistant_id: Type.String(),
    status: RunStatus,
    input: Type.Unknown(),
    context: JsonObject,
    config: JsonObject,
    metadata: JsonObject,
    output: Type.Unknown(),
    error: Type.Union([RunError, Type.Null()]),
    attempt: Type.Integer(),
    multitask_strategy: MultitaskStrategy,
    durability: Durability,
    run_timeout: NumberOrNull,
    max_model_calls: NumberOrNull,
    max_tool_calls: NumberOrNull,
    max_tokens: NumberOrNull,
    max_cost: NumberOrNull,
    usage: RunUsage,
    superseded_by_run_id: Type.Union([Uuid, Type.Null()], { description: "set when a resume created the run that continues this one" }),
    steering_closed: Type.Boolean({ description: "steering admission closed before the final flush; reset on each claim" }),
    created_at: Timestamp,
    started_at: Type.Union([Timestamp, Type.Null()]),
    finished_at: Type.Union([Timestamp, Type.Null()]),
    updated_at: Timestamp,
  },
  { $id: "Run" },
);
export type Run = Static<typeof Run>;

/** What continues a paused run: LangGraph's Command (resume value, state update, next node). */
const commandFields = {
  update: Type.Optional(Type.Union([JsonObject, Type.Null()])),
  goto: Type.Optional(Type.Union([Type.String({ minLength: 1 }), Type.Null()])),
};

/** The spec's "Run creation request fields". */
export const CreateRunBody = Type.Object(
  {
    assistant_id: Type.String({ minLength: 1, description: "assistant to execute" }),
    input: Type.Optional(Type.Unknown({ description: "must satisfy the graph's input schema" })),
    context: Type.Optional(JsonObject),
    config: Type.Optional(JsonObject),
    resume: Type.Optional(Type.Unknown({ description: "value for the pending interrupt (a LangGraph Command)" })),
    ...commandFields,
    durability: Type.Optional(Durability),
    multitask_strategy: Type.Optional(MultitaskStrategy),
    run_timeout: Type.Optional(
      Type.Union([Type.Number({ exclusiveMinimum: 0, maximum: MAX_RUN_TIMEOUT_SECONDS }), Type.Null()], {
        description: "seconds for the whole run (at most one year)",
      }),
    ),
    max_model_calls: PositiveOrNull("shared budget"),
    max_tool_calls: PositiveOrNull("shared budget"),
    max_tokens: PositiveOrNull("shared budget"),
    max_cost: PositiveOrNull("shared budget"),
    metadata: Type.Optional(JsonObject),
  },
  { additionalProperties: false },
);
export type CreateRunBody = Static<typeof CreateRunBody>;

export const ResumeBody = Type.Object(
  {
    resume: Type.Optional(Type.Unknown({ description: "the value interrupt() returns" })),
    ...commandFields,
  },
  { additionalProperties: false },
);
export type ResumeBody = Static<typeof ResumeBody>;

export const RunIdParams = Type.Object({ run_id: Uuid }, { additionalProperties: false });
export type RunIdParams = Static<typeof RunIdParams>;

export const IdempotencyHeaders = Type.Object({
  "idempotency-key": Type.Optional(
    Type.String({ minLength: 1, maxLength: 255, description: "tenant-scoped; replays return the original run" }),
  ),
});
export type IdempotencyHeaders = Static<typeof IdempotencyHeaders>;

export const ListThreadRunsQuery = Type.Object({ ...Pagination }, { additionalProperties: false });
export type ListThreadRunsQuery = Static<typeof ListThreadRunsQuery>;

/** `GET /v1/runs`: the tenant's runs, newest first, filtered by any of these (DESIGN.md "Run list"). */
export const ListRunsQuery = Type.Object(
  {
    ...Pagination,
    status: Type.Optional(RunStatus),
    assistant_id: Type.Optional(Type.String({ minLength: 1 })),
    thread_id: Type.Optional(Uuid),
    metadata: Type.Optional(Type.String({ description: 'JSON object; runs whose metadata contains it (e.g. {"schedule_id":"…"})' })),
  },
  { additionalProperties: false },
);
export type ListRunsQuery = Static<typeof ListRunsQuery>;

/** join's default wait when `timeout` is omitted (DESIGN.md). */
export const JOIN_DEFAULT_TIMEOUT_SECONDS = 30;

export const JoinQuery = Type.Object(
  {
    timeout: Type.Optional(
      Type.Number({ exclusiveMinimum: 0, maximum: 300, default: JOIN_DEFAULT_TIMEOUT_SECONDS, description: "seconds" }),
    ),
  },
  { additionalProperties: false },
);
export type JoinQuery = Static<typeof JoinQuery>;
