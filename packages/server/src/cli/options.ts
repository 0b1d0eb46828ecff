import type { parseArgs } from "node:util";

/** Every flag of every subcommand: `main` parses them once, each subcommand reads its own. */
export const OPTIONS = {
  config: { type: "string" },
  port: { type: "string" },
  host: { type: "string" },
  "data-dir": { type: "string" },
  to: { type: "string" },
  status: { type: "boolean" },
  "with-worker": { type: "boolean" },
  "log-format": { type: "string" },
  "metrics-port": { type: "string" },
  tenant: { type: "string" },
  roles: { type: "string" },
  expires: { type: "string" },
  subject: { type: "string" },
  help: { type: "boolean", short: "h" },
  version: { type: "boolean" },
} as const;

export type CliValues = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>["values"];
