import pg from "pg";
import { setImmediate as nextTurn } from "node:timers/promises";
import { Worker } from "node:worker_threads";
import { lockDataDir } from "./data-dir-lock.ts";
import { PGLITE_EXTENSIONS } from "./pglite-extensions.ts";
import { PGlite } from "@electric-sql/pglite";
import { DEFAULT_POOL_SIZE, DEFAULT_POOL_WAIT_MS, type PgliteThreadSetting } from "../config/config.ts";
import { ApiError } from "../domain/errors.ts";
import { StatementNames } from "./statement-names.ts";
import { PgliteStatements } from "./pglite-statements.ts";
import { errorFrom, type PgliteReady, type PgliteReply, type PgliteRequest, type PgliteThreadData } from "./pglite-protocol.ts";

/** Anything that can run one parameterised statement: the pool, or a transaction's client. */
export interface Queryable {
  query<Row = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<Row[]>;
  /** Runs a script of several statements without parameters (migrations). */
  exec(script: string): Promise<void>;
}

/** A transaction's connection. */
export interface Transaction extends Queryable {
  /** Runs once the transaction has committed (never after a rollback). */
  afterCommit(callback: () => void): void;
}

/**
 * The one seam between Rudder and its database. PostgreSQL (`pg`) and PGlite share it, so every
 * repository is written once, in one SQL dialect, and tested on both drivers.
 */
export interface Db extends Queryable {
  readonly driver: "postgres" | "pglite";
  /** The connection string (PostgreSQL only): other connections, like the LISTEN one, need it. */
  readonly url?: string;
  /** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (tx: Transaction) => Promise<T>): Promise<T>;
  /** The connections now and the outages seen, read without a query (for metrics). */
  stats?(): DbStats;
  /**
   * The same database on a connection of its own (PostgreSQL), for the statements that must not
   * queue behind the pool's work: the lease keeper's heartbeat. A heartbeat that waited in a busy
   * pool for longer than a lease let the leases of live attempts expire; the runs were claimed
   * again while their first attempts were still settling. Undefined where there is no pool to
   * wait in (PGlite's one connection).
   */
  readonly control?: Db;
  close(): Promise<void>;
}

/**
 * Runs `work` without a transaction around it: each of its statements commits on its own. For work
 * whose only write is one statement (atomic by itself), whatever it reads around it: the write
 * costs one round trip instead of three (`begin`, the statement, `commit`). The `afterCommit`
 * callbacks run once `work` has resolved, as after a commit; when it throws they do not run, so
 * `work` must register them only once its write has committed (as it would in a transaction).
 */
export async function withoutTransaction<T>(db: Queryable, work: (tx: Transaction) => Promise<T>): Promise<T> {
  const committed: (() => void)[] = [];
  const value = await work({
    query: <Row>(sql: string, params?: readonly unknown[]) => db.query<Row>(sql, params),
    exec: (script: string) => db.exec(script),
    afterCommit: (callback) => committed.push(callback),
  });
  for (const callback of committed) callback();
  return value;
}

export interface DbStats {
  /** Connections running a statement or holding a transaction. */
  readonly inUse: number;
  readonly idle: number;
  /** Callers waiting for a connection. */
  readonly waiting: number;
  readonly max: number;
  /** Statements that failed because the database was unreachable, since the seam was opened. */
  readonly unavailableErrors: number;
  /** Statements that failed because every connection stayed busy for the pool's whole wait. */
  readonly poolWaitTimeouts: number;
}

const noop = () => {};

/** A pooled connection is closed and replaced, once idle, after this long. */
const CONNECTION_LIFETIME_SECONDS = 600;

/** The tables whose statements' plans depend most on their size. */
const HOT_TABLES = ["runs", "threads", "run_events", "steering_events", "checkpoints", "checkpoint_writes"];

/**
 * A connection opened while any hot table has never been analyzed plans every execution of a
 * named statement afresh. PostgreSQL's plan cache otherwise settles on a generic plan after five
 * executions, and a generic plan is frozen at the table sizes of its moment: made on a new
 * database's empty tables (statistics say empty until autovacuum's first analyze), it read runs
 * by the tenant alone rather than by their key, long after the queue had grown. Once analyzed,
 * each analyze invalidates the plans, and new connections keep the default.
 */
const CUSTOM_PLANS_UNTIL_ANALYZED = `select set_config('plan_cache_mode', 'force_custom_plan', false)
  where (select count(*) from pg_stat_user_tables
          where schemaname = current_schema() and relname = any($1::text[])
            and coalesce(last_analyze, last_autoanalyze) is not null) < cardinality($1::text[])`;

/** A new connection that is not up by then fails (503): the database is down or unreachable. */
const CONNECT_TIMEOUT_MS = 5_000;

export interface PostgresPoolOptions {
  /** Connections in the pool (RUDDER_DB_POOL_SIZE). */
  readonly max?: number;
  /**
   * How long a statement waits for a free connection of a full pool before it fails 503
   * (RUDDER_DB_POOL_WAIT_MS). A busy pool is not an outage: this is a bound on queueing, kept
   * apart from the connect timeout that tells an unreachable database.
   */
  readonly waitMs?: number;
}

/**
 * pg's pool applies its one `connectionTimeoutMillis` both to queueing for a free client and to
 * connecting a new one; the client's own connect timer is the shorter bound for connecting.
 */
class BoundedConnectClient extends pg.Client {
  constructor(config: pg.ClientConfig = {}) {
    super({ ...config, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  }
}

/**
 * PostgreSQL through a `pg` pool, and `control` through a pool of one connection (opened on first
 * use: a process without a worker never opens it).
 */
export function createPostgresDb(connectionString: string, options: PostgresPoolOptions = {}): Db {
  const waitMs = options.waitMs ?? DEFAULT_POOL_WAIT_MS;
  const control = postgresPoolDb(connectionString, 1, waitMs);
  const db = postgresPoolDb(connectionString, options.max ?? DEFAULT_POOL_SIZE, waitMs);
  return {
    ...db,
    control,
    async close() {
      await Promise.all([db.close(), control.close()]);
    },
  };
}

function postgresPoolDb(connectionString: string, max: number, waitMs: number): Db {
  const pool = new pg.Pool({
    connectionString,
    max,
    connectionTimeoutMillis: waitMs,
    Client: BoundedConnectClient,
    // Awaited by the pool before the new connection's first use (docs/database.md, "Prepared
    // statements"); if it fails, the connection keeps PostgreSQL's default plan choice.
    onConnect: (client) => client.query(CUSTOM_PLANS_UNTIL_ANALYZED, [HOT_TABLES]).then(noop, noop),
    // A connection opened before the first analyze would plan afresh for as long as it lives, and a
    // busy pool's connections are never idle long enough to be closed: renewed every ten minutes,
    // they take the plan cache back once the tables have statistics.
    maxLifetimeSeconds: CONNECTION_LIFETIME_SECONDS,
  });
  // An idle client that loses its connection must not crash the process; the next query reconnects.
  pool.on("error", () => {});
  let unavailableErrors = 0;
  let poolWaitTimeouts = 0;
  const rethrowUnavailable = (error: unknown): never => {
    if (isConnectWait(error)) {
      poolWaitTimeouts += 1;
      throw busyPool(error, max, waitMs);
    }
    if (isConnectionFailure(error)) unavailableErrors += 1;
    return rethrowIfUnavailable(error);
  };
  const names = new StatementNames();
  return {
    driver: "postgres",
    url: connectionString,
    async query<Row>(sql: string, params: readonly unknown[] = []) {
      const result = await names.run(sql, params.length, true, (name) => pool.query(prepared(sql, params, name))).catch(rethrowUnavailable);
      return result.rows as Row[];
    },
    async exec(script: string) {
      await pool.query(script).catch(rethrowUnavailable);
    },
    transaction: <T>(work: (tx: Transaction) => Promise<T>) => poolTransaction(pool, names, work).catch(rethrowUnavailable),
    stats: () => ({
      inUse: pool.totalCount - pool.idleCount,
      idle: pool.idleCount,
      waiting: pool.waitingCount,
      max,
      unavailableErrors,
      poolWaitTimeouts,
    }),
    async close() {
      if (!pool.ended) await pool.end();
    },
  };
}

/**
 * A statement for `pg`: named, `pg` parses it once per connection and then only binds and
 * executes it (`StatementNames` decides which statements get a name).
 */
function prepared(sql: string, params: readonly unknown[], name: string | undefined): pg.QueryConfig<unknown[]> {
  return name === undefined ? { text: sql, values: params as unknown[] } : { name, text: sql, values: params as unknown[] };
}

/** Every connection stayed busy for the whole wait: retryable, and not counted as an outage. */
function busyPool(error: unknown, max: number, waitMs: number): ApiError {
  const busy = new ApiError(
    "unavailable",
    `all ${max} database connections stayed busy for ${waitMs / 1000} s; retry shortly (RUDDER_DB_POOL_SIZE sizes the pool)`,
    { retryAfterSeconds: 1 },
  );
  busy.cause = error;
  return busy;
}

/** One transaction on a client of the pool: committed when `work` resolves, rolled back when it throws. */
async function poolTransaction<T>(pool: pg.Pool, names: StatementNames, work: (tx: Transaction) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  const committed: (() => void)[] = [];
  let broken: unknown;
  // While checked out, the pool no longer listens for the client's errors: a connection reset
  // between two statements would be an unhandled 'error' event and end the process. Remember it
  // instead; the next statement fails (503) and the client is destroyed, not pooled.
  const onConnectionError = (error: Error) => {
    broken = error;
  };
  client.on("error", onConnectionError);
  try {
    await client.query("begin");
    const tx: Transaction = {
      afterCommit: (callback) => committed.push(callback),
      async query<Row>(sql: string, params: readonly unknown[] = []) {
        const result = await names.run(sql, params.length, false, (name) => client.query(prepared(sql, params, name)));
        return result.rows as Row[];
      },
      async exec(script: string) {
        // Without parameters pg uses the simple protocol, which accepts several statements.
        await client.query(script);
      },
    };
    const value = await work(tx);
    await client.query("commit");
    for (const callback of committed) callback();
    return value;
  } catch (error) {
    await client.query("rollback").catch((rollbackError: unknown) => {
      broken = rollbackError;
    });
    throw error;
  } finally {
    // A client whose rollback failed is in an unknown state: destroy it instead of pooling it.
    client.removeListener("error", onConnectionError);
    client.release(broken instanceof Error ? broken : undefined);
  }
}

/** Node's errors for a peer that cannot be reached or went away. */
const NETWORK_ERROR_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
]);
/** SQLSTATEs of a server that is shutting down, restarting or refusing connections (class 08: connection exception). */
const UNAVAILABLE_SQLSTATES = new Set(["57P01", "57P02", "57P03", "53300"]);
/** What `pg` says, without a code, when a connection ends or never opens. */
const CONNECTION_LOST = /^Connection terminated|connection error and is not queryable|Client was closed and is not queryable/;

/**
 * A failure of the connection rather than of the statement: the database is down, restarting or
 * unreachable. Such failures surface as 503 `unavailable` (retryable, with Retry-After); the
 * pool reconnects on its own once the database is back, so nothing needs a restart.
 */
export function isConnectionFailure(error: unknown): boolean {
  if (typeof error !== "object" || error === null) return false;
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code === "string" && (NETWORK_ERROR_CODES.has(code) || UNAVAILABLE_SQLSTATES.has(code) || code.startsWith("08"))) return true;
  return typeof message === "string" && CONNECTION_LOST.test(message);
}

/**
 * The pool gave up waiting for a connection (directly, or as the `unavailable` error's cause):
 * nothing of the statement or transaction reached the database, so running it again is safe.
 */
export function isConnectWait(error: unknown): boolean {
  const cause = error instanceof ApiError ? error.cause : error;
  const message = (cause as { message?: unknown } | null)?.message;
  return typeof message === "string" && message.startsWith("timeout exceeded when trying to connect");
}

function rethrowIfUnavailable(error: unknown): never {
  if (!isConnectionFailure(error)) throw error;
  const unavailable = new ApiError("unavailable", "the database is unreachable; retry shortly", { retryAfterSeconds: 1 });
  unavailable.cause = error;
  throw unavailable;
}

export interface PgliteOptions {
  /** Persisted there; in memory when undefined. */
  readonly dataDir?: string;
  /** Start from this dump (`PGlite.dumpDataDir`) instead of running initdb, which is several times faster. */
  readonly loadDataDir?: Blob;
  /** Where the WASM executes: this thread (default) or a worker thread of its own (docs/database.md, "PGlite on a worker thread"). */
  readonly thread?: PgliteThreadSetting;
}

/**
 * The embedded database: PGlite (WASM PostgreSQL), persisted in `dataDir`, or in memory when
 * `dataDir` is undefined. On this thread by default; `thread: "worker"` runs its SQL on a thread
 * of its own, another core than the graphs and HTTP (measured slower overall on two cores).
 */
export async function createPgliteDb(options: PgliteOptions = {}): Promise<Db> {
  const release = options.dataDir === undefined ? undefined : lockDataDir(options.dataDir);
  try {
    const db =
      options.thread === "worker"
        ? await pgliteThreadDb(options)
        : pgliteDb(await PGlite.create({ dataDir: options.dataDir, loadDataDir: options.loadDataDir, extensions: PGLITE_EXTENSIONS }));
    if (!release) return db;
    return {
      ...db,
      close: async () => {
        try {
          await db.close();
        } finally {
          release();
        }
      },
    };
  } catch (error) {
    release?.();
    throw error;
  }
}

/**
 * PGlite's one connection as pool figures: statements and transactions issued and not yet
 * finished, the first running and the rest waiting.
 */
function oneConnectionUse(): { counted: <T>(work: () => Promise<T>) => Promise<T>; stats: () => DbStats } {
  let open = 0;
  return {
    counted: async (work) => {
      open += 1;
      try {
        return await work();
      } finally {
        open -= 1;
      }
    },
    stats: () => ({
      inUse: Math.min(open, 1),
      idle: open > 0 ? 0 : 1,
      waiting: Math.max(open - 1, 0),
      max: 1,
      unavailableErrors: 0,
      poolWaitTimeouts: 0,
    }),
  };
}

/** Wraps an open PGlite, which has a single connection and serialises transactions itself. */
export function pgliteDb(lite: PGlite): Db {
  const { counted, stats } = oneConnectionUse();
  const statements = new PgliteStatements(lite);
  const run = async <Row>(target: Pick<PGlite, "query">, sql: string, params: readonly unknown[]) => {
    // PGlite executes on this thread and resolves in microtasks, so a chain of queries (a settle,
    // a claim after it) would never let the event loop read sockets: under load some HTTP requests
    // waited seconds (p99 5.5 s at 100 clients). One macrotask turn per query keeps it fair (1.3 s,
    // the queue's own wait; docs/benchmarks.md).
    await nextTurn();
    return statements.query<Row>(target, sql, params, target !== lite);
  };
  const exec = async (target: Pick<PGlite, "exec">, script: string) => {
    await target.exec(script);
  };
  return {
    driver: "pglite",
    query: <Row>(sql: string, params: readonly unknown[] = []) => counted(() => run<Row>(lite, sql, params)),
    exec: (script: string) => counted(() => exec(lite, script)),
    transaction: <T>(work: (tx: Transaction) => Promise<T>): Promise<T> => counted(() => transaction(work)),
    stats,
    async close() {
      await lite.close();
    },
  };

  async function transaction<T>(work: (tx: Transaction) => Promise<T>): Promise<T> {
    const committed: (() => void)[] = [];
    const value = await lite.transaction((liteTx) =>
      work({
        query: <Row>(sql: string, params: readonly unknown[] = []) => run<Row>(liteTx, sql, params),
        exec: (script: string) => exec(liteTx, script),
        afterCommit: (callback) => committed.push(callback),
      }),
    );
    for (const callback of committed) callback();
    return value;
  }
}

/**
 * What the worker thread evaluates: tsx's loader, then the entry (TypeScript, like the rest of
 * Rudder; a thread does not inherit a loader registered at run time, as bin/rudder.js does).
 */
function pgliteThreadBoot(): string {
  const entry = new URL("./pglite-thread.ts", import.meta.url).href;
  const tsx = import.meta.resolve("tsx/esm/api");
  return `import(${JSON.stringify(tsx)}).then(({ register }) => { register(); return import(${JSON.stringify(entry)}); });`;
}

/** Distributes a request without its id: the id is the caller's to assign. */
type PgliteCall = PgliteRequest extends infer Request ? (Request extends { id: number } ? Omit<Request, "id"> : never) : never;

/**
 * PGlite on a worker thread (pglite-thread.ts): each statement is one message there and one back.
 * Statements outside a transaction are sent at once and queue in PGlite, so the thread runs them
 * back to back; a transaction's statements go one at a time, as its work issues them.
 */
async function pgliteThreadDb(options: PgliteOptions): Promise<Db> {
  const loadDataDir = options.loadDataDir ? await options.loadDataDir.arrayBuffer() : undefined;
  const thread = new Worker(pgliteThreadBoot(), {
    eval: true,
    workerData: { dataDir: options.dataDir, loadDataDir } satisfies PgliteThreadData,
    transferList: loadDataDir ? [loadDataDir] : [],
  });
  const pending = new Map<number, { resolve: (rows: unknown[]) => void; reject: (error: Error) => void }>();
  let stopped: Error | undefined;
  let nextId = 0;
  let nextTx = 0;

  await new Promise<void>((resolve, reject) => {
    thread.once("message", (message: PgliteReady) => (message.ready ? resolve() : reject(errorFrom(message.error))));
    thread.once("error", reject);
  });
  thread.on("message", (message: PgliteReply | PgliteReady) => {
    if (!("id" in message)) return;
    const waiter = pending.get(message.id);
    pending.delete(message.id);
    // Idle, the thread must not keep the process alive; waiting on it, it must.
    if (pending.size === 0) thread.unref();
    if ("error" in message) waiter?.reject(errorFrom(message.error));
    else waiter?.resolve(message.rows as unknown[]);
  });
  const stop = (error: Error) => {
    stopped ??= error;
    for (const waiter of pending.values()) waiter.reject(stopped);
    pending.clear();
  };
  let closing = false;
  thread.on("error", stop);
  thread.on("exit", (code) => {
    const exited = new Error(`the PGlite thread exited (code ${code})`);
    stop(exited);
    // The embedded database is gone and nothing can be served: fail the process loudly (a
    // supervisor restarts it on the same data dir) rather than answer every request with errors.
    if (!closing)
      process.nextTick(() => {
        throw exited;
      });
  });
  thread.unref();

  const call = (request: PgliteCall): Promise<unknown[]> => {
    if (stopped) return Promise.reject(stopped);
    const id = nextId++;
    return new Promise((resolve, reject) => {
      if (pending.size === 0) thread.ref();
      pending.set(id, { resolve, reject });
      thread.postMessage({ ...request, id });
    });
  };
  const { counted, stats } = oneConnectionUse();

  async function transaction<T>(work: (tx: Transaction) => Promise<T>): Promise<T> {
    const tx = nextTx++;
    const committed: (() => void)[] = [];
    await call({ op: "begin", tx });
    let value: T;
    try {
      value = await work({
        query: async <Row>(sql: string, params: readonly unknown[] = []) => (await call({ op: "query", sql, params, tx })) as Row[],
        exec: async (script: string) => void (await call({ op: "exec", script, tx })),
        afterCommit: (callback) => committed.push(callback),
      });
    } catch (error) {
      await call({ op: "rollback", tx }).catch(() => {});
      throw error;
    }
    await call({ op: "commit", tx });
    for (const callback of committed) callback();
    return value;
  }

  return {
    driver: "pglite",
    query: <Row>(sql: string, params: readonly unknown[] = []) => counted(async () => (await call({ op: "query", sql, params })) as Row[]),
    exec: (script: string) => counted(async () => void (await call({ op: "exec", script }))),
    transaction: <T>(work: (tx: Transaction) => Promise<T>): Promise<T> => counted(() => transaction(work)),
    stats,
    async close() {
      if (stopped) return;
      closing = true;
      await call({ op: "close" });
      await thread.terminate();
    },
  };
}
