import { setImmediate as nextTurn } from "node:timers/promises";

/**
 * Group commit: work handed in during one turn of the event loop, or while the previous batch is
 * in flight, goes to the database as one batch (one statement, one commit) instead of one each.
 * A batch leaves on the event loop's next turn (`setImmediate`), so everything submitted in the
 * current turn goes with it, and callers resolved by one batch can chain their next submission
 * into the next. Each caller's promise settles with its own result: if a batch fails, its items
 * are sent again one by one, so one bad item fails alone.
 */
export class GroupCommit<Item, Result> {
  private readonly queue: { item: Item; resolve: (result: Result) => void; reject: (error: unknown) => void }[] = [];
  private draining = false;

  /**
   * @param send writes a batch; returns one result per item, in the items' order.
   * @param take how many of the waiting items (at least one) the next batch may take; default all.
   */
  constructor(
    private readonly send: (items: readonly Item[]) => Promise<readonly Result[]>,
    private readonly take: (waiting: readonly Item[]) => number = (waiting) => waiting.length,
  ) {}

  submit(item: Item): Promise<Result> {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (this.draining) return;
      this.draining = true;
      setImmediate(() => void this.drain());
    });
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const size = Math.max(1, this.take(this.queue.map((entry) => entry.item)));
      const batch = this.queue.splice(0, size);
      try {
        const results = await this.send(batch.map((entry) => entry.item));
        batch.forEach((entry, index) => entry.resolve(results[index]!));
      } catch (error) {
        if (batch.length === 1) batch[0]!.reject(error);
        else
          for (const entry of batch)
            await this.send([entry.item]).then(
              ([result]) => entry.resolve(result!),
              (single: unknown) => entry.reject(single ?? error),
            );
      }
      // The callers just resolved chain their next submissions in this turn: let them join the next batch.
      await nextTurn();
    }
    this.draining = false;
  }
}

/**
 * How many items from the first hold no key twice and weigh at most `capacity` together (always
 * at least one): the next batch of a statement that must not see one row twice, since it does not
 * see its own rows. The rest wait for the next statement, in order.
 */
export function distinctPrefixLength<Item>(
  items: readonly Item[],
  keysOf: (item: Item) => readonly string[],
  capacity: number,
  weightOf: (item: Item) => number = () => 1,
): number {
  const seen = new Set<string>();
  let weight = 0;
  let length = 0;
  for (const item of items) {
    const keys = keysOf(item);
    if (length > 0 && (keys.some((key) => seen.has(key)) || weight + weightOf(item) > capacity)) break;
    for (const key of keys) seen.add(key);
    weight += weightOf(item);
    length++;
  }
  return length;
}
