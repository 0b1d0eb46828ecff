/**
 * The messages between the server's thread and the thread that runs PGlite (`pglite-thread.ts`).
 * Every request carries an id its reply repeats; `tx` names the transaction a statement belongs to.
 */
export type PgliteRequest =
  | { readonly id: number; readonly op: "query"; readonly sql: string; readonly params: readonly unknown[]; readonly tx?: number }
  | { readonly id: number; readonly op: "exec"; readonly script: string; readonly tx?: number }
  /** Answered once the transaction holds the connection. */
  | { readonly id: number; readonly op: "begin"; readonly tx: number }
  | { readonly id: number; readonly op: "commit"; readonly tx: number }
  | { readonly id: number; readonly op: "rollback"; readonly tx: number }
  | { readonly id: number; readonly op: "close" };

export type PgliteReply =
  { readonly id: number; readonly rows: readonly unknown[] } | { readonly id: number; readonly error: PgliteErrorFields };

/** What the thread reports first: PGlite is open, or why it could not open. */
export type PgliteReady = { readonly ready: true } | { readonly ready: false; readonly error: PgliteErrorFields };

/**
 * An error as it crosses threads: structured clone keeps only an Error's message and name, and
 * callers read PostgreSQL's fields (`code` is the SQLSTATE, e.g. 23505 for a unique violation).
 */
export interface PgliteErrorFields {
  readonly message: string;
  readonly name?: string;
  readonly [field: string]: unknown;
}

/** What the thread starts from: a data directory, a dump to load (PGlite.dumpDataDir), or neither (memory). */
export interface PgliteThreadData {
  readonly dataDir?: string;
  readonly loadDataDir?: ArrayBuffer;
}

/** The error's own fields (code, detail, constraint...) as plain data. */
export function errorFields(error: unknown): PgliteErrorFields {
  if (!(error instanceof Error)) return { message: String(error) };
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(error)) {
    if (value === undefined || typeof value === "function") continue;
    fields[key] = value;
  }
  return { ...fields, name: error.name, message: error.message };
}

/** An Error with the fields it had on the other thread, and the stack of the caller on this one. */
export function errorFrom(fields: PgliteErrorFields): Error {
  const { message, name, ...rest } = fields;
  const error = Object.assign(new Error(message), rest);
  if (name) error.name = name;
  return error;
}
