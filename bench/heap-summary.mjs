/**
 * Summarises a V8 sampling heap profile (.heapprofile, from `bench/runs.ts --heap-prof DIR` or
 * Chrome DevTools' "allocation sampling"): bytes allocated by package and by function, largest
 * first, per run when RUNS (the measurement's run count) is given. A profile from `runs.ts` counts
 * the objects the collector freed too, so this is what the server allocates, which is what its
 * garbage collection pays for, not what it keeps.
 *
 *   node bench/heap-summary.mjs FILE [RUNS] [FUNCTIONS (default 40)] [PACKAGES (default 20)]
 *
 * The profiler samples one allocation per 4 KB (`runs.ts`), so small figures are estimates.
 */
import fs from "node:fs";
import { functionOf, packageOf } from "./profile-names.mjs";

const [file, runsArgument, functionCount = "40", packageCount = "20"] = process.argv.slice(2);
if (!file) {
  console.error("usage: node bench/heap-summary.mjs FILE [RUNS] [FUNCTIONS] [PACKAGES]");
  process.exit(2);
}
const runs = Number(runsArgument ?? 0);
const { head } = JSON.parse(fs.readFileSync(file, "utf8"));

let total = 0;
const byPackage = new Map();
const byFunction = new Map();
const add = (map, key, bytes) => map.set(key, (map.get(key) ?? 0) + bytes);
// A builtin (`Object.keys`, `new Set`, a promise's `then`) has no script: its bytes count for the
// nearest caller that has one, so a package's share holds what its code asked the engine for.
for (const pending = [{ node: head, caller: undefined }]; pending.length > 0;) {
  const { node, caller } = pending.pop();
  const frame = node.callFrame;
  const scripted = frame.url ? frame : caller;
  total += node.selfSize;
  add(byPackage, packageOf(scripted ?? frame), node.selfSize);
  add(byFunction, frame.url || !caller ? functionOf(frame) : `${functionOf(frame)} in ${functionOf(caller)}`, node.selfSize);
  for (const child of node.children) pending.push({ node: child, caller: scripted });
}

const amount = (bytes) =>
  runs > 0 ? `${(bytes / runs / 1024).toFixed(1).padStart(7)} KB/run` : `${(bytes / 1024 / 1024).toFixed(1).padStart(7)} MB`;
const top = (map, count) =>
  [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, Number(count))
    .map(([name, bytes]) => `${((100 * bytes) / total).toFixed(1).padStart(5)} %  ${amount(bytes)}  ${name}`)
    .join("\n");

console.log(`${file}: ${(total / 1024 / 1024).toFixed(0)} MB allocated${runs > 0 ? `, ${amount(total).trim()} over ${runs} runs` : ""}`);
console.log(`\nallocated by package\n${top(byPackage, packageCount)}`);
console.log(`\nallocated by function\n${top(byFunction, functionCount)}`);
