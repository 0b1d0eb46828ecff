/**
 * Summarises a V8 CPU profile (`.cpuprofile`, from `--cpu-prof` or bench/token-stream.ts's
 * `--cpu-prof DIR`): self time by package (node_modules package, or the repository folder) and by
 * function; with `--inclusive`, time by function including what it called (each sample counted
 * once per function on its stack).
 *
 *   node bench/profsum.mjs FILE [TOP=40] [--inclusive]
 */
import fs from "node:fs";

const [file, ...rest] = process.argv.slice(2);
const inclusive = rest.includes("--inclusive");
const top = Number(rest.find((arg) => !arg.startsWith("--")) ?? 40);
const profile = JSON.parse(fs.readFileSync(file, "utf8"));
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const parentOf = new Map();
for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);

/** Sampled time (µs) per profile node, and in all. */
const sampled = new Map();
let total = 0;
for (let index = 0; index < profile.samples.length; index++) {
  const delta = profile.timeDeltas[index] ?? 0;
  sampled.set(profile.samples[index], (sampled.get(profile.samples[index]) ?? 0) + delta);
  total += delta;
}

const shortUrl = (url) => url.replace(/.*node_modules\//, "nm/").replace(/.*\/(packages|bench)\//, "$1/");
const functionKey = (callFrame) => `${callFrame.functionName || "(anon)"} ${shortUrl(callFrame.url)}:${callFrame.lineNumber}`;
const packageKey = (callFrame) =>
  callFrame.url.includes("node_modules/")
    ? callFrame.url.replace(/.*node_modules\/((@[^/]+\/)?[^/]+).*/, "$1")
    : shortUrl(callFrame.url).split("/").slice(0, 4).join("/") || callFrame.functionName;

const add = (map, key, time) => map.set(key, (map.get(key) ?? 0) + time);
const bySelfFunction = new Map();
const bySelfPackage = new Map();
const byInclusiveFunction = new Map();
for (const [id, time] of sampled) {
  const { callFrame } = byId.get(id);
  add(bySelfFunction, functionKey(callFrame), time);
  add(bySelfPackage, packageKey(callFrame), time);
  const seen = new Set();
  for (let at = id; at !== undefined; at = parentOf.get(at)) {
    const key = functionKey(byId.get(at).callFrame);
    if (!seen.has(key)) add(byInclusiveFunction, key, time);
    seen.add(key);
  }
}

const lines = (map, count) =>
  [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([key, time]) => `${((100 * time) / total).toFixed(1).padStart(5)}%  ${(time / 1000).toFixed(0).padStart(6)}ms  ${key}`)
    .join("\n");

console.log("total", (total / 1000).toFixed(0), "ms");
if (inclusive) console.log(lines(byInclusiveFunction, top));
else {
  console.log(lines(bySelfPackage, 25));
  console.log("---");
  console.log(lines(bySelfFunction, top));
}
