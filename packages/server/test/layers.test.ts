import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { ESLint } from "eslint";

/**
 * The layer and cycle rules of eslint.config.js reject what they promise to, and let through
 * what the layers allow (a rule that matched nothing would pass `npm run lint` silently).
 * Each case lints a few lines as if they were a file at that path; nothing is written.
 */
const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const eslint = new ESLint({ cwd: ROOT });

async function ruleIds(path: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: `${ROOT}${path}` });
  return result!.messages.map((message) => message.ruleId ?? message.message);
}

describe("layers and cycles (eslint.config.js)", () => {
  const cases: { name: string; path: string; code: string; rejectedBy: string[] }[] = [
    {
      name: "http/ may not import storage/, not even a type",
      path: "packages/server/src/http/example.ts",
      code: 'import type { Db } from "../storage/db.ts";\nexport type Example = Db;\n',
      rejectedBy: ["import-x/no-restricted-paths"],
    },
    {
      name: "http/ imports services, domain/ and the wire schemas",
      path: "packages/server/src/http/example.ts",
      code: 'import type { Run } from "@rudder/api";\nimport type { RunService } from "../runs/service.ts";\nimport { ApiError } from "../domain/errors.ts";\nexport type Example = [Run, RunService, ApiError];\n',
      rejectedBy: [],
    },
    {
      name: "storage/ may not import a service",
      path: "packages/server/src/storage/example.ts",
      code: 'import type { RunService } from "../runs/service.ts";\nexport type Example = RunService;\n',
      rejectedBy: ["import-x/no-restricted-paths"],
    },
    {
      name: "a service may not import http/",
      path: "packages/server/src/runs/example.ts",
      code: 'import type { AppServices } from "../http/services.ts";\nexport type Example = AppServices;\n',
      rejectedBy: ["import-x/no-restricted-paths"],
    },
    {
      name: "a service imports storage/, domain/ and notify/",
      path: "packages/server/src/scheduler/example.ts",
      code: 'import type { Db } from "../storage/db.ts";\nimport type { Notifier } from "../notify/notifier.ts";\nimport { isTerminal } from "../domain/runs.ts";\nexport type Example = [Db, Notifier, typeof isTerminal];\n',
      rejectedBy: [],
    },
    {
      name: "observability/ may not import storage/ (scrape-time sources are handed to it)",
      path: "packages/server/src/observability/example.ts",
      code: 'import type { Db } from "../storage/db.ts";\nexport type Example = Db;\n',
      rejectedBy: ["import-x/no-restricted-paths"],
    },
    {
      name: "storage/ may not import observability/",
      path: "packages/server/src/storage/example.ts",
      code: 'import type { Metrics } from "../observability/metrics.ts";\nexport type Example = Metrics;\n',
      rejectedBy: ["import-x/no-restricted-paths"],
    },
    {
      name: "services and edges record metrics",
      path: "packages/server/src/http/example.ts",
      code: 'import type { Metrics } from "../observability/metrics.ts";\nexport type Example = Metrics;\n',
      rejectedBy: [],
    },
    {
      name: "domain/ imports nothing of the server and does no I/O",
      path: "packages/server/src/domain/example.ts",
      code: 'import { readFileSync } from "node:fs";\nimport type { Db } from "../storage/db.ts";\nexport type Example = [typeof readFileSync, Db];\n',
      rejectedBy: ["no-restricted-imports", "import-x/no-restricted-paths"],
    },
    {
      name: "@rudder/api imports only typebox (browsers load it)",
      path: "packages/api/src/example.ts",
      code: 'import { randomUUID } from "node:crypto";\nexport const example = randomUUID;\n',
      rejectedBy: ["no-restricted-imports"],
    },
    {
      name: "@rudder/client imports only @rudder/api (browsers, Deno and Bun load it)",
      path: "packages/client/src/example.ts",
      code: 'import { setTimeout } from "node:timers/promises";\nimport type { Run } from "@rudder/api";\nexport type Example = [typeof setTimeout, Run];\n',
      rejectedBy: ["no-restricted-imports"],
    },
    {
      name: "an import cycle, even through a type-only import",
      path: "packages/server/src/storage/db.ts",
      code: 'import type { ClaimedRun } from "./runs.ts";\nexport type Example = ClaimedRun;\n',
      rejectedBy: ["rudder/no-import-cycle"],
    },
  ];
  for (const { name, path, code, rejectedBy } of cases) {
    test(name, async () => {
      assert.deepEqual(await ruleIds(path, code), rejectedBy);
    });
  }
});
