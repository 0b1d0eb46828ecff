/**
 * The store: put throughput, and search latency (p50/p99) at 10k and 100k items, for full-text
 * search, semantic search with pgvector (PGlite ships it) and semantic search by exact scan in SQL
 * (PostgreSQL without pgvector; on PGlite too, with the extension dropped), on both drivers.
 * Also the statements each kind of batch costs (counted at the `Db` seam).
 *
 * It measures the store service itself (no HTTP): items are `{text}` of 8-20 words from a 2,000
 * word vocabulary, in 100 namespaces ["bench", "u<n>"]; searches cover the whole ["bench"] prefix
 * with a two-word query, limit 10. The embedder is examples/embed.ts (feature hashing, 256 dims,
 * in process), so the figures are the database's, not a model provider's.
 *
 *   node --import tsx bench/store.ts [--queries N] [--max 100000]                 # PGlite
 *   RUDDER_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/store.ts
 *
 * On PostgreSQL a private database is created and dropped.
 */
import { parseArgs } from "node:util";
import type { StoreOperation } from "@rudder/api";
import { embed, DIMS } from "../examples/embed.ts";
import { StoreService, type StoreSettings } from "../packages/server/src/store/service.ts";
import type { Db, Queryable, Transaction } from "../packages/server/src/storage/db.ts";
import { createTestDatabase, TEST_DRIVER } from "../packages/server/test/support/db.ts";

const { values } = parseArgs({
  options: { queries: { type: "string", default: "40" }, max: { type: "string", default: "100000" } },
});
const QUERIES = Number(values.queries);
const SCALES = [10_000, 100_000].filter((n) => n <= Number(values.max));
const BATCH = 500;

/** Counts statements and transactions asked of the database. */
function counting(db: Db): { db: Db; counts: { statements: number; transactions: number } } {
  const counts = { statements: 0, transactions: 0 };
  const wrap = <Q extends Queryable>(target: Q): Q =>
    ({
      ...target,
      query: (sql: string, params?: readonly unknown[]) => {
        counts.statements += 1;
        return target.query(sql, params);
      },
    }) as Q;
  const counted: Db = {
    ...wrap(db),
    driver: db.driver,
    url: db.url,
    exec: (script) => db.exec(script),
    close: () => db.close(),
    transaction: (work) => {
      counts.transactions += 1;
      return db.transaction((tx: Transaction) => work({ ...wrap(tx), afterCommit: tx.afterCommit }));
    },
  };
  return { db: counted, counts };
}

let seed = 42;
const random = () => {
  seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
  return seed / 2 ** 31;
};
const VOCABULARY = Array.from({ length: 2000 }, (_, i) => `w${(i * 7919).toString(36)}${"aeiou"[i % 5]}`);
const words = (n: number) => Array.from({ length: n }, () => VOCABULARY[Math.floor(random() * VOCABULARY.length)]).join(" ");

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
const fmt = (ms: number) => (ms < 10 ? ms.toFixed(2) : ms.toFixed(0));

async function latency(label: string, n: number, run: () => Promise<unknown>): Promise<string> {
  await run(); // warm-up
  const times: number[] = [];
  for (let i = 0; i < n; i += 1) {
    const start = performance.now();
    await run();
    times.push(performance.now() - start);
  }
  times.sort((a, b) => a - b);
  return `${label}: p50 ${fmt(percentile(times, 50))} ms, p99 ${fmt(percentile(times, 99))} ms (${n} searches)`;
}

async function benchDriver(driver: "pglite" | "postgres"): Promise<void> {
  const database = await createTestDatabase();
  const { db, counts } = counting(database.db);
  const embedder = { embedDocuments: embed, embedQuery: async (text: string) => (await embed([text]))[0]! };
  const base: StoreSettings = { defaultTtl: null, refreshOnRead: false };
  const semantic = new StoreService(db, { ...base, index: { embedder, dims: DIMS, fields: ["text"] } });
  const text = new StoreService(db, base);
  console.log(`\n== ${driver} (${await semantic.semanticPath()} available) ==`);
  try {
    // Statements per batch, on an empty store.
    const tenant = "bench";
    const measure = async (label: string, service: StoreService, operations: StoreOperation[]) => {
      counts.statements = 0;
      counts.transactions = 0;
      await service.batch(tenant, operations);
      console.log(`statements: ${label}: ${counts.statements} statements, ${counts.transactions} transactions`);
    };
    await measure("1 put", text, [{ kind: "put", namespace: ["s"], key: "a", value: { text: "x" } }]);
    await measure("1 get", text, [{ kind: "get", namespace: ["s"], key: "a" }]);
    await measure("1 get (refresh_ttl)", text, [{ kind: "get", namespace: ["s"], key: "a", refresh_ttl: true }]);
    await measure("1 search (full text)", text, [{ kind: "search", namespace: ["s"], query: "x" }]);
    await measure("1 search (semantic)", semantic, [{ kind: "search", namespace: ["s"], query: "x" }]);
    await measure(
      "10 puts",
      text,
      Array.from({ length: 10 }, (_, i) => ({ kind: "put" as const, namespace: ["s"], key: `k${i}`, value: { text: "x" } })),
    );
    await measure("put+get+search+delete", text, [
      { kind: "put", namespace: ["s"], key: "b", value: { text: "y" } },
      { kind: "get", namespace: ["s"], key: "b" },
      { kind: "search", namespace: ["s"] },
      { kind: "delete", namespace: ["s"], key: "b" },
    ]);
    await db.query("delete from store_items");

    let count = 0;
    for (const scale of SCALES) {
      const started = performance.now();
      const added = scale - count;
      while (count < scale) {
        const operations: StoreOperation[] = Array.from({ length: Math.min(BATCH, scale - count) }, (_, i) => ({
          kind: "put",
          namespace: ["bench", `u${(count + i) % 100}`],
          key: `item-${count + i}`,
          value: { text: words(8 + Math.floor(random() * 13)), n: count + i },
        }));
        await semantic.batch(tenant, operations);
        count += operations.length;
      }
      const seconds = (performance.now() - started) / 1000;
      console.log(
        `\n-- ${scale} items --\nput throughput (batches of ${BATCH}, embedding included): ${Math.round(added / seconds)} items/s`,
      );
      await db.query("analyze store_items");
      const query = () => ({ kind: "search" as const, namespace: ["bench"], query: words(2), limit: 10 });
      console.log(await latency("full-text search", QUERIES, () => text.batch(tenant, [query()])));
      console.log(
        await latency("no query, newest first, filter n >= half", QUERIES, () =>
          text.batch(tenant, [{ kind: "search", namespace: ["bench"], filter: { n: { $gte: scale / 2 } } }]),
        ),
      );
      const path = await semantic.semanticPath();
      const semanticQueries = path === "pgvector" ? QUERIES : Math.max(5, Math.floor(QUERIES / (scale / 10_000)));
      console.log(await latency(`semantic search (${path})`, semanticQueries, () => semantic.batch(tenant, [query()])));
      if (path === "pgvector") {
        // The exact scan on the same database: without the extension (recreated afterwards).
        await db.exec("drop extension vector");
        const exact = new StoreService(db, { ...base, index: { embedder, dims: DIMS, fields: ["text"] } });
        console.log(
          await latency(`semantic search (${await exact.semanticPath()})`, Math.max(5, Math.floor(QUERIES / (scale / 10_000))), () =>
            exact.batch(tenant, [query()]),
          ),
        );
        await db.exec("create extension vector");
      }
    }
  } finally {
    await database.drop();
  }
}

await benchDriver(TEST_DRIVER);
