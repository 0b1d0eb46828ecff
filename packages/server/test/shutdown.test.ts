import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createTestDatabase } from "./support/db.ts";
import { startTestServer } from "./support/server.ts";

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));

test("stopping a worker hands its running runs back; another worker continues them from the checkpoint", async () => {
  const database = await createTestDatabase();
  const effects = join(mkdtempSync(join(tmpdir(), "rudder-drain-")), "effects.log");
  const first = await startTestServer({ configFile: TESTING_CONFIG, database, worker: { shutdownGraceMs: 200 } });
  const { body: run } = await first.request("POST", "/v1/runs", { body: { assistant_id: "steps", input: { steps: 6, delayMs: 300, sideEffectFile: effects } } });
  for (let i = 0; i < 400 && !(existsSync(effects) && readFileSync(effects, "utf8").split("\n").length > 2); i++) await new Promise((r) => setTimeout(r, 25));

  const stopping = Date.now();
  await first.server.close(); // the worker stops claiming, waits 200 ms, aborts and hands the run back
  const stoppedIn = Date.now() - stopping;
  assert.ok(stoppedIn < 5000, `stopped within a bound (${stoppedIn} ms)`);
  const [row] = await database.db.query<{ status: string; attempt: number }>("select status, attempt from runs where run_id = $1", [run.run_id]);
  assert.deepEqual(row, { status: "pending", attempt: 1 }, "handed back to the queue");
  const [handback] = await database.db.query<{ data: { reason: string } }>(
    "select data from run_events where run_id = $1 and kind = 'run_retrying' order by sequence desc limit 1",
    [run.run_id],
  );
  assert.equal(handback!.data.reason, "worker_shutdown");

  const second = await startTestServer({ configFile: TESTING_CONFIG, database, worker: {} });
  try {
    const done = (await second.request("GET", `/v1/runs/${run.run_id}/join?timeout=30`)).body;
    assert.deepEqual([done.status, done.attempt, done.output.count], ["succeeded", 2, 6]);
    const steps = readFileSync(effects, "utf8").trim().split("\n").map((line) => Number(line.split(" ").at(-1)));
    for (let n = 1; n <= 6; n++) assert.ok(steps.includes(n), `step ${n} ran`);
    assert.ok(steps.length <= 7, "only the interrupted step may have run twice");
  } finally {
    await second.close(); // drops the database
  }
});
