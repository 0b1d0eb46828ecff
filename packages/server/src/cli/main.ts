import { parseArgs } from "node:util";
import { ConfigError } from "../config/config.ts";
import { GraphLoadError } from "../graphs/registry.ts";
import { SchemaOutdatedError } from "../server.ts";
import { ApiError } from "../domain/errors.ts";
import { isConnectionFailure } from "../storage/db.ts";
import { DataDirInUseError } from "../storage/data-dir-lock.ts";
import { MigrationError } from "../storage/migrate.ts";
import { VERSION } from "../version.ts";
import { runDev, runServe, runWorker } from "./serve.ts";
import { runMigrate } from "./migrate.ts";
import { runToken } from "./token.ts";
import { OPTIONS } from "./options.ts";

const USAGE = `rudder ${VERSION}: durable execution server for LangGraph.js agents

Usage:
  rudder dev     [--config FILE] [--port N] [--host H] [--data-dir DIR] [--log-format json|pretty]
                 API on the embedded database (or DATABASE_URL), schema migrated on start,
                 prints a dev token for tenant "default" with role admin.
                 Logs are readable lines by default (--log-format json for pino JSON).
  rudder serve   [--config FILE] [--port N] [--host H] [--with-worker] [--log-format json|pretty]
                 API for production (JSON logs, GET /metrics); refuses an outdated schema.
  rudder worker  [--config FILE] [--metrics-port N|off] [--log-format json|pretty]
                 Claims and executes runs (RUDDER_WORKER_CONCURRENCY at once); serves only
                 GET /metrics, /health and /ready on --metrics-port (default off).
  rudder migrate [--to N] [--status]
                 Apply the forward-only schema migrations (there is no downgrade).
  rudder token   --tenant T --roles r1,r2 [--expires 12h] [--subject S]
                 Mint an HS256 token with RUDDER_JWT_SECRET (or the dev secret in the data dir).

Environment: DATABASE_URL, RUDDER_JWT_SECRET, RUDDER_JWKS_URL, RUDDER_JWKS_FILE, PORT, HOST,
RUDDER_DATA_DIR, RUDDER_LOG_LEVEL, RUDDER_WORKER_CONCURRENCY, RUDDER_QUEUED_RUN_QUOTA,
RUDDER_STREAM_HEARTBEAT_MS, RUDDER_SHUTDOWN_GRACE_MS, RUDDER_JWT_REQUIRE_EXP, RUDDER_LOG_FORMAT,
RUDDER_METRICS_PORT, RUDDER_METRICS_TOKEN, RUDDER_READY_LISTEN_GRACE_MS, RUDDER_REQUEST_TIMEOUT_MS.`;

/** Runs one command and returns the process exit code; expected failures print one clear line. */
export async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (error) {
    process.stderr.write(`rudder: ${(error as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.version) return print(VERSION);
  const command = positionals[0];
  if (values.help || !command) return print(USAGE);
  try {
    switch (command) {
      case "dev":
        return await runDev(values);
      case "serve":
        return await runServe(values);
      case "worker":
        return await runWorker(values);
      case "migrate":
        return await runMigrate(values);
      case "token":
        return await runToken(values);
      default:
        process.stderr.write(`rudder: unknown command "${command}"\n\n${USAGE}\n`);
        return 2;
    }
  } catch (error) {
    if (isExpected(error)) {
      process.stderr.write(`rudder ${command}: ${error.message}\n`);
      return 1;
    }
    const database = databaseProblem(error);
    if (database !== undefined) {
      process.stderr.write(`rudder ${command}: cannot use the database: ${database}\n`);
      return 1;
    }
    throw error;
  }
}

/**
 * What an operator must fix about the database, from a failure to reach or open it (refused,
 * unknown host, no such role or database, a malformed URL), as one line: a stack of pg's
 * internals says no more. Undefined for any other error.
 */
function databaseProblem(error: unknown): string | undefined {
  const failure = error instanceof ApiError && error.cause !== undefined ? error.cause : error;
  if (!(failure instanceof Error)) return undefined;
  const { code } = failure as { code?: unknown };
  const openFailure = typeof code === "string" && (code.startsWith("28") || code === "3D000"); // authorization, no such database
  const malformedUrl = failure instanceof TypeError && /invalid url/i.test(failure.message);
  if (!isConnectionFailure(failure) && !openFailure && !malformedUrl) return undefined;
  return failure.message || (typeof code === "string" ? code : "unreachable");
}

function isExpected(error: unknown): error is Error {
  return [ConfigError, DataDirInUseError, GraphLoadError, MigrationError, SchemaOutdatedError].some((type) => error instanceof type);
}

function print(text: string): number {
  process.stdout.write(`${text}\n`);
  return 0;
}
