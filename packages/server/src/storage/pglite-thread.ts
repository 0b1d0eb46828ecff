/**
 * The thread that runs PGlite for `createPgliteDb({ thread: "worker" })` (storage/db.ts): the
 * WASM executes every statement synchronously, so here it uses the second core instead of the
 * server's event loop. It answers the requests of `pglite-protocol.ts` in the order PGlite's own
 * locks allow: statements outside a transaction queue behind an open one, as in one process.
 */
import { parentPort, workerData } from "node:worker_threads";
import { PGlite, type Transaction as PgliteTransaction } from "@electric-sql/pglite";
import { PGLITE_EXTENSIONS } from "./pglite-extensions.ts";
import { PgliteStatements } from "./pglite-statements.ts";
import { errorFields, type PgliteReady, type PgliteReply, type PgliteRequest, type PgliteThreadData } from "./pglite-protocol.ts";

type TransactionRequest = Extract<PgliteRequest, { tx?: number }>;

/** A transaction's statements, in the order they arrived, handed to its running body one at a time. */
class Inbox {
  private readonly queued: TransactionRequest[] = [];
  private waiting: ((request: TransactionRequest) => void) | undefined;

  put(request: TransactionRequest): void {
    const waiting = this.waiting;
    this.waiting = undefined;
    if (waiting) waiting(request);
    else this.queued.push(request);
  }

  next(): Promise<TransactionRequest> {
    const request = this.queued.shift();
    return request ? Promise.resolve(request) : new Promise((resolve) => (this.waiting = resolve));
  }
}

/** Thrown inside PGlite's transaction to have it roll back. */
const ROLLBACK = Symbol("rollback");

const port = parentPort!;
const data = workerData as PgliteThreadData;
const reply = (message: PgliteReply) => port.postMessage(message);
const fail = (id: number, error: unknown) => {
  const fields = errorFields(error);
  try {
    reply({ id, error: fields });
  } catch {
    // A field that cannot be cloned (a nested object with functions): the message and SQLSTATE still get across.
    reply({ id, error: { message: fields.message, name: fields.name, code: fields.code } });
  }
};

let lite: PGlite;
try {
  lite = await PGlite.create({
    dataDir: data.dataDir,
    loadDataDir: data.loadDataDir ? new Blob([data.loadDataDir]) : undefined,
    extensions: PGLITE_EXTENSIONS,
  });
  port.postMessage({ ready: true } satisfies PgliteReady);
} catch (error) {
  port.postMessage({ ready: false, error: errorFields(error) } satisfies PgliteReady);
  process.exit(1);
}

const statements = new PgliteStatements(lite);
const transactions = new Map<number, Inbox>();

port.on("message", (request: PgliteRequest) => {
  if (request.op === "begin") return begin(request.id, request.tx);
  if (request.op === "close") return void close(request.id);
  if (request.tx === undefined) return void statement(lite, request);
  const inbox = transactions.get(request.tx);
  if (inbox) inbox.put(request);
  else fail(request.id, new Error("the transaction is closed"));
});

async function statement(target: Pick<PGlite, "query" | "exec">, request: TransactionRequest): Promise<void> {
  try {
    if (request.op === "query")
      reply({ id: request.id, rows: await statements.query(target, request.sql, request.params, target !== lite) });
    else if (request.op === "exec") reply({ id: request.id, rows: (await target.exec(request.script), []) });
    else fail(request.id, new Error(`${request.op} outside a transaction`));
  } catch (error) {
    fail(request.id, error);
  }
}

/** Opens a transaction (once PGlite's lock is free) and runs its statements until commit or rollback. */
function begin(id: number, tx: number): void {
  const inbox = new Inbox();
  transactions.set(tx, inbox);
  let end: TransactionRequest | undefined;
  const body = async (liteTx: PgliteTransaction) => {
    reply({ id, rows: [] });
    for (;;) {
      const request = await inbox.next();
      if (request.op === "commit" || request.op === "rollback") {
        end = request;
        transactions.delete(tx);
        if (request.op === "rollback") throw ROLLBACK;
        return;
      }
      await statement(liteTx, request);
    }
  };
  lite.transaction(body).then(
    () => reply({ id: end!.id, rows: [] }),
    (error: unknown) => {
      transactions.delete(tx);
      if (error === ROLLBACK) reply({ id: end!.id, rows: [] });
      else if (end) fail(end.id, error);
      else fail(id, error);
    },
  );
}

async function close(id: number): Promise<void> {
  try {
    await lite.close();
    reply({ id, rows: [] });
  } catch (error) {
    fail(id, error);
  }
}
