/**
 * What one statement costs the server's thread on PGlite: on the server's thread (the WASM runs
 * there) against on a worker thread (a message there and back). CPU time of the main thread is
 * read from /proc (Node 20 has no per-thread CPU usage), so the figures hold on a loaded machine
 * better than wall times do; both are printed.
 *
 *   node --import tsx bench/pglite-roundtrip.ts [--statements N]
 *
 * Figures: docs/benchmarks.md, "PGlite on a worker thread".
 */
import os from "node:os";
import { parseArgs } from "node:util";
import { createPgliteDb } from "../packages/server/src/storage/db.ts";
import { exitWithUsage, fixed, mainThreadCpuMs, positive } from "./common.ts";

const { values: args } = parseArgs({
  options: { statements: { type: "string", default: "20000" }, help: { type: "boolean", default: false } },
});
exitWithUsage(args.help, "node --import tsx bench/pglite-roundtrip.ts [--statements N]");
const N = positive(args.statements, "--statements");

/** CPU time of this process's main thread, µs (/proc counts 10 ms clock ticks). */
const mainThreadCpuUs = () => mainThreadCpuMs() * 1000;

const CASES = [
  { label: "select $1::int", sql: "select $1::int as x", params: (i: number) => [i] },
  { label: "primary-key read, 100-byte row", sql: "select * from t where id = $1", params: (i: number) => [i % 500] },
] as const;

console.log(
  `${N} statements per case; load average ${os
    .loadavg()
    .map((load) => fixed(load, 2))
    .join(" ")}`,
);
for (const thread of ["worker", "main", "worker", "main"] as const) {
  const db = await createPgliteDb({ thread });
  await db.exec("create table t (id int primary key, v text); insert into t select g, repeat('x', 100) from generate_series(0, 499) g");
  for (const { label, sql, params } of CASES) {
    const started = performance.now();
    const main = mainThreadCpuUs();
    const process0 = process.cpuUsage();
    for (let i = 0; i < N; i++) await db.query(sql, params(i));
    const usage = process.cpuUsage(process0);
    console.log(
      `${thread.padEnd(6)} ${label.padEnd(32)} sequential: wall ${fixed(((performance.now() - started) * 1000) / N)} µs, main thread CPU ${fixed((mainThreadCpuUs() - main) / N)} µs, process CPU ${fixed((usage.user + usage.system) / N)} µs per statement`,
    );
  }
  const started = performance.now();
  const main = mainThreadCpuUs();
  await Promise.all(
    Array.from({ length: 20 }, async (_, caller) => {
      for (let i = 0; i < N / 20; i++) await db.query("select * from t where id = $1", [(i + caller) % 500]);
    }),
  );
  console.log(
    `${thread.padEnd(6)} ${"primary-key read, 20 callers".padEnd(32)} concurrent: wall ${fixed(((performance.now() - started) * 1000) / N)} µs, main thread CPU ${fixed((mainThreadCpuUs() - main) / N)} µs per statement`,
  );
  await db.close();
}
