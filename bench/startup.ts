/**
 * Server start-up: wall time and CPU of building a test server (database, migrations or template
 * load, the Fastify app with every route's validators and serializers, the worker), the first
 * time in a process and again after it. The test suite starts a server per test file or test,
 * so what a repeat costs is most of the suite's fixed overhead.
 *
 *   node --import tsx bench/startup.ts [--repeats N]                                              # PGlite
 *   RUDDER_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/startup.ts
 */
import { parseArgs } from "node:util";
import { startTestServer } from "../packages/server/test/support/server.ts";
import { positive } from "./common.ts";

const { values } = parseArgs({ options: { repeats: { type: "string", default: "3" } } });

async function timeOneStart(label: string): Promise<void> {
  const wallStart = performance.now();
  const cpuStart = process.cpuUsage();
  const server = await startTestServer();
  const cpu = process.cpuUsage(cpuStart);
  console.log(`${label}: ${(performance.now() - wallStart).toFixed(0)} ms wall, ${((cpu.user + cpu.system) / 1000).toFixed(0)} ms CPU`);
  await server.close();
}

async function main(): Promise<void> {
  await timeOneStart("first start in the process");
  for (let i = 0; i < positive(values.repeats, "--repeats"); i++) await timeOneStart("next start");
}

void main().then(() => process.exit(0));
