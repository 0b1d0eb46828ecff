import { test } from "node:test";
import assert from "node:assert/strict";
import { distinctPrefixLength, GroupCommit } from "../src/storage/group-commit.ts";

/**
 * A GroupCommit over a fake database that records each batch it was sent. Each batch takes 5 ms,
 * or, `held`, until the test lets it go (`release`): what arrives meanwhile waits for the next.
 */
function recording(fail: (item: number) => boolean = () => false, { held = false } = {}) {
  const batches: number[][] = [];
  const waiting: (() => void)[] = [];
  const group = new GroupCommit<number, string>(async (items) => {
    batches.push([...items]);
    await new Promise<void>((resolve) => (held ? waiting.push(resolve) : setTimeout(resolve, 5)));
    if (items.some(fail)) throw new Error(`bad batch ${items.join(",")}`);
    return items.map((item) => `done ${item}`);
  });
  /** Resolves once `count` batches have reached the database. */
  const sent = async (count: number) => {
    while (batches.length < count) await new Promise((resolve) => setImmediate(resolve));
  };
  /** Lets the oldest held batch finish. */
  const release = () => waiting.shift()?.();
  return { batches, group, sent, release };
}

test("items submitted in one turn go in one batch; those submitted while it is in flight go in the next", async () => {
  const { batches, group, sent, release } = recording(undefined, { held: true });
  const first = [1, 2, 3].map((item) => group.submit(item));
  await sent(1); // the first batch is in flight now
  const second = [4, 5].map((item) => group.submit(item));
  release();
  await sent(2);
  release();
  assert.deepEqual(await Promise.all([...first, ...second]), ["done 1", "done 2", "done 3", "done 4", "done 5"]);
  assert.deepEqual(batches, [
    [1, 2, 3],
    [4, 5],
  ]);
});

test("a caller resolved by one batch that submits again at once joins the next batch with the others", async () => {
  const { batches, group, sent, release } = recording(undefined, { held: true });
  const chained = group.submit(1).then(() => group.submit(2));
  await sent(1);
  const other = group.submit(3); // while [1] is in flight
  release();
  await sent(2);
  release();
  await Promise.all([chained, other]);
  assert.deepEqual(batches, [[1], [3, 2]]);
});

test("a failed batch is sent again item by item: the bad item fails alone, the rest succeed", async () => {
  const { batches, group } = recording((item) => item === 2);
  const outcomes = await Promise.allSettled([1, 2, 3].map((item) => group.submit(item)));
  assert.deepEqual(
    outcomes.map((outcome) => outcome.status),
    ["fulfilled", "rejected", "fulfilled"],
  );
  assert.match(String((outcomes[1] as PromiseRejectedResult).reason), /bad batch 2/);
  assert.deepEqual(batches, [[1, 2, 3], [1], [2], [3]]);
});

test("`take` bounds a batch; the rest wait for the next", async () => {
  const batches: number[][] = [];
  const group = new GroupCommit<number, number>(
    async (items) => (batches.push([...items]), items.map((item) => item * 2)),
    (waiting) => Math.min(waiting.length, 2),
  );
  assert.deepEqual(await Promise.all([1, 2, 3, 4, 5].map((item) => group.submit(item))), [2, 4, 6, 8, 10]);
  assert.deepEqual(batches, [[1, 2], [3, 4], [5]]);
});

test("a batch for a statement that must not see one row twice stops at a repeated key or at its capacity, and takes at least one item", () => {
  const keysOf = (item: { keys: string[] }) => item.keys;
  const weightOf = (item: { keys: string[] }) => item.keys.length;
  const items = [{ keys: ["a"] }, { keys: ["b", "c"] }, { keys: ["a"] }, { keys: ["d"] }];
  assert.equal(distinctPrefixLength(items, keysOf, 100), 2, "the second 'a' waits for the next statement");
  assert.equal(distinctPrefixLength(items.slice(2), keysOf, 100), 2);
  assert.equal(distinctPrefixLength(items, keysOf, 2, weightOf), 1, "three rows would pass a capacity of two");
  assert.equal(distinctPrefixLength([{ keys: ["x", "y", "z"] }], keysOf, 2, weightOf), 1, "one item goes alone, whatever it weighs");
  assert.equal(distinctPrefixLength([], keysOf, 10), 0);
});
