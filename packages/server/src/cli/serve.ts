import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { acceptedClaimsOf, mintToken } from "../auth/authenticator.ts";
import { ConfigError, resolveConfig, type RudderConfig } from "../config/config.ts";
import { openDatabase, startServer, type RunningServer } from "../server.ts";
import type { Db } from "../storage/db.ts";
import type { CliValues } from "./options.ts";

export async function runDev(values: CliValues): Promise<number> {
  const resolved = resolveConfig(flagsOf(values));
  const secret = resolved.auth.jwtSecret ?? devSecret(resolved.dataDir);
  const config: RudderConfig = { ...resolved, auth: { ...resolved.auth, jwtSecret: secret } };
  applyGraphEnv(config);
  const db = await openDatabase(config);
  // The embedded database is this process's alone: leases in it belong to a process that died.
  const exclusiveDatabase = db.driver === "pglite";
  const server = await startOrClose(db, () =>
    startServer({ config, db, schema: "migrate", worker: {}, exclusiveDatabase, logFormat: "pretty" }),
  );
  const token = await mintToken(secret, {
    tenantId: "default",
    roles: ["admin"],
    subject: "rudder-dev",
    expiresIn: "30d",
    ...acceptedClaimsOf(config.auth),
  });
  process.stdout.write(
    [
      "",
      `  Rudder dev server ready at ${server.url}`,
      `  database: ${config.databaseUrl ? "PostgreSQL (DATABASE_URL)" : `embedded PGlite in ${config.dataDir}`}`,
      `  graphs:   ${config.graphs.map((graph) => graph.graphId).join(", ") || "(none: add a rudder.json)"}`,
      `  cron:     ${server.scheduler ? "schedules fire in this process" : "off (RUDDER_CRON_ENABLED=false): schedules are stored, nothing fires"}`,
      `  API docs: ${server.url}/docs`,
      "",
      "  Dev token (tenant default, role admin, 30 days):",
      `  ${token}`,
      "",
      `  Try: curl -s -X POST ${server.url}/v1/threads -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' -d '{}'`,
      "",
    ].join("\n") + "\n",
  );
  return waitForShutdown(server, db);
}

export async function runServe(values: CliValues): Promise<number> {
  const config = resolveConfig(flagsOf(values));
  const { jwtSecret, jwksFile, jwksUrl, apiKeys } = config.auth;
  if (!jwtSecret && !jwksFile && !jwksUrl && apiKeys.length === 0) {
    throw new ConfigError(
      "no way to authenticate clients: set RUDDER_JWT_SECRET, RUDDER_JWKS_FILE or RUDDER_JWKS_URL, or configure auth.api_keys",
    );
  }
  applyGraphEnv(config);
  const db = await openDatabase(config);
  const withWorker = values["with-worker"] === true;
  const server = await startOrClose(db, () => startServer({ config, db, schema: "require-current", worker: withWorker ? {} : false }));
  process.stdout.write(`rudder serve: listening at ${server.url}${withWorker ? " (with a worker)" : ""}\n`);
  return waitForShutdown(server, db);
}

/** A worker process: claims and executes runs, serves no HTTP. Scale by starting more. */
export async function runWorker(values: CliValues): Promise<number> {
  const config = resolveConfig(flagsOf(values));
  applyGraphEnv(config);
  const db = await openDatabase(config);
  const server = await startOrClose(db, () => startServer({ config, db, schema: "require-current", api: false, worker: {} }));
  const metrics = server.metricsUrl ? `; metrics at ${server.metricsUrl}/metrics` : "";
  const cron = server.scheduler ? "on" : "off (RUDDER_CRON_ENABLED=false)";
  process.stdout.write(
    `rudder worker: ${server.worker?.id} executing up to ${config.workerConcurrency} runs at once; cron executor ${cron}${metrics}\n`,
  );
  return waitForShutdown(server, db);
}

function flagsOf(values: CliValues) {
  const port = values.port === undefined ? undefined : Number(values.port);
  if (port !== undefined && !Number.isInteger(port)) throw new ConfigError(`--port must be a whole number, not "${values.port}"`);
  return {
    config: values.config,
    port,
    host: values.host,
    dataDir: values["data-dir"],
    logFormat: values["log-format"],
    metricsPort: values["metrics-port"],
  };
}

/** The secret the dev server signs its tokens with, kept in the data dir across restarts. */
export function devSecret(dataDir: string): string {
  const path = join(dataDir, "dev-secret");
  if (existsSync(path)) return readFileSync(path, "utf8").trim();
  mkdirSync(dataDir, { recursive: true });
  const secret = randomBytes(32).toString("base64url");
  writeFileSync(path, `${secret}\n`, { mode: 0o600 });
  return secret;
}

/** Graph code reads its settings from process.env; variables already set in the environment win. */
function applyGraphEnv(config: RudderConfig): void {
  for (const [key, value] of Object.entries(config.graphEnv)) process.env[key] ??= value;
}

async function startOrClose(db: Db, start: () => Promise<RunningServer>): Promise<RunningServer> {
  try {
    return await start();
  } catch (error) {
    await db.close();
    throw error;
  }
}

/**
 * Resolves on SIGINT or SIGTERM once the server has stopped and the database is closed: the API
 * stops accepting and finishes what is in flight, the worker claims nothing more and lets running
 * attempts finish within RUDDER_SHUTDOWN_GRACE_MS, then hands the rest back to the queue. A second
 * signal hands them back at once.
 */
function waitForShutdown(server: RunningServer, db: Db): Promise<number> {
  return new Promise((resolve) => {
    let stopping = false;
    const stop = async (signal: NodeJS.Signals) => {
      if (stopping) {
        await server.worker?.stop(0);
        return;
      }
      stopping = true;
      // close() stops the claim loop before its first await, so once this line is out nothing new is claimed.
      const closed = server.close();
      process.stdout.write(`rudder: ${signal} received, stopping (a second signal hands running attempts back at once)\n`);
      await closed;
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      await db.close();
      resolve(0);
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
  });
}
