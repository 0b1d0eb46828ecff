import { fileURLToPath } from "node:url";
import { startVitest } from "vitest/node";

/**
 * Runs @langchain/langgraph-checkpoint-validation against RudderCheckpointSaver on the current test
 * driver. Its own `validate-checkpointer` CLI cannot be used: in 1.1.1 the published runner imports a
 * zod schema that the build dropped, so every initializer is rejected before a test runs.
 *
 * One test is excluded: "should only store channel_values that have changed (based on newVersions)"
 * checks the storage layout of savers that keep one blob per channel version. Rudder stores each
 * checkpoint whole, like MemorySaver and the SQLite saver, which the suite itself skips for it.
 */
const EXCLUDED = "should only store channel_values that have changed";

const root = fileURLToPath(new URL("../../../../", import.meta.url));
await startVitest("test", [], {
  root,
  config: false,
  watch: false,
  globals: true,
  include: ["packages/server/test/checkpointer-validation/validation.spec.ts"],
  testNamePattern: new RegExp(`^(?!.*${EXCLUDED})`),
  testTimeout: 30_000,
  hookTimeout: 60_000,
});
