import type { Db } from "./db.ts";

/** The tables of Rudder's schema, for the embedded database's vacuum. */
async function schemaTables(db: Pick<Db, "query">): Promise<string[]> {
  const rows = await db.query<{ name: string }>(
    `select format('%I.%I', schemaname, tablename) as name from pg_tables where schemaname = current_schema() order by tablename`,
  );
  return rows.map((row) => row.name);
}

/** One table vacuumed and analysed; returns how long it took, ms. */
async function vacuumTable(db: Pick<Db, "exec">, table: string): Promise<number> {
  const started = performance.now();
  await db.exec(`vacuum (analyze) ${table}`);
  return performance.now() - started;
}

export interface VacuumRound {
  /** Per table, ms. */
  readonly tables: Record<string, number>;
  readonly totalMs: number;
}

/**
 * The embedded database's stand-in for autovacuum. PGlite runs PostgreSQL in single-user mode,
 * where autovacuum never starts and no statistics are gathered: without this, every update of a
 * run leaves a dead row version and index entries behind for good, and the planner keeps the
 * estimates the schema had when it was empty. Measured in `bench/standing-load.ts` (PGlite, 500
 * running runs, 5,000 queued): the event flush grew from 3 to 70 ms per statement as the queue
 * drained, and the drain ran at 45 runs/s; with this every 15 s, 102 runs/s (docs/benchmarks.md).
 *
 * Every `intervalMs`, each table of the schema is vacuumed and analysed, one statement per table so
 * requests interleave between them (a vacuum blocks PGlite's one connection while it runs). A
 * round never overlaps the next. PostgreSQL has autovacuum and does not use this.
 */
export class EmbeddedVacuum {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly db: Pick<Db, "query" | "exec">,
    private readonly intervalMs: number,
    private readonly report: { done: (round: VacuumRound) => void; failed: (error: unknown) => void },
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      this.running ??= this.round()
        .then(this.report.done, this.report.failed)
        .finally(() => {
          this.running = undefined;
        });
    }, this.intervalMs);
    this.timer.unref();
  }

  /** Vacuums and analyses every table once (stops between tables when `stop` was called). */
  async round(): Promise<VacuumRound> {
    const started = performance.now();
    const tables: Record<string, number> = {};
    for (const table of await schemaTables(this.db)) {
      if (this.stopped) break;
      tables[table] = await vacuumTable(this.db, table);
    }
    return { tables, totalMs: performance.now() - started };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.running;
  }
}
