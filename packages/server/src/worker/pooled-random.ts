// How the worker's process draws the small random values LangChain and LangGraph ask for: from a
// pool refilled by the system's generator, as Node's own `crypto.randomUUID()` does.
import type { webcrypto } from "node:crypto";

type Crypto = webcrypto.Crypto;

/**
 * The integer typed arrays `getRandomValues` accepts (the Web Crypto API's list, less the float
 * arrays it refuses): only these are served from the pool, anything else goes to the original.
 */
const INTEGER_ARRAYS = [
  Int8Array,
  Uint8Array,
  Uint8ClampedArray,
  Int16Array,
  Uint16Array,
  Int32Array,
  Uint32Array,
  BigInt64Array,
  BigUint64Array,
] as const;

/** Requests up to this size are served from the pool; a UUID asks for 16 bytes. */
const LARGEST_POOLED_REQUEST = 256;
/** One refill serves 256 UUIDs' worth of bytes. */
const POOL_BYTES = 4096;

type GetRandomValues = <T extends ArrayBufferView | null>(array: T) => T;

/**
 * A `getRandomValues` that serves small integer-array requests from a pool which `original` fills
 * `POOL_BYTES` at a time, and hands every other request (large, float, not a typed array) to
 * `original`, which validates it as the Web Crypto API says. Each pooled byte is handed out once.
 *
 * Why: LangChain makes a UUID from `crypto.getRandomValues` for every runnable it starts (v7 run
 * ids) and LangGraph one for every checkpoint (v6): 7 per trivial Rudder run, 14–17 without
 * Rudder's stand-in tracer. On Node 20 with OpenSSL 3 each call is a synchronous `RandomBytesJob`
 * whose cost barely depends on its size: 4–7 µs alone, 13–17 µs inside a busy worker, so 64 KiB
 * costs about what three UUIDs do. At c=50 on PostgreSQL it was 3.7 % of the server's CPU, 0.1 %
 * pooled (docs/benchmarks.md, "Issue 22, thirteenth pass"). The bytes are the same generator's;
 * Node buffers `randomUUID()` the same way.
 */
export function pooledRandomValues(original: GetRandomValues): GetRandomValues {
  const pool = new Uint8Array(POOL_BYTES);
  let next = POOL_BYTES;
  return <T extends ArrayBufferView | null>(array: T): T => {
    if (!isPoolable(array)) return original(array);
    const size = array.byteLength;
    if (next + size > POOL_BYTES) {
      original(pool);
      next = 0;
    }
    new Uint8Array(array.buffer, array.byteOffset, size).set(pool.subarray(next, next + size));
    // Not left where a later reader of the pool could see what was handed out.
    pool.fill(0, next, next + size);
    next += size;
    return array;
  };
}

function isPoolable(array: ArrayBufferView | null): array is ArrayBufferView {
  return (
    ArrayBuffer.isView(array) &&
    array.byteLength <= LARGEST_POOLED_REQUEST &&
    INTEGER_ARRAYS.some((IntegerArray) => array instanceof IntegerArray)
  );
}

const installed = new WeakSet<Crypto>();

/**
 * Puts the pooled `getRandomValues` on this process's Web Crypto object (the global `crypto`
 * LangChain's UUIDs read), once. Graph code calling `crypto.getRandomValues` gets the pool too:
 * the same bytes from the same generator, served in order.
 */
export function installPooledRandomValues(target: Crypto = globalThis.crypto): void {
  if (installed.has(target)) return;
  installed.add(target);
  const original = target.getRandomValues.bind(target) as GetRandomValues;
  Object.defineProperty(target, "getRandomValues", {
    value: pooledRandomValues(original),
    writable: true,
    configurable: true,
    enumerable: false,
  });
}
