import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { canonicalTimezone, cronProblem, firingAt, nextDueAfter, timezoneProblem } from "../src/domain/schedules.ts";
import { createTestDatabase, TEST_DRIVER } from "./support/db.ts";
import { startTestServer, type TestServer } from "./support/server.ts";

/**
 * The rules of schedules without waiting for real minutes: next due times in time zones and
 * across DST changes (pure), and the executor driven by a controllable clock (one pass per
 * `fireDue()`, no loop), including the catch-up after a gap; then one real restart.
 */

const at = (iso: string) => new Date(iso);
const isoOf = (date: Date | null) => date?.toISOString() ?? null;

describe("cron and time zone rules", () => {
  test("5 fields, or 6 with leading seconds; a valid IANA zone; a cron that fires", () => {
    for (const cron of ["* * * * *", "*/15 9-17 * * 1-5", "0 0 1 1 *", "30 * * * * *", "0 0 12 * * MON"])
      assert.equal(cronProblem(cron, "UTC"), undefined, cron);
    for (const cron of ["* * * *", "0 0 0 1 1 * 2030", "", "61 * * * *", "* 24 * * *", "every minute", "0 0 30 2 *"])
      assert.ok(cronProblem(cron, "UTC"), cron);
    for (const zone of ["UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"])
      assert.equal(timezoneProblem(zone), undefined, zone);
    for (const zone of ["Mars/Base", "+02:00", "Europe/", "", "UTC; drop table"]) assert.ok(timezoneProblem(zone), zone);
  });

  test("a zone is kept spelled as IANA does; an alias stays the alias", () => {
    const cases = [
      ["utc", "UTC"],
      ["europe/paris", "Europe/Paris"],
      ["AMERICA/NEW_YORK", "America/New_York"],
      ["Europe/Paris", "Europe/Paris"],
      ["Asia/Calcutta", "Asia/Calcutta"],
      ["Etc/UTC", "Etc/UTC"],
    ];
    for (const [given, stored] of cases) assert.equal(canonicalTimezone(given!), stored, given);
  });

  test("next due time in a time zone", () => {
    assert.equal(isoOf(nextDueAfter("0 9 * * *", "Asia/Kolkata", at("2026-06-01T00:00:00Z"))), "2026-06-01T03:30:00.000Z");
    assert.equal(isoOf(nextDueAfter("0 9 * * *", "America/New_York", at("2026-06-01T00:00:00Z"))), "2026-06-01T13:00:00.000Z");
    assert.equal(isoOf(nextDueAfter("0 9 * * *", "America/New_York", at("2026-01-15T00:00:00Z"))), "2026-01-15T14:00:00.000Z");
    assert.equal(isoOf(nextDueAfter("*/10 * * * * *", "UTC", at("2026-06-01T00:00:05.300Z"))), "2026-06-01T00:00:10.000Z");
    assert.equal(
      isoOf(nextDueAfter("0 0 * * 1", "UTC", at("2026-06-01T00:00:00Z"))),
      "2026-06-08T00:00:00.000Z",
      "strictly after: a due time equal to `after` is not next",
    );
  });

  test("DST: 9:00 New York stays 9:00 local across the spring change", () => {
    // 2026-03-08 02:00 EST -> 03:00 EDT.
    assert.equal(isoOf(nextDueAfter("0 9 * * *", "America/New_York", at("2026-03-07T15:00:00Z"))), "2026-03-08T13:00:00.000Z");
    assert.equal(isoOf(nextDueAfter("0 9 * * *", "America/New_York", at("2026-03-06T15:00:00Z"))), "2026-03-07T14:00:00.000Z");
  });

  test("DST gap: a fixed time inside it fires at the first valid time after; interval jobs skip it", () => {
    // Paris 2026-03-29: 02:00 CET -> 03:00 CEST; 02:30 does not exist.
    assert.equal(isoOf(nextDueAfter("30 2 * * *", "Europe/Paris", at("2026-03-28T12:00:00Z"))), "2026-03-29T01:00:00.000Z", "03:00 CEST");
    assert.equal(
      isoOf(nextDueAfter("30 2 * * *", "Europe/Paris", at("2026-03-29T12:00:00Z"))),
      "2026-03-30T00:30:00.000Z",
      "02:30 CEST the next day",
    );
    assert.equal(
      isoOf(nextDueAfter("*/30 * * * *", "Europe/Paris", at("2026-03-29T00:30:00Z"))),
      "2026-03-29T01:00:00.000Z",
      "01:30 CET is followed by 03:00 CEST",
    );
  });

  test("DST repeat: a fixed time fires once; interval jobs fire on both occurrences", () => {
    // Paris 2026-10-25: 03:00 CEST -> 02:00 CET; 02:00-02:59 happens twice.
    assert.equal(isoOf(nextDueAfter("30 2 * * *", "Europe/Paris", at("2026-10-24T12:00:00Z"))), "2026-10-25T00:30:00.000Z");
    assert.equal(
      isoOf(nextDueAfter("30 2 * * *", "Europe/Paris", at("2026-10-25T00:30:00Z"))),
      "2026-10-26T01:30:00.000Z",
      "not again at 02:30 CET",
    );
    const halfHours: string[] = [];
    let cursor = at("2026-10-24T23:45:00Z");
    for (let i = 0; i < 4; i++) halfHours.push(isoOf((cursor = nextDueAfter("*/30 * * * *", "Europe/Paris", cursor)!))!);
    assert.deepEqual(halfHours, [
      "2026-10-25T00:00:00.000Z",
      "2026-10-25T00:30:00.000Z",
      "2026-10-25T01:00:00.000Z",
      "2026-10-25T01:30:00.000Z",
    ]);
  });

  test("catch-up: a gap fires once, the latest due time; within the grace every due time fires", () => {
    const due = at("2026-03-01T10:05:00Z");
    assert.deepEqual(firingAt("*/5 * * * *", "UTC", due, at("2026-03-01T10:27:31Z"), 10_000), {
      scheduledAt: at("2026-03-01T10:25:00Z"),
      nextRunAt: at("2026-03-01T10:30:00Z"),
    });
    assert.deepEqual(firingAt("*/5 * * * *", "UTC", due, at("2026-03-01T10:25:00Z"), 0), {
      scheduledAt: at("2026-03-01T10:25:00Z"),
      nextRunAt: at("2026-03-01T10:30:00Z"),
    });
    assert.deepEqual(firingAt("*/5 * * * *", "UTC", due, at("2026-03-01T10:05:00.400Z"), 0), {
      scheduledAt: due,
      nextRunAt: at("2026-03-01T10:10:00Z"),
    });
    assert.deepEqual(
      firingAt("* * * * * *", "UTC", due, at("2026-03-01T10:05:03.500Z"), 10_000),
      { scheduledAt: due, nextRunAt: at("2026-03-01T10:05:01Z") },
      "3.5 s late within a 10 s grace: each due time fires",
    );
    assert.deepEqual(
      firingAt("0 9 * * *", "Europe/Paris", at("2026-03-27T08:00:00Z"), at("2026-03-31T12:00:00Z"), 10_000),
      { scheduledAt: at("2026-03-31T07:00:00Z"), nextRunAt: at("2026-04-01T07:00:00Z") },
      "the latest local 9:00 across the DST change",
    );
  });
});

/** A clock the test moves. */
function controlledClock(start: string) {
  let now = at(start);
  return { now: () => now, set: (iso: string) => (now = at(iso)) };
}

async function drain(server: TestServer): Promise<number> {
  let total = 0;
  for (let fired = await server.server.scheduler!.fireDue(); fired > 0; fired = await server.server.scheduler!.fireDue()) total += fired;
  return total;
}

async function runsOf(server: TestServer, scheduleId: string): Promise<{ run_id: string; metadata: { scheduled_at: string } }[]> {
  return (await server.request("GET", `/v1/runs?limit=1000&metadata=${encodeURIComponent(JSON.stringify({ schedule_id: scheduleId }))}`))
    .body;
}

describe(`the executor on a controlled clock, ${TEST_DRIVER}`, () => {
  test("fires at the due time, not before; a gap fires once (the latest); disable and delete stop it", async () => {
    const clock = controlledClock("2026-03-01T10:02:00Z");
    const server = await startTestServer({ worker: false, clock: clock.now, scheduler: { loop: false } });
    try {
      const schedule = (
        await server.request("POST", "/v1/schedules", { body: { assistant_id: "echo", cron: "*/5 * * * *", input: { message: "m" } } })
      ).body;
      assert.equal(schedule.next_run_at, "2026-03-01T10:05:00.000Z");
      clock.set("2026-03-01T10:04:59.999Z");
      assert.equal(await drain(server), 0, "not due yet");
      clock.set("2026-03-01T10:05:00Z");
      assert.equal(await drain(server), 1);
      let current = (await server.request("GET", `/v1/schedules/${schedule.schedule_id}`)).body;
      assert.deepEqual([current.last_run_at, current.next_run_at], ["2026-03-01T10:05:00.000Z", "2026-03-01T10:10:00.000Z"]);

      clock.set("2026-03-01T10:27:31Z"); // 10:10, 10:15, 10:20 and 10:25 were missed
      assert.equal(await drain(server), 1, "the missed due times fire once");
      current = (await server.request("GET", `/v1/schedules/${schedule.schedule_id}`)).body;
      assert.deepEqual([current.last_run_at, current.next_run_at], ["2026-03-01T10:25:00.000Z", "2026-03-01T10:30:00.000Z"]);
      const runs = await runsOf(server, schedule.schedule_id);
      assert.deepEqual(
        runs.map((run) => run.metadata.scheduled_at),
        ["2026-03-01T10:25:00.000Z", "2026-03-01T10:05:00.000Z"],
      );
      assert.equal(current.last_run_id, runs[0]!.run_id);

      assert.equal((await server.request("PATCH", `/v1/schedules/${schedule.schedule_id}`, { body: { enabled: false } })).status, 200);
      clock.set("2026-03-01T10:30:00Z");
      assert.equal(await drain(server), 0, "disabled");
      const enabled = (await server.request("PATCH", `/v1/schedules/${schedule.schedule_id}`, { body: { enabled: true } })).body;
      assert.equal(enabled.next_run_at, "2026-03-01T10:35:00.000Z", "enabling counts from now, the 10:30 due time passed while disabled");
      assert.equal((await server.request("DELETE", `/v1/schedules/${schedule.schedule_id}`)).status, 204);
      clock.set("2026-03-01T10:35:00Z");
      assert.equal(await drain(server), 0, "deleted");
      assert.equal((await runsOf(server, schedule.schedule_id)).length, 2);
    } finally {
      await server.close();
    }
  });

  test("an executor a few seconds late (within the grace) fires every due time, in order", async () => {
    const clock = controlledClock("2026-03-01T10:00:00.500Z");
    const server = await startTestServer({ worker: false, clock: clock.now, scheduler: { loop: false, misfireGraceMs: 10_000 } });
    try {
      const schedule = (await server.request("POST", "/v1/schedules", { body: { assistant_id: "echo", cron: "* * * * * *" } })).body;
      clock.set("2026-03-01T10:00:04.200Z");
      assert.equal(await drain(server), 4);
      const due = (await runsOf(server, schedule.schedule_id)).map((run) => run.metadata.scheduled_at).reverse();
      assert.deepEqual(
        due,
        ["01", "02", "03", "04"].map((s) => `2026-03-01T10:00:${s}.000Z`),
      );
      const current = (await server.request("GET", `/v1/schedules/${schedule.schedule_id}`)).body;
      assert.equal(current.next_run_at, "2026-03-01T10:00:05.000Z");
    } finally {
      await server.close();
    }
  });

  test("time zones and DST: 9:00 New York each day, 14:00 then 13:00 UTC", async () => {
    const clock = controlledClock("2026-03-06T12:00:00Z");
    const server = await startTestServer({ worker: false, clock: clock.now, scheduler: { loop: false } });
    try {
      const schedule = (
        await server.request("POST", "/v1/schedules", { body: { assistant_id: "echo", cron: "0 9 * * *", timezone: "America/New_York" } })
      ).body;
      const fired: string[] = [];
      let next = schedule.next_run_at as string;
      for (let day = 0; day < 3; day++) {
        clock.set(next);
        assert.equal(await drain(server), 1);
        const current = (await server.request("GET", `/v1/schedules/${schedule.schedule_id}`)).body;
        fired.push(current.last_run_at);
        next = current.next_run_at;
      }
      assert.deepEqual(fired, ["2026-03-06T14:00:00.000Z", "2026-03-07T14:00:00.000Z", "2026-03-08T13:00:00.000Z"]);
      assert.equal(next, "2026-03-09T13:00:00.000Z");
    } finally {
      await server.close();
    }
  });

  test("concurrent passes fire each due time of each schedule once", async () => {
    const clock = controlledClock("2026-03-01T10:00:00.500Z");
    const server = await startTestServer({ worker: false, clock: clock.now, scheduler: { loop: false, batchSize: 7, misfireGraceMs: 0 } });
    try {
      const schedules = await Promise.all(
        Array.from(
          { length: 20 },
          async () =>
            (await server.request("POST", "/v1/schedules", { body: { assistant_id: "echo", cron: "* * * * * *" } })).body
              .schedule_id as string,
        ),
      );
      const steps = 8;
      for (let second = 1; second <= steps; second++) {
        clock.set(`2026-03-01T10:00:0${second}.000Z`);
        const fired = await Promise.all(Array.from({ length: 5 }, () => server.server.scheduler!.fireDue()));
        assert.ok(fired.reduce((a, b) => a + b, 0) <= schedules.length, "no due time fired twice");
        await drain(server);
      }
      for (const scheduleId of schedules) {
        const due = (await runsOf(server, scheduleId)).map((run) => run.metadata.scheduled_at).sort();
        assert.deepEqual(
          due,
          Array.from({ length: steps }, (_, i) => `2026-03-01T10:00:0${i + 1}.000Z`),
          scheduleId,
        );
      }
    } finally {
      await server.close();
    }
  });

  test("a refused due time is recorded and skipped; the next run clears last_error", async () => {
    const clock = controlledClock("2026-03-01T10:00:00.500Z");
    const server = await startTestServer({ worker: false, clock: clock.now, scheduler: { loop: false } });
    try {
      const gone = { assistant_id: "gone", graph_id: "echo" };
      assert.equal((await server.request("POST", "/v1/assistants", { body: gone })).status, 201);
      const orphan = (await server.request("POST", "/v1/schedules", { body: { assistant_id: "gone", cron: "* * * * * *" } })).body;
      const healthy = (await server.request("POST", "/v1/schedules", { body: { assistant_id: "echo", cron: "* * * * * *" } })).body;
      assert.equal((await server.request("DELETE", "/v1/assistants/gone")).status, 204);
      clock.set("2026-03-01T10:00:01Z");
      assert.equal(await drain(server), 2, "the refusal does not roll back the healthy schedule's run");
      const refused = (await server.request("GET", `/v1/schedules/${orphan.schedule_id}`)).body;
      assert.deepEqual(refused.last_error, {
        code: "validation_error",
        message: 'assistant_id "gone" names no assistant',
        scheduled_at: "2026-03-01T10:00:01.000Z",
      });
      assert.equal(refused.next_run_at, "2026-03-01T10:00:02.000Z");
      assert.equal(refused.last_run_id, null);
      assert.equal((await runsOf(server, orphan.schedule_id)).length, 0);
      assert.equal((await runsOf(server, healthy.schedule_id)).length, 1);
      assert.equal(await drain(server), 0, "skipped, not retried");
      assert.equal((await server.request("DELETE", `/v1/schedules/${orphan.schedule_id}`)).status, 204);

      // An assistant that disappears and comes back: the refusal is recorded, the next run clears it.
      const assistant = { assistant_id: "comes-back", graph_id: "echo" };
      assert.equal((await server.request("POST", "/v1/assistants", { body: assistant })).status, 201);
      const flaky = (await server.request("POST", "/v1/schedules", { body: { assistant_id: "comes-back", cron: "* * * * * *" } })).body;
      assert.equal((await server.request("DELETE", "/v1/assistants/comes-back")).status, 204);
      clock.set("2026-03-01T10:00:02Z");
      await drain(server);
      const lost = (await server.request("GET", `/v1/schedules/${flaky.schedule_id}`)).body;
      assert.equal(lost.last_error?.code, "validation_error");
      assert.equal((await server.request("POST", "/v1/assistants", { body: assistant })).status, 201);
      clock.set("2026-03-01T10:00:03Z");
      await drain(server);
      const back = (await server.request("GET", `/v1/schedules/${flaky.schedule_id}`)).body;
      assert.equal(back.last_error, null);
      assert.equal(back.last_run_at, "2026-03-01T10:00:03.000Z");
      assert.equal((await runsOf(server, flaky.schedule_id))[0]?.run_id, back.last_run_id);
    } finally {
      await server.close();
    }
  });
});

describe(`a thread's schedules, ${TEST_DRIVER}`, () => {
  test("deleting a thread deletes its schedules; other schedules stay", async () => {
    const server = await startTestServer({ worker: false, scheduler: { loop: false } });
    try {
      const thread = (await server.request("POST", "/v1/threads", { body: {} })).body;
      const other = (await server.request("POST", "/v1/threads", { body: {} })).body;
      const schedule = (body: Record<string, unknown>) =>
        server.request("POST", "/v1/schedules", { body: { assistant_id: "echo", cron: "0 * * * *", ...body } });
      const onThread = (await schedule({ thread_id: thread.thread_id })).body;
      const onOther = (await schedule({ thread_id: other.thread_id })).body;
      const stateless = (await schedule({})).body;
      assert.equal((await server.request("DELETE", `/v1/threads/${thread.thread_id}`)).status, 204);
      assert.equal((await server.request("GET", `/v1/schedules/${onThread.schedule_id}`)).status, 404);
      assert.equal((await server.request("GET", `/v1/schedules/${onOther.schedule_id}`)).status, 200);
      assert.equal((await server.request("GET", `/v1/schedules/${stateless.schedule_id}`)).status, 200);
    } finally {
      await server.close();
    }
  });
});

describe(`a real restart, ${TEST_DRIVER}`, () => {
  test("due times missed while no executor ran fire once, as the latest", { timeout: 120_000 }, async () => {
    const database = await createTestDatabase({ migrated: false });
    let second: TestServer | undefined;
    try {
      const first = await startTestServer({ database, scheduler: { misfireGraceMs: 1000 } });
      const schedule = (await first.request("POST", "/v1/schedules", { body: { assistant_id: "echo", cron: "* * * * * *" } })).body;
      while ((await runsOf(first, schedule.schedule_id)).length === 0) await new Promise((resolve) => setTimeout(resolve, 100));
      await first.server.close(); // the database stays
      const lastBefore = (
        await database.db.query<{ last: string }>(
          `select max(metadata->>'scheduled_at') as last from runs where metadata->>'schedule_id' = $1`,
          [schedule.schedule_id],
        )
      )[0]!.last;
      // Nothing runs for a few due times (the gap; no assertion depends on its length).
      await new Promise((resolve) => setTimeout(resolve, 4000));
      const restartAt = new Date();
      second = await startTestServer({ database, scheduler: { misfireGraceMs: 1000 } });
      let after: { metadata: { scheduled_at: string } }[] = [];
      while (after.length < 2) {
        after = (await runsOf(second, schedule.schedule_id)).filter((run) => run.metadata.scheduled_at > lastBefore);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const due = after.map((run) => run.metadata.scheduled_at).sort();
      const restartSecond = new Date(Math.floor(restartAt.getTime() / 1000) * 1000).toISOString();
      assert.ok(due[0]! >= restartSecond, `the catch-up is the latest due time (${due[0]}), not the oldest missed after ${lastBefore}`);
      assert.equal(new Set(due).size, due.length);
      const missed = (Date.parse(restartSecond) - Date.parse(lastBefore)) / 1000 - 1;
      assert.ok(missed >= 3, `the gap spanned ${missed} due times`);
    } finally {
      await second?.server.close();
      await database.drop();
    }
  });
});
