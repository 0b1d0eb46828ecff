import type { CheckpointSaverTestInitializer } from "@langchain/langgraph-checkpoint-validation";
import { RudderCheckpointSaver } from "../../src/storage/checkpointer.ts";
import { createTestDatabase, TEST_DRIVER, type TestDatabase } from "../support/db.ts";

let database: TestDatabase | undefined;

/**
 * Runs the official LangGraph checkpointer conformance suite against RudderCheckpointSaver on the
 * test driver (PGlite, or PostgreSQL when RUDDER_TEST_DATABASE_URL is set). One migrated database
 * serves the whole run; each checkpointer starts from emptied tables, which is the isolation the
 * suite asks for, without paying for a database per test.
 */
const initializer: CheckpointSaverTestInitializer<RudderCheckpointSaver> = {
  checkpointerName: `RudderCheckpointSaver (${TEST_DRIVER})`,
  beforeAllTimeout: 60_000,
  async beforeAll() {
    database = await createTestDatabase();
  },
  async afterAll() {
    await database?.drop();
  },
  async createCheckpointer() {
    if (!database) throw new Error("beforeAll has not created the test database");
    await database.db.query("truncate checkpoints, checkpoint_writes");
    return new RudderCheckpointSaver(database.db);
  },
};

export default initializer;
