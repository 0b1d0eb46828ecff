import type { TestContext } from "node:test";
import assert from "node:assert/strict";
import type { ChildProcessWithoutNullStreams } from "node:child_process";
import { startRudder, waitForOutput } from "./cli.ts";
import { createTestDatabase, TEST_DRIVER, type TestDatabase } from "./db.ts";

/**
 * Real `rudder` processes for the tests that split Rudder over several of them (multiprocess,
 * crash): they share one PostgreSQL database, so on PGlite those tests are skipped, visibly.
 */

const SKIP_REASON = "needs PostgreSQL: runs in npm run test:pg";

interface ChildEntry {
  readonly name: string;
  readonly child: ChildProcessWithoutNullStreams;
  readonly stderr: string[];
  /** Log lines (pino JSON on stdout) at warn level or above. */
  readonly logs: string[];
  readonly exited: Promise<void>;
}

/** The child processes of one test: started, SIGKILLed one by one, and all stopped in its finally. */
export class Processes {
  private readonly children: ChildEntry[] = [];
  /** Set by stopAll: a kill-and-replace still running after a failure must not leave a new child behind. */
  private closed = false;

  constructor(private readonly env: Record<string, string | undefined>) {}

  /** Starts `rudder ...args` and resolves with its stdout once it matches `ready`. */
  async start(name: string, args: string[], ready: RegExp, env: Record<string, string | undefined> = {}): Promise<string> {
    if (this.closed) throw new Error(`not starting ${name}: the test is stopping its processes`);
    // JSON lines, which `logs` collects, even from `rudder dev` (readable lines by default).
    const child = startRudder(args, { RUDDER_LOG_FORMAT: "json", ...this.env, ...env });
    const stderr: string[] = [];
    child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk.toString()));
    const logs: string[] = [];
    let partial = "";
    child.stdout.on("data", (chunk: Buffer) => {
      const lines = (partial + chunk.toString()).split("\n");
      partial = lines.pop()!;
      logs.push(...lines.filter((line) => line.startsWith("{")));
    });
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    this.children.push({ name, child, stderr, logs, exited });
    return waitForOutput(child, ready, 60_000);
  }

  /** SIGKILL: no handler runs, no lease is released, connections just drop. */
  async kill(name: string): Promise<void> {
    const entry = this.children.find((candidate) => candidate.name === name);
    assert.ok(entry, `no process ${name}`);
    if (!exited(entry.child)) entry.child.kill("SIGKILL");
    await entry.exited;
  }

  /** Sends `signal` (SIGTERM: a graceful stop) and resolves with the exit code once the child exited. */
  async signal(name: string, signal: NodeJS.Signals): Promise<number | null> {
    const entry = this.children.find((candidate) => candidate.name === name);
    assert.ok(entry, `no process ${name}`);
    if (!exited(entry.child)) entry.child.kill(signal);
    await entry.exited;
    return entry.child.exitCode;
  }

  /**
   * Sends `signal` and resolves once the child printed `acknowledged`, while it is still stopping,
   * with a promise of its exit code.
   */
  async signalAcknowledged(name: string, signal: NodeJS.Signals, acknowledged: RegExp): Promise<{ exitCode: Promise<number | null> }> {
    const entry = this.children.find((candidate) => candidate.name === name);
    assert.ok(entry, `no process ${name}`);
    const heard = waitForOutput(entry.child, acknowledged, 30_000);
    entry.child.kill(signal);
    await heard;
    return { exitCode: entry.exited.then(() => entry.child.exitCode) };
  }

  /** True while the child runs. */
  running(name: string): boolean {
    const entry = this.children.find((candidate) => candidate.name === name);
    return entry !== undefined && !exited(entry.child);
  }

  /** The tail of what each child wrote to stderr and logged, for failure messages. */
  stderr(): string {
    return this.children
      .map(
        ({ name, stderr, logs }) =>
          `--- ${name} stderr ---\n${stderr.join("").slice(-3000)}\n--- ${name} log ---\n${logs.join("\n").slice(-3000)}`,
      )
      .join("\n");
  }

  /** How many warn (40) and error (50+) lines the children logged, and the distinct messages. */
  logSummary(): string {
    const lines = this.children.flatMap(({ logs }) => logs);
    // Levels are names ("level":"warn"); pino's numbers are read too.
    const NUMBERS: Record<string, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 };
    const level = (line: string) => {
      const found = /"level":(?:(\d+)|"(\w+)")/.exec(line);
      return found?.[1] ? Number(found[1]) : (NUMBERS[found?.[2] ?? ""] ?? 0);
    };
    const messages = new Set(lines.map((line) => /"msg":"([^"]*)"/.exec(line)?.[1] ?? line.slice(0, 120)));
    return `${lines.filter((line) => level(line) === 40).length} warn, ${lines.filter((line) => level(line) >= 50).length} error log lines${messages.size ? `: ${[...messages].slice(0, 5).join("; ")}` : ""}`;
  }

  /** SIGTERM to all, SIGKILL to any still running after `graceMs`; resolves once every child exited. */
  async stopAll(graceMs = 10_000): Promise<void> {
    this.closed = true;
    await Promise.all(
      this.children.map(async ({ child, exited: closed }) => {
        if (exited(child)) return;
        child.kill("SIGTERM");
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), graceMs)));
        if (await Promise.race([closed.then(() => false), late])) {
          child.kill("SIGKILL");
          await closed;
        }
        clearTimeout(timer);
      }),
    );
  }
}

const exited = (child: ChildProcessWithoutNullStreams) => child.exitCode !== null || child.signalCode !== null;

/**
 * A private PostgreSQL database and the processes' environment for it; undefined (the test marked
 * skipped) on PGlite. The database stays open for the test's own SQL.
 */
export async function setUpProcesses(
  t: TestContext,
  secret: string,
): Promise<{ database: TestDatabase; processes: Processes } | undefined> {
  if (TEST_DRIVER === "pglite") {
    t.skip(SKIP_REASON);
    return undefined;
  }
  const database = await createTestDatabase();
  const processes = new Processes({ DATABASE_URL: database.url, RUDDER_JWT_SECRET: secret, RUDDER_LOG_LEVEL: "warn" });
  return { database, processes };
}

/** `rudder serve` (the API alone) on a free port; resolves with its URL. */
export async function startApi(processes: Processes, configFile: string, env: Record<string, string> = {}): Promise<string> {
  const banner = await processes.start("serve", ["serve", "--config", configFile, "--port", "0"], /listening at http:\/\/\S+/, env);
  const url = /listening at (http:\/\/[^\s]+)/.exec(banner)?.[1];
  assert.ok(url, banner);
  return url;
}

/** `rudder worker` named `name`; resolves with its worker id once it executes. */
export async function startWorker(
  processes: Processes,
  name: string,
  configFile: string,
  env: Record<string, string> = {},
): Promise<string> {
  const banner = await processes.start(name, ["worker", "--config", configFile], /rudder worker: \S+ executing/, env);
  const id = /rudder worker: (\S+) executing/.exec(banner)?.[1];
  assert.ok(id, banner);
  return id;
}
