import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { MemorySaver } from "@langchain/langgraph";
import { GraphLoadError, GraphRegistry } from "../src/graphs/registry.ts";

const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/graphs/${name}`, import.meta.url));
const spec = (file: string, exportName: string, graphId = "g") => ({ graphId, file: fixture(file), exportName });

async function loadError(file: string, exportName: string): Promise<GraphLoadError> {
  const error = await GraphRegistry.load([spec(file, exportName)], new MemorySaver()).then(
    () => assert.fail("expected loading to fail"),
    (e: unknown) => e,
  );
  assert.ok(error instanceof GraphLoadError, String(error));
  assert.match(error.message, /graph "g"/, "the message names the graph");
  return error;
}

describe("graph loading", () => {
  test("compiled graphs, uncompiled StateGraphs, factories and default exports all load and run", async () => {
    const registry = await GraphRegistry.load(
      [spec("ok.ts", "compiled", "a"), spec("ok.ts", "uncompiled", "b"), spec("ok.ts", "factory", "c"), spec("ok.ts", "default", "d")],
      new MemorySaver(),
    );
    assert.deepEqual(registry.ids(), ["a", "b", "c", "d"]);
    for (const id of registry.ids()) {
      const graph = await registry.get(id);
      const result = await graph!.invoke({ n: 1 }, { configurable: { thread_id: `t-${id}` } });
      assert.deepEqual(result, { n: 2 }, id);
    }
    assert.equal(await registry.get("missing"), undefined);
  });

  test("two registries loading the same compiled graph each keep their own checkpointer", async () => {
    const [first, second] = [new MemorySaver(), new MemorySaver()];
    const one = await GraphRegistry.load([spec("ok.ts", "compiled", "a")], first);
    const two = await GraphRegistry.load([spec("ok.ts", "compiled", "a")], second);
    await (await one.get("a"))!.invoke({ n: 1 }, { configurable: { thread_id: "shared" } });
    assert.ok(await first.getTuple({ configurable: { thread_id: "shared" } }), "the first registry's run checkpointed in its saver");
    assert.equal(await second.getTuple({ configurable: { thread_id: "shared" } }), undefined, "and not in the other's");
    assert.equal((await two.get("a"))!.checkpointer, second);
  });

  test("a missing file names the graph and the file", async () => {
    const error = await loadError("nope.ts", "graph");
    assert.match(error.message, /nope\.ts does not exist/);
  });

  test("a missing export names the export and lists what the module has", async () => {
    const error = await loadError("ok.ts", "nothing");
    assert.match(error.message, /ok\.ts has no export "nothing" \(its exports: .*compiled/);
  });

  test("a module that throws on import is reported with its error", async () => {
    const error = await loadError("throws-on-import.ts", "graph");
    assert.match(error.message, /throws-on-import\.ts failed: module exploded on import/);
  });

  test("a graph that fails to compile is reported with the compile error", async () => {
    const error = await loadError("broken.ts", "noEntry");
    assert.match(error.message, /broken\.ts failed to compile: .+/);
  });

  test("an export that is not a graph, and a factory that throws, are reported", async () => {
    assert.match((await loadError("broken.ts", "notAGraph")).message, /is not a graph/);
    assert.match((await loadError("broken.ts", "failingFactory")).message, /factory threw: factory exploded/);
  });
});
