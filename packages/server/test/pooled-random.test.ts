import { test } from "node:test";
import assert from "node:assert/strict";
import { v7 } from "@langchain/core/utils/uuid";
import { installPooledRandomValues, pooledRandomValues } from "../src/worker/pooled-random.ts";
import "../src/worker/executor.ts";

// The worker's pooled `getRandomValues` (worker/pooled-random.ts): every byte the generator gave
// is handed out once and in order, and what the pool does not serve reaches the real one.

/** A stand-in generator that fills with a running count, so the bytes handed out can be traced. */
function countingGenerator() {
  let counter = 0;
  const calls: number[] = [];
  const fill = <T extends ArrayBufferView | null>(array: T): T => {
    const view = array as unknown as ArrayBufferView;
    calls.push(view.byteLength);
    const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
    for (let i = 0; i < bytes.length; i++) bytes[i] = counter++ % 251;
    return array;
  };
  return { fill, calls };
}

test("small requests are served from one refill, each byte once and in order", () => {
  const generator = countingGenerator();
  const getRandomValues = pooledRandomValues(generator.fill);
  const seen: number[] = [];
  for (let i = 0; i < 300; i++) seen.push(...getRandomValues(new Uint8Array(16)));
  // 300 × 16 bytes is more than one 4,096-byte pool: a second refill, and no byte served twice.
  assert.deepEqual(generator.calls, [4096, 4096]);
  const expected = [...Array(4096).keys(), ...Array.from({ length: 300 * 16 - 4096 }, (_, i) => 4096 + i)].map((n) => n % 251);
  assert.deepEqual(seen, expected);
});

test("other integer arrays are filled through their bytes; a view fills only its own window", () => {
  const generator = countingGenerator();
  const getRandomValues = pooledRandomValues(generator.fill);
  const words = getRandomValues(new Uint32Array(2));
  assert.deepEqual([...new Uint8Array(words.buffer)], [0, 1, 2, 3, 4, 5, 6, 7]);
  const backing = new Uint8Array(8);
  getRandomValues(new Uint8Array(backing.buffer, 2, 3));
  assert.deepEqual([...backing], [0, 0, 8, 9, 10, 0, 0, 0]);
  assert.deepEqual(generator.calls, [4096]);
});

test("large, float and non-array requests reach the real generator, which judges them", () => {
  installPooledRandomValues();
  installPooledRandomValues(); // twice is once
  assert.throws(() => crypto.getRandomValues(new Float64Array(2) as unknown as Uint8Array), { name: "TypeMismatchError" });
  assert.throws(() => crypto.getRandomValues(new Uint8Array(65537)), { name: "QuotaExceededError" });
  assert.throws(() => crypto.getRandomValues({} as Uint8Array));
  const large = crypto.getRandomValues(new Uint8Array(4096));
  assert.ok(large.some((byte) => byte !== 0));
});

test("in the worker's process, LangChain's UUIDs come from the pool and stay distinct", () => {
  // executor.ts installed it on import: the function is no longer Web Crypto's own.
  assert.equal(Object.hasOwn(globalThis.crypto, "getRandomValues"), true);
  const ids = new Set(Array.from({ length: 5000 }, () => v7()));
  assert.equal(ids.size, 5000);
  for (const id of ids) assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
});
