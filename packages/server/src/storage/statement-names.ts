/**
 * Which statements run as named prepared statements: parsed and planned once per connection, then
 * only bound and executed (docs/database.md, "Prepared statements"). Rudder's hot statements are
 * long CTEs; planning one cost more than running it (on PGlite a settle was 12 of 15 ms).
 *
 * A text gets a name the second time it is sent, so a statement sent once never holds one. A
 * statement with more than `MAX_NAMED_PARAMETERS` parameters never gets one: only batches sized to
 * their rows (a VALUES list of checkpoint writes) have that many, and each size is another text;
 * naming them would spend the names on one-off sizes before the hot statements arrive (a cancel's
 * first comes long after the first checkpoint batches). At most `limit` texts get a name per
 * database handle, so no mix of texts grows the set, or each connection's prepared statements,
 * without bound. A text whose prepared form went stale (`run`) never gets a name again.
 */
export class StatementNames {
  readonly #names = new Map<string, string>();
  readonly #seen = new Set<string>();
  readonly #refused = new Set<string>();
  #issued = 0;

  constructor(private readonly limit = DEFAULT_NAMED_STATEMENTS) {}

  /** The name `sql` (with `parameters` parameters) runs under, or undefined: it runs unnamed (parsed and planned this once). */
  nameFor(sql: string, parameters: number): string | undefined {
    const name = this.#names.get(sql);
    if (name !== undefined) return name;
    if (parameters > MAX_NAMED_PARAMETERS || this.#issued >= this.limit || this.#refused.has(sql)) return undefined;
    if (!this.#seen.has(sql)) {
      // Bounded like the names: texts seen once are forgotten in bulk.
      if (this.#seen.size >= this.limit) this.#seen.clear();
      this.#seen.add(sql);
      return undefined;
    }
    this.#seen.delete(sql);
    const issued = `rudder_${++this.#issued}`;
    this.#names.set(sql, issued);
    return issued;
  }

  /**
   * Runs `sql` through `execute`, with its name or none. When a prepared form turns out stale
   * (`isStalePreparedStatement`), the text is refused a name from then on, and run again unnamed
   * when `retryUnnamed` (outside a transaction; inside one the error has aborted it).
   */
  async run<T>(sql: string, parameters: number, retryUnnamed: boolean, execute: (name: string | undefined) => Promise<T>): Promise<T> {
    const name = this.nameFor(sql, parameters);
    try {
      return await execute(name);
    } catch (error) {
      if (name === undefined || !isStalePreparedStatement(error)) throw error;
      this.#names.delete(sql);
      this.#refused.add(sql);
      if (!retryUnnamed) throw error;
      return execute(undefined);
    }
  }
}

/** Rudder sends a few dozen distinct hot statements; this leaves room for the variants of the rest. */
export const DEFAULT_NAMED_STATEMENTS = 200;

/**
 * The most parameters of a statement that gets a name. Rudder's fixed-shape statements take at most
 * 21 (a run's insert); a checkpoint batch of up to six rows still gets one (those sizes recur: a
 * step's checkpoint and its task's writes), a larger batch does not.
 */
export const MAX_NAMED_PARAMETERS = 64;

/**
 * A prepared statement that can no longer run as it was planned: a migration changed the columns
 * its result had (PostgreSQL: "cached plan must not change result type"). The plain statement runs.
 */
export function isStalePreparedStatement(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return code === "0A000" && typeof message === "string" && message.includes("cached plan must not change result type");
}
