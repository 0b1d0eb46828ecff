import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";
import ts from "typescript";

/**
 * No import cycles between a package's modules, counting `import type` too. `import-x/no-cycle`
 * skips type-only imports (they vanish at run time), but a type-only cycle is still two modules
 * that cannot be understood, moved or layered apart; every cycle Rudder had was of that kind.
 *
 * The graph is built from each module's import and export declarations (TypeScript's own
 * pre-processor, so no type checking is needed), following relative specifiers only: other
 * packages cannot close a cycle through a workspace package's sources without importing
 * relatively. Files read from disk are cached by modification time.
 */

/** @type {Map<string, { mtimeMs: number; imports: string[] }>} */
const graph = new Map();

function resolveSpecifier(fromFile, specifier) {
  if (!specifier.startsWith(".")) return undefined;
  const base = resolve(dirname(fromFile), specifier);
  for (const candidate of [base, `${base}.ts`, `${base}/index.ts`]) {
    if (existsSync(candidate) && statSync(candidate).isFile()) return candidate;
  }
  return undefined;
}

function importsIn(file, text) {
  const { importedFiles } = ts.preProcessFile(text, true, true);
  return importedFiles.map((entry) => resolveSpecifier(file, entry.fileName)).filter((target) => target !== undefined);
}

function importsOf(file) {
  const mtimeMs = statSync(file).mtimeMs;
  const cached = graph.get(file);
  if (cached?.mtimeMs === mtimeMs) return cached.imports;
  const imports = importsIn(file, readFileSync(file, "utf8"));
  graph.set(file, { mtimeMs, imports });
  return imports;
}

/** The shortest import path from `start` back to `target`, or undefined. */
function pathBack(start, target) {
  const previous = new Map([[start, undefined]]);
  const queue = [start];
  while (queue.length > 0) {
    const file = queue.shift();
    for (const next of importsOf(file)) {
      if (previous.has(next)) continue;
      previous.set(next, file);
      if (next === target) {
        const path = [];
        for (let at = next; at !== undefined; at = previous.get(at)) path.unshift(at);
        return path;
      }
      queue.push(next);
    }
  }
  return undefined;
}

/** @type {import("eslint").Rule.RuleModule} */
export const noImportCycle = {
  meta: {
    type: "problem",
    docs: { description: "Forbid import cycles between modules, type-only imports included" },
    schema: [],
    messages: { cycle: "import cycle: {{path}}" },
  },
  create(context) {
    const file = context.physicalFilename;
    if (!existsSync(file)) return {};
    const check = (node) => {
      if (node.source?.type !== "Literal" || typeof node.source.value !== "string") return;
      const target = resolveSpecifier(file, node.source.value);
      if (target === undefined || target === file) return;
      const path = pathBack(target, file);
      if (!path) return;
      const names = [file, ...path].map((entry) => relative(dirname(file), entry));
      context.report({ node, messageId: "cycle", data: { path: names.join(" → ") } });
    };
    return { ImportDeclaration: check, ExportNamedDeclaration: check, ExportAllDeclaration: check, ImportExpression: check };
  },
};
