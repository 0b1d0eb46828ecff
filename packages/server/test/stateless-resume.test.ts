import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { TEST_DRIVER } from "./support/db.ts";
import { startTestServer, type TestServer } from "./support/server.ts";

/**
 * A stateless run keeps its checkpoints under its own id; resuming it must hand them to the run
 * that continues it, or the resume would start the graph over on an empty state.
 */
describe(`resuming a paused stateless run on ${TEST_DRIVER}`, () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer();
  });
  after(async () => server?.close());

  async function settled(runId: string): Promise<{ status: string; output: Record<string, unknown>; thread_id: string | null }> {
    for (;;) {
      const joined = await server.request("GET", `/v1/runs/${runId}/join?timeout=60`);
      if (joined.status !== 408) {
        assert.equal(joined.status, 200, JSON.stringify(joined.body));
        return joined.body;
      }
    }
  }

  test("continues from the interrupt with the state it had, and frees nothing it still needs", async () => {
    const created = await server.request("POST", "/v1/runs", { body: { assistant_id: "approval", input: { request: "ship it" } } });
    assert.equal(created.status, 202);
    const paused = await settled(created.body.run_id);
    assert.equal(paused.status, "paused");
    assert.equal(paused.thread_id, null);
    const resumed = await server.request("POST", `/v1/runs/${created.body.run_id}/resume`, { body: { resume: { approved: true } } });
    assert.equal(resumed.status, 202, JSON.stringify(resumed.body));
    const done = await settled(resumed.body.run_id);
    assert.equal(done.status, "succeeded", JSON.stringify(done));
    assert.equal(done.output.draft, "Plan for: ship it", "the state before the interrupt");
    assert.equal(done.output.outcome, "done: Plan for: ship it");
  });
});
