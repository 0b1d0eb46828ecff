/**
 * The parent side of the forked load generator (bench/client.ts): bench/runs.ts and
 * bench/token-stream.ts send it tasks over IPC so that the HTTP and SSE clients do not share the
 * server's event loop.
 */
import { fork, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { ClientTask } from "./client.ts";
import { now } from "./counting.ts";

export class Client {
  private readonly child: ChildProcess;
  private readonly pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  private nextId = 0;
  /** Child clock minus this process's clock, ms. */
  offset = 0;

  constructor() {
    this.child = fork(fileURLToPath(new URL("./client.ts", import.meta.url)), [], {
      execArgv: ["--import", "tsx"],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    this.child.on("message", (message: { id: number; result?: unknown; error?: string }) => {
      const waiter = this.pending.get(message.id);
      this.pending.delete(message.id);
      if (message.error !== undefined) waiter?.reject(new Error(`client: ${message.error}`));
      else waiter?.resolve(message.result);
    });
  }

  /** The load generator's process id (its CPU time is read from /proc). */
  get pid(): number | undefined {
    return this.child.pid;
  }

  request<T>(task: ClientTask): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.child.send({ id, task });
    });
  }

  /** NTP-style: the ping with the shortest round trip gives the offset. */
  async calibrate(): Promise<{ offsetMs: number; rttMs: number }> {
    let best = { offsetMs: 0, rttMs: Number.POSITIVE_INFINITY };
    for (let i = 0; i < 30; i++) {
      const sent = now();
      const theirs = await this.request<number>({ kind: "clock" });
      const back = now();
      if (back - sent < best.rttMs) best = { offsetMs: theirs - (sent + back) / 2, rttMs: back - sent };
    }
    this.offset = best.offsetMs;
    return best;
  }

  close(): void {
    this.child.disconnect();
  }
}
