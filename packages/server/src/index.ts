export { resolveConfig, type RudderConfig } from "./config/config.ts";
export { createAuthenticator, mintToken, type Principal } from "./auth/authenticator.ts";
export { openDatabase, startServer, type RunningServer } from "./server.ts";
export { createPgliteDb, createPostgresDb, type Db } from "./storage/db.ts";
export { migrate, migrationStatus } from "./storage/migrate.ts";
export { RudderCheckpointSaver } from "./storage/checkpointer.ts";
