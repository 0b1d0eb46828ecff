import { describe, test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { mintToken } from "../src/auth/authenticator.ts";
import { TEST_DRIVER, type TestDatabase } from "./support/db.ts";
import { setUpProcesses, startApi, startWorker, type Processes } from "./support/processes.ts";
import { openSse, type SseConnection, type SseEvent } from "./support/sse.ts";
import { allEvents, apiClient, mapLimit, type Api, type RunEvent } from "./support/api.ts";

/**
 * Crash tests: real `rudder serve` and `rudder worker` processes on a private PostgreSQL database,
 * with workers SIGKILLed (and replaced) while they hold leases. Short leases (2 s, heartbeat
 * 400 ms) make a dead worker's runs claimable again within seconds. PGlite is one process's
 * database, so on PGlite these tests are skipped (visibly); `npm run test:pg` runs them.
 */

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));
const SECRET = "rudder-crash-test-secret-rudder-crash-test-secret";
const WORKER_ENV = { RUDDER_LEASE_MS: "2000", RUDDER_HEARTBEAT_MS: "400", RUDDER_WORKER_CONCURRENCY: "10" };

interface Run {
  run_id: string;
  thread_id: string | null;
  status: string;
  attempt: number;
  output: Record<string, unknown> | null;
  started_at: string | null;
  finished_at: string | null;
}

/** The test's `rudder worker` processes, by worker id (which names the lease owner in the runs table). */
class Workers {
  /** worker id → process name, for workers that are up and not killed. */
  readonly live = new Map<string, string>();
  private started = 0;
  private readonly starting: Promise<string>[] = [];

  constructor(private readonly processes: Processes) {}

  /** Starts a worker; resolves with its id once it executes. */
  add(): Promise<string> {
    const name = `worker-${++this.started}`;
    const ready = (async () => {
      const id = await startWorker(this.processes, name, TESTING_CONFIG, WORKER_ENV);
      this.live.set(id, name);
      return id;
    })();
    ready.catch(() => {}); // awaited by `ready()`; not an unhandled rejection meanwhile
    this.starting.push(ready);
    return ready;
  }

  /** Every worker started so far is up. */
  async ready(): Promise<void> {
    await Promise.all(this.starting);
  }

  /**
   * SIGKILLs the live worker holding the most unexpired leases (waiting, up to 20 s, until a live
   * worker holds one) and starts a replacement, not awaited. Returns the victim and the runs it
   * held just before it died.
   */
  async killBusiest(sql: TestDatabase["db"]): Promise<{ victim: string; held: string[] }> {
    const waitedFrom = Date.now();
    for (;;) {
      const leases = await sql.query<{ lease_owner: string; run_id: string }>(
        "select lease_owner, run_id::text as run_id from runs where status = 'running' and lease_expires_at > now()",
      );
      const held = new Map<string, string[]>([...this.live.keys()].map((id) => [id, []]));
      for (const { lease_owner, run_id } of leases) held.get(lease_owner)?.push(run_id);
      const [busiest] = [...held.entries()].sort((a, b) => b[1].length - a[1].length);
      if (busiest && busiest[1].length > 0) {
        const [victim, runs] = busiest;
        const name = this.live.get(victim)!;
        this.live.delete(victim);
        await this.processes.kill(name);
        void this.add();
        return { victim, held: runs };
      }
      assert.ok(Date.now() - waitedFrom < 20_000, "a live worker held a lease within 20 s");
      await sleep(50);
    }
  }
}

/** A JSON client for one Rudder API with an admin token. */

/** Joins a run, joining again on 408, until `deadline` (epoch ms). */
async function joinRun(api: Api, runId: string, deadline: number): Promise<Run> {
  for (;;) {
    const remaining = Math.ceil((deadline - Date.now()) / 1000);
    if (remaining <= 0) throw new Error(`run ${runId} had not ended by the test's deadline`);
    const joined = await api<Run>("GET", `/v1/runs/${runId}/join?timeout=${Math.min(30, remaining)}`);
    if (joined.status === 408) continue;
    assert.equal(joined.status, 200, `join ${runId}: ${JSON.stringify(joined.body)}`);
    return joined.body;
  }
}

/** Rejects with `message` unless `promise` settles within `ms`. */
async function within<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(message)), ms)));
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** What the runs table says, for failure messages. */
async function runSummary(sql: TestDatabase["db"]): Promise<string> {
  const rows = await sql.query<{ status: string; attempt: number; n: number }>(
    "select status, attempt, count(*)::int as n from runs group by status, attempt order by status, attempt",
  );
  return rows.map(({ status, attempt, n }) => `${n} ${status} (attempt ${attempt})`).join(", ");
}

/** The API and two workers, an admin client of the test tenant, and a timeline for diagnostics. */
async function startCluster(t: TestContext, processes: Processes, workers: Workers) {
  const [url] = await Promise.all([startApi(processes, TESTING_CONFIG), workers.add(), workers.add()]);
  const began = Date.now();
  const phase = (name: string) => t.diagnostic(`${name} at ${Date.now() - began} ms`);
  phase("processes ready");
  const token = await mintToken(SECRET, { tenantId: "crash", roles: ["admin"] });
  return { url, token, api: apiClient(url, token), phase, began };
}

const sequencesOf = (events: readonly SseEvent[]) => events.map((event) => Number(event.id));
const range = (from: number, to: number) => Array.from({ length: Math.max(0, to - from + 1) }, (_, i) => from + i);

describe(`SIGKILLed workers on ${TEST_DRIVER}`, () => {
  test("runs survive SIGKILLed workers", { timeout: 170_000 }, async (t) => {
    const setup = await setUpProcesses(t, SECRET);
    if (!setup) return;
    const { database, processes } = setup;
    const sql = database.db;
    const workers = new Workers(processes);
    const dir = mkdtempSync(join(tmpdir(), "rudder-crash-"));
    const sideEffectFile = join(dir, "side-effects.log");
    writeFileSync(sideEffectFile, "");
    const streams: SseConnection[] = [];
    const RUNS = 100;
    const STEPS = 4;
    try {
      const { url, token, api, phase, began } = await startCluster(t, processes, workers);
      const auth = { authorization: `Bearer ${token}` };

      // 100 stateless runs, created 50 ms apart (about 5 s), so runs are in flight at every kill.
      // Each run's stream is opened from Last-Event-ID 0 as soon as it exists and read to its end.
      const runIds = new Array<string>(RUNS);
      const received = new Map<string, Promise<SseEvent[]>>();
      const creating = Promise.all(
        range(0, RUNS - 1).map(async (index) => {
          await sleep(index * 50);
          const created = await api<Run>("POST", "/v1/runs", {
            assistant_id: "steps",
            input: { steps: STEPS, delayMs: 100, sideEffectFile, label: String(index) },
          });
          assert.equal(created.status, 202, JSON.stringify(created.body));
          const runId = created.body.run_id;
          runIds[index] = runId;
          const stream = await openSse(`${url}/v1/runs/${runId}/stream`, { headers: auth, lastEventId: "0" });
          streams.push(stream);
          const reading = stream.rest();
          reading.catch(() => {}); // awaited below
          received.set(runId, reading);
        }),
      );

      // Three kills 1.5 s apart, each of the worker holding the most leases, each replaced at once.
      const kills: { at: number; victim: string; held: string[] }[] = [];
      const chaos = (async () => {
        for (let k = 1; k <= 3; k++) {
          await sleep(Math.max(0, began + 1500 * k - Date.now()));
          const { victim, held } = await workers.killBusiest(sql);
          kills.push({ at: Date.now() - began, victim, held });
          phase(`killed ${victim} holding ${held.length} leases`);
        }
        await workers.ready();
      })();
      await Promise.all([creating, chaos]);
      phase("100 runs created, 3 workers killed and replaced");

      // Every run ends succeeded.
      const deadline = began + 90_000;
      const joined = await Promise.all(runIds.map((runId) => joinRun(api, runId, deadline))).catch(async (error: Error) => {
        throw Object.assign(error, { message: `${error.message}\nruns: ${await runSummary(sql)}` });
      });
      const runs = new Map(joined.map((run) => [run.run_id, run]));
      phase("100 runs joined");
      const unsucceeded = joined.filter((run) => run.status !== "succeeded");
      assert.deepEqual(
        unsucceeded.map((run) => [run.run_id, run.status, run.attempt]),
        [],
        "every run succeeded",
      );

      const reclaimed = joined.filter((run) => run.attempt > 1);
      const heldAtKill = new Set(kills.flatMap(({ held }) => held));
      assert.ok(reclaimed.length > 0, "the kills hit in-flight runs: at least one run needed a second attempt");
      // A run settled in the milliseconds between reading the leases and the kill keeps attempt 1.
      const heldReclaimed = [...heldAtKill].filter((runId) => runs.get(runId)!.attempt > 1).length;
      assert.ok(heldReclaimed >= heldAtKill.size / 2, `${heldReclaimed} of the ${heldAtKill.size} runs held by killed workers ran again`);

      // No step's side effect was lost. A step whose worker died after its side effect but before
      // its checkpoint ran again: counted, not failed.
      const lines = readFileSync(sideEffectFile, "utf8").split("\n").filter(Boolean);
      const steps = new Map<string, number[]>(runIds.map((runId) => [runId, []]));
      for (const line of lines) {
        const [runId, label, step] = line.split(" ");
        assert.ok(steps.has(runId!), `side effect of an unknown run: ${line}`);
        assert.equal(label, String(runIds.indexOf(runId!)), `label of ${line}`);
        steps.get(runId!)!.push(Number(step));
      }
      let duplicated = 0;
      const duplicatedRuns = new Set<string>();
      for (const [runId, done] of steps) {
        const distinct = [...new Set(done)].sort((a, b) => a - b);
        assert.deepEqual(distinct, range(1, STEPS), `run ${runId} (attempt ${runs.get(runId)!.attempt}) ran steps ${done.join(",")}`);
        if (done.length > STEPS) {
          duplicated += done.length - STEPS;
          duplicatedRuns.add(runId);
        }
      }
      for (const runId of duplicatedRuns) assert.ok(runs.get(runId)!.attempt > 1, `run ${runId} repeated a step without a second attempt`);

      // Each run's event log is 1..N, one run_succeeded, last.
      const logs = new Map<string, RunEvent[]>();
      await mapLimit(runIds, 16, async (runId) => logs.set(runId, await allEvents(api, runId)));
      for (const [runId, log] of logs) {
        assert.deepEqual(
          log.map((event) => event.sequence),
          range(1, log.length),
          `events of run ${runId} are gapless`,
        );
        assert.equal(log.at(-1)?.kind, "run_succeeded", `run ${runId} ends with run_succeeded`);
        assert.equal(log.filter((event) => event.kind === "run_succeeded").length, 1);
        const started = log.filter((event) => event.kind === "run_started").map((event) => event.data.attempt);
        assert.ok(started.includes(runs.get(runId)!.attempt), `run ${runId} logged the start of its last attempt`);
      }

      // The streams opened while the runs were queued or running followed them across their
      // reclaims: 1..N, no gap, no repeat, the same events as the log, and closed by the server.
      const streamed = await within(
        Promise.all(runIds.map(async (runId) => [runId, await received.get(runId)!] as const)),
        20_000,
        "the streams did not all close within 20 s of the runs ending",
      );
      for (const [runId, events] of streamed) {
        const log = logs.get(runId)!;
        assert.deepEqual(sequencesOf(events), range(1, log.length), `stream of run ${runId} (attempt ${runs.get(runId)!.attempt})`);
        assert.deepEqual(
          events.map((event) => event.event),
          log.map((event) => event.kind),
          `stream of run ${runId} is its log`,
        );
      }
      assert.ok(
        streams.every((stream) => stream.ended),
        "every stream was closed by the server",
      );

      // Reopened after the end from Last-Event-ID 0, a reclaimed run's stream replays its log and closes.
      const replayed = reclaimed.slice(0, 5);
      for (const { run_id: runId } of replayed) {
        const replay = await openSse(`${url}/v1/runs/${runId}/stream`, { headers: auth, lastEventId: "0" });
        streams.push(replay);
        const events = await within(replay.rest(), 10_000, `replay of ${runId} did not close`);
        assert.deepEqual(sequencesOf(events), range(1, logs.get(runId)!.length), `replay of run ${runId}`);
        assert.ok(replay.ended);
      }

      const attempts = joined.reduce(
        (counts, run) => counts.set(run.attempt, (counts.get(run.attempt) ?? 0) + 1),
        new Map<number, number>(),
      );
      phase("checked");
      t.diagnostic(
        `kills: ${kills.length} (at ${kills.map(({ at, held }) => `${at} ms holding ${held.length}`).join(", ")}); ` +
          `reclaimed runs: ${reclaimed.length}, ${heldReclaimed} of the ${heldAtKill.size} held at a kill (attempts ${[...attempts]
            .sort()
            .map(([a, n]) => `${a}:${n}`)
            .join(" ")}); ` +
          `duplicated side effects: ${duplicated} in ${duplicatedRuns.size} runs; ` +
          `live streams checked: ${streamed.length} (${streamed.filter(([runId]) => runs.get(runId)!.attempt > 1).length} of reclaimed runs); replays: ${replayed.length}; ` +
          `processes logged ${processes.logSummary()}`,
      );
    } catch (error) {
      throw Object.assign(error as Error, { message: `${(error as Error).message}\n${processes.stderr()}` });
    } finally {
      for (const stream of streams) stream.close();
      await processes.stopAll(5_000);
      await database.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test(
    "steering chaos: every accepted event is in its run's final state exactly once, consumed once, or superseded",
    { timeout: 170_000 },
    async (t) => {
      const setup = await setUpProcesses(t, SECRET);
      if (!setup) return;
      const { database, processes } = setup;
      const sql = database.db;
      const workers = new Workers(processes);
      const RUNS = 50;
      const STEERS = 1000;
      try {
        const { api, phase, began } = await startCluster(t, processes, workers);

        // 50 runs that loop on steering until "stop". Two workers of 10 slots run 20 of them; the
        // other 30 stay queued, collecting steering, until "stop" frees slots. Every other run has
        // durability "exit": a killed attempt of it stored no checkpoint, so its tasks never run
        // again and what they consumed goes to the next attempt's first drain.
        const runIds = await mapLimit(range(1, RUNS), 10, async (_, index) => {
          const created = await api<Run>("POST", "/v1/runs", {
            assistant_id: "steer_loop",
            input: { rounds: 100_000, waitMs: 200, idleWaits: 5 },
            config: { recursionLimit: 1_000_000 },
            durability: index % 2 === 0 ? "exit" : "sync",
          });
          assert.equal(created.status, 202, JSON.stringify(created.body));
          return created.body.run_id;
        });
        const running = async () => (await sql.query<{ n: number }>("select count(*)::int as n from runs where status = 'running'"))[0]!.n;
        while ((await running()) < 20) {
          assert.ok(Date.now() - began < 30_000, `20 runs running within 30 s: ${await runSummary(sql)}`);
          await sleep(100);
        }
        phase("50 runs created, 20 running");

        // 1,000 steers, 50 in flight, paced over about 6 s, each with its own key, round-robin over
        // the runs; the busiest worker is SIGKILLed (and replaced) after 250 and after 650 were sent.
        interface Sent {
          runId: string;
          key: string;
          sentAt: number;
          answeredAt: number;
          status: number;
          body: { id?: string; code?: string; status?: string; created_at?: string };
        }
        const steer = async (runId: string, key: string, kind: string, payload: unknown): Promise<Sent> => {
          const sentAt = Date.now();
          const answer = await api<Sent["body"]>("POST", `/v1/runs/${runId}/steer`, { kind, payload, idempotency_key: key });
          return { runId, key, sentAt, answeredAt: Date.now(), status: answer.status, body: answer.body };
        };
        const kills: { at: number; victim: string; held: string[] }[] = [];
        let chaos = Promise.resolve();
        const sendingBegan = Date.now();
        const sent = await mapLimit(range(0, STEERS - 1), 50, async (index) => {
          await sleep(Math.max(0, sendingBegan + index * 6 - Date.now()));
          if (index === 250 || index === 650) {
            chaos = chaos.then(async () => {
              const { victim, held } = await workers.killBusiest(sql);
              kills.push({ at: Date.now() - began, victim, held });
              phase(`killed ${victim} holding ${held.length} leases after ${index} steers`);
            });
          }
          return steer(runIds[index % RUNS]!, `steer-${index}`, "note", { index });
        });
        await chaos;
        phase(`${STEERS} steers sent`);
        await workers.ready();
        phase("replacement workers ready");

        // "stop" to every run, raced by two late steers per run: one sent with the stop, one 0-45 ms
        // after its 202. Each is consumed with the stop, superseded at the final boundary, or
        // refused (run_finalizing, run_terminal) once the run has finished its graph.
        const stopping = await mapLimit(runIds, 25, async (runId, index) => {
          const early = steer(runId, `late-a-${runId}`, "note", { late: "a" });
          const stop = await steer(runId, `stop-${runId}`, "stop", null);
          await sleep((index % 4) * 15);
          const late = await steer(runId, `late-b-${runId}`, "note", { late: "b" });
          return { stop, late: [await early, late] };
        });
        const stops = stopping.map(({ stop }) => stop);
        const lates = stopping.flatMap(({ late }) => late);
        phase("stops sent");
        const deadline = Date.now() + 90_000;
        const joined = await Promise.all(runIds.map((runId) => joinRun(api, runId, deadline))).catch(async (error: Error) => {
          throw Object.assign(error, { message: `${error.message}\nruns: ${await runSummary(sql)}` });
        });
        phase("50 runs joined");
        assert.deepEqual(
          joined.filter((run) => run.status !== "succeeded").map((run) => [run.run_id, run.status]),
          [],
          "every run succeeded",
        );
        assert.ok(
          joined.every((run) => run.output?.stopped === true),
          "every run ended on its stop",
        );

        // Once ended, a run refuses a new key (run_terminal) but replays a known one as it is now.
        const after = await mapLimit(runIds, 25, (runId) => steer(runId, `after-${runId}`, "note", { late: "after" }));
        for (const answer of after)
          assert.deepEqual([answer.status, answer.body.code], [409, "run_terminal"], `steer ${answer.key} after its run ended`);
        const replay = await steer(runIds[0]!, "steer-0", "note", { index: 0 });
        assert.deepEqual(
          [replay.status, replay.body.id, replay.body.status],
          [202, sent[0]!.body.id, "consumed"],
          "a replayed key after the run ended",
        );

        // Every other answer is 202, or a 409 run_terminal/run_finalizing to a steer answered after
        // its run's stop was stored: a run ends only after its stop, so no steer before may be refused.
        const answers = [...sent, ...stops, ...lates];
        const stopAt = new Map(stops.map((stop) => [stop.runId, stop.status === 202 ? Date.parse(stop.body.created_at!) : Infinity]));
        const refused = answers.filter((answer) => answer.status !== 202);
        for (const answer of refused) {
          assert.equal(answer.status, 409, `steer ${answer.key}: ${JSON.stringify(answer.body)}`);
          assert.ok(
            answer.body.code === "run_terminal" || answer.body.code === "run_finalizing",
            `steer ${answer.key}: ${JSON.stringify(answer.body)}`,
          );
          assert.ok(
            stopAt.get(answer.runId)! <= answer.answeredAt,
            `steer ${answer.key} refused (${answer.body.code}) before its run's stop was stored`,
          );
        }
        assert.ok(
          refused.every((answer) => answer.key.startsWith("late-")),
          `only late steers refused: ${refused.map((answer) => answer.key).join(", ")}`,
        );
        const accepted = new Map<string, Sent>();
        for (const answer of answers) {
          if (answer.status !== 202) continue;
          assert.ok(answer.body.id && !accepted.has(answer.body.id), `a new id for each key: ${answer.key}`);
          accepted.set(answer.body.id, answer);
        }

        // Each accepted id: one run.steer.accepted in its run's log, at most one run.steer.consumed,
        // and in the runs' final graph state exactly once unless it was superseded (then never, and
        // never consumed). Kills between a drain (which commits consumption) and the node's
        // checkpoint must neither lose the message from the state nor report it twice.
        const logs = new Map<string, RunEvent[]>();
        await mapLimit(runIds, 10, async (runId) => logs.set(runId, await allEvents(api, runId)));
        const seen = {
          accepted: new Map<string, string[]>(),
          consumed: new Map<string, string[]>(),
          superseded: new Map<string, string[]>(),
        };
        const kinds = {
          "run.steer.accepted": seen.accepted,
          "run.steer.consumed": seen.consumed,
          "run.steer.superseded": seen.superseded,
        } as const;
        for (const [runId, log] of logs) {
          assert.deepEqual(
            log.map((event) => event.sequence),
            range(1, log.length),
            `events of run ${runId} are gapless`,
          );
          for (const event of log) {
            const into = kinds[event.kind as keyof typeof kinds];
            if (!into) continue;
            const id = String(event.data.steering_event_id);
            into.set(id, [...(into.get(id) ?? []), runId]);
          }
        }
        const inState = new Map<string, string[]>();
        for (const run of joined) {
          const kept = (run.output?.received as { sourceEventId: string; sequence: number }[] | undefined) ?? [];
          const sequences = kept.map((message) => message.sequence);
          assert.deepEqual(
            sequences,
            [...sequences].sort((a, b) => a - b),
            `run ${run.run_id} received its messages in order`,
          );
          for (const { sourceEventId } of kept) inState.set(sourceEventId, [...(inState.get(sourceEventId) ?? []), run.run_id]);
        }
        let consumed = 0;
        let superseded = 0;
        const problems: string[] = [];
        for (const [id, { runId, key }] of accepted) {
          const acceptedIn = seen.accepted.get(id) ?? [];
          const consumedIn = seen.consumed.get(id) ?? [];
          const supersededIn = seen.superseded.get(id) ?? [];
          const keptIn = inState.get(id) ?? [];
          const where = `${key} (${id}): accepted in ${JSON.stringify(acceptedIn)}, consumed in ${JSON.stringify(consumedIn)}, superseded in ${JSON.stringify(supersededIn)}, in the state of ${JSON.stringify(keptIn)}`;
          if (acceptedIn.length !== 1 || acceptedIn[0] !== runId) problems.push(where);
          else if (consumedIn.length > 1) problems.push(`consumed twice: ${where}`);
          else if (
            supersededIn.length > 0 &&
            (supersededIn.length > 1 || supersededIn[0] !== runId || consumedIn.length > 0 || keptIn.length > 0)
          )
            problems.push(where);
          else if (supersededIn.length === 0 && (keptIn.length !== 1 || keptIn[0] !== runId || consumedIn[0] !== runId))
            problems.push(`not in its run's state exactly once: ${where}`);
          consumed += consumedIn.length;
          superseded += supersededIn.length;
        }
        for (const id of new Set([...seen.accepted.keys(), ...seen.consumed.keys(), ...seen.superseded.keys(), ...inState.keys()])) {
          if (!accepted.has(id)) problems.push(`a steering event ${id} no 202 answered`);
        }
        assert.deepEqual(
          problems,
          [],
          "every accepted steering event is in its run's final state exactly once, consumed once, or superseded",
        );

        // The rows agree: none left pending on a succeeded run; as many consumed and superseded as the log says.
        const rows = await sql.query<{ status: string; n: number }>(
          "select s.status, count(*)::int as n from steering_events s join runs r on r.run_id = s.run_id where r.status = 'succeeded' group by s.status",
        );
        const byStatus = Object.fromEntries(rows.map(({ status, n }) => [status, n]));
        assert.deepEqual(byStatus, { consumed, ...(superseded ? { superseded } : {}) }, "steering_events rows of succeeded runs");
        // Rows a killed attempt consumed and a later attempt was handed again: the attempt that wrote
        // the run.steer.consumed (the last run_started before it) is older than the row's last taker.
        const takers = new Map(
          (
            await sql.query<{ id: string; consumed_attempt: number }>(
              "select id::text as id, consumed_attempt from steering_events where status = 'consumed'",
            )
          ).map((row) => [row.id, row.consumed_attempt]),
        );
        let handedAgain = 0;
        for (const log of logs.values()) {
          let attempt = 0;
          for (const event of log) {
            if (event.kind === "run_started") attempt = Number(event.data.attempt);
            if (event.kind === "run.steer.consumed" && takers.get(String(event.data.steering_event_id))! > attempt) handedAgain++;
          }
        }
        const reclaimed = joined.filter((run) => run.attempt > 1);
        assert.ok(reclaimed.length > 0, "the kills hit running runs: at least one run needed a second attempt");
        const reclaimedExit = reclaimed.filter((run) => runIds.indexOf(run.run_id) % 2 === 0);
        // An exit-mode attempt settles nothing before it ends: a killed one hands everything it consumed on.
        if (reclaimedExit.length > 0) assert.ok(handedAgain > 0, "a killed attempt's consumed messages were handed to the next attempt");
        phase("checked");
        t.diagnostic(
          `kills: ${kills.length} (${kills.map(({ at, held }) => `${at} ms holding ${held.length}`).join(", ")}); reclaimed runs: ${reclaimed.length}; ` +
            `accepted: ${accepted.size} (${sent.filter((a) => a.status === 202).length} steers + ${stops.filter((a) => a.status === 202).length} stops + ` +
            `${lates.filter((a) => a.status === 202).length} late); refused: ${refused.length} of ${lates.length} late ` +
            `(${refused.filter((a) => a.body.code === "run_finalizing").length} run_finalizing, ${refused.filter((a) => a.body.code === "run_terminal").length} run_terminal) ` +
            `+ ${after.length} after the end (run_terminal); consumed: ${consumed}; superseded: ${superseded}; ` +
            `reclaimed runs with durability exit: ${reclaimedExit.length}; consumed by a killed attempt and handed to the next: ${handedAgain}; ` +
            `processes logged ${processes.logSummary()}`,
        );
      } catch (error) {
        throw Object.assign(error as Error, { message: `${(error as Error).message}\n${processes.stderr()}` });
      } finally {
        await processes.stopAll(5_000);
        await database.drop();
      }
    },
  );
});
