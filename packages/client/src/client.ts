import type {
  Assistant,
  CreateAssistantBody,
  CreateRunBody,
  CreateScheduleBody,
  CreateThreadBody,
  ForkAnswer,
  ForkBody,
  ListAssistantsQuery,
  ListRunsQuery,
  ListSchedulesQuery,
  ListThreadsQuery,
  PatchAssistantBody,
  PatchScheduleBody,
  PatchThreadBody,
  ResumeBody,
  Run,
  RunEvent,
  RunEventsQuery,
  Schedule,
  SteerAccepted,
  StoreBatchAnswer,
  StoreOperation,
  StoreSearchHit,
  StoreSearchOperation,
  SteerBody,
  Thread,
  ThreadHistoryQuery,
  ThreadState,
  ThreadStateQuery,
} from "@rudder/api";
import { RudderError, type ProblemBody } from "./errors.ts";
import {
  DEFAULT_RETRY,
  backoffMs,
  retryAfterSeconds,
  shouldRetry,
  shouldRetryUnsafeWrite,
  sleep,
  withRetries,
  type RetryOptions,
} from "./retry.ts";
import { parseEventStream } from "./sse.ts";

export interface RudderClientOptions {
  /** The server's root URL, e.g. `http://localhost:2024`. */
  readonly baseUrl: string;
  /** A bearer token, or a function that returns a fresh one for each request. */
  readonly token?: string | (() => string | Promise<string>);
  /** An API key (sent as `X-Api-Key`) instead of a token. */
  readonly apiKey?: string;
  /** The fetch to use (default: the global one). */
  readonly fetch?: typeof fetch;
  readonly retry?: RetryOptions;
  /** Extra headers on every request. */
  readonly headers?: Record<string, string>;
}

/** Per call: abort it (also its retries and backoff waits). */
export interface CallOptions {
  readonly signal?: AbortSignal;
}

/** Run creation: the body, plus `thread_id` (absent: a stateless run). */
export type CreateRunParams = CreateRunBody & { readonly thread_id?: string | null };

export interface StreamedEvent {
  readonly run_id: string;
  readonly sequence: number;
  readonly event: string;
  readonly data: Record<string, unknown>;
  readonly created_at: string;
}

type Query = Record<string, string | number | boolean | object | undefined>;

/** A list query whose `metadata` filter travels as JSON text: the caller passes the object. */
type WithJsonMetadata<Q> = Omit<Q, "metadata"> & { metadata?: Record<string, unknown> };

interface RequestOptions extends CallOptions {
  readonly body?: unknown;
  readonly query?: Query;
  readonly headers?: Record<string, string>;
  /**
   * Whether the request is safe to send again whatever became of the last send: true for reads
   * and for writes that carry an Idempotency-Key or are idempotent by nature (retried by
   * `shouldRetry`); false otherwise, and then it is retried only when the answer says it was not
   * carried out (`shouldRetryUnsafeWrite`: never after a network failure, a 500, 502 or 504).
   */
  readonly replayable: boolean;
  /** Error codes never retried by this call (join leaves join_timeout to its caller). */
  readonly noRetry?: readonly string[];
}

/** Errors a settled run's join can still report: the caller decides. */
const JOIN_TIMEOUT = "join_timeout";

/**
 * A typed client for Rudder's `/v1` API with the spec's client retry rules built in: bounded
 * exponential backoff with jitter only on retryable answers, network failures, 429 and temporary
 * 5xx (a write that is not safe to repeat only when the answer says it was not carried out: 429,
 * 503, a retryable 4xx); Retry-After respected (seconds or an HTTP-date); run creation retried with
 * the same Idempotency-Key and body (one is made when the caller gives none); never a silent new
 * key; no automatic redrive.
 */
export class RudderClient {
  readonly threads: ThreadsResource;
  readonly assistants: AssistantsResource;
  readonly runs: RunsResource;
  readonly store: StoreResource;
  readonly schedules: SchedulesResource;
  private readonly retry: Required<RetryOptions>;
  private readonly fetchImpl: typeof fetch;
  private readonly baseUrl: string;

  constructor(private readonly options: RudderClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    this.threads = new ThreadsResource(this);
    this.assistants = new AssistantsResource(this);
    this.runs = new RunsResource(this);
    this.store = new StoreResource(this);
    this.schedules = new SchedulesResource(this);
  }

  /** One API call with the retry rules; the parsed JSON body (undefined for 204). */
  async request<T>(method: string, path: string, options: RequestOptions): Promise<T> {
    const attempt = async () => {
      const response = await this.send(method, path, options);
      if (response.status === 204) return undefined as T;
      return (await response.json()) as T;
    };
    return withRetries(
      async () =>
        attempt().catch((error: unknown) => {
          if (error instanceof RudderError && options.noRetry?.includes(error.code)) throw withoutRetry(error);
          throw error;
        }),
      this.retry,
      options.signal,
      // A write that may have happened must not be sent twice without an idempotency key.
      options.replayable ? shouldRetry : shouldRetryUnsafeWrite,
    ).catch((error: unknown) => {
      throw error instanceof NoRetry ? error.error : error;
    });
  }

  /** Sends once: the response when 2xx, else a RudderError (network failures included). */
  async send(method: string, path: string, options: Omit<RequestOptions, "replayable"> & { accept?: string }): Promise<Response> {
    const url = new URL(this.baseUrl + path);
    for (const [key, value] of Object.entries(options.query ?? {})) {
      if (value !== undefined) url.searchParams.set(key, typeof value === "object" ? JSON.stringify(value) : String(value));
    }
    const headers: Record<string, string> = { accept: options.accept ?? "application/json", ...this.options.headers, ...options.headers };
    const token = typeof this.options.token === "function" ? await this.options.token() : this.options.token;
    if (token) headers.authorization = `Bearer ${token}`;
    if (this.options.apiKey) headers["x-api-key"] = this.options.apiKey;
    if (options.body !== undefined) headers["content-type"] = "application/json";
    let response: Response;
    try {
      response = await this.fetchImpl(url, {
        method,
        headers,
        ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
        ...(options.signal ? { signal: options.signal } : {}),
      });
    } catch (error) {
      if (options.signal?.aborted) throw options.signal.reason;
      throw RudderError.network(error);
    }
    if (response.ok) return response;
    throw await problemOf(response);
  }

  /** The run's events from `after` on, reconnecting with Last-Event-ID; see `RunsResource.stream`. */
  async *streamEvents(
    runId: string,
    options: { after?: number; signal?: AbortSignal } = {},
  ): AsyncGenerator<StreamedEvent, void, undefined> {
    let last = options.after ?? 0;
    for (let failures = 0; ;) {
      try {
        const response = await this.send("GET", `/v1/runs/${encodeURIComponent(runId)}/stream`, {
          accept: "text/event-stream",
          headers: { "last-event-id": String(last) },
          ...(options.signal ? { signal: options.signal } : {}),
        });
        for await (const frame of parseEventStream(response.body!)) {
          const event = JSON.parse(frame.data) as RunEvent;
          failures = 0;
          if (event.sequence <= last) continue; // a duplicate after a reconnect (spec section 6, rule 4)
          last = event.sequence;
          yield { run_id: event.run_id, sequence: event.sequence, event: event.kind, data: event.data, created_at: event.created_at };
        }
        // The server ends a stream when the run is terminal or paused; a cut connection can look
        // the same, so ask before giving up.
        const run = await this.runs.get(runId, options.signal ? { signal: options.signal } : {});
        if (SETTLED.has(run.status)) {
          // Events committed with the final status may still follow the ones read.
          const rest = await this.runs.events(runId, { after: last, limit: 1000 }, options.signal ? { signal: options.signal } : {});
          for (const event of rest)
            yield { run_id: event.run_id, sequence: event.sequence, event: event.kind, data: event.data, created_at: event.created_at };
          return;
        }
      } catch (error) {
        if (options.signal?.aborted) throw error;
        const dropped = !(error instanceof RudderError) || shouldRetry(error);
        if (!dropped || ++failures >= this.retry.attempts) throw error instanceof RudderError ? error : RudderError.network(error);
        await sleep(backoffMs(error, failures, this.retry), options.signal);
      }
    }
  }
}

const SETTLED = new Set(["succeeded", "failed", "cancelled", "timed_out", "dead_letter", "paused"]);

/** Carries an error past `withRetries` untouched, so it is not retried. */
class NoRetry extends Error {
  constructor(readonly error: RudderError) {
    super(error.message);
  }
}
const withoutRetry = (error: RudderError) => new NoRetry(error);

async function problemOf(response: Response): Promise<RudderError> {
  const text = await response.text().catch(() => "");
  let problem: ProblemBody = {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) problem = parsed as ProblemBody;
  } catch {
    problem = { detail: text.slice(0, 500) || response.statusText };
  }
  return new RudderError(problem, response.status, {
    requestId: response.headers.get("x-request-id") ?? undefined,
    retryAfterSeconds: retryAfterSeconds(response.headers.get("retry-after")),
  });
}

const id = (value: string) => encodeURIComponent(value);
const signalOf = (options: CallOptions | undefined) => (options?.signal ? { signal: options.signal } : {});

class ThreadsResource {
  constructor(private readonly client: RudderClient) {}
  create(body: CreateThreadBody = { metadata: {} }, options?: CallOptions): Promise<Thread> {
    return this.client.request("POST", "/v1/threads", { body, replayable: false, ...signalOf(options) });
  }
  get(threadId: string, options?: CallOptions): Promise<Thread> {
    return this.client.request("GET", `/v1/threads/${id(threadId)}`, { replayable: true, ...signalOf(options) });
  }
  /** `metadata`: threads whose metadata contains this object (sent as JSON, as the query wants it). */
  list(query: WithJsonMetadata<ListThreadsQuery> = {}, options?: CallOptions): Promise<Thread[]> {
    return this.client.request("GET", "/v1/threads", { query, replayable: true, ...signalOf(options) });
  }
  /** Replaces the thread's metadata (idempotent). */
  update(threadId: string, body: PatchThreadBody, options?: CallOptions): Promise<Thread> {
    return this.client.request("PATCH", `/v1/threads/${id(threadId)}`, { body, replayable: true, ...signalOf(options) });
  }
  delete(threadId: string, options?: CallOptions): Promise<void> {
    return this.client.request("DELETE", `/v1/threads/${id(threadId)}`, { replayable: false, ...signalOf(options) });
  }
  getState(threadId: string, query: ThreadStateQuery = {}, options?: CallOptions): Promise<ThreadState> {
    return this.client.request("GET", `/v1/threads/${id(threadId)}/state`, { query, replayable: true, ...signalOf(options) });
  }
  /** Newest first; `before` pages on from a checkpoint id (the server has no offset here). */
  getHistory(threadId: string, query: ThreadHistoryQuery = {}, options?: CallOptions): Promise<ThreadState[]> {
    return this.client.request("GET", `/v1/threads/${id(threadId)}/history`, { query, replayable: true, ...signalOf(options) });
  }
  /** A new lineage from a checkpoint, optionally with values written as a node (POST /fork). */
  updateState(threadId: string, body: ForkBody, options?: CallOptions): Promise<ForkAnswer> {
    return this.client.request("POST", `/v1/threads/${id(threadId)}/fork`, { body, replayable: false, ...signalOf(options) });
  }
}

class AssistantsResource {
  constructor(private readonly client: RudderClient) {}
  create(body: CreateAssistantBody, options?: CallOptions): Promise<Assistant> {
    return this.client.request("POST", "/v1/assistants", { body, replayable: body.assistant_id !== undefined, ...signalOf(options) });
  }
  get(assistantId: string, options?: CallOptions): Promise<Assistant> {
    return this.client.request("GET", `/v1/assistants/${id(assistantId)}`, { replayable: true, ...signalOf(options) });
  }
  list(query: ListAssistantsQuery = {}, options?: CallOptions): Promise<Assistant[]> {
    return this.client.request("GET", "/v1/assistants", { query, replayable: true, ...signalOf(options) });
  }
  update(assistantId: string, body: PatchAssistantBody, options?: CallOptions): Promise<Assistant> {
    return this.client.request("PATCH", `/v1/assistants/${id(assistantId)}`, { body, replayable: true, ...signalOf(options) });
  }
  delete(assistantId: string, options?: CallOptions): Promise<void> {
    return this.client.request("DELETE", `/v1/assistants/${id(assistantId)}`, { replayable: false, ...signalOf(options) });
  }
}

class RunsResource {
  constructor(private readonly client: RudderClient) {}

  /**
   * Creates a run (on `thread_id`, or stateless). Retried with the same Idempotency-Key and the
   * identical body; the client makes a key when none is given, and never switches keys. An
   * `idempotency_conflict` is thrown, never retried.
   */
  create(params: CreateRunParams, options: CallOptions & { idempotencyKey?: string } = {}): Promise<Run> {
    const { thread_id: threadId, ...body } = params;
    const key = options.idempotencyKey ?? globalThis.crypto.randomUUID();
    const path = threadId ? `/v1/threads/${id(threadId)}/runs` : "/v1/runs";
    return this.client.request("POST", path, { body, headers: { "idempotency-key": key }, replayable: true, ...signalOf(options) });
  }
  get(runId: string, options?: CallOptions): Promise<Run> {
    return this.client.request("GET", `/v1/runs/${id(runId)}`, { replayable: true, ...signalOf(options) });
  }
  /**
   * Runs newest first: with only `thread_id` (and paging), that thread's runs
   * (`GET /v1/threads/{id}/runs`); otherwise the tenant's runs filtered as `GET /v1/runs` allows.
   */
  list(query: WithJsonMetadata<ListRunsQuery> = {}, options?: CallOptions): Promise<Run[]> {
    const { thread_id: threadId, limit, offset, ...filters } = query;
    if (threadId !== undefined && Object.values(filters).every((value) => value === undefined)) {
      return this.client.request("GET", `/v1/threads/${id(threadId)}/runs`, {
        query: { limit, offset },
        replayable: true,
        ...signalOf(options),
      });
    }
    return this.client.request("GET", "/v1/runs", { query, replayable: true, ...signalOf(options) });
  }
  /** Waits once (at most `timeout` seconds, default 30): throws `join_timeout` if the run is not terminal or paused by then. */
  join(runId: string, params: { timeout?: number } = {}, options?: CallOptions): Promise<Run> {
    return this.client.request("GET", `/v1/runs/${id(runId)}/join`, {
      query: params,
      replayable: true,
      noRetry: [JOIN_TIMEOUT],
      ...signalOf(options),
    });
  }
  /** Joins again after each `join_timeout` until the run is terminal or paused (or `signal` aborts). */
  async wait(runId: string, options: CallOptions & { timeout?: number } = {}): Promise<Run> {
    for (;;) {
      try {
        return await this.join(runId, { timeout: options.timeout ?? 30 }, options);
      } catch (error) {
        if (!(error instanceof RudderError && error.code === JOIN_TIMEOUT)) throw error;
      }
    }
  }
  async createAndWait(params: CreateRunParams, options: CallOptions & { idempotencyKey?: string } = {}): Promise<Run> {
    const run = await this.create(params, options);
    return this.wait(run.run_id, options);
  }
  cancel(runId: string, options?: CallOptions): Promise<Run> {
    return this.client.request("POST", `/v1/runs/${id(runId)}/cancel`, { replayable: false, ...signalOf(options) });
  }
  resume(runId: string, body: ResumeBody = {}, options?: CallOptions): Promise<Run> {
    return this.client.request("POST", `/v1/runs/${id(runId)}/resume`, { body, replayable: false, ...signalOf(options) });
  }
  /** Re-queues a failed or dead-lettered run; never done automatically (spec rule 5). */
  redrive(runId: string, options?: CallOptions): Promise<Run> {
    return this.client.request("POST", `/v1/runs/${id(runId)}/redrive`, { replayable: false, ...signalOf(options) });
  }
  /**
   * Steers a live run. Retried with the same idempotency key (one is made when none is given), so a
   * retry never writes a second event. A `run_finalizing` error means: steer a new run.
   */
  steer(
    runId: string,
    body: Omit<SteerBody, "idempotency_key">,
    options: CallOptions & { idempotencyKey?: string } = {},
  ): Promise<SteerAccepted> {
    const key = options.idempotencyKey ?? globalThis.crypto.randomUUID();
    return this.client.request("POST", `/v1/runs/${id(runId)}/steer`, {
      body,
      headers: { "idempotency-key": key },
      replayable: true,
      ...signalOf(options),
    });
  }
  events(runId: string, query: RunEventsQuery = {}, options?: CallOptions): Promise<RunEvent[]> {
    return this.client.request("GET", `/v1/runs/${id(runId)}/events`, { query, replayable: true, ...signalOf(options) });
  }
  /**
   * The run's events as they happen, from `after` on, until the run is terminal or paused. A
   * dropped connection is reopened with Last-Event-ID (with backoff); duplicates are dropped by
   * sequence, so each event arrives once, in order.
   */
  stream(runId: string, options: { after?: number; signal?: AbortSignal } = {}): AsyncIterable<StreamedEvent> {
    return this.client.streamEvents(runId, options);
  }
}

/** A store search: a search operation's fields, the namespace prefix (segments) optional (the whole store). */
export type StoreSearchParams = Omit<StoreSearchOperation, "kind" | "namespace"> & {
  readonly namespace?: readonly string[];
};

class StoreResource {
  constructor(private readonly client: RudderClient) {}
  /** Operations in order, in one transaction: all or nothing; `results[i]` answers `operations[i]`. */
  batch(operations: readonly StoreOperation[], options?: CallOptions): Promise<StoreBatchAnswer> {
    // Replayable: put and delete are idempotent by key (a replay writes the same thing), the rest read.
    return this.client.request("POST", "/v1/store/batch", { body: { operations }, replayable: true, ...signalOf(options) });
  }
  /**
   * Sent as a batch of one search, not as `GET /v1/store/search`: the segments travel as they are,
   * so the server checks each one (joined by "/" for the query string, `["a/b"]` would search
   * `["a","b"]` and `[""]` the whole store).
   */
  async search(params: StoreSearchParams = {}, options?: CallOptions): Promise<StoreSearchHit[]> {
    const operation: StoreSearchOperation = { ...params, kind: "search", namespace: [...(params.namespace ?? [])] };
    const { results } = await this.batch([operation], options);
    return results[0] as StoreSearchHit[];
  }
}

class SchedulesResource {
  constructor(private readonly client: RudderClient) {}
  /** Not retried after a network failure: a retry could create a second schedule. */
  create(body: CreateScheduleBody, options?: CallOptions): Promise<Schedule> {
    return this.client.request("POST", "/v1/schedules", { body, replayable: false, ...signalOf(options) });
  }
  get(scheduleId: string, options?: CallOptions): Promise<Schedule> {
    return this.client.request("GET", `/v1/schedules/${id(scheduleId)}`, { replayable: true, ...signalOf(options) });
  }
  list(query: ListSchedulesQuery = {}, options?: CallOptions): Promise<Schedule[]> {
    return this.client.request("GET", "/v1/schedules", { query, replayable: true, ...signalOf(options) });
  }
  /** A patch sets fields to values, so sending it again changes nothing more: replayable. */
  update(scheduleId: string, body: PatchScheduleBody, options?: CallOptions): Promise<Schedule> {
    return this.client.request("PATCH", `/v1/schedules/${id(scheduleId)}`, { body, replayable: true, ...signalOf(options) });
  }
  delete(scheduleId: string, options?: CallOptions): Promise<void> {
    return this.client.request("DELETE", `/v1/schedules/${id(scheduleId)}`, { replayable: false, ...signalOf(options) });
  }
}
