import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { ReplayTurns } from "../src/runs/replay-turns.ts";

const settled = async <T>(promise: Promise<T>): Promise<boolean> => {
  let done = false;
  void promise.then(() => (done = true));
  await new Promise((resolve) => setImmediate(resolve));
  return done;
};

describe("replay turns", () => {
  test("a tenant's replays take at most its turns at once, handed on in order; other tenants are not held", async () => {
    const turns = new ReplayTurns(2);
    const first = await turns.take("a");
    const second = await turns.take("a");
    const third = turns.take("a");
    const fourth = turns.take("a");
    assert.equal(await settled(third), false, "a third waits");
    assert.equal(await settled(turns.take("b")), true, "another tenant takes its own turn at once");
    first();
    first(); // giving a turn back twice gives back one
    assert.equal(await settled(third), true, "the first waiter gets the turn given back");
    assert.equal(await settled(fourth), false, "the second still waits");
    second();
    assert.equal(await settled(fourth), true);
    (await third)();
    (await fourth)();
    const again = await Promise.all([turns.take("a"), turns.take("a")]);
    assert.equal(again.length, 2, "every turn came back");
  });
});
