import { Type, type Static } from "typebox";
import { EventCursor, JsonObject, literals, Pagination, Timestamp, Uuid } from "./common.ts";
import { RunError, RunStatus } from "./runs.ts";

/** One entry of a run's event log, as listed and streamed (spec section 6: an SSE event's `data`). */
export const RunEvent = Type.Object(
  {
    id: Type.String(),
    run_id: Type.String(),
    sequence: Type.Integer({ minimum: 1 }),
    kind: Type.String(),
    data: JsonObject,
    created_at: Timestamp,
  },
  { $id: "RunEvent" },
);
export type RunEvent = Static<typeof RunEvent>;

export const RunEventsQuery = Type.Object(
  {
    after: Type.Optional(EventCursor({ description: "sequence to read after" })),
    ...Pagination,
  },
  { additionalProperties: false },
);
export type RunEventsQuery = Static<typeof RunEventsQuery>;

/** A reconnecting stream client sends the last sequence it processed. */
export const RunStreamHeaders = Type.Object({
  "last-event-id": Type.Optional(EventCursor({ description: "the last sequence the client processed" })),
});
export type RunStreamHeaders = Static<typeof RunStreamHeaders>;

/** Why a run ended cancelled: `run_cancelled.data.reason`. */
export const CANCEL_REASONS = ["cancel_requested", "cancel_previous", "lease_expired"] as const;
export const CancelReason = literals(CANCEL_REASONS);
export type CancelReason = Static<typeof CancelReason>;

const NodeName = Type.Union([Type.String(), Type.Null()]);
/** Where in the graph a subgraph's event came from: LangGraph's namespace, `["<node>:<task id>", ...]`. */
const SubgraphNamespace = Type.Optional(Type.Array(Type.String(), { minItems: 1 }));
/** The steering event's own fields, repeated in each of its lifecycle events (spec section 6). */
const steeringFields = { steering_event_id: Uuid, sequence: Type.Integer({ minimum: 1 }), kind: Type.String() };

/**
 * Every event kind and the one shape of its `data` (docs/events.md). The log's schema keeps
 * `data` an open object, so a client tolerates kinds it does not know; these give the known ones
 * their types, and the server builds each event against them.
 */
export const RUN_EVENT_DATA = {
  // The run's lifecycle, written with each status change.
  run_started: Type.Object({ attempt: Type.Integer({ minimum: 1 }), worker: Type.String() }),
  run_succeeded: Type.Object({}),
  run_paused: Type.Object({ interrupts: Type.Array(Type.Unknown()) }),
  run_failed: Type.Object({ error: RunError }),
  run_timed_out: Type.Object({ error: RunError }),
  run_dead_letter: Type.Object({ error: RunError }),
  run_retrying: Type.Object({
    attempt: Type.Integer({ minimum: 1 }),
    reason: literals(["error", "worker_shutdown"]),
    delay_ms: Type.Number({ minimum: 0 }),
    error: Type.Union([RunError, Type.Null()]),
  }),
  run_cancelled: Type.Object({ reason: CancelReason, from: RunStatus, error: RunError }),
  run_redriven: Type.Object({ from: RunStatus }),
  // The graph's progress, as LangGraph streams it.
  // `input` and `result` only when a run asked for them (LangGraph's `tasks`/`debug` stream modes).
  // `namespace` only on a subgraph's events, for runs that asked for them (LangGraph's `stream_subgraphs`).
  node_started: Type.Object({
    node: Type.String(),
    task_id: Type.String(),
    triggers: Type.Array(Type.String()),
    input: Type.Optional(Type.Unknown()),
    namespace: SubgraphNamespace,
  }),
  node_completed: Type.Object({
    node: Type.String(),
    task_id: Type.String(),
    error: Type.Union([Type.String(), Type.Null()]),
    interrupts: Type.Array(Type.Unknown()),
    result: Type.Optional(Type.Unknown()),
    namespace: SubgraphNamespace,
  }),
  values: Type.Object({ values: Type.Unknown(), namespace: SubgraphNamespace }),
  updates: Type.Object({ updates: Type.Unknown(), namespace: SubgraphNamespace }),
  custom: Type.Object({ data: Type.Unknown(), namespace: SubgraphNamespace }),
  messages: Type.Object({ message: Type.Unknown(), node: NodeName, metadata: JsonObject, namespace: SubgraphNamespace }),
  // Only when a run asked for it (LangGraph's `tools` stream mode): a tool's start, event, end or error.
  tools: Type.Object({ data: Type.Unknown(), namespace: SubgraphNamespace }),
  // Only when a run asked for it (LangGraph's `events` stream mode): a LangChain streamEvents v2 event.
  langchain_event: Type.Object({ event: JsonObject }),
  // Only when a run asked for it (LangGraph's `checkpoints`/`debug` stream modes).
  checkpoint: Type.Object({
    config: JsonObject,
    parent_config: Type.Union([JsonObject, Type.Null()]),
    values: Type.Unknown(),
    metadata: JsonObject,
    next: Type.Array(Type.String()),
    tasks: Type.Array(Type.Unknown()),
    namespace: SubgraphNamespace,
  }),
  // Steering (spec section 6, "Steering lifecycle events").
  "run.steer.accepted": Type.Object({ ...steeringFields, source_event_id: Type.Optional(Uuid) }),
  "run.steer.consumed": Type.Object({
    ...steeringFields,
    source_event_id: Type.Optional(Uuid),
    queue_latency_seconds: Type.Number({ minimum: 0 }),
    node: NodeName,
    namespace: Type.Array(Type.String()),
    task_id: Type.Union([Type.String(), Type.Null()]),
  }),
  "run.steer.superseded": Type.Object({
    ...steeringFields,
    source_event_id: Uuid,
    reason: literals(["resume_transfer", "unconsumed_at_final_boundary"]),
    superseded_by_run_id: Type.Union([Uuid, Type.Null()]),
    replacement_steering_event_id: Type.Union([Uuid, Type.Null()]),
  }),
};
export type RunEventKind = keyof typeof RUN_EVENT_DATA;
export type RunEventData = { [K in RunEventKind]: Static<(typeof RUN_EVENT_DATA)[K]> };

/** An event of a known kind as it is appended: the log adds its id, run, sequence and time. */
export type RunEventBody<K extends RunEventKind = RunEventKind> = { [Kind in K]: { kind: Kind; data: RunEventData[Kind] } }[K];

/** A logged event of a known kind, its `data` typed by its kind. */
export type KnownRunEvent = { [K in RunEventKind]: Omit<RunEvent, "kind" | "data"> & RunEventBody<K> }[RunEventKind];
