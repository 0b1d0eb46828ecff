/**
 * The load generator of bench/runs.ts, forked as a child process so the HTTP client does not share
 * the server's event loop. It takes tasks over IPC and answers with raw timings (ms on the shared
 * clock, `now()`); bench/runs.ts does the statistics.
 */
/** The same clock as bench/counting.ts `now` (shared by every process of the machine). */
const now = (): number => performance.timeOrigin + performance.now();

export type ClientTask =
  | { kind: "clock" }
  | { kind: "threads"; url: string; token: string; count: number }
  | {
      kind: "runs";
      url: string;
      token: string;
      concurrency: number;
      runs: number;
      body: Record<string, unknown>;
      /** One thread per run (POST /v1/threads/{id}/runs); stateless runs (POST /v1/runs) when absent. */
      threadIds?: string[];
    }
  | { kind: "sse"; url: string; token: string; concurrency: number; runs: number; body: Record<string, unknown> }
  /** LangGraph API: one `POST /runs/stream` (stateless, stream_mode custom) per run, all at once. */
  | { kind: "lg-stream"; url: string; runs: number; body: Record<string, unknown> };

export interface RunsResult {
  elapsedMs: number;
  /** Create request sent -> join returned, per succeeded run. */
  latencies: number[];
  /** Per succeeded run: create sent, create answered, join answered (client clock). */
  stamps: [number, number, number][];
  /** Per succeeded run: create request sent -> the run's created_at (client and database clocks, ms). */
  createMs: number[];
  /** Per succeeded run, from the joined run's timestamps (database clock, ms): created -> started, started -> finished. */
  queuedMs: number[];
  executedMs: number[];
  /** Per succeeded run: run finished_at (database) -> join answered (client clock). */
  joinLagMs: number[];
  errors: number;
  firstError?: string;
}

export interface SseEvent {
  runId: string;
  sequence: number;
  kind: string;
  /** When the chunk holding the event was read from the stream. */
  receivedAt: number;
  createdAt: string;
  /** `t` of a ticker custom event: when the graph emitted it. */
  emittedAt?: number;
  /** `s` of a ticker custom event: when it was due (emittedAt - scheduledAt: how late the graph's timer fired). */
  scheduledAt?: number;
  /** `i` of a ticker custom event: its place in the run's ticks. */
  index?: number;
  /** When the stream's response headers arrived. */
  openedAt: number;
}

export interface SseResult {
  events: SseEvent[];
  errors: number;
  firstError?: string;
}

type Reply = { id: number; result?: unknown; error?: string };

async function call(
  url: string,
  token: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(url + path, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, json: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

async function pool(concurrency: number, total: number, work: (index: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, total) }, async () => {
      for (let index = next++; index < total; index = next++) await work(index);
    }),
  );
}

async function createThreads(task: Extract<ClientTask, { kind: "threads" }>): Promise<string[]> {
  const ids: string[] = [];
  await pool(10, task.count, async () => {
    const { status, json } = await call(task.url, task.token, "POST", "/v1/threads", {});
    if (status !== 201) throw new Error(`POST /v1/threads answered ${status}: ${JSON.stringify(json)}`);
    ids.push(String(json.thread_id));
  });
  return ids;
}

async function runs(task: Extract<ClientTask, { kind: "runs" }>): Promise<RunsResult> {
  const result: RunsResult = {
    elapsedMs: 0,
    latencies: [],
    stamps: [],
    createMs: [],
    queuedMs: [],
    executedMs: [],
    joinLagMs: [],
    errors: 0,
  };
  const fail = (message: string) => {
    result.errors++;
    result.firstError ??= message;
  };
  const started = now();
  await pool(task.concurrency, task.runs, async (index) => {
    const sent = now();
    const path = task.threadIds ? `/v1/threads/${task.threadIds[index]}/runs` : "/v1/runs";
    const created = await call(task.url, task.token, "POST", path, task.body);
    if (created.status !== 202) return fail(`create answered ${created.status}: ${JSON.stringify(created.json)}`);
    const createdAt = now();
    const joined = await call(task.url, task.token, "GET", `/v1/runs/${String(created.json.run_id)}/join?timeout=120`);
    if (joined.status !== 200 || joined.json.status !== "succeeded")
      return fail(`join answered ${joined.status}: ${JSON.stringify(joined.json).slice(0, 300)}`);
    const joinedAt = now();
    result.latencies.push(joinedAt - sent);
    result.stamps.push([sent, createdAt, joinedAt]);
    const [createdTs, started, finished] = [joined.json.created_at, joined.json.started_at, joined.json.finished_at].map((value) =>
      Date.parse(String(value)),
    );
    result.createMs.push(createdTs! - sent);
    result.queuedMs.push(started! - createdTs!);
    result.executedMs.push(finished! - started!);
    result.joinLagMs.push(joinedAt - finished!);
  });
  result.elapsedMs = now() - started;
  return result;
}

async function sse(task: Extract<ClientTask, { kind: "sse" }>): Promise<SseResult> {
  const result: SseResult = { events: [], errors: 0 };
  await pool(task.concurrency, task.runs, async () => {
    try {
      const created = await call(task.url, task.token, "POST", "/v1/runs", task.body);
      if (created.status !== 202) throw new Error(`create answered ${created.status}: ${JSON.stringify(created.json)}`);
      const runId = String(created.json.run_id);
      const response = await fetch(`${task.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${task.token}` } });
      if (response.status !== 200 || !response.body) throw new Error(`stream answered ${response.status}`);
      const openedAt = now();
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        const receivedAt = now();
        buffer += decoder.decode(value, { stream: true });
        let end: number;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = frame
            .split("\n")
            .filter((line) => line.startsWith("data: "))
            .map((line) => line.slice(6))
            .join("\n");
          if (!data) continue; // a heartbeat comment
          const event = JSON.parse(data) as {
            sequence: number;
            kind: string;
            created_at: string;
            data: { data?: unknown };
          };
          result.events.push({
            runId,
            sequence: event.sequence,
            kind: event.kind,
            receivedAt,
            createdAt: event.created_at,
            ...(event.kind === "custom" ? tickFields(event.data.data) : {}),
            openedAt,
          });
        }
      }
    } catch (error) {
      result.errors++;
      result.firstError ??= (error as Error).message;
    }
  });
  return result;
}

/** The stamps of a ticker's custom event (bench/graphs.ts): `{ i, t, s }`. */
function tickFields(data: unknown): Pick<SseEvent, "emittedAt" | "scheduledAt" | "index"> {
  const tick = (typeof data === "object" && data !== null ? data : {}) as { i?: unknown; t?: unknown; s?: unknown };
  return {
    ...(typeof tick.t === "number" ? { emittedAt: tick.t } : {}),
    ...(typeof tick.s === "number" ? { scheduledAt: tick.s } : {}),
    ...(typeof tick.i === "number" ? { index: tick.i } : {}),
  };
}

/** The LangGraph API's stream of a stateless run: `event: custom` frames carry the ticker's `{ i, t, s }`. */
async function lgStream(task: Extract<ClientTask, { kind: "lg-stream" }>): Promise<SseResult> {
  const result: SseResult = { events: [], errors: 0 };
  await pool(task.runs, task.runs, async (index) => {
    try {
      const response = await fetch(`${task.url}/runs/stream`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(task.body),
      });
      if (response.status !== 200 || !response.body) throw new Error(`POST /runs/stream answered ${response.status}`);
      const openedAt = now();
      const runId = `lg-${index}`;
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      let sequence = 0;
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        const receivedAt = now();
        buffer += decoder.decode(value, { stream: true }).replaceAll("\r\n", "\n");
        let end: number;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const frame = buffer.slice(0, end).split("\n");
          buffer = buffer.slice(end + 2);
          const kind = frame
            .find((line) => line.startsWith("event:"))
            ?.slice(6)
            .trim();
          const data = frame
            .filter((line) => line.startsWith("data:"))
            .map((line) => line.slice(5).trim())
            .join("\n");
          if (kind !== "custom" || !data) continue;
          const tick: unknown = JSON.parse(data);
          result.events.push({
            runId,
            sequence: ++sequence,
            kind,
            receivedAt,
            createdAt: "",
            ...tickFields(tick),
            openedAt,
          });
        }
      }
    } catch (error) {
      result.errors++;
      result.firstError ??= (error as Error).message;
    }
  });
  return result;
}

async function handle(task: ClientTask): Promise<unknown> {
  switch (task.kind) {
    case "clock":
      return now();
    case "threads":
      return createThreads(task);
    case "runs":
      return runs(task);
    case "sse":
      return sse(task);
    case "lg-stream":
      return lgStream(task);
  }
}

process.on("message", (message: { id: number; task: ClientTask }) => {
  handle(message.task).then(
    (result) => process.send!({ id: message.id, result } satisfies Reply),
    (error: unknown) => process.send!({ id: message.id, error: (error as Error).stack ?? String(error) } satisfies Reply),
  );
});
process.on("disconnect", () => process.exit(0));
