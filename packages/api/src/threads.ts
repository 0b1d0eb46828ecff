import { Type, type Static } from "typebox";
import { JsonObject, literals, Pagination, Timestamp, Uuid } from "./common.ts";

export const THREAD_STATUSES = ["idle", "busy", "paused", "error"] as const;
export const ThreadStatus = literals(THREAD_STATUSES);
export type ThreadStatus = Static<typeof ThreadStatus>;

export const Thread = Type.Object(
  {
    thread_id: Uuid,
    metadata: JsonObject,
    status: ThreadStatus,
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: "Thread" },
);
export type Thread = Static<typeof Thread>;

export const ThreadIdParams = Type.Object({ thread_id: Uuid }, { additionalProperties: false });
export type ThreadIdParams = Static<typeof ThreadIdParams>;

export const CreateThreadBody = Type.Object({ metadata: Type.Optional(JsonObject) }, { additionalProperties: false });
export type CreateThreadBody = Static<typeof CreateThreadBody>;

export const PatchThreadBody = Type.Object({ metadata: JsonObject }, { additionalProperties: false });
export type PatchThreadBody = Static<typeof PatchThreadBody>;

export const ListThreadsQuery = Type.Object(
  {
    ...Pagination,
    metadata: Type.Optional(Type.String({ description: "JSON object; threads whose metadata contains it" })),
  },
  { additionalProperties: false },
);
export type ListThreadsQuery = Static<typeof ListThreadsQuery>;

/** Where a checkpoint sits: the address a client passes back to read or fork from it. */
export const CheckpointRef = Type.Object(
  { thread_id: Type.String(), checkpoint_ns: Type.String(), checkpoint_id: Type.String() },
  { $id: "CheckpointRef" },
);
export type CheckpointRef = Static<typeof CheckpointRef>;

/** The named schemas the thread schemas refer to by `$ref`, for their static types. */
type ThreadRefs = { CheckpointRef: typeof CheckpointRef };

/** A thread's state at one checkpoint, in the shape LangGraph Platform clients read. */
export const ThreadState = Type.Object(
  {
    values: Type.Unknown(),
    next: Type.Array(Type.String()),
    tasks: Type.Array(
      Type.Object({
        id: Type.String(),
        name: Type.String(),
        error: Type.Union([Type.String(), Type.Null()]),
        interrupts: Type.Array(Type.Unknown()),
        result: Type.Optional(
          Type.Unknown({ description: "what the task wrote to the graph's output, when it finished in this checkpoint" }),
        ),
      }),
    ),
    checkpoint: Type.Union([Type.Ref("CheckpointRef"), Type.Null()]),
    parent_checkpoint: Type.Union([Type.Ref("CheckpointRef"), Type.Null()]),
    metadata: JsonObject,
    created_at: Type.Union([Timestamp, Type.Null()]),
  },
  { $id: "ThreadState" },
);
export type ThreadState = Static<typeof ThreadState, ThreadRefs>;

export const ThreadStateQuery = Type.Object(
  { checkpoint_id: Type.Optional(Type.String({ minLength: 1 })) },
  { additionalProperties: false },
);
export type ThreadStateQuery = Static<typeof ThreadStateQuery>;

export const ThreadHistoryQuery = Type.Object(
  {
    ...Pagination,
    before: Type.Optional(Type.String({ minLength: 1, description: "only checkpoints older than this checkpoint_id" })),
  },
  { additionalProperties: false },
);
export type ThreadHistoryQuery = Static<typeof ThreadHistoryQuery>;

export const ForkBody = Type.Object(
  {
    checkpoint_id: Type.Optional(Type.String({ minLength: 1 })),
    values: Type.Optional(JsonObject),
    as_node: Type.Optional(Type.String({ minLength: 1 })),
  },
  { additionalProperties: false },
);
export type ForkBody = Static<typeof ForkBody>;

/** The runtime config of the new lineage: pass it as a run's config to continue from that checkpoint. */
export const ForkAnswer = Type.Object({ configurable: Type.Ref("CheckpointRef") });
export type ForkAnswer = Static<typeof ForkAnswer, ThreadRefs>;
