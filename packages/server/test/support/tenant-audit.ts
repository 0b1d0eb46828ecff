import type { Db, Transaction } from "../../src/storage/db.ts";

/** The tables whose rows belong to a tenant and whose keys lead with `tenant_id` (migration 000012). */
export const TENANT_TABLES = ["threads", "runs", "run_events", "steering_events", "checkpoints", "checkpoint_writes"] as const;

/** Words that can follow a table name where an alias would stand: they are not aliases. */
const NOT_ALIASES = new Set([
  "where",
  "set",
  "on",
  "values",
  "for",
  "order",
  "limit",
  "offset",
  "returning",
  "join",
  "left",
  "right",
  "inner",
  "cross",
  "group",
  "union",
  "select",
  "using",
  "default",
  "as",
]);

/** One reference to a tenant table in a statement, and why it does not name the tenant (if it does not). */
export interface TableReference {
  readonly table: string;
  readonly alias: string | undefined;
  readonly problem: string | undefined;
}

/**
 * Every reference of `sql` to a tenant table, each checked for naming the tenant: an INSERT lists
 * `tenant_id` among its columns; a read, update or delete of an aliased table compares
 * `alias.tenant_id` (to a parameter or to another row's tenant); of an unaliased one, compares a
 * bare `tenant_id`. A `tenant_id` that is only selected does not count. A textual check, so
 * statements are written plainly (no dynamic table names), which Rudder's are.
 */
export function tableReferences(sql: string): TableReference[] {
  const text = sql.replace(/\s+/g, " ").toLowerCase();
  const references: TableReference[] = [];
  const pattern = new RegExp(`\\b(from|join|update|into|using) (${TENANT_TABLES.join("|")})\\b(?: (?:as )?([a-z_][a-z0-9_]*))?`, "g");
  for (const match of text.matchAll(pattern)) {
    const [, verb, table, word] = match;
    const alias = word !== undefined && !NOT_ALIASES.has(word) ? word : undefined;
    let problem: string | undefined;
    if (verb === "into") {
      const columns = /^ ?\(([^)]*)\)/.exec(text.slice(match.index + `${verb} ${table}`.length));
      if (!columns || !/\btenant_id\b/.test(columns[1]!)) problem = `insert into ${table} does not set tenant_id`;
    } else if (alias) {
      const named = new RegExp(`\\b${alias}\\.tenant_id ?(=|in\\b)|= ?${alias}\\.tenant_id\\b`);
      if (!named.test(text)) problem = `${table} ${alias} is not filtered or joined by ${alias}.tenant_id`;
    } else if (!/(?<![\w.])tenant_id ?(=|in\b)/.test(text)) {
      problem = `${table} is not filtered by tenant_id`;
    }
    references.push({ table: table!, alias, problem });
  }
  return references;
}

/**
 * `db` with every statement it (or a transaction of it) runs recorded in `seen`: the pool's, the
 * transactions' and those run before commit.
 */
export function recordingDb(db: Db, seen: string[]): Db {
  const recordTx = (tx: Transaction): Transaction => ({
    ...tx,
    query: (sql, params) => (seen.push(sql), tx.query(sql, params)),
    exec: (script) => (seen.push(script), tx.exec(script)),
  });
  return {
    ...db,
    query: (sql, params) => (seen.push(sql), db.query(sql, params)),
    exec: (script) => (seen.push(script), db.exec(script)),
    transaction: (work) => db.transaction((tx) => work(recordTx(tx))),
  };
}
