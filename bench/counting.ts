/**
 * Counting instruments for bench/runs.ts (nothing here is used by the server itself):
 *
 * - `countingDb` wraps Rudder's `Db` seam and counts what the server asks of its database:
 *   statements (grouped by the start of their SQL), transactions, autocommit statements. It also
 *   stamps the commit time of every run event it sees appended, for the event-to-SSE latency.
 * - `WireCounter` patches `pg.Client.prototype.query` (PostgreSQL only) and counts every round trip
 *   on connections to one database, including what the `Db` seam does not show: `begin`/`commit`,
 *   and the notifier's `pg_notify` on its own pool. It classifies commits as writing (they assign
 *   a transaction id, so PostgreSQL flushes WAL for them) or read-only from the results.
 */
import pg from "pg";
import type { Db, Queryable, Transaction } from "../packages/server/src/storage/db.ts";

/** Milliseconds on a clock shared by every process of this machine (sub-millisecond resolution). */
export const now = (): number => performance.timeOrigin + performance.now();

export interface TraceEntry {
  start: number;
  end: number;
  label: string;
}

/** While set, every statement is also logged here, by the `Db` proxy or by the wire counter (PostgreSQL). */
export const tracing: { source: "db" | "wire"; entries: TraceEntry[] } | { source: undefined } = { source: undefined };

/**
 * Labels and write verdicts by SQL text: the server sends a few dozen distinct statements, and
 * the regular expressions cost the server process ~4 % of its CPU per trivial run when run per
 * statement, which the bench's CPU figures would count as the server's.
 */
const labels = new Map<string, string>();
const writeKinds = new Map<string, WriteKind>();
const MEMO_MAX = 10_000;

/**
 * The statement's group: its first 64 characters, whitespace collapsed, with the two long column
 * lists Rudder repeats (the run row, the checkpoint tuple) shortened so the WHERE clause shows.
 */
export function statementLabel(sql: string): string {
  let label = labels.get(sql);
  if (label === undefined) {
    if (labels.size >= MEMO_MAX) labels.clear();
    labels.set(sql, (label = labelOf(sql)));
  }
  return label;
}

function labelOf(sql: string): string {
  const flat = sql
    .replace(/\s+/g, " ")
    .trim()
    .replace(/(r\.)?run_id::text as run_id, (r\.)?tenant_id, .*?(r\.)?updated_at\b/, "<run columns>")
    .replace(/^select c\.thread_id, c\.checkpoint_ns, .* from checkpoints c\b/, "select <checkpoint + writes> from checkpoints c");
  return flat.length > 64 ? `${flat.slice(0, 63)}…` : flat;
}

/** Whether a statement writes: never, always, or when it returns rows (an insert/update ... returning). */
type WriteKind = "no" | "yes" | "if-rows";

function writeKind(sql: string): WriteKind {
  let kind = writeKinds.get(sql);
  if (kind === undefined) {
    if (writeKinds.size >= MEMO_MAX) writeKinds.clear();
    writeKinds.set(sql, (kind = !isWriteStatement(sql) ? "no" : /\breturning\b/i.test(sql) ? "if-rows" : "yes"));
  }
  return kind;
}

/** Insert/update/delete (also inside a CTE, or after CTEs), or a row-locking select. */
function isWriteStatement(sql: string): boolean {
  return (
    /^\s*(insert|update|delete)\b/i.test(sql) ||
    /^\s*with\b[\s\S]*?\(\s*(insert|update|delete)\b/i.test(sql) ||
    /^\s*with\b[\s\S]*\)\s*(insert|update|delete)\b/i.test(sql) ||
    /\bfor update\b/i.test(sql)
  );
}

export interface StatementStat {
  count: number;
  /** Of `count`, how many ran inside a `transaction()`. */
  inTransaction: number;
  /** Of `count`, how many returned no rows (a claim that found nothing, an update without RETURNING...). */
  noRows: number;
  totalMs: number;
}

export interface DbCounts {
  statements: Map<string, StatementStat>;
  /** `transaction()` calls that committed, grouped by the labels of their statements. */
  transactions: Map<string, number>;
  committedTransactions: number;
  rolledBackTransactions: number;
  /** Statements outside a transaction: each one is its own commit. */
  autocommitStatements: number;
  /** Commits (transactions + autocommit statements) that wrote (heuristic: DML verb, and rows when it has RETURNING). */
  writingCommits: number;
}

const emptyCounts = (): DbCounts => ({
  statements: new Map(),
  transactions: new Map(),
  committedTransactions: 0,
  rolledBackTransactions: 0,
  autocommitStatements: 0,
  writingCommits: 0,
});

export class DbCounter {
  counts: DbCounts = emptyCounts();
  /** `${run_id}:${sequence}` -> when the append that wrote it committed (see `now`). Only while `stampEvents`. */
  readonly eventCommits = new Map<string, number>();
  stampEvents = false;
  /** Called after an append outside a transaction commits (the bench's simulated run_events notice). */
  onAppendCommitted: ((runId: string) => void) | undefined;

  reset(): void {
    this.counts = emptyCounts();
  }

  /** The counts so far, and a fresh start. */
  take(): DbCounts {
    const counts = this.counts;
    this.reset();
    return counts;
  }

  record(sql: string, rowCount: number, ms: number, inTransaction: boolean): void {
    const label = statementLabel(sql);
    let stat = this.counts.statements.get(label);
    if (!stat) this.counts.statements.set(label, (stat = { count: 0, inTransaction: 0, noRows: 0, totalMs: 0 }));
    stat.count++;
    if (inTransaction) stat.inTransaction++;
    if (rowCount === 0) stat.noRows++;
    stat.totalMs += ms;
    if (!inTransaction) {
      this.counts.autocommitStatements++;
      if (writes(sql, rowCount)) this.counts.writingCommits++;
    }
  }
}

function writes(sql: string, rowCount: number): boolean {
  const kind = writeKind(sql);
  return kind === "yes" || (kind === "if-rows" && rowCount !== 0);
}

const APPEND_PREFIX = /^\s*with allocated as \(/;

/** `db`, with every statement and transaction counted in `counter`. */
export function countingDb(db: Db, counter: DbCounter): Db {
  const run = async <Row>(
    target: Queryable,
    sql: string,
    params: readonly unknown[] | undefined,
    tx: TxState | undefined,
  ): Promise<Row[]> => {
    const started = now();
    const rows = await target.query<Row>(sql, params);
    const ended = now();
    counter.record(sql, rows.length, ended - started, tx !== undefined);
    if (tracing.source === "db") tracing.entries.push({ start: started, end: ended, label: `${tx ? "  tx: " : ""}${statementLabel(sql)}` });
    if (tx) {
      tx.labels.push(statementLabel(sql).slice(0, 40));
      if (writes(sql, rows.length)) tx.writes = true;
    }
    if (APPEND_PREFIX.test(sql) && rows.length > 0) {
      const runId = String(params?.[0]);
      const keys = (rows as { sequence?: number }[]).map((row) => `${runId}:${row.sequence}`);
      if (tx) tx.appended.push(...keys);
      else {
        if (counter.stampEvents) for (const key of keys) counter.eventCommits.set(key, now());
        counter.onAppendCommitted?.(runId);
      }
    }
    return rows;
  };
  const exec = async (target: Queryable, script: string, tx: TxState | undefined): Promise<void> => {
    const started = now();
    await target.exec(script);
    counter.record(script, -1, now() - started, tx !== undefined);
  };
  return {
    driver: db.driver,
    ...(db.url === undefined ? {} : { url: db.url }),
    query: <Row>(sql: string, params?: readonly unknown[]) => run<Row>(db, sql, params, undefined),
    exec: (script: string) => exec(db, script, undefined),
    async transaction<T>(work: (tx: Transaction) => Promise<T>): Promise<T> {
      const state: TxState = { labels: [], writes: false, appended: [] };
      try {
        const value = await db.transaction((tx) =>
          work({
            query: <Row>(sql: string, params?: readonly unknown[]) => run<Row>(tx, sql, params, state),
            exec: (script: string) => exec(tx, script, state),
            afterCommit: (callback) => tx.afterCommit(callback),
          }),
        );
        const committedAt = now();
        const shape = state.labels.join(" + ") || "(empty)";
        counter.counts.transactions.set(shape, (counter.counts.transactions.get(shape) ?? 0) + 1);
        counter.counts.committedTransactions++;
        if (state.writes) counter.counts.writingCommits++;
        if (counter.stampEvents) for (const key of state.appended) counter.eventCommits.set(key, committedAt);
        return value;
      } catch (error) {
        counter.counts.rolledBackTransactions++;
        throw error;
      }
    },
    close: () => db.close(),
  };
}

interface TxState {
  labels: string[];
  writes: boolean;
  appended: string[];
}

export interface WireCounts {
  /** Every query message sent on a connection to the database: statements, begin, commit, pg_notify... */
  roundTrips: number;
  begins: number;
  commits: number;
  rollbacks: number;
  /** Statements outside begin/commit: each is its own transaction. */
  autocommits: number;
  notifies: number;
  /** Commits that wrote: a DML row, a row lock, or a pg_notify (which always takes a transaction id). */
  writingCommits: number;
  /**
   * Of the writing commits, those of a statement that only notifies (the notifier's batched
   * `select pg_notify(...)` on its own connection, with synchronous_commit off: no wait for the disk).
   */
  notifyOnlyCommits: number;
  connections: number;
  /** Autocommit statements by label: how many, and how many of them wrote. */
  autocommitByLabel: Map<string, { count: number; writing: number }>;
}

const emptyWire = (): WireCounts => ({
  roundTrips: 0,
  begins: 0,
  commits: 0,
  rollbacks: 0,
  autocommits: 0,
  notifies: 0,
  writingCommits: 0,
  notifyOnlyCommits: 0,
  connections: 0,
  autocommitByLabel: new Map(),
});

interface PgResult {
  command?: string;
  rowCount?: number | null;
}

type ClientWithDb = pg.Client & { database?: string };

/** Counts round trips on `pg` connections to the databases in `databases` (installed once per process). */
export class WireCounter {
  counts: WireCounts = emptyWire();
  readonly databases = new Set<string>();
  readonly inTransaction = new WeakMap<object, { writes: boolean }>();
  private static installed: WireCounter | undefined;

  static install(): WireCounter {
    if (WireCounter.installed) return WireCounter.installed;
    const counter = new WireCounter();
    WireCounter.installed = counter;
    const proto = pg.Client.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
    const originalQuery = proto.query!;
    const originalConnect = proto.connect!;
    proto.query = function (this: ClientWithDb, ...args: unknown[]) {
      if (!counter.databases.has(this.database ?? "")) return originalQuery.apply(this, args);
      const first = args[0];
      const text = typeof first === "string" ? first : String((first as { text?: string } | undefined)?.text ?? "");
      counter.counts.roundTrips++;
      const started = now();
      const inTransaction = counter.inTransaction.has(this);
      const done = (error: unknown, result: unknown) => {
        if (tracing.source === "wire")
          tracing.entries.push({
            start: started,
            end: now(),
            label: `${inTransaction && !/^\s*begin\b/i.test(text) ? "  tx: " : ""}${statementLabel(text)}`,
          });
        counter.finished(this, text, error, result as PgResult | PgResult[] | undefined);
      };
      const callbackAt = args.findIndex((arg) => typeof arg === "function");
      if (callbackAt >= 0) {
        const callback = args[callbackAt] as (error: unknown, result: unknown) => void;
        args[callbackAt] = (error: unknown, result: unknown) => {
          done(error, result);
          callback(error, result);
        };
        return originalQuery.apply(this, args);
      }
      const returned = originalQuery.apply(this, args);
      if (returned && typeof (returned as Promise<unknown>).then === "function") {
        (returned as Promise<unknown>).then(
          (result) => done(undefined, result),
          (error: unknown) => done(error, undefined),
        );
      }
      return returned;
    };
    proto.connect = function (this: ClientWithDb, ...args: unknown[]) {
      if (counter.databases.has(this.database ?? "")) counter.counts.connections++;
      return originalConnect.apply(this, args);
    };
    return counter;
  }

  take(): WireCounts {
    const counts = this.counts;
    this.counts = emptyWire();
    return counts;
  }

  private finished(client: object, text: string, error: unknown, result: PgResult | PgResult[] | undefined): void {
    const verb = text.trim().toLowerCase();
    if (verb === "begin") {
      this.counts.begins++;
      this.inTransaction.set(client, { writes: false });
      return;
    }
    if (verb === "commit" || verb === "rollback") {
      const tx = this.inTransaction.get(client);
      this.inTransaction.delete(client);
      if (verb === "rollback" || error) {
        this.counts.rollbacks++;
        return;
      }
      this.counts.commits++;
      if (tx?.writes) this.counts.writingCommits++;
      return;
    }
    const notify = /\bpg_notify\b/i.test(text);
    if (notify) this.counts.notifies++;
    const results = Array.isArray(result) ? result : result ? [result] : [];
    const wrote =
      notify ||
      results.some(
        (r) =>
          ((r.rowCount ?? 0) > 0 && ["INSERT", "UPDATE", "DELETE", "MERGE"].includes(r.command ?? "")) ||
          (r.command === "SELECT" && (r.rowCount ?? 0) > 0 && /\bfor update\b/i.test(text)),
      );
    const tx = this.inTransaction.get(client);
    if (tx) {
      if (wrote) tx.writes = true;
      return;
    }
    this.counts.autocommits++;
    const label = statementLabel(text);
    let byLabel = this.counts.autocommitByLabel.get(label);
    if (!byLabel) this.counts.autocommitByLabel.set(label, (byLabel = { count: 0, writing: 0 }));
    byLabel.count++;
    if (wrote && !error) {
      this.counts.writingCommits++;
      byLabel.writing++;
      if (/^\s*select\s+pg_notify\(/i.test(text)) this.counts.notifyOnlyCommits++;
    }
  }
}
