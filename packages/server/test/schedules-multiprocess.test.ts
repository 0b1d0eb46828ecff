import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { mintToken } from "../src/auth/authenticator.ts";
import { apiClient } from "./support/api.ts";
import { TEST_DRIVER } from "./support/db.ts";
import { setUpProcesses, startApi, startWorker } from "./support/processes.ts";

/**
 * Many executors, one database (PostgreSQL only; skipped visibly on PGlite): three `rudder worker`
 * processes each run the cron executor, every-second schedules fire for over 30 s, and one
 * executor is SIGKILLed midway. Every due time from each schedule's first to its last must have
 * exactly one run: none missing, none duplicated.
 */

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));
const SECRET = "rudder-schedules-multiprocess-secret-rudder";
const SCHEDULES = 4;
const RUN_FOR_MS = 32_000;
const KILL_AFTER_MS = 15_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe(`cron executors in several processes on ${TEST_DRIVER}`, () => {
  test("three executors, one SIGKILLed midway: each due time fires exactly once", { timeout: 240_000 }, async (t) => {
    const setup = await setUpProcesses(t, SECRET);
    if (!setup) return;
    const { database, processes } = setup;
    try {
      const [url] = await Promise.all([
        startApi(processes, TESTING_CONFIG),
        startWorker(processes, "executor-1", TESTING_CONFIG),
        startWorker(processes, "executor-2", TESTING_CONFIG),
        startWorker(processes, "executor-3", TESTING_CONFIG),
      ]);
      const api = apiClient(url, await mintToken(SECRET, { tenantId: "cron-multiprocess", roles: ["admin"] }));
      const schedules: { schedule_id: string; next_run_at: string }[] = [];
      for (let i = 0; i < SCHEDULES; i++) {
        const created = await api<{ schedule_id: string; next_run_at: string }>("POST", "/v1/schedules", {
          assistant_id: "echo",
          cron: "* * * * * *",
          input: { message: `schedule ${i}` },
          metadata: { index: i },
        });
        assert.equal(created.status, 201, JSON.stringify(created.body));
        schedules.push(created.body);
      }
      // The scenario's length is fixed; no assertion depends on how long anything took.
      await sleep(KILL_AFTER_MS);
      await processes.kill("executor-2");
      await sleep(RUN_FOR_MS - KILL_AFTER_MS);
      const last: string[] = [];
      for (const schedule of schedules) {
        const disabled = await api<{ last_run_at: string; next_run_at: string | null }>("PATCH", `/v1/schedules/${schedule.schedule_id}`, {
          enabled: false,
        });
        assert.equal(disabled.status, 200);
        assert.equal(disabled.body.next_run_at, null);
        last.push(disabled.body.last_run_at);
      }

      let lags: number[] = [];
      for (const [index, schedule] of schedules.entries()) {
        const rows = await database.db.query<{ scheduled_at: string; lag_ms: number }>(
          `select metadata->>'scheduled_at' as scheduled_at,
                  (extract(epoch from created_at - (metadata->>'scheduled_at')::timestamptz) * 1000)::float8 as lag_ms
             from runs where tenant_id = 'cron-multiprocess' and metadata->>'schedule_id' = $1 order by 1`,
          [schedule.schedule_id],
        );
        const due = rows.map((row) => row.scheduled_at);
        lags = lags.concat(rows.map((row) => row.lag_ms));
        const first = Date.parse(schedule.next_run_at);
        const expected = Array.from({ length: (Date.parse(last[index]!) - first) / 1000 + 1 }, (_, i) =>
          new Date(first + i * 1000).toISOString(),
        );
        assert.ok(expected.length >= RUN_FOR_MS / 1000 - 2, `schedule ${index} fired over ${expected.length} s`);
        assert.equal(
          new Set(due).size,
          due.length,
          `schedule ${index}: a due time fired twice: ${due.filter((d, i) => due.indexOf(d) !== i).join(", ")}`,
        );
        assert.deepEqual(
          due,
          expected,
          `schedule ${index}: missing ${expected.filter((d) => !due.includes(d)).join(", ") || "none"}; extra ${due.filter((d) => !expected.includes(d)).join(", ") || "none"}`,
        );
      }
      lags.sort((a, b) => a - b);
      const pct = (p: number) => Math.round(lags[Math.min(lags.length - 1, Math.floor((p / 100) * lags.length))]!);
      t.diagnostic(
        `${lags.length} runs fired; fire lag (due time -> run created) p50 ${pct(50)} ms, p99 ${pct(99)} ms, max ${pct(100)} ms`,
      );
      t.diagnostic(processes.logSummary());
    } catch (error) {
      t.diagnostic(processes.stderr());
      throw error;
    } finally {
      await processes.stopAll();
      await database.drop();
    }
  });
});
