import { randomUUID } from "node:crypto";
import type { ForkAnswer, ForkBody, JsonObject, Thread, ThreadState } from "@rudder/api";
import { ApiError, notFound } from "../domain/errors.ts";
import type { HistoryPage, ThreadStateReader } from "../graphs/thread-state.ts";
import type { Db } from "../storage/db.ts";
import {
  deleteThread,
  findThread,
  insertThread,
  countThreads,
  listThreads,
  lockThread,
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
      if (!(await lockThread(tx, tenantId, threadId))) throw notFound("thread", threadId);
      if (await threadHasActiveRun(tx, tenantId, threadId)) {
        throw new ApiError("conflict", `thread ${threadId} has an active run; cancel it or wait before deleting the thread`);
      }
      await deleteThread(tx, tenantId, threadId);
    });
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
