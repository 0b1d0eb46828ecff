import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import { isSettled, type RunStatus } from "../domain/runs.ts";

/** A queue read that failed. */
const UNREADABLE = Symbol("unreadable");

/** What the queue looks like now, read from the database at scrape time (one statement). */
export interface QueueSnapshot {
  /** Runs with status pending, including those waiting for a retry's backoff or their thread. */
  readonly pending: number;
  /** Pending runs a worker may claim now: past their retry backoff and not blocked behind their thread. */
  readonly ready: number;
  /** Pending runs waiting for their thread's active run to finish (multitask strategy enqueue). */
  readonly blocked: number;
  /** How long the longest-waiting ready run has been claimable, in seconds (0 when none). */
  readonly oldestReadySeconds: number;
}

/** The database connections of this process, read at scrape time (no query). */
export interface PoolSnapshot {
  readonly inUse: number;
  readonly idle: number;
  readonly waiting: number;
  readonly max: number;
  /** Statements that failed because the database was unreachable, since the process started. */
  readonly unavailableErrors: number;
  /** Statements that failed because every pooled connection stayed busy too long, since the process started. */
  readonly poolWaitTimeouts: number;
}

/** The notifier's LISTEN connection, read at scrape time. */
export interface NotifierSnapshot {
  readonly listening: boolean;
  readonly reconnects: number;
}

/** Where scrape-time gauges come from; the composition root wires them (this layer reads no database). */
export interface MetricsSources {
  readonly queue?: () => Promise<QueueSnapshot>;
  readonly pool?: () => PoolSnapshot;
  readonly notifier?: () => NotifierSnapshot;
  /** Attempts this process is executing now. */
  readonly activeAttempts?: () => number;
}

export interface MetricsOptions {
  /** Process and event-loop metrics (prom-client's defaults). Default true. */
  readonly processMetrics?: boolean;
  /** The queue snapshot is read at most this often; scrapes in between get the last one. Default 1000 ms. */
  readonly queueCacheMs?: number;
}

/** Seconds: from 5 ms to about 5 minutes, for latencies and attempt durations alike. */
const SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/**
 * The metrics of one Rudder process, on a registry of its own (so several servers in one test
 * process never share counters). Services record through the methods below; gauges whose truth is
 * elsewhere (the queue in the database, the pool, the LISTEN connection) are read when scraped.
 * docs/observability.md lists every metric.
 */
export class Metrics {
  readonly registry = new Registry();
  private sources: MetricsSources = {};
  private queueRead: { at: number; value: Promise<QueueSnapshot> } | undefined;
  private readonly queueCacheMs: number;

  readonly httpRequests = new Counter({
    name: "rudder_http_requests_total",
    help: "HTTP requests answered, by route pattern, method and status code",
    labelNames: ["method", "route", "status"] as const,
    registers: [this.registry],
  });
  readonly httpDuration = new Histogram({
    name: "rudder_http_request_duration_seconds",
    help: "Time from a request's arrival to the end of its response (SSE streams: until the stream ends)",
    labelNames: ["method", "route", "status"] as const,
    buckets: HTTP_BUCKETS,
    registers: [this.registry],
  });
  readonly runsCreated = new Counter({
    name: "rudder_runs_created_total",
    help: "Runs created (not idempotent replays), by graph; a resume's new run counts too",
    labelNames: ["graph_id"] as const,
    registers: [this.registry],
  });
  readonly runsSettled = new Counter({
    name: "rudder_runs_settled_total",
    help: "Runs that reached a terminal status or paused, by status and graph",
    labelNames: ["status", "graph_id"] as const,
    registers: [this.registry],
  });
  readonly retries = new Counter({
    name: "rudder_run_retries_total",
    help: "Attempts that ended with the run going back to the queue: error (a retryable failure) or worker_shutdown (handed back)",
    labelNames: ["reason", "graph_id"] as const,
    registers: [this.registry],
  });
  readonly claimWait = new Histogram({
    name: "rudder_run_claim_wait_seconds",
    help: "From the moment a run became claimable (created, backoff passed, or lease expired) to its claim by a worker",
    buckets: SECONDS_BUCKETS,
    registers: [this.registry],
  });
  readonly attemptDuration = new Histogram({
    name: "rudder_attempt_duration_seconds",
    help: "From claim to settle of one attempt, by the status it left the run in",
    labelNames: ["status", "graph_id"] as const,
    buckets: SECONDS_BUCKETS,
    registers: [this.registry],
  });
  readonly steeringAccepted = new Counter({
    name: "rudder_steering_accepted_total",
    help: "Steering events accepted (new rows; idempotent replays not counted)",
    registers: [this.registry],
  });
  readonly steeringConsumed = new Counter({
    name: "rudder_steering_consumed_total",
    help: "Steering events consumed by a drain (each counted once, however often it is replayed to a re-executed task)",
    registers: [this.registry],
  });
  readonly steeringSuperseded = new Counter({
    name: "rudder_steering_superseded_total",
    help: "Steering events superseded: unconsumed_at_final_boundary or resume_transfer",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });
  readonly steeringLatency = new Histogram({
    name: "rudder_steering_consume_latency_seconds",
    help: "From a steering event's acceptance to its consumption by a drain (database clock)",
    buckets: SECONDS_BUCKETS,
    registers: [this.registry],
  });
  readonly sseStreams = new Gauge({
    name: "rudder_sse_streams_open",
    help: "SSE run streams this process is serving now",
    registers: [this.registry],
  });
  readonly scheduleFireLag = new Histogram({
    name: "rudder_scheduler_fire_lag_seconds",
    help: "From a schedule's due time to the commit of the run it fired",
    buckets: SECONDS_BUCKETS,
    registers: [this.registry],
  });

  constructor(options: MetricsOptions = {}) {
    this.queueCacheMs = options.queueCacheMs ?? 1000;
    if (options.processMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: "rudder_" });
    // prom-client calls `collect` with the metric as `this`; these reach the sources.
    const readQueue = () => this.queue();
    const sources = () => this.sources;
    // The queue as one cached read at scrape time (`queueCacheMs`), one gauge per figure.
    const queueGauge = (name: string, help: string, figure: (queue: QueueSnapshot) => number) =>
      new Gauge({
        name,
        help,
        registers: [this.registry],
        async collect() {
          const queue = await readQueue();
          // Unreadable (the database is down): NaN, not the last figure read, which would look current.
          if (queue) this.set(queue === UNREADABLE ? Number.NaN : figure(queue));
        },
      });
    queueGauge(
      "rudder_queue_pending_runs",
      "Runs waiting in the queue (status pending), across all processes (read from the database)",
      (queue) => queue.pending,
    );
    queueGauge(
      "rudder_queue_ready_runs",
      "Pending runs a worker may claim now: past their retry backoff and not blocked behind their thread's active run",
      (queue) => queue.ready,
    );
    queueGauge(
      "rudder_queue_blocked_runs",
      "Pending runs waiting for their thread's active run to finish (enqueued behind it)",
      (queue) => queue.blocked,
    );
    queueGauge(
      "rudder_queue_oldest_age_seconds",
      "How long the longest-waiting claimable run has waited (0 when none)",
      (queue) => queue.oldestReadySeconds,
    );
    new Gauge({
      name: "rudder_worker_active_attempts",
      help: "Attempts this process is executing now",
      registers: [this.registry],
      collect() {
        const active = sources().activeAttempts?.();
        if (active !== undefined) this.set(active);
      },
    });
    new Gauge({
      name: "rudder_db_connections",
      help: "This process's database connections, by state: in_use, idle, waiting (requests queued for a connection), max",
      labelNames: ["state"] as const,
      registers: [this.registry],
      collect() {
        const pool = sources().pool?.();
        if (!pool) return;
        this.set({ state: "in_use" }, pool.inUse);
        this.set({ state: "idle" }, pool.idle);
        this.set({ state: "waiting" }, pool.waiting);
        this.set({ state: "max" }, pool.max);
      },
    });
    // Totals the pool keeps since it opened, read at scrape time.
    const poolTotal = (name: string, help: string, total: (pool: PoolSnapshot) => number) =>
      new Counter({
        name,
        help,
        registers: [this.registry],
        collect() {
          const pool = sources().pool?.();
          if (!pool) return;
          this.reset();
          this.inc(total(pool));
        },
      });
    poolTotal(
      "rudder_db_unavailable_errors_total",
      "Statements that failed because the database was unreachable (answered 503 or retried by the worker)",
      (pool) => pool.unavailableErrors,
    );
    poolTotal(
      "rudder_db_pool_wait_timeouts_total",
      "Statements that failed because every pooled connection stayed busy for RUDDER_DB_POOL_WAIT_MS (answered 503 or retried by the worker)",
      (pool) => pool.poolWaitTimeouts,
    );
    new Gauge({
      name: "rudder_notifier_listening",
      help: "1 while the notifier's LISTEN connection is up (always 1 on the embedded database)",
      registers: [this.registry],
      collect() {
        const notifier = sources().notifier?.();
        if (notifier) this.set(notifier.listening ? 1 : 0);
      },
    });
    new Counter({
      name: "rudder_notifier_reconnects_total",
      help: "Times the notifier's LISTEN connection was lost and a reconnect was scheduled",
      registers: [this.registry],
      collect() {
        const notifier = sources().notifier?.();
        if (!notifier) return;
        this.reset();
        this.inc(notifier.reconnects);
      },
    });
  }

  /** Wires the scrape-time sources (the composition root calls it once the parts exist). */
  setSources(sources: MetricsSources): void {
    this.sources = { ...this.sources, ...sources };
  }

  /** The exposition text for one scrape. */
  async scrape(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  runCreated(graphId: string): void {
    this.runsCreated.inc({ graph_id: graphId });
  }

  /** A run changed status; counted when the new status is terminal or paused. */
  runStatusChanged(status: RunStatus, graphId: string): void {
    if (isSettled(status)) this.runsSettled.inc({ status, graph_id: graphId });
  }

  consumedSteering(latenciesSeconds: readonly number[]): void {
    this.steeringConsumed.inc(latenciesSeconds.length);
    for (const latency of latenciesSeconds) this.steeringLatency.observe(latency);
  }

  supersededSteering(count: number, reason: "unconsumed_at_final_boundary" | "resume_transfer"): void {
    if (count > 0) this.steeringSuperseded.inc({ reason }, count);
  }

  /** One read per `queueCacheMs` whoever scrapes, and concurrent scrapes share it; a failed read leaves the gauges as they were. */
  /** The queue now (cached `queueCacheMs`); undefined without a queue source, UNREADABLE when the read failed. */
  private async queue(): Promise<QueueSnapshot | typeof UNREADABLE | undefined> {
    const read = this.sources.queue;
    if (!read) return undefined;
    const now = Date.now();
    if (!this.queueRead || now - this.queueRead.at >= this.queueCacheMs) this.queueRead = { at: now, value: read() };
    return this.queueRead.value.catch(() => {
      this.queueRead = undefined;
      return UNREADABLE;
    });
  }
}
