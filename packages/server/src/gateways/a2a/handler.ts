import type {
  AgentCard,
  CancelTaskRequest,
  DeleteTaskPushNotificationConfigRequest,
  GetTaskPushNotificationConfigRequest,
  GetTaskRequest,
  ListTaskPushNotificationConfigsRequest,
  ListTaskPushNotificationConfigsResponse,
  ListTasksRequest,
  ListTasksResponse,
  Message,
  SendMessageRequest,
  StreamResponse,
  SubscribeToTaskRequest,
  Task,
  TaskPushNotificationConfig,
} from "@a2a-js/sdk";
import { TaskState } from "@a2a-js/sdk";
import {
  A2AError,
  ExtendedAgentCardNotConfiguredError,
  JsonRpcTransportError,
  PushNotificationNotSupportedError,
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from "@a2a-js/sdk/errors";
import type { A2ARequestHandler } from "@a2a-js/sdk/server";
import type { Assistant } from "@rudder/api";
import type { FastifyBaseLogger } from "fastify";
import { ApiError, type ErrorCode } from "../../domain/errors.ts";
import { isUuid } from "../../domain/names.ts";
import type { A2ATaskService, TaskBegun, TaskRun } from "../../runs/a2a-tasks.ts";
import { inputFromParts, resumeValueFromParts, type InputTarget } from "./parts.ts";
import { TaskEventMapper, isTerminalTask, runStatusesOf, stateLabel, taskOf, taskResponse } from "./task-view.ts";

/** Who is calling, on which assistant, for one request. */
export interface A2ACall {
  readonly tenantId: string;
  /** The caller's roles grant `operate` (send, cancel); viewers read. */
  readonly canOperate: boolean;
  readonly assistant: Assistant;
  readonly card: AgentCard;
  readonly target: InputTarget;
  /** The call speaks A2A 0.3 (the SDK's compat layer), not 1.0. */
  readonly legacy: boolean;
  /** Aborts when the client goes away or the server shuts down: waits and streams stop. */
  readonly signal: AbortSignal;
  readonly log: FastifyBaseLogger;
}

/** JSON-RPC's first implementation-defined server error: Rudder's own refusals (the message starts with Rudder's error code). */
export const RUDDER_ERROR_CODE = -32000;
const INTERNAL_ERROR_CODE = -32603;

/** A cancelled running task stops cooperatively; CancelTask waits this long for it to end before answering. */
const CANCEL_WAIT_MS = 5000;
const DEFAULT_PAGE_SIZE = 50;
const MAX_PAGE_SIZE = 100;
/** A message id is the run's Idempotency-Key, held to that header's limit. */
const MAX_MESSAGE_ID_LENGTH = 255;

/** Rudder errors that mean the request's params were wrong. */
const INVALID_PARAMS: ReadonlySet<ErrorCode> = new Set(["validation_error", "invalid_request", "payload_too_large"]);

/**
 * The SDK's request handler interface, answered from Rudder's runs: the SDK's JSON-RPC transport
 * handlers (1.0 and the 0.3 compat one) parse requests and shape responses; this class decides
 * what each call does to tasks. It holds nothing between requests: the runs table and the run's
 * event log are the task store, so any API process serves any task.
 */
export class RudderA2AHandler implements A2ARequestHandler {
  constructor(
    private readonly tasks: A2ATaskService,
    private readonly call: A2ACall,
  ) {}

  async getAgentCard(): Promise<AgentCard> {
    return this.call.card;
  }

  async getAuthenticatedExtendedAgentCard(): Promise<AgentCard> {
    // 1.0 (§3.3.4): a card that declares no extended card makes the call unsupported; 0.3 says "not configured".
    if (!this.call.legacy) throw new UnsupportedOperationError("this agent has no extended card (capabilities.extendedAgentCard is false)");
    throw new ExtendedAgentCardNotConfiguredError("this agent has no extended card: its public card is complete");
  }

  /** Blocking by default: answers once the task is completed, failed, canceled or needs input. */
  async sendMessage(params: SendMessageRequest): Promise<Task> {
    return this.guard(async () => {
      const { run } = await this.begin(params);
      if (params.configuration?.returnImmediately) return taskOf(run);
      return taskOf(await this.tasks.settle(this.call.tenantId, run, this.call.signal));
    });
  }

  async *sendMessageStream(params: SendMessageRequest): AsyncGenerator<StreamResponse, void, undefined> {
    const { run, replayed } = await this.guard(() => this.begin(params));
    yield* this.guardStream(this.updates(run, { settledBefore: replayed }));
  }

  async getTask(params: GetTaskRequest): Promise<Task> {
    return this.guard(async () => taskOf(await this.taskRun(params.id)));
  }

  async listTasks(params: ListTasksRequest): Promise<ListTasksResponse> {
    return this.guard(async () => {
      const limit = params.pageSize ?? DEFAULT_PAGE_SIZE;
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_SIZE)
        throw new RequestMalformedError(`pageSize must be 1 to ${MAX_PAGE_SIZE}`);
      const offset = decodePageToken(params.pageToken);
      if (params.status === TaskState.UNRECOGNIZED)
        throw new RequestMalformedError("status must be a TaskState, such as TASK_STATE_WORKING");
      if (params.contextId && !isUuid(params.contextId))
        throw new RequestMalformedError(`contextId ${params.contextId} is not a context id (a UUID)`);
      const statuses = params.status ? runStatusesOf(params.status) : undefined;
      const since = params.statusTimestampAfter ? storableInstant(params.statusTimestampAfter) : undefined;
      // A state no run is in matches nothing.
      if (statuses?.length === 0) return { tasks: [], nextPageToken: "", pageSize: limit, totalSize: 0 };
      const { runs, total } = await this.tasks.list(
        this.call.tenantId,
        this.call.assistant.assistant_id,
        { threadId: params.contextId || undefined, statuses, updatedSince: since },
        { limit, offset },
      );
      const tasks = runs.map(taskOf).map((task) => (params.includeArtifacts ? task : { ...task, artifacts: [] }));
      return {
        tasks,
        nextPageToken: offset + runs.length < total ? encodePageToken(offset + runs.length) : "",
        pageSize: limit,
        totalSize: total,
      };
    });
  }

  /** Cancels the task's current run: at once when it is queued or waiting for input, cooperatively when it runs. */
  async cancelTask(params: CancelTaskRequest): Promise<Task> {
    return this.guard(async () => {
      this.requireOperate("cancel tasks");
      const run = await this.taskRun(params.id);
      if (isTerminalTask(run)) throw new TaskNotCancelableError(`task ${run.task_id} is already ${stateLabel(run.status)}`);
      const cancelled = await this.tasks.cancel(this.call.tenantId, this.call.assistant.assistant_id, run).catch(async (error: unknown) => {
        // The run ended between the read and the cancel.
        if (error instanceof ApiError && error.code === "conflict")
          throw new TaskNotCancelableError(`task ${run.task_id} has already ended`);
        throw error;
      });
      const waited = AbortSignal.any([this.call.signal, AbortSignal.timeout(CANCEL_WAIT_MS)]);
      return taskOf(await this.tasks.settle(this.call.tenantId, cancelled, waited));
    });
  }

  /** Joins a task that is still working: its state now, then every update until it ends or needs input. */
  async *resubscribe(params: SubscribeToTaskRequest): AsyncGenerator<StreamResponse, void, undefined> {
    const run = await this.guard(async () => {
      const found = await this.taskRun(params.id);
      if (isTerminalTask(found)) throw new UnsupportedOperationError(`task ${found.task_id} has ended; read it with GetTask`);
      return found;
    });
    yield* this.guardStream(this.updates(run, { settledBefore: true }));
  }

  async createTaskPushNotificationConfig(): Promise<TaskPushNotificationConfig> {
    throw pushNotSupported();
  }

  async getTaskPushNotificationConfig(_params: GetTaskPushNotificationConfigRequest): Promise<TaskPushNotificationConfig> {
    throw pushNotSupported();
  }

  async listTaskPushNotificationConfigs(_params: ListTaskPushNotificationConfigsRequest): Promise<ListTaskPushNotificationConfigsResponse> {
    throw pushNotSupported();
  }

  async deleteTaskPushNotificationConfig(_params: DeleteTaskPushNotificationConfigRequest): Promise<void> {
    throw pushNotSupported();
  }

  /**
   * The task's stream, from its run's durable event log: the task as it is now, then the updates
   * of the run's events from its first (a subscriber that joins late still gets the whole
   * streamed output), then the final artifact and status once the run is terminal or paused.
   */
  private async *updates(run: TaskRun, options: { settledBefore: boolean }): AsyncGenerator<StreamResponse, void, undefined> {
    yield taskResponse(taskOf(run));
    // A task that had ended or was waiting for input before this call (a resubscribe, a retried
    // send) is all in that first event: replaying its run's log would take it back to working.
    if (options.settledBefore && (isTerminalTask(run) || run.status === "paused")) return;
    const mapper = new TaskEventMapper(run);
    for await (const update of this.tasks.follow(this.call.tenantId, run, { events: true, signal: this.call.signal })) {
      if (update.type === "events") for (const event of update.events) yield* mapper.updates(event);
      else yield* mapper.finish(update.run);
    }
  }

  /** A message starts a task, or answers the input-required task it names. */
  private async begin(params: SendMessageRequest): Promise<TaskBegun> {
    this.requireOperate("send messages");
    const message = params.message;
    if (!message) throw new RequestMalformedError("params.message is required");
    if (!message.messageId) throw new RequestMalformedError("message.messageId is required");
    if (message.messageId.length > MAX_MESSAGE_ID_LENGTH)
      throw new RequestMalformedError(`message.messageId is longer than ${MAX_MESSAGE_ID_LENGTH} characters`);
    if (params.configuration?.taskPushNotificationConfig) throw pushNotSupported();
    if (message.taskId) return this.answer(message);
    if (message.contextId && !isUuid(message.contextId))
      throw new RequestMalformedError(`contextId ${message.contextId} names no context of this tenant`);
    return this.tasks.start(this.call.tenantId, this.call.assistant, {
      input: inputFromParts(message.parts, this.call.target),
      contextId: message.contextId || undefined,
      messageId: message.messageId,
    });
  }

  private async answer(message: Message): Promise<TaskBegun> {
    const run = await this.taskRun(message.taskId);
    if (message.contextId && message.contextId !== run.thread_id) {
      throw new RequestMalformedError(`contextId ${message.contextId} is not the context of task ${run.task_id}`);
    }
    if (run.status === "paused")
      return this.tasks.resume(
        this.call.tenantId,
        this.call.assistant.assistant_id,
        run,
        resumeValueFromParts(message.parts),
        message.messageId,
      );
    // A retried answer (its reply was lost) finds the task it carried on, as a retried first send does.
    if (await this.tasks.answeredBy(this.call.tenantId, run, message.messageId)) return { run, replayed: true };
    const state = stateLabel(run.status);
    if (isTerminalTask(run))
      throw new UnsupportedOperationError(`task ${run.task_id} is ${state} and takes no more messages; send a new message in its context`);
    throw new UnsupportedOperationError(`task ${run.task_id} is ${state}: a message continues a task only when it is input-required`);
  }

  private async taskRun(taskId: string): Promise<TaskRun> {
    if (typeof taskId !== "string" || !taskId.trim()) throw new RequestMalformedError("a task id (a string) is required");
    const run = await this.tasks.current(this.call.tenantId, this.call.assistant.assistant_id, taskId);
    if (!run) throw new TaskNotFoundError(`task ${taskId} not found`);
    return run;
  }

  private requireOperate(what: string): void {
    if (!this.call.canOperate) throw rudderError(new ApiError("forbidden", `only a role that grants "operate" may ${what}`));
  }

  /** Rudder's errors as A2A's: wrong params are -32602, Rudder's own refusals -32000; anything unexpected is logged and hidden. */
  private async guard<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      throw this.toA2AError(error);
    }
  }

  private async *guardStream<T>(stream: AsyncGenerator<T, void, undefined>): AsyncGenerator<T, void, undefined> {
    try {
      yield* stream;
    } catch (error) {
      throw this.toA2AError(error);
    }
  }

  private toA2AError(error: unknown): Error {
    if (error instanceof A2AError) return error;
    if (error instanceof ApiError) return INVALID_PARAMS.has(error.code) ? new RequestMalformedError(error.message) : rudderError(error);
    this.call.log.error({ err: error }, "A2A request failed");
    return new JsonRpcTransportError({
      jsonrpc: "2.0",
      id: null,
      error: { code: INTERNAL_ERROR_CODE, message: "the server failed to handle this request" },
    });
  }
}

/** A Rudder refusal (forbidden, quota_exceeded, run_resume_conflict, …) as a JSON-RPC error that names its code. */
function rudderError(error: ApiError): JsonRpcTransportError {
  return new JsonRpcTransportError({
    jsonrpc: "2.0",
    id: null,
    error: { code: RUDDER_ERROR_CODE, message: `${error.code}: ${error.message}`, data: { code: error.code, retryable: error.retryable } },
  });
}

export function pushNotSupported(): Error {
  return new PushNotificationNotSupportedError(
    "push notifications are not supported: stream with SendStreamingMessage or SubscribeToTask, or poll GetTask",
  );
}

/** Page tokens are opaque to clients; here they carry the offset of the next page. */
function encodePageToken(offset: number): string {
  return Buffer.from(`offset:${offset}`).toString("base64url");
}

function decodePageToken(token: string): number {
  if (!token) return 0;
  const match = /^offset:(\d{1,9})$/.exec(Buffer.from(token, "base64url").toString());
  if (!match) throw new RequestMalformedError("pageToken is not one this server gave");
  return Number(match[1]);
}

/**
 * `statusTimestampAfter` as an instant storage compares: a timestamp between the years 1 and 9999
 * (JavaScript's dates reach years PostgreSQL cannot parse), normalised to ISO 8601 in UTC.
 */
function storableInstant(value: string): string {
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw new RequestMalformedError("statusTimestampAfter must be an ISO 8601 timestamp");
  const instant = new Date(ms);
  const year = instant.getUTCFullYear();
  if (year < 1 || year > 9999) throw new RequestMalformedError("statusTimestampAfter must fall between the years 0001 and 9999");
  return instant.toISOString();
}
