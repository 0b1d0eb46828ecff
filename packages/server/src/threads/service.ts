import { randomUUID } from "node:crypto";
import type { ForkAnswer, ForkBody, JsonObject, Thread, ThreadState } from "@rudder/api";
import { ApiError, notFound, undefinedOn } from "../domain/errors.ts";
import type { HistoryPage, ThreadStateReader } from "../graphs/thread-state.ts";
import type { Db, Queryable } from "../storage/db.ts";
import { deleteSchedulesOfThread } from "../storage/schedules.ts";
import {
  copyThread,
  deleteThread,
  findThread,
  insertThread,
  countThreads,
  listThreads,
  keepLatestCheckpoints,
  lockThread,
  mergeLatestCheckpointMetadata,
  writeThreadMetadata,
  threadHasActiveRun,
  type ThreadListQuery,
} from "../storage/threads.ts";

/**
 * Threads of a tenant and their checkpointed state. Another tenant's thread answers 404 exactly
 * as a missing one; every read of state checks the thread's tenant first.
 */
export class ThreadService {
  constructor(
    private readonly db: Db,
    private readonly state: ThreadStateReader,
  ) {}

  /**
   * A new thread, named by Rudder or, through the LangGraph API, by the client: ids are unique
   * within a tenant (the same id in two tenants is two threads). An id the tenant already has is a
   * 409 (`ifExists` "raise", the default), or answers the existing thread ("do_nothing"). An id
   * that is one of the tenant's run ids is always a 409: a stateless run's checkpoints are kept
   * under its run id, so a thread of that id would read them as its own.
   */
  async create(
    tenantId: string,
    metadata: JsonObject,
    options: { threadId?: string | undefined; ifExists?: "raise" | "do_nothing" | undefined } = {},
  ): Promise<Thread> {
    const threadId = options.threadId ?? randomUUID();
    const created = await insertThread(this.db, tenantId, threadId, metadata);
    if (created) return created;
    const existing = await findThread(this.db, tenantId, threadId);
    if (!existing) throw new ApiError("conflict", `thread id ${threadId} is the id of a run of this tenant; choose another`);
    if (options.ifExists === "do_nothing") return existing;
    throw new ApiError("conflict", `thread ${threadId} already exists (if_exists "do_nothing" answers it instead)`);
  }

  async get(tenantId: string, threadId: string): Promise<Thread> {
    const thread = await findThread(this.db, tenantId, threadId);
    if (!thread) throw notFound("thread", threadId);
    return thread;
  }

  async list(tenantId: string, query: ThreadListQuery): Promise<Thread[]> {
    return listThreads(this.db, tenantId, query);
  }

  async count(tenantId: string, query: Omit<ThreadListQuery, "limit" | "offset">): Promise<number> {
    return countThreads(this.db, tenantId, query);
  }

  async replaceMetadata(tenantId: string, threadId: string, metadata: JsonObject): Promise<Thread> {
    return this.writeMetadata(tenantId, threadId, metadata, "replace");
  }

  /** Adds these keys to the thread's metadata (LangGraph's PATCH), atomically. */
  async mergeMetadata(tenantId: string, threadId: string, metadata: JsonObject): Promise<Thread> {
    return this.writeMetadata(tenantId, threadId, metadata, "merge");
  }

  private async writeMetadata(tenantId: string, threadId: string, metadata: JsonObject, mode: "replace" | "merge"): Promise<Thread> {
    const thread = await writeThreadMetadata(this.db, tenantId, threadId, metadata, mode);
    if (!thread) throw notFound("thread", threadId);
    return thread;
  }

  /**
   * Deletes the thread and, in the same transaction, its runs, checkpoints and pending writes.
   * Refused (409) while a run is pending, running or cancelling; the thread row lock serialises
   * this check with run creation on the thread.
   */
  async delete(tenantId: string, threadId: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      await this.lockIdle(tx, tenantId, threadId, "deleting the thread");
      await deleteThread(tx, tenantId, threadId);
    });
    // Its schedules go once the thread has: in the same transaction, the delete would wait on a
    // schedule an executor holds while that executor waits on the thread (a deadlock). One firing
    // in between is refused (the thread is gone) and recorded on the schedule, which then goes.
    await deleteSchedulesOfThread(this.db, tenantId, threadId);
  }

  /**
   * A copy of the thread under a new id: its metadata, checkpoints and pending writes (LangGraph's
   * `threads.copy`), in one statement; the copy is idle and has no runs.
   */
  async copy(tenantId: string, threadId: string): Promise<Thread> {
    const copied = await copyThread(this.db, tenantId, threadId, randomUUID());
    if (!copied) throw notFound("thread", threadId);
    return copied;
  }

  /**
   * LangGraph's `threads.prune`: `delete` deletes each thread, `keep_latest` keeps only each
   * thread's latest checkpoints. A thread that is missing, or busy with a run, is left as it is and
   * not counted; the answer is how many were pruned.
   */
  async prune(tenantId: string, threadIds: readonly string[], strategy: "delete" | "keep_latest"): Promise<number> {
    let pruned = 0;
    const pruneOne = async (threadId: string): Promise<true> => {
      if (strategy === "delete") await this.delete(tenantId, threadId);
      else {
        await this.db.transaction(async (tx) => {
          await this.lockIdle(tx, tenantId, threadId, "pruning its checkpoints");
          await keepLatestCheckpoints(tx, tenantId, threadId);
        });
      }
      return true;
    };
    for (const threadId of new Set(threadIds)) {
      if (await pruneOne(threadId).catch(undefinedOn("not_found", "conflict"))) pruned += 1;
    }
    return pruned;
  }

  /** Locks the thread (404 when missing); 409 while a run of it is pending, running or cancelling. */
  private async lockIdle(tx: Queryable, tenantId: string, threadId: string, doing: string): Promise<void> {
    if (!(await lockThread(tx, tenantId, threadId))) throw notFound("thread", threadId);
    if (await threadHasActiveRun(tx, tenantId, threadId)) {
      throw new ApiError("conflict", `thread ${threadId} has an active run; cancel it or wait before ${doing}`);
    }
  }

  async stateOf(tenantId: string, threadId: string, checkpointId: string | undefined): Promise<ThreadState> {
    await this.get(tenantId, threadId);
    return this.state.state(tenantId, threadId, checkpointId);
  }

  async history(tenantId: string, threadId: string, options: HistoryPage): Promise<ThreadState[]> {
    await this.get(tenantId, threadId);
    return this.state.history(tenantId, threadId, options);
  }

  async fork(tenantId: string, threadId: string, request: ForkBody): Promise<ForkAnswer> {
    await this.get(tenantId, threadId);
    return this.state.fork(tenantId, threadId, request);
  }

  /** Adds these keys to the metadata of the thread's latest state (LangGraph's `patchState`); 404 when it has none. */
  async patchStateMetadata(tenantId: string, threadId: string, metadata: JsonObject): Promise<void> {
    await this.get(tenantId, threadId);
    if (!(await mergeLatestCheckpointMetadata(this.db, tenantId, threadId, metadata))) {
      throw new ApiError("not_found", `thread ${threadId} has no state yet: there is no checkpoint to patch`);
    }
  }

  /**
   * LangGraph's state update: a fork written as the thread's newest state, so, as on LangGraph
   * Platform, a 409 while a run of the thread is pending or running (that run would write over
   * the edit, which would be left on a side branch while the caller was told it had landed).
   */
  async updateState(tenantId: string, threadId: string, request: ForkBody): Promise<ForkAnswer> {
    await this.get(tenantId, threadId);
    if (await threadHasActiveRun(this.db, tenantId, threadId)) {
      throw new ApiError("conflict", `thread ${threadId} is busy: a run of it is pending or running; update its state once it has ended`);
    }
    return this.state.fork(tenantId, threadId, request);
  }
}
