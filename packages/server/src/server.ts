import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "pino";
import { createAuthenticator } from "./auth/authenticator.ts";
import { createScrapeAuthorizer } from "./auth/scrape.ts";
import { ApiError } from "./domain/errors.ts";
import { ConfigError, type RudderConfig } from "./config/config.ts";
import { AssistantCatalog } from "./graphs/assistants.ts";
import { GraphRegistry } from "./graphs/registry.ts";
import { GraphSchemaCatalog } from "./graphs/schemas.ts";
import { ThreadStateReader } from "./graphs/thread-state.ts";
import { buildApp, type App } from "./http/app.ts";
import type { AppServices } from "./http/services.ts";
import { createLocalNotifier, createPostgresNotifier, type Notifier } from "./notify/notifier.ts";
import { startMetricsListener, type MetricsListener } from "./observability/listener.ts";
import { createLogger, type LogFormat } from "./observability/logger.ts";
import { Metrics } from "./observability/metrics.ts";
import { A2ATaskService } from "./runs/a2a-tasks.ts";
import { RunService } from "./runs/service.ts";
import { SteeringService } from "./runs/steering.ts";
import { DEFAULT_SCHEDULER_OPTIONS, Scheduler, type SchedulerOptions } from "./scheduler/executor.ts";
import { ScheduleService } from "./scheduler/service.ts";
import { AssistantRepository } from "./storage/assistants.ts";
import { RudderCheckpointSaver } from "./storage/checkpointer.ts";
import { McpSessions } from "./gateways/mcp/session.ts";
import { createPgliteDb, createPostgresDb, type Db } from "./storage/db.ts";
import { EmbeddedVacuum } from "./storage/embedded-vacuum.ts";
import { migrate, migrationStatus } from "./storage/migrate.ts";
import { expireLeases } from "./storage/lease.ts";
import { readQueueStats } from "./storage/queue-stats.ts";
import { SteeringRepository } from "./storage/steering.ts";
import { loadEmbedder } from "./store/embedder.ts";
import { StoreService } from "./store/service.ts";
import { StoreSweeper } from "./store/sweeper.ts";
import { ThreadService } from "./threads/service.ts";
import { VERSION } from "./version.ts";
import { DEFAULT_WORKER_OPTIONS, Worker, type WorkerOptions } from "./worker/worker.ts";

/** PostgreSQL when DATABASE_URL is set, else the embedded PGlite database in the data dir. */
export async function openDatabase(
  config: Pick<RudderConfig, "databaseUrl" | "dataDir" | "pgliteThread" | "dbPoolSize" | "dbPoolWaitMs">,
): Promise<Db> {
  if (config.databaseUrl) return createPostgresDb(config.databaseUrl, { max: config.dbPoolSize, waitMs: config.dbPoolWaitMs });
  mkdirSync(config.dataDir, { recursive: true });
  return createPgliteDb({ dataDir: join(config.dataDir, "pglite"), thread: config.pgliteThread });
}

/** Raised when the database schema is older than this binary needs. */
export class SchemaOutdatedError extends Error {
  override readonly name = "SchemaOutdatedError";
}

export interface StartOptions {
  readonly config: RudderConfig;
  readonly db: Db;
  /** dev and tests bring the schema up to date; serve and worker refuse an outdated one. */
  readonly schema: "migrate" | "require-current";
  /** Serve the HTTP API (default true). */
  readonly api?: boolean;
  /** Run a worker in this process, with these options over the defaults (default: no worker). */
  readonly worker?: Partial<WorkerOptions> | false;
  /**
   * Run the cron executor in this process, with these options over the defaults. Default: where a
   * worker runs (`rudder dev`, `rudder worker`, `serve --with-worker`), unless
   * `RUDDER_CRON_ENABLED=false`.
   */
  readonly scheduler?: Partial<SchedulerOptions> | false;
  /** The clock schedules compute due times from (tests move it; default the system clock). */
  readonly clock?: () => Date;
  /** The logger (tests capture its lines); false: silent; default: one from the config. */
  readonly logger?: Logger | false;
  /** The log format when the config names none (`rudder dev`: pretty). Default json. */
  readonly logFormat?: LogFormat;
  /** This process's metrics (default: new ones, with process metrics). */
  readonly metrics?: Metrics;
  /** Replaces the notifier chosen from the database (benchmarks measure lost wake-ups with it). */
  readonly notifier?: Notifier;
  /**
   * This process is the database's only user (`rudder dev` on the embedded database): leases
   * found at start were held by a process that died, so their runs are claimable at once.
   */
  readonly exclusiveDatabase?: boolean;
}

export interface RunningServer {
  /** Set when the process serves the API. */
  readonly app: App | undefined;
  readonly url: string | undefined;
  readonly worker: Worker | undefined;
  readonly scheduler: Scheduler | undefined;
  readonly metrics: Metrics;
  /** The metrics listener of a process without the API, when it serves one. */
  readonly metricsUrl: string | undefined;
  readonly log: Logger;
  /** The long-term store (tests and benchmarks reach it directly). */
  readonly store: StoreService;
  /** A2A tasks over runs (tests reach it to interleave a cancel with a resume). */
  readonly a2aTasks: A2ATaskService;
  /**
   * Stops the worker (running attempts get the grace period, the rest go back to the queue) and
   * the API (no new requests, open streams and joins end, in-flight requests finish) together,
   * then the notifier.
   */
  close(): Promise<void>;
}

/**
 * Builds every service from the resolved config, then starts the API and/or a worker. The
 * database belongs to the caller, who closes it after `close()`.
 */
export async function startServer(options: StartOptions): Promise<RunningServer> {
  const { config, db } = options;
  await prepareSchema(db, options.schema);
  if (options.exclusiveDatabase) await expireLeases(db);
  const checkpointer = new RudderCheckpointSaver(db, { tenantId: null }); // every call names its tenant
  const graphs = await GraphRegistry.load(config.graphs, checkpointer);
  const notifier: Notifier =
    options.notifier ?? (db.driver === "postgres" && db.url ? createPostgresNotifier(db.url) : createLocalNotifier());
  const steering = new SteeringRepository(db);
  const metrics = options.metrics ?? new Metrics();
  const log =
    options.logger === false
      ? createLogger({ level: "silent", format: "json" })
      : (options.logger ?? createLogger({ level: config.logLevel, format: config.logFormat ?? options.logFormat ?? "json" }));
  const assistants = new AssistantCatalog(new AssistantRepository(db), graphs, config.assistants);
  const threads = new ThreadService(db, new ThreadStateReader(graphs, checkpointer));
  const runService = new RunService(db, assistants, graphs, notifier, { queuedRunQuota: config.queuedRunQuota, metrics });
  const authenticate = createAuthenticator(config.auth);
  const readiness = async () => {
    await db.query("select 1");
    const listen = notifier.health?.();
    if (listen && !listen.listening && Date.now() - listen.since > config.readyListenGraceMs) {
      throw new ApiError(
        "unavailable",
        `the notifier's LISTEN connection has been down for ${Math.round((Date.now() - listen.since) / 1000)} s`,
        { retryAfterSeconds: 1 },
      );
    }
    return { database: db.driver, graphs: graphs.ids() };
  };
  const storeIndex = config.store.index;
  const store = new StoreService(db, {
    index: storeIndex && { embedder: await loadEmbedder(storeIndex), dims: storeIndex.dims, fields: storeIndex.fields },
    defaultTtl: config.store.defaultTtl,
    refreshOnRead: config.store.refreshOnRead,
  });
  const services: AppServices = {
    authenticate,
    assistants,
    graphSchemas: new GraphSchemaCatalog(graphs),
    mcpSessions: new McpSessions(config.auth.jwtSecret),
    threads,
    runService,
    steeringService: new SteeringService(db, notifier, undefined, metrics),
    schedules: new ScheduleService(db, runService, notifier, options.clock),
    a2aTasks: new A2ATaskService(db, runService, threads, graphs),
    graphs,
    store,
    notifier,
    readiness,
    streamHeartbeatMs: config.streamHeartbeatMs,
    metrics,
    authorizeScrape: createScrapeAuthorizer(authenticate, config.metricsToken),
  };
  const serveApi = options.api ?? true;
  const app = serveApi
    ? await buildApp({
        services,
        bodyLimitBytes: config.bodyLimitBytes,
        requestTimeoutMs: config.requestTimeoutMs,
        logger: log,
        version: VERSION,
      })
    : undefined;
  const worker = options.worker
    ? new Worker(
        // Streams of this process get the worker's committed events without reading them back.
        { db, steering, graphs, checkpointer, notifier, log, prices: config.modelPrices, metrics, store, handoff: runService.feed },
        {
          ...DEFAULT_WORKER_OPTIONS,
          concurrency: config.workerConcurrency,
          leaseMs: config.leaseMs,
          heartbeatMs: config.heartbeatMs,
          pollMs: config.workerPollMs,
          shutdownGraceMs: config.shutdownGraceMs,
          ...options.worker,
        },
      )
    : undefined;
  const schedulerOptions = options.scheduler ?? (options.worker && config.cronEnabled ? {} : false);
  const scheduler = schedulerOptions
    ? new Scheduler({ db, runService, notifier, log, metrics }, { ...DEFAULT_SCHEDULER_OPTIONS, now: options.clock, ...schedulerOptions })
    : undefined;
  let url: string | undefined;
  if (app) {
    await listen(app, config.host, config.port).catch(async (error: unknown) => {
      await app.close();
      await notifier.close();
      throw error;
    });
    const address = app.server.address();
    const port = typeof address === "object" && address ? address.port : config.port;
    url = `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`;
  }
  metrics.setSources({
    queue: () => readQueueStats(db),
    ...(db.stats ? { pool: db.stats } : {}),
    ...(notifier.health ? { notifier: notifier.health } : {}),
    ...(worker ? { activeAttempts: () => worker.activeAttempts } : {}),
  });
  // Without the API, a worker serves /metrics on a listener of its own.
  let listener: MetricsListener | undefined;
  if (!app && worker && config.metricsPort !== undefined) {
    listener = await startMetricsListener({
      host: config.host,
      port: config.metricsPort,
      metrics,
      authorize: services.authorizeScrape,
      ready: async () => void (await readiness()),
      log,
    }).catch(async (error: unknown) => {
      await notifier.close();
      const code = (error as { code?: string }).code;
      if (code === "EADDRINUSE")
        throw new ConfigError(
          `cannot serve metrics on ${config.host}:${config.metricsPort}: the address is in use (choose another with --metrics-port or RUDDER_METRICS_PORT, or "off")`,
        );
      throw error;
    });
  }
  // Only once the API listens: a server that failed to start must not have claimed runs.
  worker?.start();
  scheduler?.start();
  const sweeper = new StoreSweeper(db, config.store.sweepIntervalMinutes * 60_000, (error) =>
    log.warn({ err: error }, "store TTL sweep failed"),
  );
  sweeper.start();
  const vacuum = db.driver === "pglite" ? embeddedVacuum(db, log) : undefined;
  return {
    app,
    url,
    worker,
    scheduler,
    store,
    a2aTasks: services.a2aTasks,
    metrics,
    metricsUrl: listener?.url,
    log,
    async close() {
      await Promise.all([scheduler?.stop(), worker?.stop(), app?.close(), sweeper.stop(), vacuum?.stop()]);
      await listener?.close();
      await notifier.close();
    },
  };
}

/** How often the embedded database is vacuumed (storage/embedded-vacuum.ts). */
const EMBEDDED_VACUUM_MS = 15_000;

function embeddedVacuum(db: Db, log: Logger): EmbeddedVacuum {
  const vacuum = new EmbeddedVacuum(db, EMBEDDED_VACUUM_MS, {
    done: ({ totalMs, tables }) => log.debug({ duration_ms: Math.round(totalMs), tables }, "embedded database vacuumed"),
    failed: (error) => log.warn({ err: error }, "vacuuming the embedded database failed; retrying next round"),
  });
  vacuum.start();
  return vacuum;
}

async function prepareSchema(db: Db, mode: StartOptions["schema"]): Promise<void> {
  if (mode === "migrate") {
    await migrate(db);
    return;
  }
  const status = await migrationStatus(db);
  // Pending, not just "current < latest": a revision below the current one can still be missing (docs/database.md).
  if (status.pending.length > 0) {
    throw new SchemaOutdatedError(
      `the database schema is at revision ${status.current} but this server needs ${status.latest}; run \`rudder migrate\` first (not applied: ${status.pending.map((m) => m.id).join(", ")})`,
    );
  }
}

/** Listens, turning the usual operator mistakes (port taken, not allowed) into a one-line ConfigError. */
async function listen(app: App, host: string, port: number): Promise<void> {
  try {
    await app.listen({ host, port });
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === "EADDRINUSE")
      throw new ConfigError(`cannot listen on ${host}:${port}: the address is in use (choose another with --port or PORT)`);
    if (code === "EACCES")
      throw new ConfigError(`cannot listen on ${host}:${port}: permission denied (choose a port above 1023 with --port or PORT)`);
    if (code === "EADDRNOTAVAIL") throw new ConfigError(`cannot listen on ${host}:${port}: no such local address (check --host or HOST)`);
    if (code === "ENOTFOUND" || code === "EAI_AGAIN")
      throw new ConfigError(`cannot listen on ${host}:${port}: no such host name (check --host or HOST)`);
    throw error;
  }
}
