import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { InMemoryStore, type BaseStore } from "@langchain/langgraph-checkpoint";
import { TenantStore } from "../src/store/langgraph-store.ts";
import { StoreService } from "../src/store/service.ts";
import { createTestDatabase, TEST_DRIVER, type TestDatabase } from "./support/db.ts";

/**
 * The same random sequence of operations against Rudder's store (through `TenantStore`, the
 * BaseStore graph code gets) and LangGraph's `InMemoryStore` gives the same results, where the
 * in-memory store defines them: gets, deletes, searches without a query (compared as sets: the
 * in-memory store returns insertion order, Rudder newest first; the limit exceeds the item count)
 * with equality and comparison filters, and list_namespaces with prefix, suffix and max_depth.
 */

const NAMESPACES = [["a"], ["a", "b"], ["a", "c"], ["b"], ["a", "b", "c"]];
const PREFIXES = [[], ["a"], ["a", "b"], ["b"], ["c"]];
const KEYS = ["k1", "k2", "k3"];

type Command =
  | { op: "put"; ns: string[]; key: string; value: { n: number; s: string } }
  | { op: "delete"; ns: string[]; key: string }
  | { op: "get"; ns: string[]; key: string }
  | { op: "search"; prefix: string[]; filter: Record<string, unknown> | undefined }
  | { op: "list"; prefix: string[] | undefined; suffix: string[] | undefined; maxDepth: number | undefined };

const ns = fc.constantFrom(...NAMESPACES);
const key = fc.constantFrom(...KEYS);
const filter = fc.option(
  fc.oneof(
    fc.record({ n: fc.integer({ min: 0, max: 4 }) }),
    fc.record({ s: fc.constantFrom("x", "y") }),
    fc.record({ n: fc.record({ $gt: fc.integer({ min: 0, max: 4 }) }) }),
    fc.record({ n: fc.record({ $lte: fc.integer({ min: 0, max: 4 }), $ne: fc.integer({ min: 0, max: 4 }) }) }),
    fc.record({ s: fc.record({ $ne: fc.constantFrom("x", "y") }) }),
  ),
  { nil: undefined },
);
const command: fc.Arbitrary<Command> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant("put" as const),
      ns,
      key,
      value: fc.record({ n: fc.integer({ min: 0, max: 4 }), s: fc.constantFrom("x", "y") }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("delete" as const), ns, key }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("get" as const), ns, key }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("search" as const), prefix: fc.constantFrom(...PREFIXES), filter }) },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant("list" as const),
      prefix: fc.option(fc.constantFrom<string[]>(["a"], ["a", "b"], ["*", "b"]), { nil: undefined }),
      suffix: fc.option(fc.constantFrom<string[]>(["b"], ["c"], ["b", "*"]), { nil: undefined }),
      maxDepth: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
    }),
  },
);

/** What a command observes, in a form both stores give alike. */
async function observe(store: BaseStore, cmd: Command): Promise<unknown> {
  switch (cmd.op) {
    case "put":
      return store.put(cmd.ns, cmd.key, cmd.value);
    case "delete":
      return store.delete(cmd.ns, cmd.key);
    case "get": {
      const item = await store.get(cmd.ns, cmd.key);
      return item && { namespace: item.namespace, key: item.key, value: item.value };
    }
    case "search": {
      const hits = await store.search(cmd.prefix, { filter: cmd.filter, limit: 1000 });
      return hits.map((hit) => `${hit.namespace.join("/")}#${hit.key}=${JSON.stringify(hit.value)}`).sort();
    }
    case "list": {
      if (!(store instanceof InMemoryStore)) {
        const spaces = await store.listNamespaces({ prefix: cmd.prefix, suffix: cmd.suffix, maxDepth: cmd.maxDepth, limit: 1000 });
        return spaces.map((space) => space.join("/")).sort();
      }
      // InMemoryStore keeps listing a namespace whose last item was deleted (its map stays, empty):
      // only namespaces that hold items count, truncated to maxDepth as LangGraph truncates.
      const full = await store.listNamespaces({ prefix: cmd.prefix, suffix: cmd.suffix, limit: 1000 });
      const { data } = store as unknown as { data: Map<string, Map<string, unknown>> };
      const holding = full.filter((space) => (data.get(space.join(":"))?.size ?? 0) > 0);
      return [...new Set(holding.map((space) => space.slice(0, cmd.maxDepth).join("/")))].sort();
    }
  }
}

describe(`store differential against LangGraph's InMemoryStore (${TEST_DRIVER})`, () => {
  let database: TestDatabase;
  let service: StoreService;
  before(async () => {
    database = await createTestDatabase();
    service = new StoreService(database.db, { defaultTtl: null, refreshOnRead: true });
  });
  after(() => database.drop());

  test("random operation sequences give the same results", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(command, { minLength: 1, maxLength: 25 }), async (commands) => {
        const ours = new TenantStore(service, `diff-${randomUUID()}`);
        const reference = new InMemoryStore();
        for (const [index, cmd] of commands.entries()) {
          // JSON: fast-check's records have a null prototype, the stores' answers do not.
          const [got, expected] = [JSON.stringify(await observe(ours, cmd)), JSON.stringify(await observe(reference, cmd))];
          assert.deepEqual(got, expected, `command ${index}: ${JSON.stringify(cmd)}`);
        }
      }),
      { numRuns: 40 },
    );
  });
});
