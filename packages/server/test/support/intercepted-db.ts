import type { Db, Queryable, Transaction } from "../../src/storage/db.ts";

/** Runs one statement on `target` (the pool or a transaction), observing it on the way. */
export type Intercept = <Row>(target: Queryable, sql: string, params?: readonly unknown[]) => Promise<Row[]>;

/** `inner` with every statement, inside transactions too, sent through `intercept` (scripts and the rest pass through). */
export function interceptedDb(inner: Db, intercept: Intercept): Db {
  return {
    driver: inner.driver,
    ...(inner.url === undefined ? {} : { url: inner.url }),
    query: (sql, params) => intercept(inner, sql, params),
    exec: (script) => inner.exec(script),
    transaction: (work) =>
      inner.transaction((tx: Transaction) =>
        work({
          query: (sql, params) => intercept(tx, sql, params),
          exec: (script) => tx.exec(script),
          afterCommit: (callback) => tx.afterCommit(callback),
        }),
      ),
    close: () => inner.close(),
  };
}

/** The first statement `call` sends through `db`, with its parameters; nothing is run. */
export async function firstStatement(db: Db, call: (db: Db) => Promise<unknown>): Promise<{ sql: string; params: readonly unknown[] }> {
  let recorded: { sql: string; params: readonly unknown[] } | undefined;
  const stop = new Error("recorded");
  const recorder: Db = {
    ...db,
    query: (sql, params = []) => {
      recorded ??= { sql, params };
      return Promise.reject(stop);
    },
  };
  await call(recorder).catch((error: unknown) => {
    if (error !== stop) throw error;
  });
  if (!recorded) throw new Error("the call sent no statement");
  return recorded;
}
