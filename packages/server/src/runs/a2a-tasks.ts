import { createHash, randomUUID } from "node:crypto";
import type { Assistant, Run, RunEvent } from "@rudder/api";
import { ApiError } from "../domain/errors.ts";
import { isUuid } from "../domain/names.ts";
import { canonicalJson } from "../domain/runs.ts";
import { graphInputChannels } from "../graphs/input.ts";
import type { GraphRegistry } from "../graphs/registry.ts";
import { currentTaskRun, listTaskRuns, taskRunById, taskRunByIdempotencyKey, type TaskFilter, type TaskRun } from "../storage/a2a-tasks.ts";
import type { Db } from "../storage/db.ts";
import type { ThreadService } from "../threads/service.ts";
import type { RunService } from "./service.ts";

export type { TaskFilter, TaskRun };

/** What starts a task: the graph input a message asks for, on its context (thread) or a new one. */
export interface TaskStart {
  readonly input: Record<string, unknown>;
  readonly contextId: string | undefined;
  readonly messageId: string;
}

/** What an assistant's graph takes: its input fields, and where a message's text goes. */
export interface TaskInputShape {
  readonly channels: string[] | undefined;
  readonly messagesChannel: boolean;
  /** `metadata.a2a_text_field` of the assistant, default `input`. */
  readonly textField: string;
}

/** The run a message left the task at, and whether an earlier send of the same message had already (`replayed`). */
export interface TaskBegun {
  readonly run: TaskRun;
  readonly replayed: boolean;
}

/** What following a task's current run yields: its new events, then the run as it settled. */
export type TaskUpdate = { readonly type: "events"; readonly events: RunEvent[] } | { readonly type: "settled"; readonly run: TaskRun };

const DEFAULT_TEXT_FIELD = "input";

/**
 * A2A tasks over Rudder runs (docs/a2a.md): a task is its first run and the runs that resume it
 * (the chain `superseded_by_run_id` records); its context is the runs' thread. Runs are created,
 * resumed, cancelled and followed through `RunService`; tasks are read back from the runs table,
 * so any API process answers for any task, and nothing about a task lives in memory. The A2A
 * gateway speaks the protocol over this service.
 */
export class A2ATaskService {
  constructor(
    private readonly db: Db,
    private readonly runService: RunService,
    private readonly threads: ThreadService,
    private readonly graphs: GraphRegistry,
  ) {}

  async inputShapeOf(assistant: Assistant): Promise<TaskInputShape> {
    const graph = await this.graphs.get(assistant.graph_id);
    const channels = graph ? graphInputChannels(graph) : undefined;
    const field = assistant.metadata.a2a_text_field;
    return {
      channels,
      messagesChannel: channels?.includes("messages") ?? false,
      textField: typeof field === "string" && field ? field : DEFAULT_TEXT_FIELD,
    };
  }

  /** The task's current run; undefined for an id that names no task of the assistant (task ids are UUIDs). */
  async current(tenantId: string, assistantId: string, taskId: string): Promise<TaskRun | undefined> {
    return isUuid(taskId) ? currentTaskRun(this.db, tenantId, assistantId, taskId) : undefined;
  }

  list(
    tenantId: string,
    assistantId: string,
    filter: TaskFilter,
    page: { limit: number; offset: number },
  ): Promise<{ runs: TaskRun[]; total: number }> {
    return listTaskRuns(this.db, tenantId, assistantId, filter, page);
  }

  /**
   * Starts a task: a run whose id is the task's, tagged `a2a_task_id` as it is inserted, on the
   * message's context (thread) or a new one. The message id is the run's Idempotency-Key, so a
   * client that retries a send gets the task its first attempt started, never a second run.
   */
  async start(tenantId: string, assistant: Assistant, start: TaskStart): Promise<TaskBegun> {
    const key = idempotencyKeyOf(assistant.assistant_id, start.messageId);
    const fingerprint = fingerprintOf(start);
    const replay = await this.replay(tenantId, assistant.assistant_id, key, fingerprint);
    if (replay) return { run: replay, replayed: true };
    const threadId =
      start.contextId === undefined
        ? (await this.threads.create(tenantId, { a2a_assistant_id: assistant.assistant_id })).thread_id
        : await this.context(tenantId, start.contextId);
    const runId = randomUUID();
    const metadata = { a2a_task_id: runId, a2a_message_id: start.messageId, a2a_fingerprint: fingerprint };
    try {
      const { run } = await this.runService.create(
        tenantId,
        threadId,
        { assistant_id: assistant.assistant_id, input: start.input, metadata },
        { idempotencyKey: key, runId },
      );
      return { run: (await this.current(tenantId, assistant.assistant_id, run.run_id))!, replayed: false };
    } catch (error) {
      // The thread was made for this run only: without the run it would be an empty leftover.
      if (start.contextId === undefined) await this.threads.delete(tenantId, threadId).catch(() => undefined);
      // A concurrent send of the same message won the key (its new thread made its request differ).
      if (error instanceof ApiError && error.code === "idempotency_conflict") {
        const winner = await this.replay(tenantId, assistant.assistant_id, key, fingerprint);
        if (winner) return { run: winner, replayed: true };
      }
      throw error;
    }
  }

  /** The thread of an existing context; an unknown one (or another tenant's) is a fault in the request. */
  private async context(tenantId: string, contextId: string): Promise<string> {
    try {
      return (await this.threads.get(tenantId, contextId)).thread_id;
    } catch (error) {
      if (error instanceof ApiError && error.code === "not_found")
        throw new ApiError("validation_error", `contextId ${contextId} names no context of this tenant`);
      throw error;
    }
  }

  /** The task an earlier send of the same message started, as it is now (it may have been resumed since). */
  private async replay(tenantId: string, assistantId: string, key: string, fingerprint: string): Promise<TaskRun | undefined> {
    const found = await taskRunByIdempotencyKey(this.db, tenantId, key);
    if (!found) return undefined;
    if (found.fingerprint !== fingerprint)
      throw new ApiError("validation_error", "this messageId was already sent with a different message; give every message its own id");
    return (await this.current(tenantId, assistantId, found.run.task_id)) ?? found.run;
  }

  /**
   * Answers an input-required task: its paused run is resumed with `value`, and the new run carries
   * the task on, recording the answer's message id (`a2a_answer_message_id`) so that a retried
   * answer finds the run it started (`answeredBy`). A concurrent send of the same answer that lost
   * the resume gets that run too.
   */
  async resume(tenantId: string, assistantId: string, run: TaskRun, value: unknown, messageId: string): Promise<TaskBegun> {
    try {
      const next = await this.runService.resume(tenantId, run.run_id, { resume: value }, { metadata: { [ANSWER_KEY]: messageId } });
      return { run: taskRunOf(next, run.task_id), replayed: false };
    } catch (error) {
      if (!(error instanceof ApiError && error.code === "run_resume_conflict")) throw error;
      const current = await this.current(tenantId, assistantId, run.task_id);
      if (current && (await this.answeredBy(tenantId, current, messageId))) return { run: current, replayed: true };
      throw error;
    }
  }

  /** Whether the task's current run was started by the answer with this message id. */
  async answeredBy(tenantId: string, run: TaskRun, messageId: string): Promise<boolean> {
    return (await this.runService.get(tenantId, run.run_id)).metadata[ANSWER_KEY] === messageId;
  }

  /**
   * Cancels the task's current run and returns it. An answer may resume the task between the read
   * of `run` and the cancel (the cancel then meets a superseded run): the run that carries the task
   * on is cancelled instead, as a client that knows only the task id means.
   */
  async cancel(tenantId: string, assistantId: string, run: TaskRun): Promise<TaskRun> {
    for (let hop = 0; ; hop++) {
      try {
        await this.runService.cancel(tenantId, run.run_id);
        return run;
      } catch (error) {
        if (!(error instanceof ApiError && error.code === "run_superseded") || hop >= MAX_CANCEL_HOPS) throw error;
        const next = await this.current(tenantId, assistantId, run.task_id);
        if (!next || next.run_id === run.run_id) throw error;
        run = next;
      }
    }
  }

  /**
   * Follows the task's current run from the start of its durable event log: its events (unless
   * `events` is false) as they commit, then the run once it is terminal or paused. Ends early,
   * without `settled`, when `signal` aborts.
   */
  async *follow(
    tenantId: string,
    run: TaskRun,
    options: { events: boolean; signal: AbortSignal },
  ): AsyncGenerator<TaskUpdate, void, undefined> {
    for await (const update of this.runService.follow(tenantId, run.run_id, options)) {
      if (update.type === "events") yield update;
      if (update.type === "settled") yield { type: "settled", run: taskRunOf(update.run, run.task_id) };
    }
  }

  /** Waits until the run is terminal or paused, or `signal` aborts; then the run as it is. */
  async settle(tenantId: string, run: TaskRun, signal: AbortSignal): Promise<TaskRun> {
    for await (const update of this.follow(tenantId, run, { events: false, signal })) {
      if (update.type === "settled") return update.run;
    }
    return (await taskRunById(this.db, tenantId, run.task_id, run.run_id)) ?? run;
  }
}

/** A run of task `taskId`, as the task view reads it. */
function taskRunOf(run: Run, taskId: string): TaskRun {
  const { run_id, thread_id, status, output, error, created_at, updated_at } = run;
  return { task_id: taskId, run_id, thread_id, status, output, error, created_at, updated_at };
}

/** How many answers in a row a cancel follows before it gives up (each one resumed the task as the cancel read it). */
const MAX_CANCEL_HOPS = 3;

/** The run metadata key that records which answer (A2A message id) resumed the task into this run. */
const ANSWER_KEY = "a2a_answer_message_id";

/** Tenant-unique (assistant, message) key, within the Idempotency-Key length limit. */
function idempotencyKeyOf(assistantId: string, messageId: string): string {
  return `a2a:${createHash("sha256").update(`${assistantId}\n${messageId}`).digest("hex")}`;
}

function fingerprintOf(start: TaskStart): string {
  return createHash("sha256")
    .update(canonicalJson({ input: start.input, context_id: start.contextId ?? null }))
    .digest("hex");
}
