import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { mintToken } from "../src/auth/authenticator.ts";
import { runRudder } from "./support/cli.ts";
import { createPostgresDb } from "../src/storage/db.ts";
import { ApiError } from "../src/domain/errors.ts";
import { TEST_DATABASE_URL, TEST_DRIVER } from "./support/db.ts";
import { holdTransaction } from "./support/hold.ts";
import { PrivatePostgres } from "./support/private-postgres.ts";
import { Processes, startApi, startWorker } from "./support/processes.ts";

/**
 * Issue 13, row 13 and "outage tests": the database goes away under load and comes back. On
 * PostgreSQL a private server (never the shared one) is stopped like a crash and restarted under
 * `rudder serve` and `rudder worker`; on PGlite, `rudder dev` (whose process is the embedded
 * database) is SIGKILLed and started again. No accepted run may be lost or stuck, every answer
 * during the outage is a 503 problem, and nothing needs a restart to recover.
 */

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));
const SECRET = "rudder-outage-test-secret-rudder-outage-test-secret";
const RUN_INPUT = { steps: 3, delayMs: 100 };

interface Answer {
  readonly phase: Phase;
  readonly request: string;
  readonly status: number;
  readonly contentType: string;
  readonly retryAfter: string | null;
  readonly code: string | undefined;
}
type Phase = "before" | "down" | "restarting" | "after";

/** A JSON client for one API, recording every answer with the phase of the test it arrived in. */
function recordingClient(url: string, token: string, phase: () => Phase, answers: Answer[]) {
  return async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const response = await fetch(url + path, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await response.text();
    const parsed = text ? (JSON.parse(text) as Record<string, unknown>) : undefined;
    answers.push({
      phase: phase(),
      request: `${method} ${path.split("?")[0]}`,
      status: response.status,
      contentType: response.headers.get("content-type") ?? "",
      retryAfter: response.headers.get("retry-after"),
      code: typeof parsed?.code === "string" ? parsed.code : undefined,
    });
    return { status: response.status, body: parsed };
  };
}

/** Joins every run until it is settled (joining again after 408 or 503), before `deadline`. */
async function settleAll(
  api: ReturnType<typeof recordingClient>,
  runIds: readonly string[],
  deadline: number,
): Promise<Map<string, { status: string; attempt: number }>> {
  const settled = new Map<string, { status: string; attempt: number }>();
  for (const runId of runIds) {
    for (;;) {
      assert.ok(Date.now() < deadline, `run ${runId} had not settled by the test's deadline`);
      const joined = await api("GET", `/v1/runs/${runId}/join?timeout=10`);
      if (joined.status === 200) {
        settled.set(runId, { status: String(joined.body?.status), attempt: Number(joined.body?.attempt) });
        break;
      }
      assert.ok([408, 503].includes(joined.status), `join ${runId}: ${joined.status} ${JSON.stringify(joined.body)}`);
    }
  }
  return settled;
}

/** Every answer of `phase` is the 503 problem an outage gives, with Retry-After. */
function assertAllUnavailable(answers: readonly Answer[], phase: Phase): void {
  const during = answers.filter((answer) => answer.phase === phase);
  assert.ok(during.length > 0, `some requests were answered while ${phase}`);
  for (const answer of during) {
    assert.equal(answer.status, 503, `${answer.request} while ${phase}: ${answer.status} ${answer.code}`);
    assert.match(answer.contentType, /^application\/problem\+json/);
    assert.equal(answer.code, "unavailable");
    assert.ok(answer.retryAfter && Number(answer.retryAfter) >= 1, `Retry-After on ${answer.request}`);
  }
}

describe(`database outages on ${TEST_DRIVER}`, () => {
  test("PostgreSQL stopped and restarted under load: 503 unavailable meanwhile, /ready 503, recovery without restart, no run lost or stuck", async (t) => {
    if (TEST_DRIVER !== "postgres") {
      t.skip("stops a private PostgreSQL server: runs in npm run test:pg");
      return;
    }
    const database = await PrivatePostgres.create();
    const processes = new Processes({ DATABASE_URL: database.url, RUDDER_JWT_SECRET: SECRET, RUDDER_LOG_LEVEL: "warn" });
    let phase: Phase = "before";
    const answers: Answer[] = [];
    try {
      assert.equal((await runRudder(["migrate"], { DATABASE_URL: database.url })).code, 0);
      const url = await startApi(processes, TESTING_CONFIG);
      await startWorker(processes, "worker", TESTING_CONFIG, {
        RUDDER_LEASE_MS: "2000",
        RUDDER_HEARTBEAT_MS: "400",
        RUDDER_WORKER_POLL_MS: "200",
      });
      const api = recordingClient(url, await mintToken(SECRET, { tenantId: "outage", roles: ["admin"] }), () => phase, answers);

      // Load: creates runs (each with its own Idempotency-Key) and reads one back, all the time.
      const accepted: string[] = [];
      const acceptedIn = (which: Phase) => answers.filter((answer) => answer.phase === which && answer.status === 202).length;
      let loading = true;
      const load = (async () => {
        for (let i = 0; loading; i++) {
          const created = await api("POST", "/v1/runs", { assistant_id: "steps", input: RUN_INPUT }, { "idempotency-key": `load-${i}` });
          if (created.status === 202) accepted.push(String(created.body?.run_id));
          if (accepted.length > 0) await api("GET", `/v1/runs/${accepted[i % accepted.length]}`);
          await sleep(25);
        }
      })();
      while (accepted.length < 10) await sleep(50);

      await database.stop("immediate");
      phase = "down";
      const down = answers.length;
      assert.equal((await api("GET", "/ready")).status, 503);
      assert.equal((await api("POST", "/v1/threads", {})).status, 503);
      assert.equal((await api("GET", `/v1/runs/${accepted[0]}/join?timeout=1`)).status, 503);
      while (answers.length < down + 20) await sleep(50);
      assert.ok(processes.running("serve") && processes.running("worker"), "nothing died with the database");

      phase = "restarting";
      await database.start();
      phase = "after";
      const recoveredBy = Date.now() + 60_000;
      while ((await api("GET", "/ready")).status !== 200) {
        assert.ok(Date.now() < recoveredBy, "ready again within a minute of the database's return");
        await sleep(200);
      }
      while (acceptedIn("after") < 10) await sleep(50);
      loading = false;
      await load;

      assertAllUnavailable(answers, "down");
      const unexpected = answers.filter((answer) => answer.status >= 500 && answer.status !== 503);
      assert.deepEqual(unexpected, [], "no answer in any phase was a 5xx other than 503");
      const settled = await settleAll(api, accepted, Date.now() + 120_000);
      const notSucceeded = [...settled].filter(([, run]) => run.status !== "succeeded");
      assert.deepEqual(notSucceeded, [], "every accepted run succeeded");
      assert.ok(processes.running("serve") && processes.running("worker"), "recovered without a restart");

      const sql = new pg.Client({ connectionString: database.url });
      await sql.connect();
      try {
        const { rows } = await sql.query<{ status: string; n: number }>("select status, count(*)::int as n from runs group by status");
        assert.deepEqual(rows, [{ status: "succeeded", n: accepted.length }], "the accepted runs, all succeeded, and nothing else");
      } finally {
        await sql.end();
      }
      t.diagnostic(`${accepted.length} runs accepted; ${answers.filter((a) => a.phase === "down").length} answers while down, all 503`);
    } catch (error) {
      t.diagnostic(processes.stderr());
      throw error;
    } finally {
      await processes.stopAll();
      await database.destroy();
    }
  });

  test("a busy pool is not an outage: a statement waits for a connection, and past the pool's wait fails 503 'busy', not 'unreachable'", async (t) => {
    if (TEST_DRIVER !== "postgres" || !TEST_DATABASE_URL) {
      t.skip("pg's pool: runs in npm run test:pg");
      return;
    }
    const db = createPostgresDb(TEST_DATABASE_URL, { max: 1, waitMs: 300 });
    try {
      const holder = await holdTransaction(db, (tx) => tx.query("select 1"));
      // Longer than the pool's wait while the one connection is held: a 503 that names the busy pool.
      const refused = await db.query("select 1").catch((error: unknown) => error);
      assert.ok(refused instanceof ApiError, String(refused));
      assert.equal(refused.code, "unavailable");
      assert.match(refused.message, /database connections stayed busy/);
      // Shorter than the wait: the statement queues and runs once the connection is free.
      const queued = db.query<{ one: number }>("select 1 as one");
      await sleep(50);
      holder.release();
      await holder.done;
      assert.deepEqual(await queued, [{ one: 1 }]);
      assert.deepEqual(
        { timeouts: db.stats?.().poolWaitTimeouts, outages: db.stats?.().unavailableErrors },
        { timeouts: 1, outages: 0 },
        "counted as a busy pool, not as the database unreachable",
      );
    } finally {
      await db.close();
    }
  });

  test("rudder dev SIGKILLed with the embedded database and started again: no accepted run lost or stuck", async (t) => {
    if (TEST_DRIVER !== "pglite") {
      t.skip("the embedded database is PGlite: runs in npm test");
      return;
    }
    const dataDir = mkdtempSync(join(tmpdir(), "rudder-outage-dev-"));
    // A lease of ten minutes: only the restart's own release of dead leases lets their runs go on in time.
    const processes = new Processes({
      DATABASE_URL: undefined,
      RUDDER_JWT_SECRET: SECRET,
      RUDDER_LOG_LEVEL: "warn",
      RUDDER_LEASE_MS: "600000",
      RUDDER_WORKER_CONCURRENCY: "3",
    });
    const startDev = async (name: string) => {
      const banner = await processes.start(
        name,
        ["dev", "--config", TESTING_CONFIG, "--port", "0", "--data-dir", dataDir],
        /ready at http:\/\/\S+/,
      );
      return /ready at (http:\/\/\S+)/.exec(banner)![1]!;
    };
    const answers: Answer[] = [];
    const token = await mintToken(SECRET, { tenantId: "outage", roles: ["admin"] });
    try {
      const first = recordingClient(await startDev("dev-1"), token, () => "before", answers);
      const accepted: string[] = [];
      for (let i = 0; i < 8; i++) {
        const created = await first("POST", "/v1/runs", { assistant_id: "steps", input: { steps: 4, delayMs: 250 } });
        assert.equal(created.status, 202);
        accepted.push(String(created.body?.run_id));
      }
      const runningBy = Date.now() + 60_000;
      const running = async () =>
        (await Promise.all(accepted.map(async (id) => (await first("GET", `/v1/runs/${id}`)).body?.status))).filter((s) => s === "running")
          .length;
      while ((await running()) === 0) {
        assert.ok(Date.now() < runningBy, "some run started");
        await sleep(50);
      }
      await processes.kill("dev-1");

      const second = recordingClient(await startDev("dev-2"), token, () => "after", answers);
      const settled = await settleAll(second, accepted, Date.now() + 180_000);
      assert.deepEqual(
        [...settled.values()].map((run) => run.status),
        accepted.map(() => "succeeded"),
        "every accepted run succeeded",
      );
      assert.ok(
        [...settled.values()].some((run) => run.attempt === 2),
        "the runs that were running continued on a new attempt",
      );
      assert.deepEqual(
        answers.filter((answer) => answer.status >= 500),
        [],
        "no 5xx",
      );
    } catch (error) {
      t.diagnostic(processes.stderr());
      throw error;
    } finally {
      await processes.stopAll();
    }
  });
});
