/**
 * Summarises a V8 CPU profile (.cpuprofile, from `bench/runs.ts --cpu-prof DIR`,
 * `bench/token-stream.ts --cpu-prof DIR`, `node --cpu-prof` or the inspector): self time by
 * package (node_modules package, or the repository folder for our own code) and by function,
 * largest first; with `--inclusive`, time by function including what it called (each sample
 * counted once per function on its stack).
 *
 *   node bench/profile-summary.mjs FILE [FUNCTIONS (default 40)] [PACKAGES (default 25)] [--inclusive]
 *
 * Self time is the time a function was on top of the stack; "(program)" is V8 outside JavaScript
 * (mostly native code and the event loop), "(garbage collector)" is GC, "(idle)" is waiting.
 * Busy is the total minus idle; percentages are of busy time. Samples inside a `node:inspector`
 * call are left out: they are the profiler stopping itself (bench/runs.ts profiles in process).
 */
import fs from "node:fs";
import { functionOf, packageOf } from "./profile-names.mjs";

const args = process.argv.slice(2);
const inclusive = args.includes("--inclusive");
const [file, functionCount = "40", packageCount = "25"] = args.filter((arg) => arg !== "--inclusive");
if (!file) {
  console.error("usage: node bench/profile-summary.mjs FILE [FUNCTIONS] [PACKAGES]");
  process.exit(2);
}
const profile = JSON.parse(fs.readFileSync(file, "utf8"));
const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
const parents = new Map();
for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id);
const inInspector = (id) => {
  for (let at = id; at !== undefined; at = parents.get(at)) if (nodes.get(at).callFrame.url === "node:inspector") return true;
  return false;
};

/** Microseconds of self time per node id. */
const selfTime = new Map();
for (let i = 0; i < profile.samples.length; i++) {
  const id = profile.samples[i];
  selfTime.set(id, (selfTime.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
}

let total = 0;
let idle = 0;
let profiler = 0;
const byPackage = new Map();
const byFunction = new Map();
const byInclusiveFunction = new Map();
const addInclusive = (id, time) => {
  const seen = new Set();
  for (let at = id; at !== undefined; at = parents.get(at)) {
    const key = functionOf(nodes.get(at).callFrame);
    if (!seen.has(key)) byInclusiveFunction.set(key, (byInclusiveFunction.get(key) ?? 0) + time);
    seen.add(key);
  }
};
for (const [id, time] of selfTime) {
  const frame = nodes.get(id).callFrame;
  if (inInspector(id)) {
    profiler += time;
    continue;
  }
  total += time;
  if (frame.functionName === "(idle)") {
    idle += time;
    continue;
  }
  byPackage.set(packageOf(frame), (byPackage.get(packageOf(frame)) ?? 0) + time);
  byFunction.set(functionOf(frame), (byFunction.get(functionOf(frame)) ?? 0) + time);
  if (inclusive) addInclusive(id, time);
}
const busy = total - idle;
const top = (map, count) =>
  [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, Number(count))
    .map(([name, time]) => `${((100 * time) / busy).toFixed(1).padStart(5)} %  ${(time / 1000).toFixed(0).padStart(6)} ms  ${name}`)
    .join("\n");

console.log(
  `${file}: ${(total / 1000).toFixed(0)} ms sampled, ${(busy / 1000).toFixed(0)} ms busy (${((100 * busy) / total).toFixed(0)} %)` +
    `; ${(profiler / 1000).toFixed(0)} ms inside node:inspector left out`,
);
if (inclusive) console.log(`\ntime by function with what it called (% of busy)\n${top(byInclusiveFunction, functionCount)}`);
else {
  console.log(`\nself time by package (% of busy)\n${top(byPackage, packageCount)}`);
  console.log(`\nself time by function (% of busy)\n${top(byFunction, functionCount)}`);
}
