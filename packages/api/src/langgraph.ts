import { Type, type Static } from "typebox";
import { JsonObject, literals, MAX_INT32, Timestamp, Uuid } from "./common.ts";
import { ASSISTANT_ID_PATTERN } from "./assistants.ts";
import { Durability } from "./runs.ts";
import {
  NamespacePrefix,
  STORE_LIST_NAMESPACES_DEFAULT_LIMIT,
  STORE_SEARCH_DEFAULT_LIMIT,
  StoreFilter,
  StoreKey,
  StoreSearchHit,
  StoreTtl,
} from "./store.ts";

/**
 * The LangGraph Platform (Agent Server) API that Rudder serves at the root, beside `/v1`
 * (DESIGN.md "LangGraph Platform API"): the shapes `@langchain/langgraph-sdk`'s `Client` sends and
 * reads (its `schema.d.ts`: `Assistant`, `Thread`, `ThreadState`, `Run`, `RunStatus`,
 * `ThreadStatus`, `MultitaskStrategy`). Names on this surface are LangGraph's, not Rudder's.
 */

/** LangGraph's run statuses (the SDK's `RunStatus`). */
export const LG_RUN_STATUSES = ["pending", "running", "error", "success", "timeout", "interrupted"] as const;
export const LgRunStatus = literals(LG_RUN_STATUSES);
export type LgRunStatus = Static<typeof LgRunStatus>;

/** LangGraph's thread statuses (the SDK's `ThreadStatus`). */
export const LG_THREAD_STATUSES = ["idle", "busy", "interrupted", "error"] as const;
export const LgThreadStatus = literals(LG_THREAD_STATUSES);
export type LgThreadStatus = Static<typeof LgThreadStatus>;

/** LangGraph's multitask strategies (the SDK's `MultitaskStrategy`). */
export const LG_MULTITASK_STRATEGIES = ["reject", "interrupt", "rollback", "enqueue"] as const;
export const LgMultitaskStrategy = literals(LG_MULTITASK_STRATEGIES);
export type LgMultitaskStrategy = Static<typeof LgMultitaskStrategy>;

/** The stream modes the SDK offers (`StreamMode`); those Rudder serves are listed in docs/langgraph-api.md. */
export const LG_STREAM_MODES = [
  "values",
  "updates",
  "messages",
  "messages-tuple",
  "events",
  "custom",
  "debug",
  "tasks",
  "checkpoints",
  "tools",
  "lifecycle",
] as const;
export const LgStreamMode = literals(LG_STREAM_MODES);
export type LgStreamMode = Static<typeof LgStreamMode>;

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(schema: T) => Type.Union([schema, Type.Null()]);
const Opt = <T extends Parameters<typeof Type.Union>[0][number]>(schema: T) => Type.Optional(Nullable(schema));

/** An assistant, with LangGraph's `version` (Rudder's assistants have one version: 1). */
export const LgAssistant = Type.Object(
  {
    assistant_id: Type.String(),
    graph_id: Type.String(),
    name: Type.String(),
    description: Nullable(Type.String()),
    config: JsonObject,
    context: JsonObject,
    metadata: JsonObject,
    version: Type.Integer(),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: "LgAssistant" },
);
export type LgAssistant = Static<typeof LgAssistant>;

/** What an assistant search may sort by (the SDK's `AssistantSortBy`); anything else is a 422. */
export const LG_ASSISTANT_SORT_FIELDS = ["assistant_id", "graph_id", "name", "created_at", "updated_at"] as const;

/** What an assistant search may `select` (the SDK's `AssistantSelectField`). */
export const LG_ASSISTANT_SELECT_FIELDS = [
  "assistant_id",
  "graph_id",
  "name",
  "description",
  "config",
  "context",
  "created_at",
  "updated_at",
  "metadata",
  "version",
] as const;

export const LgAssistantSearchBody = Type.Object(
  {
    graph_id: Opt(Type.String()),
    name: Opt(Type.String()),
    metadata: Opt(JsonObject),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 10 })),
    offset: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_INT32, default: 0 })),
    sort_by: Opt(literals(LG_ASSISTANT_SORT_FIELDS)),
    sort_order: Opt(literals(["asc", "desc"])),
    select: Opt(Type.Array(literals(LG_ASSISTANT_SELECT_FIELDS), { maxItems: 16 })),
  },
  { additionalProperties: false },
);
export type LgAssistantSearchBody = Static<typeof LgAssistantSearchBody>;

/** `assistants.count`: the search's filters. */
export const LgAssistantCountBody = Type.Object(
  { graph_id: Opt(Type.String()), name: Opt(Type.String()), metadata: Opt(JsonObject) },
  { additionalProperties: false },
);
export type LgAssistantCountBody = Static<typeof LgAssistantCountBody>;

/** `assistants.create`: a tenant's own assistant (`if_exists` as threads'). */
/** The fields an assistant create may set and an update replace (metadata: merged in by an update). */
const lgAssistantFields = {
  name: Opt(Type.String({ minLength: 1, maxLength: 256 })),
  description: Opt(Type.String({ maxLength: 4096 })),
  config: Opt(JsonObject),
  context: Opt(JsonObject),
  metadata: Opt(JsonObject),
};

export const LgAssistantCreateBody = Type.Object(
  {
    graph_id: Type.String({ minLength: 1 }),
    assistant_id: Opt(Type.String({ pattern: ASSISTANT_ID_PATTERN })),
    if_exists: Opt(literals(["raise", "do_nothing"])),
    ...lgAssistantFields,
  },
  { additionalProperties: false },
);
export type LgAssistantCreateBody = Static<typeof LgAssistantCreateBody>;

/** `assistants.update`: the fields given replace the stored ones, except `metadata`, which is merged in. */
export const LgAssistantPatchBody = Type.Object(
  { graph_id: Opt(Type.String({ minLength: 1 })), ...lgAssistantFields },
  { additionalProperties: false },
);
export type LgAssistantPatchBody = Static<typeof LgAssistantPatchBody>;

export const LgAssistantDeleteQuery = Type.Object(
  {
    delete_threads: Type.Optional(
      Type.Union([literals(["0", "1", "true", "false"]), Type.Boolean()], {
        description: "also delete the threads whose latest run was the assistant's (metadata.assistant_id); busy threads stay",
      }),
    ),
  },
  { additionalProperties: false },
);
export type LgAssistantDeleteQuery = Static<typeof LgAssistantDeleteQuery>;

/** `assistants.getVersions`: Rudder keeps an assistant's current version only, so a page has at most one. */
export const LgAssistantVersionsBody = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 10 })),
    offset: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_INT32, default: 0 })),
    metadata: Opt(JsonObject),
  },
  { additionalProperties: false },
);
export type LgAssistantVersionsBody = Static<typeof LgAssistantVersionsBody>;

/** The SDK's `AssistantVersion`: the assistant as it was at `created_at`, without `updated_at`. */
export const LgAssistantVersion = Type.Omit(LgAssistant, ["updated_at"]);
export type LgAssistantVersion = Static<typeof LgAssistantVersion>;

export const LgAssistantLatestBody = Type.Object(
  { version: Type.Integer({ minimum: 1, maximum: MAX_INT32 }) },
  { additionalProperties: false },
);
export type LgAssistantLatestBody = Static<typeof LgAssistantLatestBody>;

/** The graph's nodes and edges, as LangGraph's `Graph.toJSON()` draws them. */
export const LgAssistantGraph = Type.Object({
  nodes: Type.Array(Type.Object({ id: Type.Union([Type.String(), Type.Number()]) }, { additionalProperties: true })),
  edges: Type.Array(Type.Object({ source: Type.String(), target: Type.String() }, { additionalProperties: true })),
});
export type LgAssistantGraph = Static<typeof LgAssistantGraph>;

export const LgGraphQuery = Type.Object(
  { xray: Type.Optional(Type.Union([Type.Boolean(), Type.Integer({ minimum: 0, maximum: 100 })])) },
  { additionalProperties: false },
);
export type LgGraphQuery = Static<typeof LgGraphQuery>;

const JsonSchemaOrNull = Nullable(Type.Unknown({ description: "a JSON Schema" }));
export const LgSubgraphParams = Type.Object(
  {
    assistant_id: Type.String({ minLength: 1, maxLength: 128 }),
    namespace: Type.Optional(Type.String({ minLength: 1, maxLength: 1024, description: "a subgraph's namespace (its node's name)" })),
  },
  { additionalProperties: false },
);
export type LgSubgraphParams = Static<typeof LgSubgraphParams>;

export const LgSubgraphQuery = Type.Object(
  { recurse: Type.Optional(Type.Union([literals(["0", "1", "true", "false"]), Type.Boolean()])) },
  { additionalProperties: false },
);
export type LgSubgraphQuery = Static<typeof LgSubgraphQuery>;

/** The SDK's `GraphSchema`. */
export const LgGraphSchemas = Type.Object({
  graph_id: Type.String(),
  input_schema: JsonSchemaOrNull,
  output_schema: JsonSchemaOrNull,
  state_schema: JsonSchemaOrNull,
  config_schema: JsonSchemaOrNull,
  context_schema: JsonSchemaOrNull,
});
export type LgGraphSchemas = Static<typeof LgGraphSchemas>;

/** The SDK's `Checkpoint`. */
export const LgCheckpoint = Type.Object(
  {
    thread_id: Type.String(),
    checkpoint_ns: Type.String(),
    checkpoint_id: Nullable(Type.String()),
    checkpoint_map: Nullable(JsonObject),
  },
  { $id: "LgCheckpoint" },
);
export type LgCheckpoint = Static<typeof LgCheckpoint>;

/** The SDK's `Thread`: its latest `values` and pending `interrupts` (by task id) ride along. */
export const LgThread = Type.Object(
  {
    thread_id: Uuid,
    created_at: Timestamp,
    updated_at: Timestamp,
    state_updated_at: Timestamp,
    metadata: JsonObject,
    status: LgThreadStatus,
    values: Type.Unknown(),
    interrupts: Type.Record(Type.String(), Type.Array(Type.Unknown())),
  },
  { $id: "LgThread" },
);
export type LgThread = Static<typeof LgThread>;

export const LgThreadCreateBody = Type.Object(
  {
    metadata: Opt(JsonObject),
    thread_id: Opt(
      Type.String({
        format: "uuid",
        description: "the thread's id, unique within the tenant (default: a new UUID); if_exists says what an id the tenant has does",
      }),
    ),
    if_exists: Opt(literals(["raise", "do_nothing"])),
    supersteps: Opt(Type.Array(Type.Unknown(), { maxItems: 0, description: "not supported (422 when non-empty)" })),
    ttl: Opt(Type.Unknown({ description: "not supported (422 when given)" })),
  },
  { additionalProperties: false },
);
export type LgThreadCreateBody = Static<typeof LgThreadCreateBody>;

export const LgThreadPatchBody = Type.Object(
  { metadata: Opt(JsonObject), ttl: Opt(Type.Unknown({ description: "not supported (422 when given)" })) },
  { additionalProperties: false },
);
export type LgThreadPatchBody = Static<typeof LgThreadPatchBody>;

/** What a thread search may sort by (the SDK's `ThreadSortBy`); anything else is a 422. */
export const LG_THREAD_SORT_FIELDS = ["thread_id", "status", "created_at", "updated_at", "state_updated_at"] as const;

/** What a thread search may `select` (the SDK's `ThreadSelectField`); a thread has no `config` or `context`, so those come back absent. */
export const LG_THREAD_SELECT_FIELDS = [
  "thread_id",
  "created_at",
  "updated_at",
  "state_updated_at",
  "metadata",
  "config",
  "context",
  "status",
  "values",
  "interrupts",
] as const;

export const LgThreadSearchBody = Type.Object(
  {
    metadata: Opt(JsonObject),
    ids: Opt(Type.Array(Uuid, { maxItems: 1000 })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 10 })),
    offset: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_INT32, default: 0 })),
    status: Opt(LgThreadStatus),
    sort_by: Opt(literals(LG_THREAD_SORT_FIELDS)),
    sort_order: Opt(literals(["asc", "desc"])),
    select: Opt(Type.Array(literals(LG_THREAD_SELECT_FIELDS), { maxItems: 16 })),
    values: Opt(JsonObject),
    extract: Opt(Type.Unknown()),
  },
  { additionalProperties: false },
);
export type LgThreadSearchBody = Static<typeof LgThreadSearchBody>;

/** `threads.count`: the search's filters. */
export const LgThreadCountBody = Type.Object(
  { metadata: Opt(JsonObject), status: Opt(LgThreadStatus), values: Opt(JsonObject) },
  { additionalProperties: false },
);
export type LgThreadCountBody = Static<typeof LgThreadCountBody>;

type LgRefs = { LgCheckpoint: typeof LgCheckpoint };

/** The SDK's `ThreadState`. */
export const LgThreadState = Type.Object(
  {
    values: Type.Unknown(),
    next: Type.Array(Type.String()),
    checkpoint: Nullable(Type.Ref("LgCheckpoint")),
    metadata: JsonObject,
    created_at: Nullable(Timestamp),
    parent_checkpoint: Nullable(Type.Ref("LgCheckpoint")),
    tasks: Type.Array(
      Type.Object({
        id: Type.String(),
        name: Type.String(),
        error: Nullable(Type.String()),
        interrupts: Type.Array(Type.Unknown()),
        checkpoint: Nullable(Type.Ref("LgCheckpoint")),
        state: Type.Null(),
        result: Type.Unknown(),
      }),
    ),
    interrupts: Type.Array(Type.Unknown()),
  },
  { $id: "LgThreadState" },
);
export type LgThreadState = Static<typeof LgThreadState, LgRefs>;

/** A `before`/`checkpoint` argument: a checkpoint id, or a config or checkpoint object holding one. */
const CheckpointLike = Type.Union([Type.String({ minLength: 1 }), JsonObject]);

export const LgHistoryBody = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 10 })),
    before: Opt(CheckpointLike),
    metadata: Opt(JsonObject),
    checkpoint: Opt(JsonObject),
    select: Opt(Type.Array(Type.String())),
  },
  { additionalProperties: false },
);
export type LgHistoryBody = Static<typeof LgHistoryBody>;

export const LgUpdateStateBody = Type.Object(
  {
    values: Type.Optional(Type.Unknown()),
    as_node: Opt(Type.String({ minLength: 1 })),
    checkpoint_id: Opt(Type.String({ minLength: 1 })),
    checkpoint: Opt(JsonObject),
  },
  { additionalProperties: false },
);
export type LgUpdateStateBody = Static<typeof LgUpdateStateBody>;

/** The new checkpoint: `checkpoint` as the Platform answers, `configurable` as the SDK's type reads it. */
export const LgUpdateStateAnswer = Type.Object({ checkpoint: Type.Ref("LgCheckpoint"), configurable: Type.Ref("LgCheckpoint") });
export type LgUpdateStateAnswer = Static<typeof LgUpdateStateAnswer, LgRefs>;

/** `threads.patchState`: keys added to the metadata of the thread's latest state. */
export const LgPatchStateBody = Type.Object({ metadata: JsonObject }, { additionalProperties: false });
export type LgPatchStateBody = Static<typeof LgPatchStateBody>;

/** `threads.getState` with a checkpoint object (`POST /threads/{id}/state/checkpoint`). */
export const LgStateAtCheckpointBody = Type.Object(
  { checkpoint: Opt(JsonObject), subgraphs: Opt(Type.Boolean()) },
  { additionalProperties: false },
);
export type LgStateAtCheckpointBody = Static<typeof LgStateAtCheckpointBody>;

/** `GET /threads/{id}/history`: the POST's page, in the query string. */
export const LgHistoryQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 10 })),
    before: Type.Optional(Type.String({ minLength: 1, description: "a checkpoint id" })),
  },
  { additionalProperties: false },
);
export type LgHistoryQuery = Static<typeof LgHistoryQuery>;

/** `threads.prune`: `delete` deletes the threads; `keep_latest` keeps each thread's latest checkpoint only. */
export const LgThreadPruneBody = Type.Object(
  {
    thread_ids: Type.Array(Uuid, { minItems: 1, maxItems: 1000 }),
    strategy: Opt(literals(["delete", "keep_latest"])),
  },
  { additionalProperties: false },
);
export type LgThreadPruneBody = Static<typeof LgThreadPruneBody>;

export const LgThreadPruneAnswer = Type.Object({ pruned_count: Type.Integer({ minimum: 0 }) });
export type LgThreadPruneAnswer = Static<typeof LgThreadPruneAnswer>;

export const LgStateQuery = Type.Object(
  { subgraphs: Type.Optional(Type.Boolean()), select: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])) },
  { additionalProperties: false },
);
export type LgStateQuery = Static<typeof LgStateQuery>;

export const LgThreadCheckpointParams = Type.Object(
  { thread_id: Uuid, checkpoint_id: Type.String({ minLength: 1 }) },
  { additionalProperties: false },
);
export type LgThreadCheckpointParams = Static<typeof LgThreadCheckpointParams>;

export const LgThreadRunParams = Type.Object({ thread_id: Uuid, run_id: Uuid }, { additionalProperties: false });
export type LgThreadRunParams = Static<typeof LgThreadRunParams>;

/** The SDK's `Run`; `kwargs` holds what the run was created with. */
export const LgRun = Type.Object(
  {
    run_id: Uuid,
    thread_id: Nullable(Uuid),
    assistant_id: Type.String(),
    created_at: Timestamp,
    updated_at: Timestamp,
    status: LgRunStatus,
    metadata: JsonObject,
    multitask_strategy: Nullable(LgMultitaskStrategy),
    kwargs: JsonObject,
  },
  { $id: "LgRun" },
);
export type LgRun = Static<typeof LgRun>;

/** LangGraph's Command: resume the pending interrupt, update state, go to a node. */
export const LgCommand = Type.Object(
  {
    resume: Type.Optional(Type.Unknown()),
    update: Opt(JsonObject),
    goto: Opt(Type.String({ minLength: 1, description: "a node name (Send objects are not supported)" })),
  },
  { additionalProperties: false },
);
export type LgCommand = Static<typeof LgCommand>;

/** The longest `after_seconds` a run may ask for: a year. */
export const MAX_AFTER_SECONDS = 366 * 24 * 3600;

/** The body of run create, wait and stream, on a thread or stateless, as the SDK sends it. */
export const LgRunCreateBody = Type.Object(
  {
    assistant_id: Type.String({ minLength: 1, description: "an assistant id, or a graph id" }),
    input: Type.Optional(Type.Unknown()),
    command: Opt(LgCommand),
    config: Opt(JsonObject),
    context: Opt(JsonObject),
    metadata: Opt(JsonObject),
    stream_mode: Opt(Type.Union([LgStreamMode, Type.Array(LgStreamMode, { maxItems: 16 })])),
    stream_subgraphs: Opt(Type.Boolean()),
    stream_resumable: Opt(Type.Boolean({ description: "every Rudder run is resumable; accepted and ignored" })),
    feedback_keys: Opt(Type.Array(Type.String(), { maxItems: 0, description: "not supported (422 when non-empty)" })),
    interrupt_before: Opt(
      Type.Union([Type.Literal("*"), Type.Array(Type.String({ minLength: 1 }), { maxItems: 256 })], {
        description: "node names (or every node) the run pauses before",
      }),
    ),
    interrupt_after: Opt(
      Type.Union([Type.Literal("*"), Type.Array(Type.String({ minLength: 1 }), { maxItems: 256 })], {
        description: "node names (or every node) the run pauses after",
      }),
    ),
    checkpoint: Opt(JsonObject),
    checkpoint_id: Opt(Type.String({ minLength: 1 })),
    webhook: Opt(Type.String({ description: "not supported (422 when given)" })),
    strict_resume: Opt(Type.Boolean()),
    multitask_strategy: Opt(LgMultitaskStrategy),
    on_completion: Opt(literals(["delete", "keep"])),
    on_disconnect: Opt(literals(["cancel", "continue"])),
    after_seconds: Opt(
      Type.Number({ minimum: 0, maximum: MAX_AFTER_SECONDS, description: "the run is created pending and starts no sooner than this" }),
    ),
    /** On a thread that does not exist: 404 ("reject", the default), or create it ("create"). */
    if_not_exists: Opt(literals(["reject", "create"])),
    checkpoint_during: Opt(Type.Boolean()),
    durability: Opt(Durability),
    langsmith_tracer: Opt(JsonObject),
  },
  { additionalProperties: false },
);
export type LgRunCreateBody = Static<typeof LgRunCreateBody>;

/** `runs.createBatch`: stateless runs, created in order. */
export const LgRunBatchBody = Type.Array(LgRunCreateBody, { minItems: 1, maxItems: 100 });
export type LgRunBatchBody = Static<typeof LgRunBatchBody>;

/** `runs.cancelMany`: a thread's runs (by status), or runs by id. */
export const LgCancelManyBody = Type.Object(
  {
    thread_id: Opt(Uuid),
    run_ids: Opt(Type.Array(Uuid, { minItems: 1, maxItems: 1000 })),
    status: Opt(literals(["pending", "running", "all"])),
  },
  { additionalProperties: false },
);
export type LgCancelManyBody = Static<typeof LgCancelManyBody>;

export const LgCancelManyQuery = Type.Object(
  { action: Type.Optional(literals(["interrupt", "rollback"])) },
  { additionalProperties: false },
);
export type LgCancelManyQuery = Static<typeof LgCancelManyQuery>;

/** What `runs.list` may `select` (the SDK's `RunSelectField`); a run has no `cancel_reason`, so it comes back absent. */
export const LG_RUN_SELECT_FIELDS = [
  "run_id",
  "thread_id",
  "assistant_id",
  "created_at",
  "updated_at",
  "status",
  "metadata",
  "kwargs",
  "multitask_strategy",
  "cancel_reason",
] as const;

export const LgListRunsQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 10 })),
    offset: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_INT32, default: 0 })),
    status: Type.Optional(LgRunStatus),
    select: Type.Optional(Type.Union([literals(LG_RUN_SELECT_FIELDS), Type.Array(literals(LG_RUN_SELECT_FIELDS), { maxItems: 16 })])),
  },
  { additionalProperties: false },
);
export type LgListRunsQuery = Static<typeof LgListRunsQuery>;

export const LgCancelQuery = Type.Object(
  {
    wait: Type.Optional(Type.Union([literals(["0", "1", "true", "false"]), Type.Boolean()])),
    action: Type.Optional(literals(["interrupt", "rollback"])),
    reason: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
);
export type LgCancelQuery = Static<typeof LgCancelQuery>;

export const LgJoinQuery = Type.Object(
  { cancel_on_disconnect: Type.Optional(Type.Union([literals(["0", "1", "true", "false"]), Type.Boolean()])) },
  { additionalProperties: false },
);
export type LgJoinQuery = Static<typeof LgJoinQuery>;

export const LgJoinStreamQuery = Type.Object(
  {
    cancel_on_disconnect: Type.Optional(Type.Union([literals(["0", "1", "true", "false"]), Type.Boolean()])),
    stream_mode: Type.Optional(Type.Union([LgStreamMode, Type.Array(LgStreamMode, { maxItems: 16 })])),
    namespace: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
    checkpoint_id: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
);
export type LgJoinStreamQuery = Static<typeof LgJoinStreamQuery>;

/** `Last-Event-ID` on this surface: a sequence, or `-1` for the start (LangGraph's convention). */
export const LgStreamHeaders = Type.Object({ "last-event-id": Type.Optional(Type.Integer({ minimum: -1, maximum: MAX_INT32 })) });
export type LgStreamHeaders = Static<typeof LgStreamHeaders>;

export const LgInfo = Type.Object({
  version: Type.String(),
  flags: Type.Object({ assistants: Type.Boolean(), crons: Type.Boolean(), langsmith: Type.Boolean(), store: Type.Boolean() }),
  rudder: Type.Object({ api: Type.String({ description: "where Rudder's own API lives" }) }),
});
export type LgInfo = Static<typeof LgInfo>;

export const LgOk = Type.Object({ ok: Type.Boolean() });
export type LgOk = Static<typeof LgOk>;

// The store (the SDK's `client.store`): the tenant's store, the same data as /v1/store.

/** A namespace segment on this surface: LangGraph joins segments with "." in a get's query, so none may hold one. */
const LgNamespaceSegment = Type.String({ minLength: 1, maxLength: 256, pattern: "^[^/.]+$" });
const LgNamespace = Type.Array(LgNamespaceSegment, { minItems: 1, maxItems: 32 });
const LgNamespacePattern = Type.Array(Type.String({ minLength: 1, maxLength: 256, pattern: "^[^/]+$" }), { maxItems: 32 });
const LgStoreLimit = (fallback: number) => Type.Integer({ minimum: 1, maximum: 1000, default: fallback });
const LgOffset = Type.Integer({ minimum: 0, maximum: MAX_INT32, default: 0 });

export const LgStorePutBody = Type.Object(
  {
    namespace: LgNamespace,
    key: StoreKey,
    value: JsonObject,
    index: Opt(
      Type.Union([Type.Literal(false), Type.Array(Type.String({ minLength: 1, maxLength: 256 }), { maxItems: 32 })], {
        description: "null: the configured fields; false: not indexed; a list of field paths: those",
      }),
    ),
    ttl: Type.Optional(StoreTtl),
  },
  { additionalProperties: false },
);
export type LgStorePutBody = Static<typeof LgStorePutBody>;

export const LgStoreItemQuery = Type.Object(
  {
    namespace: Type.String({ minLength: 1, maxLength: 8192, description: "the namespace's segments joined by '.'" }),
    key: StoreKey,
    refresh_ttl: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type LgStoreItemQuery = Static<typeof LgStoreItemQuery>;

export const LgStoreDeleteBody = Type.Object({ namespace: LgNamespace, key: StoreKey }, { additionalProperties: false });
export type LgStoreDeleteBody = Static<typeof LgStoreDeleteBody>;

export const LgStoreSearchBody = Type.Object(
  {
    namespace_prefix: Opt(NamespacePrefix),
    filter: Opt(StoreFilter),
    limit: Type.Optional(LgStoreLimit(STORE_SEARCH_DEFAULT_LIMIT)),
    offset: Type.Optional(LgOffset),
    query: Opt(Type.String({ minLength: 1, maxLength: 8192 })),
    refresh_ttl: Opt(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type LgStoreSearchBody = Static<typeof LgStoreSearchBody>;

export const LgStoreSearchAnswer = Type.Object({ items: Type.Array(StoreSearchHit) });
export type LgStoreSearchAnswer = Static<typeof LgStoreSearchAnswer>;

export const LgListNamespacesBody = Type.Object(
  {
    prefix: Opt(LgNamespacePattern),
    suffix: Opt(LgNamespacePattern),
    max_depth: Opt(Type.Integer({ minimum: 1, maximum: 32 })),
    limit: Type.Optional(LgStoreLimit(STORE_LIST_NAMESPACES_DEFAULT_LIMIT)),
    offset: Type.Optional(LgOffset),
  },
  { additionalProperties: false },
);
export type LgListNamespacesBody = Static<typeof LgListNamespacesBody>;

export const LgListNamespacesAnswer = Type.Object({ namespaces: Type.Array(Type.Array(Type.String())) });
export type LgListNamespacesAnswer = Static<typeof LgListNamespacesAnswer>;

// Crons (the SDK's `client.crons`), over Rudder's schedules (/v1/schedules).

/** The SDK's `Cron`: a Rudder schedule under LangGraph's names (cron_id = schedule_id, schedule = cron, next_run_date = next_run_at). */
export const LgCron = Type.Object(
  {
    cron_id: Uuid,
    assistant_id: Type.String(),
    thread_id: Nullable(Uuid),
    on_run_completed: Nullable(literals(["delete", "keep"])),
    end_time: Type.Null({ description: "crons do not end (end_time is not supported)" }),
    schedule: Type.String(),
    timezone: Type.String(),
    created_at: Timestamp,
    updated_at: Timestamp,
    payload: JsonObject,
    user_id: Type.Null(),
    next_run_date: Nullable(Timestamp),
    metadata: JsonObject,
    enabled: Type.Boolean(),
  },
  { $id: "LgCron" },
);
export type LgCron = Static<typeof LgCron>;

/** Fields the SDK may send that a Rudder schedule cannot carry: accepted only when absent, null or empty (else 422 naming them). */
export const LG_CRON_REFUSED_FIELDS = [
  "config",
  "context",
  "interrupt_before",
  "interrupt_after",
  "webhook",
  "checkpoint_during",
  "durability",
  "stream_mode",
  "stream_subgraphs",
  "end_time",
] as const;
const Refused = () => Type.Optional(Type.Unknown({ description: "not supported (422 when given)" }));
const refusedCronFields = {
  config: Refused(),
  context: Refused(),
  interrupt_before: Refused(),
  interrupt_after: Refused(),
  webhook: Refused(),
  checkpoint_during: Refused(),
  durability: Refused(),
  stream_mode: Refused(),
  stream_subgraphs: Refused(),
  end_time: Refused(),
};

const CronSchedule = Type.String({
  minLength: 1,
  maxLength: 200,
  description: "5 fields (minute hour day-of-month month day-of-week), or 6 with leading seconds",
});

export const LgCronCreateBody = Type.Object(
  {
    assistant_id: Type.String({ minLength: 1, description: "an assistant id, or a graph id" }),
    schedule: CronSchedule,
    timezone: Opt(Type.String({ minLength: 1, maxLength: 100 })),
    input: Opt(JsonObject),
    metadata: Opt(JsonObject),
    enabled: Opt(Type.Boolean()),
    multitask_strategy: Opt(LgMultitaskStrategy),
    on_run_completed: Opt(literals(["delete", "keep"])),
    stream_resumable: Opt(Type.Boolean({ description: "every Rudder run is resumable; accepted and ignored" })),
    ...refusedCronFields,
  },
  { additionalProperties: false },
);
export type LgCronCreateBody = Static<typeof LgCronCreateBody>;

export const LgCronUpdateBody = Type.Object(
  {
    schedule: Opt(CronSchedule),
    timezone: Opt(Type.String({ minLength: 1, maxLength: 100 })),
    input: Opt(JsonObject),
    metadata: Opt(JsonObject),
    enabled: Opt(Type.Boolean()),
    on_run_completed: Opt(literals(["delete", "keep"])),
    stream_resumable: Opt(Type.Boolean()),
    ...refusedCronFields,
  },
  { additionalProperties: false },
);
export type LgCronUpdateBody = Static<typeof LgCronUpdateBody>;

export const LG_CRON_SORT_FIELDS = ["cron_id", "assistant_id", "thread_id", "created_at", "updated_at", "next_run_date"] as const;
export const LG_CRON_SELECT_FIELDS = [
  "cron_id",
  "assistant_id",
  "thread_id",
  "end_time",
  "schedule",
  "created_at",
  "updated_at",
  "user_id",
  "payload",
  "next_run_date",
  "metadata",
  "now",
  "timezone",
  "enabled",
  "on_run_completed",
] as const;

export const LgCronSearchBody = Type.Object(
  {
    assistant_id: Opt(Type.String({ minLength: 1 })),
    thread_id: Opt(Uuid),
    enabled: Opt(Type.Boolean()),
    metadata: Opt(JsonObject),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 10 })),
    offset: Type.Optional(LgOffset),
    sort_by: Opt(literals(LG_CRON_SORT_FIELDS)),
    sort_order: Opt(literals(["asc", "desc"])),
    select: Opt(Type.Array(literals(LG_CRON_SELECT_FIELDS), { maxItems: 16 })),
  },
  { additionalProperties: false },
);
export type LgCronSearchBody = Static<typeof LgCronSearchBody>;

export const LgCronCountBody = Type.Object(
  { assistant_id: Opt(Type.String({ minLength: 1 })), thread_id: Opt(Uuid), metadata: Opt(JsonObject) },
  { additionalProperties: false },
);
export type LgCronCountBody = Static<typeof LgCronCountBody>;

export const LgCronIdParams = Type.Object({ cron_id: Uuid }, { additionalProperties: false });
export type LgCronIdParams = Static<typeof LgCronIdParams>;
