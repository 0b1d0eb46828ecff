import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { resolveConfig } from "../src/config/config.ts";
import { startRudder, waitForOutput } from "./support/cli.ts";
import { createTestDatabase, TEST_DRIVER } from "./support/db.ts";
import { assertProblem } from "./support/problem.ts";
import { EXAMPLES_CONFIG, startTestServer, type TestServer } from "./support/server.ts";

/**
 * Schedules over HTTP with the real executor (DESIGN.md "Schedules"): CRUD and its refusals,
 * tenants and roles, and every-second schedules that really fire. Waits are for conditions
 * (a run appeared, a control schedule fired twice more), never for a length of time.
 */

const EVERY_SECOND = "* * * * * *";
const YEARLY = "0 0 1 1 *";

interface Schedule {
  schedule_id: string;
  assistant_id: string;
  cron: string;
  timezone: string;
  input: Record<string, unknown>;
  enabled: boolean;
  metadata: Record<string, unknown>;
  thread_id: string | null;
  next_run_at: string | null;
  last_run_at: string | null;
  last_run_id: string | null;
  last_error: { code: string; message: string; scheduled_at: string } | null;
  created_at: string;
  updated_at: string;
}

interface Run {
  run_id: string;
  thread_id: string | null;
  assistant_id: string;
  status: string;
  input: unknown;
  metadata: Record<string, unknown>;
  created_at: string;
}

describe(`schedules on ${TEST_DRIVER}`, () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer();
  });
  after(() => server.close());

  const create = (body: Record<string, unknown>, tenant = "t1") => server.request("POST", "/v1/schedules", { body, tenant });
  const runsOf = async (scheduleId: string, tenant = "t1"): Promise<Run[]> => {
    const listed = await server.request(
      "GET",
      `/v1/runs?limit=1000&metadata=${encodeURIComponent(JSON.stringify({ schedule_id: scheduleId }))}`,
      { tenant },
    );
    assert.equal(listed.status, 200, JSON.stringify(listed.body));
    return listed.body;
  };
  /** Polls until `check` returns a value (a condition, not a timing: the bound only ends a hung test). */
  async function until<T>(what: string, check: () => Promise<T | undefined>, boundMs = 60_000): Promise<T> {
    const giveUp = Date.now() + boundMs;
    for (;;) {
      const value = await check();
      if (value !== undefined) return value;
      if (Date.now() > giveUp) assert.fail(`gave up waiting: ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  const runsAtLeast = (scheduleId: string, count: number, tenant = "t1") =>
    until(`${count} runs of schedule ${scheduleId}`, async () => {
      const runs = await runsOf(scheduleId, tenant);
      return runs.length >= count ? runs : undefined;
    });
  /** A control schedule that fires every second: once it fired `more` more times, any fire the test expects to be absent had its chance. */
  async function controlFires(more: number, tenant = "t1"): Promise<void> {
    const control = await create({ assistant_id: "echo", cron: EVERY_SECOND, input: { message: "control" } }, tenant);
    assert.equal(control.status, 201);
    await runsAtLeast(control.body.schedule_id, more, tenant);
    await server.request("DELETE", `/v1/schedules/${control.body.schedule_id}`, { tenant });
  }

  test("create: defaults, the record's fields, get and list newest first", async () => {
    const tenant = `crud-${randomUUID()}`;
    const created = await create({ assistant_id: "echo", cron: YEARLY }, tenant);
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const schedule: Schedule = created.body;
    assert.match(schedule.schedule_id, /^[0-9a-f-]{36}$/);
    assert.deepEqual(
      { ...schedule, schedule_id: undefined, next_run_at: undefined, created_at: undefined, updated_at: undefined },
      {
        schedule_id: undefined,
        assistant_id: "echo",
        cron: YEARLY,
        timezone: "UTC",
        input: {},
        enabled: true,
        metadata: {},
        thread_id: null,
        next_run_at: undefined,
        last_run_at: null,
        last_run_id: null,
        last_error: null,
        created_at: undefined,
        updated_at: undefined,
      },
    );
    const nextYear = new Date().getUTCFullYear() + 1;
    assert.equal(schedule.next_run_at, `${nextYear}-01-01T00:00:00.000Z`);

    const second = await create(
      {
        assistant_id: "echo-loud",
        cron: "30 9 * * 1-5",
        timezone: "Europe/Paris",
        input: { message: "hi" },
        metadata: { team: "a" },
        enabled: false,
      },
      tenant,
    );
    assert.equal(second.status, 201);
    assert.equal(second.body.next_run_at, null, "null while disabled");
    assert.deepEqual(
      [second.body.timezone, second.body.input, second.body.metadata, second.body.enabled],
      ["Europe/Paris", { message: "hi" }, { team: "a" }, false],
    );

    assert.deepEqual((await server.request("GET", `/v1/schedules/${schedule.schedule_id}`, { tenant })).body, schedule);
    const listed = await server.request("GET", "/v1/schedules", { tenant });
    assert.deepEqual(
      listed.body.map((s: Schedule) => s.schedule_id),
      [second.body.schedule_id, schedule.schedule_id],
    );
    const paged = await server.request("GET", "/v1/schedules?limit=1&offset=1", { tenant });
    assert.deepEqual(
      paged.body.map((s: Schedule) => s.schedule_id),
      [schedule.schedule_id],
    );
  });

  test("every refusal is a 422 validation_error", async () => {
    const thread = await server.request("POST", "/v1/threads", { body: {} });
    const base = { assistant_id: "echo", cron: YEARLY };
    const bad: [string, Record<string, unknown>][] = [
      ["4 fields", { ...base, cron: "* * * *" }],
      ["7 fields", { ...base, cron: "0 0 0 1 1 * 2030" }],
      ["out of range", { ...base, cron: "61 * * * *" }],
      ["not a cron", { ...base, cron: "every day" }],
      ["never fires", { ...base, cron: "0 0 30 2 *" }],
      ["empty cron", { ...base, cron: "" }],
      ["unknown time zone", { ...base, timezone: "Mars/Olympus_Mons" }],
      ["offset instead of a zone", { ...base, timezone: "+02:00" }],
      ["unknown assistant", { ...base, assistant_id: "no-such-assistant" }],
      ["unknown thread", { ...base, thread_id: randomUUID() }],
      ["thread of another tenant", { ...base, thread_id: thread.body.thread_id, tenant: undefined }],
      ["unknown field", { ...base, schedule_id: randomUUID() }],
      ["no cron", { assistant_id: "echo" }],
      ["no assistant", { cron: YEARLY }],
      ["input not an object", { ...base, input: [1] }],
      ["enabled not a boolean", { ...base, enabled: "yes" }],
    ];
    for (const [what, body] of bad) {
      const tenant = what === "thread of another tenant" ? "other-tenant" : "t1";
      const { tenant: _, ...payload } = body;
      assertProblem(await create(payload, tenant), 422, "validation_error");
    }
    const schedule = (await create(base)).body as Schedule;
    for (const patch of [
      { cron: "* * *" },
      { timezone: "Nowhere/Land" },
      { assistant_id: "echo" },
      { thread_id: null },
      { enabled: 1 },
      { next_run_at: null },
    ]) {
      assertProblem(await server.request("PATCH", `/v1/schedules/${schedule.schedule_id}`, { body: patch }), 422, "validation_error");
    }
    assertProblem(await server.request("GET", "/v1/schedules/not-a-uuid"), 422, "validation_error");
    assertProblem(await server.request("GET", "/v1/schedules?limit=0"), 422, "validation_error");
    assert.deepEqual(
      (await server.request("GET", `/v1/schedules/${schedule.schedule_id}`)).body,
      schedule,
      "refused patches changed nothing",
    );
  });

  test("tenant isolation (404 as for a missing one) and roles: viewer reads, operator writes", async () => {
    const mine = (await create({ assistant_id: "echo", cron: YEARLY }, "iso-a")).body as Schedule;
    const path = `/v1/schedules/${mine.schedule_id}`;
    assertProblem(await server.request("GET", path, { tenant: "iso-b" }), 404, "not_found");
    assertProblem(await server.request("PATCH", path, { tenant: "iso-b", body: { enabled: false } }), 404, "not_found");
    assertProblem(await server.request("DELETE", path, { tenant: "iso-b" }), 404, "not_found");
    assert.deepEqual((await server.request("GET", "/v1/schedules", { tenant: "iso-b" })).body, []);
    assertProblem(await server.request("GET", `/v1/schedules/${randomUUID()}`, { tenant: "iso-a" }), 404, "not_found");

    const viewer = { tenant: "iso-a", roles: ["viewer" as const] };
    assert.equal((await server.request("GET", path, viewer)).status, 200);
    assert.equal((await server.request("GET", "/v1/schedules", viewer)).status, 200);
    assertProblem(
      await server.request("POST", "/v1/schedules", { ...viewer, body: { assistant_id: "echo", cron: YEARLY } }),
      403,
      "forbidden",
    );
    assertProblem(await server.request("PATCH", path, { ...viewer, body: { enabled: false } }), 403, "forbidden");
    assertProblem(await server.request("DELETE", path, viewer), 403, "forbidden");
    assertProblem(
      await server.request("POST", "/v1/schedules", {
        tenant: "iso-a",
        roles: ["developer"],
        body: { assistant_id: "echo", cron: YEARLY },
      }),
      403,
      "forbidden",
    );
    const operator = { tenant: "iso-a", roles: ["operator" as const] };
    assert.equal((await server.request("PATCH", path, { ...operator, body: { enabled: false } })).status, 200);
    assert.equal(
      (await server.request("POST", "/v1/schedules", { ...operator, body: { assistant_id: "echo", cron: YEARLY } })).status,
      201,
    );
    assert.equal((await server.request("DELETE", path, operator)).status, 204);
    assertProblem(await server.request("GET", path, operator), 404, "not_found");
    assertProblem(await server.request("GET", "/v1/schedules", { token: null }), 401, "unauthorized");
  });

  test("an every-second schedule fires runs with its input and metadata plus schedule_id and scheduled_at", async () => {
    const created = await create({
      assistant_id: "echo",
      cron: EVERY_SECOND,
      input: { message: "tick" },
      metadata: { origin: "cron-test" },
    });
    const schedule: Schedule = created.body;
    const runs = await runsAtLeast(schedule.schedule_id, 3);
    await server.request("DELETE", `/v1/schedules/${schedule.schedule_id}`);
    const fired = await runsOf(schedule.schedule_id);
    const due = fired.map((run) => run.metadata.scheduled_at as string);
    assert.equal(new Set(due).size, due.length, "one run per due time");
    for (const run of runs) {
      assert.equal(run.assistant_id, "echo");
      assert.equal(run.thread_id, null, "stateless without thread_id");
      assert.deepEqual(run.input, { message: "tick" });
      assert.deepEqual(Object.keys(run.metadata).sort(), ["origin", "schedule_id", "scheduled_at"]);
      assert.equal(run.metadata.origin, "cron-test");
      assert.equal(run.metadata.schedule_id, schedule.schedule_id);
      assert.match(run.metadata.scheduled_at as string, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$/, "a whole second");
      assert.ok((run.metadata.scheduled_at as string) >= schedule.created_at.slice(0, 19), "no due time before the schedule existed");
    }
    // The fired runs execute like any other.
    const joined = await server.request("GET", `/v1/runs/${runs.at(-1)!.run_id}/join`);
    assert.equal(joined.body.status, "succeeded", JSON.stringify(joined.body));
    // Each fire's commit is observed by the fire-lag histogram (other tests' fires count too).
    const metrics = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${await server.token()}` } })).text();
    const observed = Number(/^rudder_scheduler_fire_lag_seconds_count (\S+)$/m.exec(metrics)?.[1]);
    assert.ok(observed >= fired.length, `fire lag observed ${observed} fires, at least ${fired.length} happened`);
  });

  test("an empty PATCH changes nothing, updated_at included; another tenant's is still 404", async () => {
    const schedule = (await create({ assistant_id: "echo", cron: "0 0 1 1 *" })).body as Schedule;
    const path = `/v1/schedules/${schedule.schedule_id}`;
    const patched = await server.request("PATCH", path, { body: {} });
    assert.equal(patched.status, 200);
    assert.deepEqual(patched.body, schedule);
    assertProblem(await server.request("PATCH", path, { tenant: "iso-b", body: {} }), 404, "not_found");
    await server.request("DELETE", path);
  });

  test("last_run_at and last_run_id name the newest fire; next_run_at moves on", async () => {
    const schedule = (await create({ assistant_id: "echo", cron: EVERY_SECOND })).body as Schedule;
    await runsAtLeast(schedule.schedule_id, 2);
    const patched = await server.request("PATCH", `/v1/schedules/${schedule.schedule_id}`, { body: { enabled: false } });
    assert.equal(patched.status, 200);
    const runs = await runsOf(schedule.schedule_id);
    const newest = runs[0]!;
    assert.equal(patched.body.last_run_id, newest.run_id);
    assert.equal(patched.body.last_run_at, newest.metadata.scheduled_at);
    assert.equal(patched.body.next_run_at, null);
    assert.equal(patched.body.last_error, null);
    await server.request("DELETE", `/v1/schedules/${schedule.schedule_id}`);
  });

  test("disabling and deleting stop further fires; enabling starts them again", async () => {
    const disabled = (await create({ assistant_id: "echo", cron: EVERY_SECOND })).body as Schedule;
    const deleted = (await create({ assistant_id: "echo", cron: EVERY_SECOND })).body as Schedule;
    await Promise.all([runsAtLeast(disabled.schedule_id, 1), runsAtLeast(deleted.schedule_id, 1)]);
    assert.equal((await server.request("PATCH", `/v1/schedules/${disabled.schedule_id}`, { body: { enabled: false } })).status, 200);
    assert.equal((await server.request("DELETE", `/v1/schedules/${deleted.schedule_id}`)).status, 204);
    const counts = [(await runsOf(disabled.schedule_id)).length, (await runsOf(deleted.schedule_id)).length];
    await controlFires(3);
    assert.deepEqual([(await runsOf(disabled.schedule_id)).length, (await runsOf(deleted.schedule_id)).length], counts);

    const enabled = await server.request("PATCH", `/v1/schedules/${disabled.schedule_id}`, { body: { enabled: true } });
    assert.ok(enabled.body.next_run_at > new Date(Date.now() - 2000).toISOString(), "enabling computes the next due time from now");
    await runsAtLeast(disabled.schedule_id, counts[0]! + 1);
    await server.request("DELETE", `/v1/schedules/${disabled.schedule_id}`);
  });

  test("PATCH of the cron recomputes next_run_at and takes effect; input and metadata changes reach later runs", async () => {
    const schedule = (await create({ assistant_id: "echo", cron: EVERY_SECOND, input: { message: "a" } })).body as Schedule;
    await runsAtLeast(schedule.schedule_id, 1);
    const yearly = await server.request("PATCH", `/v1/schedules/${schedule.schedule_id}`, {
      body: { cron: YEARLY, timezone: "asia/tokyo" },
    });
    assert.equal(yearly.status, 200);
    assert.equal(yearly.body.timezone, "Asia/Tokyo", "stored as IANA spells it");
    // Midnight of 1 January in Tokyo is 15:00 UTC on 31 December.
    assert.match(yearly.body.next_run_at, /^\d{4}-12-31T15:00:00\.000Z$/);
    const count = (await runsOf(schedule.schedule_id)).length;
    await controlFires(3);
    assert.equal((await runsOf(schedule.schedule_id)).length, count, "no fire after the cron moved to a yearly time");

    const back = await server.request("PATCH", `/v1/schedules/${schedule.schedule_id}`, {
      body: { cron: EVERY_SECOND, input: { message: "b" }, metadata: { v: 2 } },
    });
    assert.equal(back.status, 200);
    const runs = await runsAtLeast(schedule.schedule_id, count + 1);
    assert.deepEqual(runs[0]!.input, { message: "b" });
    assert.equal(runs[0]!.metadata.v, 2);
    await server.request("DELETE", `/v1/schedules/${schedule.schedule_id}`);
  });

  test("a thread schedule's runs go to its thread, enqueued", async () => {
    const thread = (await server.request("POST", "/v1/threads", { body: {} })).body;
    const schedule = (
      await create({ assistant_id: "echo", cron: EVERY_SECOND, thread_id: thread.thread_id, input: { message: "on thread" } })
    ).body as Schedule;
    assert.equal(schedule.thread_id, thread.thread_id);
    const runs = await runsAtLeast(schedule.schedule_id, 2);
    await server.request("DELETE", `/v1/schedules/${schedule.schedule_id}`);
    for (const run of runs) assert.equal(run.thread_id, thread.thread_id);
    const threadRuns = await server.request("GET", `/v1/threads/${thread.thread_id}/runs`);
    for (const run of runs) assert.ok(threadRuns.body.some((r: Run) => r.run_id === run.run_id));
    const joined = await server.request("GET", `/v1/runs/${runs[0]!.run_id}/join`);
    assert.equal(joined.body.status, "succeeded");
  });

  test("a schedule whose assistant disappeared is skipped with last_error; the executor goes on", async () => {
    const tenant = `gone-${randomUUID()}`;
    const assistant = await server.request("POST", "/v1/assistants", { tenant, body: { graph_id: "echo", name: "short-lived" } });
    assert.equal(assistant.status, 201);
    const schedule = (await create({ assistant_id: assistant.body.assistant_id, cron: EVERY_SECOND }, tenant)).body as Schedule;
    await runsAtLeast(schedule.schedule_id, 1, tenant);
    assert.equal((await server.request("DELETE", `/v1/assistants/${assistant.body.assistant_id}`, { tenant })).status, 204);
    const failed = await until("last_error", async () => {
      const current = (await server.request("GET", `/v1/schedules/${schedule.schedule_id}`, { tenant })).body as Schedule;
      return current.last_error ? current : undefined;
    });
    assert.equal(failed.last_error!.code, "validation_error");
    assert.match(failed.last_error!.message, /names no assistant/);
    assert.ok(failed.next_run_at! > failed.last_error!.scheduled_at, "the refused due time was skipped, not retried");
    const count = (await runsOf(schedule.schedule_id, tenant)).length;
    await controlFires(2, tenant);
    assert.equal((await runsOf(schedule.schedule_id, tenant)).length, count);
    await server.request("DELETE", `/v1/schedules/${schedule.schedule_id}`, { tenant });
  });

  test("GET /v1/runs: newest first, filtered by status, assistant_id, thread_id and metadata; tenant-scoped", async () => {
    const tenant = `list-${randomUUID()}`;
    const thread = (await server.request("POST", "/v1/threads", { tenant, body: {} })).body;
    const a = (
      await server.request("POST", "/v1/runs", {
        tenant,
        body: { assistant_id: "echo", input: { message: "a" }, metadata: { k: "a", shared: 1 } },
      })
    ).body;
    const b = (
      await server.request("POST", `/v1/threads/${thread.thread_id}/runs`, {
        tenant,
        body: { assistant_id: "echo-loud", input: { message: "b" }, metadata: { k: "b", shared: 1 } },
      })
    ).body;
    for (const run of [a, b]) await server.request("GET", `/v1/runs/${run.run_id}/join`, { tenant });
    const c = (
      await server.request("POST", "/v1/runs", {
        tenant,
        body: { assistant_id: "approval", input: { request: "c" }, metadata: { k: "c" } },
      })
    ).body;
    await server.request("GET", `/v1/runs/${c.run_id}/join`, { tenant });
    const ids = async (query: string) => {
      const listed = await server.request("GET", `/v1/runs${query}`, { tenant });
      assert.equal(listed.status, 200, JSON.stringify(listed.body));
      return listed.body.map((run: Run) => run.run_id);
    };
    assert.deepEqual(await ids(""), [c.run_id, b.run_id, a.run_id]);
    assert.deepEqual(await ids("?limit=1&offset=1"), [b.run_id]);
    assert.deepEqual(await ids("?status=succeeded"), [b.run_id, a.run_id]);
    assert.deepEqual(await ids("?status=paused"), [c.run_id]);
    assert.deepEqual(await ids("?assistant_id=echo-loud"), [b.run_id]);
    assert.deepEqual(await ids(`?thread_id=${thread.thread_id}`), [b.run_id]);
    assert.deepEqual(await ids(`?metadata=${encodeURIComponent('{"shared":1}')}`), [b.run_id, a.run_id]);
    assert.deepEqual(await ids(`?metadata=${encodeURIComponent('{"k":"a"}')}&assistant_id=echo`), [a.run_id]);
    assert.deepEqual(await ids(`?metadata=${encodeURIComponent('{"k":"a"}')}&status=paused`), []);
    assert.deepEqual((await server.request("GET", "/v1/runs", { tenant: `${tenant}-other` })).body, []);
    assert.equal((await server.request("GET", "/v1/runs", { tenant, roles: ["viewer"] })).status, 200);
    for (const query of ["?status=sleeping", "?metadata=[1]", "?metadata=nope", "?thread_id=x", "?limit=1001", "?unknown=1"]) {
      assertProblem(await server.request("GET", `/v1/runs${query}`, { tenant }), 422, "validation_error");
    }
  });

  test("OpenAPI documents every schedule route and the run list", async () => {
    const doc = (await server.request("GET", "/openapi.json", { token: null })).body;
    assert.deepEqual(Object.keys(doc.paths["/v1/schedules"]).sort(), ["get", "post"]);
    assert.deepEqual(Object.keys(doc.paths["/v1/schedules/{schedule_id}"]).sort(), ["delete", "get", "patch"]);
    assert.ok(doc.paths["/v1/runs"].get, "GET /v1/runs");
    assert.ok(doc.components.schemas.Schedule);
  });
});

describe(`RUDDER_CRON_ENABLED=false on ${TEST_DRIVER}`, () => {
  test("resolves to cronEnabled false; default true; anything else is a config error", () => {
    assert.equal(resolveConfig({}, {}).cronEnabled, true);
    assert.equal(resolveConfig({}, { RUDDER_CRON_ENABLED: "false" }).cronEnabled, false);
    assert.throws(() => resolveConfig({}, { RUDDER_CRON_ENABLED: "maybe" }), /RUDDER_CRON_ENABLED/);
  });

  test("schedules are stored and nothing fires", async () => {
    const server = await startTestServer({ config: { cronEnabled: false } });
    try {
      assert.equal(server.server.scheduler, undefined, "no executor in this process");
      assert.ok(server.server.worker, "the worker still runs");
      const created = await server.request("POST", "/v1/schedules", { body: { assistant_id: "echo", cron: EVERY_SECOND } });
      assert.equal(created.status, 201);
      assert.ok(created.body.next_run_at, "the next due time is still computed");
      // A stateless run created meanwhile finishes: the worker had every chance to run a fired one.
      const run = (await server.request("POST", "/v1/runs", { body: { assistant_id: "echo", input: { message: "x" } } })).body;
      await server.request("GET", `/v1/runs/${run.run_id}/join`);
      const due = created.body.next_run_at as string;
      while (new Date().toISOString() <= due) await new Promise((resolve) => setTimeout(resolve, 100));
      const second = (await server.request("POST", "/v1/runs", { body: { assistant_id: "echo", input: { message: "y" } } })).body;
      await server.request("GET", `/v1/runs/${second.run_id}/join`);
      const fired = await server.request(
        "GET",
        `/v1/runs?metadata=${encodeURIComponent(JSON.stringify({ schedule_id: created.body.schedule_id }))}`,
      );
      assert.deepEqual(fired.body, []);
      const stored = await server.request("GET", `/v1/schedules/${created.body.schedule_id}`);
      assert.equal(stored.body.last_run_id, null);
    } finally {
      await server.close();
    }
  });
});

describe(`rudder dev on ${TEST_DRIVER}`, () => {
  test("runs the cron executor: an every-second schedule fires", { timeout: 120_000 }, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "rudder-dev-cron-"));
    const database = TEST_DRIVER === "postgres" ? await createTestDatabase({ migrated: false }) : undefined;
    const child = startRudder(["dev", "--config", EXAMPLES_CONFIG, "--port", "0", "--data-dir", dataDir], {
      DATABASE_URL: database?.url,
      RUDDER_JWT_SECRET: undefined,
      RUDDER_CRON_ENABLED: undefined,
    });
    try {
      const banner = await waitForOutput(child, /Dev token[^\n]*\n\s+(\S+)\n/);
      assert.match(banner, /cron: +schedules fire in this process/);
      const url = /ready at (http:\/\/127\.0\.0\.1:\d+)/.exec(banner)?.[1];
      const token = /Dev token[^\n]*\n\s+(\S+)\n/.exec(banner)?.[1];
      assert.ok(url && token, banner);
      const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
      const created = await fetch(`${url}/v1/schedules`, {
        method: "POST",
        headers,
        body: JSON.stringify({ assistant_id: "echo", cron: EVERY_SECOND, input: { message: "dev" } }),
      });
      assert.equal(created.status, 201);
      const { schedule_id } = (await created.json()) as { schedule_id: string };
      const query = encodeURIComponent(JSON.stringify({ schedule_id }));
      for (let runs: Run[] = []; runs.length === 0; await new Promise((resolve) => setTimeout(resolve, 100))) {
        runs = (await (await fetch(`${url}/v1/runs?metadata=${query}`, { headers })).json()) as Run[];
      }
    } finally {
      child.kill("SIGTERM");
      const [code] = await once(child, "close");
      assert.equal(code, 0, "SIGTERM stops the dev server and its executor cleanly");
      await database?.drop();
    }
  });
});
