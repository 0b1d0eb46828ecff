import { parse, protocol, type PGlite } from "@electric-sql/pglite";
import { StatementNames } from "./statement-names.ts";

/** What runs a plain statement: PGlite itself, or one of its transactions. */
type PlainTarget = Pick<PGlite, "query">;

/**
 * Statements on one PGlite, those `StatementNames` names as prepared statements. PGlite's own
 * `query` makes six calls into the WASM per statement (parse, describe, bind, describe, execute,
 * sync) and parses and plans the statement every time; a named statement is parsed and described
 * once, and each execution after that is one call (bind, describe, execute, sync). Measured on the
 * run path's statements: a settle 15 → 2.3 ms, a claim 8 → 1.5 ms (docs/benchmarks.md).
 *
 * It takes PGlite's locks as `query` does: the query lock always, and outside a transaction the
 * transaction lock first, so a statement never runs inside another caller's open transaction.
 */
export class PgliteStatements {
  /** Prepared statements by name: their parameters' type oids, which pick each value's serializer. */
  readonly #parameterTypes = new Map<string, readonly number[]>();

  constructor(
    private readonly lite: PGlite,
    private readonly names = new StatementNames(),
  ) {}

  /** Runs `sql` on `target` (`lite`, or a transaction of it when `inTransaction`). */
  query<Row>(target: PlainTarget, sql: string, params: readonly unknown[], inTransaction: boolean): Promise<Row[]> {
    return this.names.run(sql, params.length, !inTransaction, async (name) => {
      if (name === undefined) return (await target.query<Row>(sql, params as unknown[])).rows;
      const execute = () => this.lite._runExclusiveQuery(() => this.#execute<Row>(name, sql, params, inTransaction));
      return inTransaction ? execute() : this.lite._runExclusiveTransaction(execute);
    });
  }

  async #execute<Row>(name: string, sql: string, params: readonly unknown[], inTransaction: boolean): Promise<Row[]> {
    const types = this.#parameterTypes.get(name) ?? (await this.#prepare(name, sql));
    const values = params.map((value, index) => {
      if (value === null || value === undefined) return null;
      const serializer = this.lite.serializers[types[index]!];
      return serializer ? serializer(value) : String(value);
    });
    const { messages } = await this.lite.execProtocol(
      frames(
        protocol.serialize.bind({ statement: name, values }),
        protocol.serialize.describe({ type: "P" }),
        protocol.serialize.execute({}),
        protocol.serialize.sync(),
      ),
      // Outside a transaction the data directory is brought up to date, as `query` does.
      { syncToFs: !inTransaction },
    );
    return parse.parseResults(messages, this.lite.parsers)[0]!.rows as Row[];
  }

  async #prepare(name: string, sql: string): Promise<readonly number[]> {
    const { messages } = await this.lite.execProtocol(
      frames(protocol.serialize.parse({ name, text: sql }), protocol.serialize.describe({ type: "S", name }), protocol.serialize.sync()),
      { syncToFs: false },
    );
    const types = parse.parseDescribeStatementResults(messages);
    this.#parameterTypes.set(name, types);
    return types;
  }
}

/** Protocol messages as the one buffer PGlite takes them in. */
function frames(...messages: Uint8Array[]): Uint8Array {
  const buffer = new Uint8Array(messages.reduce((length, message) => length + message.length, 0));
  let offset = 0;
  for (const message of messages) {
    buffer.set(message, offset);
    offset += message.length;
  }
  return buffer;
}
