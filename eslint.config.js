import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import js from "@eslint/js";
import importX from "eslint-plugin-import-x";
import tseslint from "typescript-eslint";
import { noImportCycle } from "./lint/no-import-cycle.js";

const SERVER_SRC = "packages/server/src";
/** Paths in this file are relative to it, wherever eslint runs from. */
const ROOT = fileURLToPath(new URL(".", import.meta.url));

/**
 * The server's layers and what each may import besides itself, external packages and
 * `@rudder/api` (docs/architecture.md "Layers" explains them). Entries are folders or files of
 * `packages/server/src`. Anything not listed is forbidden, so a new folder must be placed here.
 */
const SERVICES = ["runs", "threads", "graphs", "worker", "store", "scheduler"];
const SERVICE_IMPORTS = [...SERVICES, "domain", "storage", "notify", "config", "observability"];
const EDGE_IMPORTS = [...SERVICES, "auth", "domain", "config", "notify", "observability"];
const LAYERS = {
  domain: [],
  config: ["domain"],
  // Metrics and the logger: recorded by services and edges; it reads no database itself (the
  // composition root hands it scrape-time sources), so it sits below storage.
  observability: ["domain", "config"],
  auth: ["config", "domain"],
  storage: ["domain", "config"],
  // Notices ride on a transaction: the notifier knows the Transaction seam, nothing else of storage.
  notify: ["domain", "config", "storage/db.ts"],
  ...Object.fromEntries(SERVICES.map((service) => [service, SERVICE_IMPORTS])),
  // The edges speak protocols (HTTP, MCP, A2A) and reach the backend only through services.
  http: [...EDGE_IMPORTS, "gateways"],
  gateways: [...EDGE_IMPORTS, "http"],
};
/** The composition root and the command line build everything; a constant anyone may read. */
const UNRESTRICTED = ["cli", "server.ts", "index.ts", "version.ts"];

const undeclared = readdirSync(`${ROOT}${SERVER_SRC}`).filter((entry) => !(entry in LAYERS) && !UNRESTRICTED.includes(entry));
if (undeclared.length > 0) {
  throw new Error(`${SERVER_SRC}/${undeclared.join(", ")}: in no layer; add to LAYERS in eslint.config.js and to docs/architecture.md`);
}

const layerZones = Object.entries(LAYERS).map(([layer, allowed]) => {
  const others = allowed.filter((entry) => entry !== layer);
  return {
    target: `${SERVER_SRC}/${layer}`,
    from: SERVER_SRC,
    except: [layer, ...others, "version.ts"].map((entry) => `./${entry}`),
    message: `${layer}/ may import ${others.length ? `only ${others.join(", ")}` : "nothing of the server"} (docs/architecture.md, "Layers")`,
  };
});

/** Modules that do I/O or belong to a framework: not in pure rules, not in the wire contract. */
const IMPURE = [
  "node:fs",
  "node:fs/*",
  "node:net",
  "node:http",
  "node:https",
  "node:child_process",
  "pg",
  "@electric-sql/*",
  "fastify",
  "@fastify/*",
  "@langchain/*",
];

export default tseslint.config(
  { ignores: ["**/node_modules/**", "**/.rudder/**", "**/dist/**", ".tmp/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: "readonly",
        console: "readonly",
        URL: "readonly",
        fetch: "readonly",
        Buffer: "readonly",
        TextEncoder: "readonly",
        setTimeout: "readonly",
        clearTimeout: "readonly",
      },
    },
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/no-explicit-any": "error",
    },
  },
  {
    files: ["packages/*/src/**/*.ts"],
    plugins: { "import-x": importX, rudder: { rules: { "no-import-cycle": noImportCycle } } },
    rules: {
      "import-x/no-restricted-paths": ["error", { basePath: ROOT, zones: layerZones }],
      "rudder/no-import-cycle": "error",
    },
  },
  {
    files: [`${SERVER_SRC}/domain/**/*.ts`],
    rules: {
      "no-restricted-imports": ["error", { patterns: [{ group: IMPURE, message: "domain/ holds pure rules: no I/O, no framework" }] }],
    },
  },
  {
    // The wire contract is imported by browsers too (@rudder/client): TypeBox and its own modules only.
    files: ["packages/api/src/**/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        { patterns: [{ regex: "^(?!typebox$|\\./)", message: "@rudder/api may import only typebox (browsers import it)" }] },
      ],
    },
  },
  {
    // The client runs in browsers, Deno and Bun: fetch and web streams, the wire contract, nothing else.
    files: ["packages/client/src/**/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        { patterns: [{ regex: "^(?!@rudder/api$|\\./)", message: "@rudder/client may import only @rudder/api (browsers import it)" }] },
      ],
    },
  },
);
