import { randomUUID } from "node:crypto";
import { EventEmitter } from "node:events";
import { setImmediate as nextTurn } from "node:timers/promises";
import pg from "pg";
import type { RunStatus } from "../domain/runs.ts";
import type { Transaction } from "../storage/db.ts";

/**
 * Wake-up hints. Durable records are the truth: a lost notice only delays whoever waits on it,
 * so every waiter also re-checks storage on a timer.
 */
export type Notice =
  /** A run may be claimable; `dueAt` (epoch ms): not before then (a delayed run). */
  | { readonly topic: "run_created"; readonly dueAt?: number }
  /**
   * A run's row changed. `status`: the status the change left it in, so a waiter for the run's
   * end need not read a run that is only `cancelling` (absent from notices of older binaries:
   * read then).
   */
  | { readonly topic: "run_changed"; readonly runId: string; readonly status?: RunStatus }
  | { readonly topic: "run_events"; readonly runId: string }
  /** A worker's event flush committed: each run it wrote, with its last sequence now. */
  | { readonly topic: "events_flushed"; readonly runs: ReadonlyArray<readonly [runId: string, sequence: number]> }
  | { readonly topic: "steering"; readonly runId: string }
  /** A schedule was created, changed or deleted: executors recompute when to wake. */
  | { readonly topic: "schedules_changed" };

export interface Notifier {
  /** Notices published in one call travel together (one NOTIFY across processes). */
  publish(...notices: readonly Notice[]): Promise<void>;
  /**
   * Publishes with the transaction: heard only once it commits, never if it rolls back. Across
   * processes the notices leave after the commit, batched with this process's other notices (see
   * createPostgresNotifier: not inside the writer's commit).
   */
  publishWithin(tx: Transaction, ...notices: readonly Notice[]): Promise<void>;
  subscribe(listener: (notice: Notice) => void): () => void;
  /** Whether notices from other processes can arrive now (for /ready and metrics). */
  health?(): NotifierHealth;
  close(): Promise<void>;
}

export interface NotifierHealth {
  /** The LISTEN connection is up (always true for the in-process notifier). */
  readonly listening: boolean;
  /** When `listening` last changed, epoch milliseconds. */
  readonly since: number;
  /** Times the LISTEN connection was lost and a reconnect scheduled. */
  readonly reconnects: number;
}

/** For one process (the embedded database, tests): notices go straight to local listeners. */
export function createLocalNotifier(): Notifier {
  const emitter = new EventEmitter();
  emitter.setMaxListeners(0);
  const createdAt = Date.now();
  return {
    async publish(...notices) {
      for (const notice of notices) emitter.emit("notice", notice);
    },
    async publishWithin(tx, ...notices) {
      tx.afterCommit(() => {
        for (const notice of notices) emitter.emit("notice", notice);
      });
    },
    subscribe(listener) {
      emitter.on("notice", listener);
      return () => emitter.off("notice", listener);
    },
    health: () => ({ listening: true, since: createdAt, reconnects: 0 }),
    async close() {
      emitter.removeAllListeners();
    },
  };
}

const CHANNEL = "rudder";
/** PostgreSQL refuses NOTIFY payloads of 8000 bytes or more; stay well under. */
export const MAX_PAYLOAD_BYTES = 7000;

/** What one NOTIFY carries: the sending process's id (it skips its own) and a batch of notices. */
interface Envelope {
  readonly from: string;
  readonly notices: readonly Notice[];
}

/**
 * Across processes: PostgreSQL LISTEN/NOTIFY on one channel. This process's own listeners hear a
 * notice at once; other processes hear it through NOTIFY. Notices published while a NOTIFY is in
 * flight are batched, duplicates dropped, into the next one (one statement, one commit), so a
 * busy process does not pay a commit per notice. A dedicated connection listens and reconnects
 * after a failure; notices published while it is down are lost, which the waiters' timers cover.
 *
 * A transaction's notices (`publishWithin`) are sent by this publisher once the transaction has
 * committed, not inside it: a commit that NOTIFYs holds PostgreSQL's cluster-wide notify lock
 * until it is flushed to disk, so notifying writers commit one at a time, each waiting out the
 * previous one's flush (measured here: 1,859 notifying update commits/s against 4,199 without, 16
 * clients). The publisher's own commits are notify-only and do not wait for the flush
 * (`synchronous_commit=off`: a notice is a hint, and the writes it announces are already durable),
 * so the lock is held only briefly and the writers group-commit freely. A crash between a commit
 * and its notice loses the notice, as a lost LISTEN connection does; the timers cover it.
 */
export function createPostgresNotifier(connectionString: string): Notifier {
  const local = createLocalNotifier();
  const origin = randomUUID();
  const publisher = new pg.Pool({ connectionString, max: 1, options: "-c synchronous_commit=off" });
  publisher.on("error", () => {});
  let listener: pg.Client | undefined;
  let closed = false;
  let since = Date.now();
  let reconnects = 0;
  let retryTimer: NodeJS.Timeout | undefined;
  const outbox = new Set<string>();
  let sending: Promise<void> | undefined;

  const connect = async (): Promise<void> => {
    const client = new pg.Client({ connectionString });
    client.on("notification", (message) => {
      void local.publish(...receivedNotices(message.payload, origin));
    });
    client.on("error", () => reconnect(client));
    client.on("end", () => reconnect(client));
    try {
      await client.connect();
      await client.query(`listen ${CHANNEL}`);
      listener = client;
      since = Date.now();
    } catch {
      reconnect(client);
    }
  };
  const reconnect = (client: pg.Client) => {
    if (closed || retryTimer || (listener && listener !== client)) return;
    if (listener) since = Date.now();
    listener = undefined;
    reconnects += 1;
    void client.end().catch(() => {});
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      void connect();
    }, 500);
    retryTimer.unref();
  };
  const ready = connect();

  /** Sends everything in the outbox, then whatever arrived meanwhile, until it is empty. */
  const send = async (): Promise<void> => {
    while (outbox.size > 0) {
      const noticeTexts = [...outbox];
      outbox.clear();
      await publisher.query(notifyStatement(origin, noticeTexts)).catch(() => {});
    }
    sending = undefined;
  };

  const publish = async (...notices: readonly Notice[]): Promise<void> => {
    await local.publish(...notices);
    for (const notice of notices) outbox.add(JSON.stringify(notice));
    // Started on the loop's next turn: the answers this work resolves (a create's 202, a join
    // woken by a settle) are written first, and the publishers of this turn share a NOTIFY.
    sending ??= nextTurn().then(send);
    await sending;
  };

  return {
    publish,
    async publishWithin(tx, ...notices) {
      if (notices.length > 0) tx.afterCommit(() => void publish(...notices));
    },
    subscribe: (fn) => local.subscribe(fn),
    health: () => ({ listening: listener !== undefined, since, reconnects }),
    async close() {
      closed = true;
      clearTimeout(retryTimer);
      await sending;
      await ready;
      await listener?.end().catch(() => {});
      await publisher.end();
      await local.close();
    },
  };
}

/** One statement, without parameters, that sends the notices (each as JSON) in as few NOTIFY payloads as fit. */
function notifyStatement(origin: string, noticeTexts: readonly string[]): string {
  const calls = envelopes(origin, noticeTexts).map((payload) => `pg_notify('${CHANNEL}', ${pg.escapeLiteral(payload)})`);
  return `select ${calls.join(", ")}`;
}

/**
 * The notices, each already JSON, as NOTIFY payloads (an `Envelope` each) under PostgreSQL's size
 * limit, in order. The envelope is written around the notices' texts and its size added up as it
 * grows: serialising the batch again for every notice was quadratic in a burst's notices (a
 * thousand runs cancelled at once). A notice too large for any payload still goes, alone.
 */
export function envelopes(from: string, noticeTexts: readonly string[]): string[] {
  const head = `{"from":${JSON.stringify(from)},"notices":[`;
  const tail = "]}";
  const empty = Buffer.byteLength(head) + tail.length;
  const payloads: string[] = [];
  let batch: string[] = [];
  let bytes = empty;
  for (const text of noticeTexts) {
    const size = Buffer.byteLength(text);
    // One more notice adds its bytes and a comma after the first.
    if (batch.length > 0 && bytes + 1 + size > MAX_PAYLOAD_BYTES) {
      payloads.push(head + batch.join(",") + tail);
      batch = [];
      bytes = empty;
    }
    bytes += (batch.length > 0 ? 1 : 0) + size;
    batch.push(text);
  }
  if (batch.length > 0) payloads.push(head + batch.join(",") + tail);
  return payloads;
}

/** The notices of a NOTIFY payload from another process; none of this process's own, none of garbage. */
function receivedNotices(payload: string | undefined, origin: string): readonly Notice[] {
  if (!payload) return [];
  try {
    const envelope = JSON.parse(payload) as Partial<Envelope>;
    return envelope.from === origin || !Array.isArray(envelope.notices) ? [] : envelope.notices;
  } catch {
    return [];
  }
}
