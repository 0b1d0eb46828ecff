import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { TEST_DRIVER } from "./support/db.ts";
import { startTestServer, type TestServer } from "./support/server.ts";

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));

// Graph code runs in the server process, so this is defence in depth: the objects Rudder hands a
// run (its store, its checkpointer) act for the run's tenant whatever graph code does with them.

describe(`graph code stays in its run's tenant (${TEST_DRIVER})`, () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ configFile: TESTING_CONFIG });
  });
  after(() => server.close());

  test("reassigning the store's tenant, rebuilding a store from its parts, naming another tenant to the checkpointer, or planting a held write reaches only the run's own tenant", async () => {
    const victim = "switch-victim";
    const attacker = "switch-attacker";
    // The victim's thread (a checkpoint holding a secret) and store item.
    const thread = await server.request("POST", "/v1/threads", { tenant: victim, body: {} });
    assert.equal(thread.status, 201);
    const victimThread = thread.body.thread_id as string;
    const seeded = await server.request("POST", `/v1/threads/${victimThread}/runs`, {
      tenant: victim,
      body: { assistant_id: "echo", input: { message: "victim-checkpoint-secret" } },
    });
    assert.equal(seeded.status, 202, JSON.stringify(seeded.body));
    const seededRun = await server.request("GET", `/v1/runs/${seeded.body.run_id}/join?timeout=30`, { tenant: victim });
    assert.equal(seededRun.body.status, "succeeded", JSON.stringify(seededRun.body.error));
    const put = (tenant: string, text: string) =>
      server.request("POST", "/v1/store/batch", {
        tenant,
        body: { operations: [{ kind: "put", namespace: ["notes"], key: "k", value: { text } }] },
      });
    assert.equal((await put(victim, "victim-store-secret")).status, 200);
    assert.equal((await put(attacker, "attacker-own-note")).status, 200);

    const own = await server.request("POST", "/v1/threads", { tenant: attacker, body: {} });
    const created = await server.request("POST", `/v1/threads/${own.body.thread_id}/runs`, {
      tenant: attacker,
      body: { assistant_id: "tenant_switch", input: { victim, thread: victimThread } },
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    const joined = await server.request("GET", `/v1/runs/${created.body.run_id}/join?timeout=30`, { tenant: attacker });
    assert.equal(joined.body.status, "succeeded", JSON.stringify(joined.body.error));
    const report = joined.body.output.report as Record<string, unknown>;
    const seen = JSON.stringify(report);
    assert.ok(!seen.includes("victim-"), `graph code saw the victim's data: ${seen}`);

    // The store still serves the run's tenant, and nothing in it leads to another's.
    assert.deepEqual(
      (report.store_search as { value: { text: string } }[]).map((item) => item.value.text),
      ["attacker-own-note"],
    );
    assert.equal(report.store_twin, "unreachable");
    // The checkpointer refuses another tenant, and still reads the run's own thread.
    assert.match((report.checkpoint_get as { refused: string }).refused, /tenant/);
    assert.match((report.checkpoint_list as { refused: string }).refused, /tenant/);
    assert.equal(report.checkpoint_own, true);
    // A commit hook in the config is not the run's: never handed a transaction.
    assert.equal(report.checkpoint_hook, false);
    assert.equal(report.hook_rows, undefined);
    // The attempt's held writes are out of reach, and the victim's thread is as it was.
    assert.equal(report.checkpoint_held, "unreachable");
    const state = await server.request("GET", `/v1/threads/${victimThread}/state`, { tenant: victim });
    assert.equal(state.body.values.message, "victim-checkpoint-secret");
  });
});
