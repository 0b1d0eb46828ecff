import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { FastifyServerOptions } from "fastify";
import { createAuthenticator } from "./auth/authenticator.ts";
import type { RudderConfig } from "./config/config.ts";
import { AssistantCatalog } from "./graphs/assistants.ts";
import { GraphRegistry } from "./graphs/registry.ts";
import { ThreadStateReader } from "./graphs/thread-state.ts";
import { buildApp, type App } from "./http/app.ts";
import { AssistantRepository } from "./storage/assistants.ts";
import { RudderCheckpointSaver } from "./storage/checkpointer.ts";
import { createPgliteDb, createPostgresDb, type Db } from "./storage/db.ts";
import { migrate, migrationStatus } from "./storage/migrate.ts";
import { ThreadRepository } from "./storage/threads.ts";
import { VERSION } from "./version.ts";

/** PostgreSQL when DATABASE_URL is set, else the embedded PGlite database in the data dir. */
export async function openDatabase(config: Pick<RudderConfig, "databaseUrl" | "dataDir">): Promise<Db> {
  if (config.databaseUrl) return createPostgresDb(config.databaseUrl);
  mkdirSync(config.dataDir, { recursive: true });
  return createPgliteDb({ dataDir: join(config.dataDir, "pglite") });
}

/** Raised when the database schema is older than this binary needs. */
export class SchemaOutdatedError extends Error {
  override readonly name = "SchemaOutdatedError";
}

export interface StartOptions {
  readonly config: RudderConfig;
  readonly db: Db;
  /** dev and tests bring the schema up to date; serve refuses to start on an outdated one. */
  readonly schema: "migrate" | "require-current";
  readonly logger?: FastifyServerOptions["logger"];
}

export interface RunningServer {
  readonly app: App;
  readonly url: string;
  close(): Promise<void>;
}

/** Builds every service from the resolved config, then listens. Closing stops the HTTP server only. */
export async function startServer(options: StartOptions): Promise<RunningServer> {
  const { config, db } = options;
  await prepareSchema(db, options.schema);
  const checkpointer = new RudderCheckpointSaver(db);
  const graphs = await GraphRegistry.load(config.graphs, checkpointer);
  const app = await buildApp({
    services: {
      db,
      authenticate: createAuthenticator(config.auth),
      graphs,
      assistants: new AssistantCatalog(new AssistantRepository(db), graphs, config.assistants),
      threads: new ThreadRepository(db),
      threadState: new ThreadStateReader(graphs, checkpointer),
    },
    bodyLimitBytes: config.bodyLimitBytes,
    logger: options.logger ?? { level: config.logLevel },
    version: VERSION,
  });
  await app.listen({ host: config.host, port: config.port });
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : config.port;
  const host = config.host.includes(":") ? `[${config.host}]` : config.host;
  return { app, url: `http://${host}:${port}`, close: () => app.close() };
}

async function prepareSchema(db: Db, mode: StartOptions["schema"]): Promise<void> {
  if (mode === "migrate") {
    await migrate(db);
    return;
  }
  const status = await migrationStatus(db);
  if (status.current < status.latest) {
    throw new SchemaOutdatedError(
      `the database schema is at revision ${status.current} but this server needs ${status.latest}; run \`rudder migrate\` first`,
    );
  }
}
