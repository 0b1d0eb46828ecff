/**
 * Which statements run as named prepared statements: parsed and planned once per connection, then
 * only bound and executed (docs/database.md, "Prepared statements"). Rudder's hot statements are
 * long CTEs; planning one cost more than running it (on PGlite a settle was 12 of 15 ms).
 *
 * A text gets a name the second time it is sent, so a statement sent once never holds one. At most
 * `limit` texts get a name per database handle: a statement whose text varies (a VALUES list sized
 * to its rows) cannot grow the set, or each connection's prepared statements, without bound. A text
 * the database refused to run prepared (`refuse`) never gets a name again.
 */
export class StatementNames {
  readonly #names = new Map<string, string>();
  readonly #seen = new Set<string>();
  readonly #refused = new Set<string>();
  #issued = 0;

  constructor(private readonly limit = DEFAULT_NAMED_STATEMENTS) {}

  /** The name `sql` runs under, or undefined: it runs unnamed (parsed and planned this once). */
  nameFor(sql: string): string | undefined {
    const name = this.#names.get(sql);
    if (name !== undefined) return name;
    if (this.#issued >= this.limit || this.#refused.has(sql)) return undefined;
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

  /** Runs `sql` unnamed from now on (its prepared form failed where the plain one would not). */
  refuse(sql: string): void {
    this.#names.delete(sql);
    this.#refused.add(sql);
  }
}

/** Rudder sends a few dozen distinct hot statements; this leaves room for the variants of the rest. */
export const DEFAULT_NAMED_STATEMENTS = 200;

/**
 * A prepared statement that can no longer run as it was planned: a migration changed the columns
 * its result had (PostgreSQL: "cached plan must not change result type"). The plain statement runs.
 */
export function isStalePreparedStatement(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return code === "0A000" && typeof message === "string" && message.includes("cached plan must not change result type");
}
