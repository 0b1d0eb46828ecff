/**
 * What the trivial graph itself costs, in process, without Rudder (issue 22, items 1 and 5): CPU
 * and wall time per sequential run of bench/graphs.ts' one-node graph, invoked, and streamed with
 * the stream modes every Rudder run records (worker/executor.ts `STREAM_MODES`), without and with
 * a checkpointer (LangGraph's in-memory `MemorySaver`, durability `sync`, as Rudder's default).
 * The difference between the rows is what LangGraph and LangChain spend on the modes and on the
 * checkpoints before any database is involved: a floor under Rudder's CPU per run.
 *
 * Usage (from the repository root):
 *
 *   node --import tsx bench/graph-cost.ts [--runs N]
 *
 *   --runs N   timed runs per row (default 3000), after N / 10 untimed ones
 */
import { parseArgs } from "node:util";
import { MemorySaver } from "@langchain/langgraph";
import { STREAM_MODES } from "../packages/server/src/worker/executor.ts";
import { exitWithUsage, fixed, positive, table } from "./common.ts";
import { oneNodeGraph } from "./graphs.ts";

const { values: args } = parseArgs({ options: { runs: { type: "string", default: "3000" }, help: { type: "boolean", default: false } } });
exitWithUsage(args.help, "node --import tsx bench/graph-cost.ts [--runs N]");
const RUNS = positive(args.runs, "--runs");

const input = { message: "hi" };
const plain = oneNodeGraph().compile();
const saved = oneNodeGraph().compile({ checkpointer: new MemorySaver() });
let thread = 0;
const durable = () => ({ configurable: { thread_id: `t${++thread}` }, durability: "sync" as const });
const drain = async (stream: AsyncIterable<unknown>) => {
  for await (const _ of stream);
};

const rows: [string, () => Promise<unknown>][] = [
  ["invoke", () => plain.invoke(input)],
  ["stream: values", async () => drain(await plain.stream(input, { streamMode: ["values"] }))],
  [`stream: ${STREAM_MODES.join(", ")}`, async () => drain(await plain.stream(input, { streamMode: [...STREAM_MODES] }))],
  ["invoke, MemorySaver, sync", () => saved.invoke(input, durable())],
  [
    `stream: ${STREAM_MODES.join(", ")}; MemorySaver, sync`,
    async () => drain(await saved.stream(input, { ...durable(), streamMode: [...STREAM_MODES] })),
  ],
];

const results: (string | number)[][] = [];
for (const [label, run] of rows) {
  for (let i = 0; i < Math.ceil(RUNS / 10); i++) await run();
  const cpu = process.cpuUsage();
  const start = performance.now();
  for (let i = 0; i < RUNS; i++) await run();
  const wall = performance.now() - start;
  const used = process.cpuUsage(cpu);
  results.push([label, fixed((used.user + used.system) / 1000 / RUNS, 3), fixed(wall / RUNS, 3)]);
}
console.log(`one-node graph, ${RUNS} sequential runs per row, ${new Date().toISOString()}, Node ${process.version}`);
console.log(table(["what", "CPU ms/run", "wall ms/run"], results, ["l", "r", "r"]));
