import type { Db, Transaction } from "../../src/storage/db.ts";

export interface HeldTransaction<T> {
  /** What `first` returned, inside the still open transaction. */
  readonly value: T;
  /** Lets the transaction commit. */
  release(): void;
  /** Settles once the transaction has ended. */
  readonly done: Promise<void>;
}

/**
 * Opens a transaction on `db`, runs `first` in it (taking a lock, holding a pooled connection),
 * and keeps it open until `release` is called: a test holds a window open without sleeping.
 */
export async function holdTransaction<T>(db: Db, first: (tx: Transaction) => Promise<T>): Promise<HeldTransaction<T>> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let opened!: (value: T) => void;
  let failed!: (error: unknown) => void;
  const open = new Promise<T>((resolve, reject) => ((opened = resolve), (failed = reject)));
  const done = db.transaction(async (tx) => {
    opened(await first(tx));
    await released;
  });
  done.catch(failed);
  return { value: await open, release, done };
}
