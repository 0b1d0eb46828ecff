import { EventEmitter } from "node:events";
import pg from "pg";

/**
 * Wake-up hints. Durable records are the truth: a lost notice only delays whoever waits on it,
 * so every waiter also re-checks storage on a timer.
 */
export type Notice =
  | { readonly topic: "run_created" }
  | { readonly topic: "run_changed"; readonly runId: string }
  | { readonly topic: "run_events"; readonly runId: string }
  | { readonly topic: "steering"; readonly runId: string };

export interface Notifier {
  publish(notice: Notice): Promise<void>;
  subscribe(listener: (notice: Notice) => void): () => void;
  close(): Promise<void>;
}

/** For one process (the embedded database, tests): notices go straight to local listeners. */
export function createLocalNotifier(): Notifier {
  const emitter = new EventEmitter();
  emitter.setMaxListeners(0);
  return {
    async publish(notice) {
      emitter.emit("notice", notice);
    },
    subscribe(listener) {
      emitter.on("notice", listener);
      return () => emitter.off("notice", listener);
    },
    async close() {
      emitter.removeAllListeners();
    },
  };
}

const CHANNEL = "rudder";

/**
 * Across processes: PostgreSQL LISTEN/NOTIFY on one channel. A dedicated connection listens and
 * reconnects after a failure; notices published while it is down are lost, which the waiters'
 * timers cover. Every notice, this process's own included, arrives through the listener.
 */
export function createPostgresNotifier(connectionString: string): Notifier {
  const local = createLocalNotifier();
  const publisher = new pg.Pool({ connectionString, max: 2 });
  publisher.on("error", () => {});
  let listener: pg.Client | undefined;
  let closed = false;
  let retryTimer: NodeJS.Timeout | undefined;

  const connect = async (): Promise<void> => {
    const client = new pg.Client({ connectionString });
    client.on("notification", (message) => {
      if (message.payload) void local.publish(JSON.parse(message.payload) as Notice);
    });
    client.on("error", () => reconnect(client));
    client.on("end", () => reconnect(client));
    try {
      await client.connect();
      await client.query(`listen ${CHANNEL}`);
      listener = client;
    } catch {
      reconnect(client);
    }
  };
  const reconnect = (client: pg.Client) => {
    if (closed || retryTimer || (listener && listener !== client)) return;
    listener = undefined;
    void client.end().catch(() => {});
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      void connect();
    }, 500);
    retryTimer.unref();
  };
  const ready = connect();

  return {
    async publish(notice) {
      await publisher.query("select pg_notify($1, $2)", [CHANNEL, JSON.stringify(notice)]).catch(() => {});
    },
    subscribe: (fn) => local.subscribe(fn),
    async close() {
      closed = true;
      clearTimeout(retryTimer);
      await ready;
      await listener?.end().catch(() => {});
      await publisher.end();
      await local.close();
    },
  };
}

/**
 * Resolves true when a notice matching `match` arrives, false after `timeoutMs` or on abort.
 * Subscribe before reading storage, then wait: a change between the read and the wait is not lost.
 */
export function waitForNotice(
  notifier: Notifier,
  match: (notice: Notice) => boolean,
  timeoutMs: number,
  signal?: AbortSignal,
): { promise: Promise<boolean>; cancel: () => void } {
  let cancel = () => {};
  const promise = new Promise<boolean>((resolve) => {
    const finish = (value: boolean) => {
      clearTimeout(timer);
      unsubscribe();
      signal?.removeEventListener("abort", onAbort);
      resolve(value);
    };
    const onAbort = () => finish(false);
    const unsubscribe = notifier.subscribe((notice) => {
      if (match(notice)) finish(true);
    });
    const timer = setTimeout(() => finish(false), timeoutMs);
    signal?.addEventListener("abort", onAbort, { once: true });
    cancel = () => finish(false);
  });
  return { promise, cancel };
}
