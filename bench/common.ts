/**
 * Argument parsing and formatting shared by the benches (bench/runs.ts, token-stream.ts,
 * standing-load.ts, scale-out.ts, pglite-thread.ts, pglite-roundtrip.ts), and their /proc CPU readers.
 */
import { randomUUID } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { createPostgresDb, type Db } from "../packages/server/src/storage/db.ts";
export { firstStatement } from "../packages/server/test/support/intercepted-db.ts";

export type Driver = "pglite" | "postgres";

/** The PostgreSQL server a bench creates its private databases on, unless --database-url says otherwise. */
export const DEFAULT_DATABASE_URL = process.env.RUDDER_BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

/** One statement on a one-connection pool of its own at `url` (creating, dropping, reading statistics). */
export async function queryOnce<Row>(url: string, sql: string, params: unknown[] = []): Promise<Row[]> {
  const admin = createPostgresDb(url, { max: 1 });
  try {
    return await admin.query<Row>(sql, params);
  } finally {
    await admin.close();
  }
}

/** `--driver pglite|postgres|both`; `both` measures in the order given. */
export function drivers(raw: string, both: readonly Driver[] = ["pglite", "postgres"]): Driver[] {
  const chosen = raw === "both" ? [...both] : [raw as Driver];
  if (!chosen.every((driver) => driver === "pglite" || driver === "postgres")) throw new Error("--driver must be pglite, postgres or both");
  return chosen;
}

export function positive(raw: string, name: string): number {
  return wholeNumber(raw, name, 1);
}

/** A whole number of at least `least` (a command-line value), or an error naming the option. */
function wholeNumber(raw: string, name: string, least: number): number {
  const value = Number(raw);
  if (!Number.isInteger(value) || value < least) {
    throw new Error(`${name} must be a ${least === 1 ? "positive" : "non-negative"} whole number, not "${raw}"`);
  }
  return value;
}

/** A comma-separated list of positive whole numbers (empty items are skipped). */
export function positiveList(raw: string, name: string): number[] {
  return wholeList(raw, name, 1);
}

/** A comma-separated list of whole numbers, zero allowed (empty items are skipped). */
export function nonNegativeList(raw: string, name: string): number[] {
  return wholeList(raw, name, 0);
}

function wholeList(raw: string, name: string, least: number): number[] {
  return raw
    .split(",")
    .filter(Boolean)
    .map((value) => wholeNumber(value, name, least));
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export const fixed = (value: number, digits = 1) => (Number.isFinite(value) ? value.toFixed(digits) : "-");

/** Nearest-rank percentile; NaN for no values. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** A plain-text table; columns align left ("l") or right ("r"), by default the first left and the rest right. */
export function table(headers: string[], rows: (string | number)[][], align: ("l" | "r")[] = []): string {
  const cells = [headers, ...rows.map((row) => row.map(String))];
  const widths = headers.map((_, column) => Math.max(...cells.map((row) => (row[column] ?? "").length)));
  const line = (row: string[]) =>
    row
      .map((cell, column) =>
        (align[column] ?? (column === 0 ? "l" : "r")) === "l" ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!),
      )
      .join("  ");
  return [line(cells[0]!), widths.map((width) => "-".repeat(width)).join("  "), ...cells.slice(1).map(line)].join("\n");
}

/** With `--help`, prints the usage line and exits. */
export function exitWithUsage(help: boolean, usage: string): void {
  if (!help) return;
  console.log(usage);
  process.exit(0);
}

/** `explain (<options>) <sql>` in a transaction that rolls back, so a write explained with `analyze` changes nothing. */
export async function explainRolledBack(db: Db, options: string, sql: string, params: readonly unknown[]): Promise<string> {
  let plan = "";
  const rollback = new Error("rollback");
  await db
    .transaction(async (tx) => {
      const rows = await tx.query<{ "QUERY PLAN": string }>(`explain (${options}) ${sql}`, params);
      plan = rows.map((row) => row["QUERY PLAN"]).join("\n");
      throw rollback;
    })
    .catch((error: unknown) => {
      if (error !== rollback) throw error;
    });
  return plan;
}

/** A fresh database on the PostgreSQL server at `base`, and how to drop it (closing `db` first). */
export async function privateDatabase(base: string, prefix: string): Promise<{ db: Db; drop: () => Promise<void> }> {
  const name = `${prefix}_${randomUUID().replaceAll("-", "")}`;
  await queryOnce(base, `create database ${name}`);
  const url = new URL(base);
  url.pathname = `/${name}`;
  const db = createPostgresDb(url.toString(), { max: 2 });
  return {
    db,
    drop: async () => {
      await db.close();
      await queryOnce(base, `drop database if exists ${name} with (force)`);
    },
  };
}

/** Clock ticks per second of /proc's CPU times (`getconf CLK_TCK`: 100 on every Linux build Node supports). */
const CLOCK_TICKS_PER_S = 100;

/** User + system CPU time so far of the process or thread a /proc `stat` file describes, ms; NaN where /proc cannot tell (not Linux, gone). */
function statCpuMs(statPath: string): number {
  try {
    // The command name may hold spaces and parentheses: the fields after it start past the last ") ".
    const stat = readFileSync(statPath, "utf8");
    const fields = stat.slice(stat.lastIndexOf(") ") + 2).split(" ");
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_S; // utime, stime
  } catch {
    return Number.NaN;
  }
}

/** A process's CPU time so far, ms (/proc/<pid>/stat). */
export const processCpuMs = (pid: number): number => statCpuMs(`/proc/${pid}/stat`);

/** This process's main thread's CPU time so far, ms: the event loop alone (Node 20 has no `process.threadCpuUsage`). */
export const mainThreadCpuMs = (): number => statCpuMs(`/proc/self/task/${process.pid}/stat`);

/** Busy and total jiffies of the whole machine so far (/proc/stat); both 0 where there is none (not Linux). */
export function machineJiffies(): { busy: number; total: number } {
  try {
    const fields = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal (guest time is already in user)
    const total = fields.slice(0, 8).reduce((sum, value) => sum + value, 0);
    // not idle, iowait, or stolen by the hypervisor
    return { busy: total - (fields[3] ?? 0) - (fields[4] ?? 0) - (fields[7] ?? 0), total };
  } catch {
    return { busy: 0, total: 0 };
  }
}

/**
 * The CPU time of every local PostgreSQL server process so far (postmaster, backends, WAL writer,
 * autovacuum), ms: what the database costs the machine, beside the server's own figure. Backends
 * that exit between two readings take their time with them, so read it around a window in which
 * the pool's connections stay open. NaN where /proc cannot tell.
 */
export function postgresCpuMs(): number {
  let total = 0;
  try {
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue;
      let name: string;
      try {
        name = readFileSync(`/proc/${entry}/comm`, "utf8").trim();
      } catch {
        continue; // exited meanwhile
      }
      if (name !== "postgres") continue;
      const ms = processCpuMs(Number(entry));
      if (Number.isFinite(ms)) total += ms;
    }
  } catch {
    return Number.NaN;
  }
  return total;
}
