import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { mintToken } from "../src/auth/authenticator.ts";
import { TEST_DRIVER } from "./support/db.ts";
import { setUpProcesses, startApi, startWorker } from "./support/processes.ts";
import { openSse, type SseEvent } from "./support/sse.ts";
import { allEvents, apiClient, mapLimit, type Api, type RunEvent } from "./support/api.ts";

/**
 * Rudder split over real processes (`rudder serve` for the API, `rudder worker` for execution)
 * sharing one PostgreSQL database: notices cross processes through LISTEN/NOTIFY and the runs
 * table is the queue the workers compete on. PGlite is one process's database, so on PGlite these
 * tests are skipped (visibly); `npm run test:pg` runs them.
 */

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));
const SECRET = "rudder-multiprocess-secret-rudder-multiprocess";

interface Run {
  run_id: string;
  thread_id: string | null;
  status: string;
  attempt: number;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
}

/** A JSON client for one Rudder API with an admin token. */

async function joinRun(api: Api, runId: string): Promise<Run> {
  for (;;) {
    const joined = await api<Run>("GET", `/v1/runs/${runId}/join?timeout=120`);
    if (joined.status === 408) continue;
    assert.equal(joined.status, 200, `join ${runId}: ${JSON.stringify(joined.body)}`);
    return joined.body;
  }
}

const sequencesOf = (events: readonly SseEvent[]) => events.map((event) => Number(event.id));
const range = (from: number, to: number) => Array.from({ length: Math.max(0, to - from + 1) }, (_, i) => from + i);

describe(`rudder serve and rudder worker as separate processes on ${TEST_DRIVER}`, () => {
  test("events written by a worker in one process reach an SSE stream served by another", { timeout: 90_000 }, async (t) => {
    const setup = await setUpProcesses(t, SECRET);
    if (!setup) return;
    const { database, processes } = setup;
    try {
      // A long heartbeat: a stream that progressed only on its heartbeat timer (a notice not
      // crossing processes, or not sent) would stall for 30 s, far past the bound asserted below.
      // A 10-minute worker poll: the worker claims these runs only if the API process's
      // run_created notices reach it.
      const [url] = await Promise.all([
        startApi(processes, TESTING_CONFIG, { RUDDER_STREAM_HEARTBEAT_MS: "30000" }),
        startWorker(processes, "worker", TESTING_CONFIG, { RUDDER_WORKER_POLL_MS: "600000" }),
      ]);
      const token = await mintToken(SECRET, { tenantId: "multiprocess", roles: ["admin"] });
      const api = apiClient(url, token);
      const streamUrl = (runId: string) => `${url}/v1/runs/${runId}/stream`;
      const auth = { authorization: `Bearer ${token}` };

      const thread = await api<{ thread_id: string }>("POST", "/v1/threads", {});
      assert.equal(thread.status, 201);
      const threadId = thread.body.thread_id;
      // The run under test waits on its thread behind a blocker (about 600 ms), so its streams
      // open while it is still pending and then follow it from its first event to its last.
      const blocker = await api<Run>("POST", `/v1/threads/${threadId}/runs`, { assistant_id: "steps", input: { steps: 4, delayMs: 150 } });
      assert.equal(blocker.status, 202, JSON.stringify(blocker.body));
      // The thread's state keeps the blocker's count of 4: asking for 9 runs 5 more steps.
      const created = await api<Run>("POST", `/v1/threads/${threadId}/runs`, { assistant_id: "steps", input: { steps: 9, delayMs: 100 } });
      assert.equal(created.status, 202, JSON.stringify(created.body));
      const runId = created.body.run_id;

      // Two streams: one read to the end, one cut after 3 events. Their responses arrive at once,
      // not at the run's first event.
      const opened = Date.now();
      const [full, partial] = await Promise.all([
        openSse(streamUrl(runId), { headers: auth }),
        openSse(streamUrl(runId), { headers: auth }),
      ]);
      const early = await api<Run>("GET", `/v1/runs/${runId}`);
      assert.equal(early.body.status, "pending", "the streams opened while the run was still queued");

      const received: { event: SseEvent; at: number }[] = [];
      const reading = (async () => {
        for (let event = await full.next(); event; event = await full.next()) received.push({ event, at: Date.now() });
      })();
      reading.catch(() => {}); // awaited below; not an unhandled rejection if the test fails first

      const firstThree: SseEvent[] = [];
      for (let i = 0; i < 3; i++) {
        const event = await partial.next();
        assert.ok(event, "the stream delivered at least 3 events");
        firstThree.push(event);
      }
      partial.close();
      assert.deepEqual(sequencesOf(firstThree), [1, 2, 3]);
      assert.equal(partial.lastEventId, "3");
      const resumed = await openSse(streamUrl(runId), { headers: auth, lastEventId: partial.lastEventId });
      const afterThree = await resumed.rest();
      assert.ok(resumed.ended, "the resumed stream closed by itself");

      await reading;
      const elapsed = Date.now() - opened;
      assert.ok(full.ended, "the stream closed by itself once the run ended");
      const events = received.map(({ event }) => event);
      const n = events.length;
      assert.deepEqual(sequencesOf(events), range(1, n), "sequences 1..N, no gap, no repeat");
      assert.equal(events[0]!.event, "run_started");
      assert.equal(events.at(-1)!.event, "run_succeeded");
      assert.equal(events.filter((event) => event.event === "run_succeeded").length, 1);
      for (const event of events) {
        const payload = JSON.parse(event.data) as RunEvent;
        assert.deepEqual([payload.run_id, payload.sequence, payload.kind], [runId, Number(event.id), event.event]);
      }
      assert.ok(
        elapsed < 20_000,
        `the stream ended ${elapsed} ms after it opened: it must follow the worker's notices and close when the run ends, not wait for a heartbeat`,
      );
      // Delivered live, as the worker writes them, not in a burst when the run ends: the 5 steps
      // complete 100 ms apart, so their node_completed events arrive in several separate bursts.
      const stepArrivals = received.filter(({ event }) => event.event === "node_completed").map(({ at }) => at);
      assert.equal(stepArrivals.length, 5, `one node_completed per step: ${events.map((event) => event.event).join(" ")}`);
      const bursts = stepArrivals.filter((at, i) => i === 0 || at - stepArrivals[i - 1]! >= 40).length;
      const gaps = stepArrivals.map((at) => at - stepArrivals[0]!);
      assert.ok(bursts >= 3, `node_completed events arrived at +${gaps.join(", +")} ms: the stream did not follow the run as it ran`);

      // The resumed stream continues exactly after Last-Event-ID: 4..N, the same frames.
      assert.deepEqual(sequencesOf(afterThree), range(4, n), "Last-Event-ID: 3 resumes at 4");
      assert.deepEqual(
        afterThree.map(({ id, event, data }) => ({ id, event, data })),
        events.slice(3).map(({ id, event, data }) => ({ id, event, data })),
      );

      // The durable log holds the same events, and join sees the run succeeded.
      const log = await allEvents(api, runId);
      assert.deepEqual(
        log.map((event) => event.sequence),
        range(1, n),
      );
      assert.deepEqual(
        log.map((event) => event.kind),
        events.map((event) => event.event),
      );
      const joined = await joinRun(api, runId);
      assert.equal(joined.status, "succeeded");
      assert.equal(joined.attempt, 1);
      assert.equal((await joinRun(api, blocker.body.run_id)).status, "succeeded");

      // A stream opened after the run ended replays the whole log and closes.
      const replay = await openSse(streamUrl(runId), { headers: auth });
      assert.deepEqual(sequencesOf(await replay.rest()), range(1, n));
    } catch (error) {
      throw Object.assign(error as Error, { message: `${(error as Error).message}\n${processes.stderr()}` });
    } finally {
      await processes.stopAll();
      await database.drop();
    }
  });

  test("two worker processes compete for 200 runs", { timeout: 110_000 }, async (t) => {
    const setup = await setUpProcesses(t, SECRET);
    if (!setup) return;
    const { database, processes } = setup;
    const dir = mkdtempSync(join(tmpdir(), "rudder-multiprocess-"));
    const sideEffectFile = join(dir, "side-effects.log");
    writeFileSync(sideEffectFile, "");
    try {
      const began = Date.now();
      const phase = (name: string) => t.diagnostic(`${name} at ${Date.now() - began} ms`);
      const workerEnv = { RUDDER_WORKER_CONCURRENCY: "8" };
      const [url, ...workerIds] = await Promise.all([
        startApi(processes, TESTING_CONFIG),
        startWorker(processes, "worker-a", TESTING_CONFIG, workerEnv),
        startWorker(processes, "worker-b", TESTING_CONFIG, workerEnv),
      ]);
      assert.notEqual(workerIds[0], workerIds[1]);
      phase("processes ready");
      const token = await mintToken(SECRET, { tenantId: "multiprocess", roles: ["admin"] });
      const api = apiClient(url!, token);
      // "steps" counts in the thread's state, which a thread's next run continues from: the k-th
      // run (from 0) on a thread asks for 2(k+1) steps to run 2 more, numbered 2k+1 and 2k+2.
      const input = (label: string, k = 0) => ({ steps: 2 * (k + 1), delayMs: 5, sideEffectFile, label });

      const threadIds = await mapLimit(range(1, 20), 10, async () => {
        const thread = await api<{ thread_id: string }>("POST", "/v1/threads", {});
        assert.equal(thread.status, 201);
        return thread.body.thread_id;
      });

      // 150 runs over the 20 threads (each thread's runs created one after another, so their
      // creation order is known), and 50 stateless runs, all created while the workers claim.
      const perThread = new Map<string, string[]>(threadIds.map((id) => [id, []]));
      const createThreadRuns = Promise.all(
        threadIds.map(async (threadId, index) => {
          const count = Math.floor(150 / 20) + (index < 150 % 20 ? 1 : 0);
          for (let i = 0; i < count; i++) {
            const created = await api<Run>("POST", `/v1/threads/${threadId}/runs`, {
              assistant_id: "steps",
              input: input(threadId, i),
              multitask_strategy: "enqueue",
            });
            assert.equal(created.status, 202, JSON.stringify(created.body));
            perThread.get(threadId)!.push(created.body.run_id);
          }
        }),
      );
      const createStateless = mapLimit(range(1, 50), 10, async () => {
        const created = await api<Run>("POST", "/v1/runs", { assistant_id: "steps", input: input("stateless") });
        assert.equal(created.status, 202, JSON.stringify(created.body));
        return created.body.run_id;
      });
      const [, statelessIds] = await Promise.all([createThreadRuns, createStateless]);
      phase("200 runs created");
      const threadRunIds = [...perThread.values()].flat();
      assert.equal(threadRunIds.length, 150);
      assert.equal(statelessIds.length, 50);
      const allIds = [...threadRunIds, ...statelessIds];
      assert.equal(new Set(allIds).size, 200);

      // Every run ends succeeded, after exactly one attempt.
      const runs = new Map<string, Run>();
      await Promise.all(allIds.map(async (runId) => runs.set(runId, await joinRun(api, runId))));
      phase("200 runs joined");
      const unsucceeded = [...runs.values()].filter((run) => run.status !== "succeeded" || run.attempt !== 1);
      assert.deepEqual(
        unsucceeded.map((run) => [run.run_id, run.status, run.attempt]),
        [],
        "every run succeeded on its first attempt",
      );

      // Each step of each run ran exactly once: 2 lines per run, none for unknown runs.
      const lines = readFileSync(sideEffectFile, "utf8").split("\n").filter(Boolean);
      assert.equal(lines.length, 400, "2 side-effect lines per run");
      const sideEffects = new Map<string, { label: string; step: number }[]>();
      for (const line of lines) {
        const [runId, label, step] = line.split(" ");
        assert.ok(runs.has(runId!), `side effect of an unknown run: ${line}`);
        sideEffects.set(runId!, [...(sideEffects.get(runId!) ?? []), { label: label!, step: Number(step) }]);
      }
      for (const entries of sideEffects.values()) entries.sort((a, b) => a.step - b.step);
      const labelOf = new Map(allIds.map((runId) => [runId, runs.get(runId)!.thread_id ?? "stateless"]));
      for (const runId of allIds) {
        const entries = sideEffects.get(runId) ?? [];
        assert.equal(entries.length, 2, `run ${runId} ran 2 steps, once each: ${JSON.stringify(entries)}`);
        assert.ok(
          entries.every(({ label }) => label === labelOf.get(runId)),
          `labels of run ${runId}: ${JSON.stringify(entries)}`,
        );
        assert.equal(entries[1]!.step, entries[0]!.step + 1, `steps of run ${runId}: ${JSON.stringify(entries)}`);
      }

      // Each run has one run_started event (one attempt), written between the run's start and end,
      // naming the worker that executed it.
      const events = await mapLimit(allIds, 16, (runId) => allEvents(api, runId));
      const executedBy = new Map<string, number>();
      allIds.forEach((runId, index) => {
        const run = runs.get(runId)!;
        const log = events[index]!;
        assert.deepEqual(
          log.map((event) => event.sequence),
          range(1, log.length),
          `events of run ${runId} are gapless`,
        );
        const started = log.filter((event) => event.kind === "run_started");
        assert.equal(started.length, 1, `run ${runId} started once`);
        assert.equal(log.at(-1)!.kind, "run_succeeded");
        const [{ data, created_at }] = started as [RunEvent];
        assert.equal(data.attempt, 1);
        assert.ok(run.started_at && run.finished_at, `run ${runId} has started_at and finished_at`);
        assert.ok(run.started_at <= created_at && created_at <= run.finished_at, `run_started of ${runId} lies within its run`);
        executedBy.set(String(data.worker), (executedBy.get(String(data.worker)) ?? 0) + 1);
      });
      assert.deepEqual(
        [...executedBy.keys()].sort(),
        [...workerIds].sort(),
        `both workers executed runs: ${JSON.stringify(Object.fromEntries(executedBy))}`,
      );

      phase("events read");
      // One run at a time per thread, in the order the runs were created.
      for (const [threadId, ids] of perThread) {
        const byStart = ids.map((runId) => runs.get(runId)!).sort((a, b) => a.started_at!.localeCompare(b.started_at!));
        for (let i = 1; i < byStart.length; i++) {
          const [previous, next] = [byStart[i - 1]!, byStart[i]!];
          assert.ok(
            previous.finished_at! <= next.started_at!,
            `thread ${threadId}: run ${next.run_id} started at ${next.started_at} before run ${previous.run_id} finished at ${previous.finished_at}`,
          );
        }
        assert.deepEqual(
          byStart.map((run) => run.run_id),
          ids,
          `thread ${threadId}: runs started in creation order`,
        );
        // "steps" counts in the thread's state: the k-th run's steps are numbered 2k+1 and 2k+2
        // exactly when each run continued from the state its predecessor left.
        ids.forEach((runId, k) => {
          assert.deepEqual(
            sideEffects.get(runId)!.map(({ step }) => step),
            [2 * k + 1, 2 * k + 2],
            `steps of run ${runId}, number ${k} on thread ${threadId}`,
          );
        });
      }
      for (const runId of statelessIds)
        assert.deepEqual(
          sideEffects.get(runId)!.map(({ step }) => step),
          [1, 2],
          `steps of stateless run ${runId}`,
        );
    } catch (error) {
      throw Object.assign(error as Error, { message: `${(error as Error).message}\n${processes.stderr()}` });
    } finally {
      await processes.stopAll();
      await database.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
