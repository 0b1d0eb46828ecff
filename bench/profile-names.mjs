/**
 * How bench/profile-summary.mjs and bench/heap-summary.mjs name a V8 profile's call frames: by
 * package (the node_modules package, Node's module, or the repository folder for our own code) and
 * by function (its name and where it is).
 */
const repositoryPath = (url) => url.replace(/^file:\/\//, "").replace(/^.*?\/(packages|bench|examples)\//, "$1/");

/** The package a frame belongs to; a frame with no script (native code, GC) by its own name. */
export const packageOf = ({ url, functionName }) => {
  if (!url) return functionName || "(native)";
  const module = url.match(/node_modules\/((@[^/]+\/)?[^/]+)/);
  if (module) return module[1];
  if (url.startsWith("node:")) return `node:${url.slice(5).split("/")[0]}`;
  return repositoryPath(url).split("/").slice(0, 4).join("/");
};

/** A frame's function and its place (package-relative path and line). */
export const functionOf = ({ url, functionName, lineNumber }) => {
  const where = url.replace(/^.*node_modules\//, "").replace(/^file:\/\//, "");
  return `${functionName || "(anonymous)"} ${where ? `${repositoryPath(where)}:${lineNumber + 1}` : ""}`.trim();
};
