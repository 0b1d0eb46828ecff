import { existsSync, readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { isRole, type Role } from "../domain/roles.ts";
import { tenantIdProblem } from "../domain/tenants.ts";

const KIB = 1024;
const MIB = 1024 * KIB;
const SECOND = 1000;

/** One graph named in the config file: `"id": "./path/to/file.ts:exportName"`. */
export interface GraphSpec {
  readonly graphId: string;
  /** Absolute path of the module. */
  readonly file: string;
  readonly exportName: string;
}

/** The store's embedder module (`store.index.embed`), its vector size and the fields it embeds. */
export interface EmbedderSpec {
  /** Absolute path of the module. */
  readonly file: string;
  readonly exportName: string;
  readonly dims: number;
  readonly fields: readonly string[];
}

/** `store` in the config file (DESIGN.md "Store"). */
export interface StoreConfig {
  readonly index: EmbedderSpec | undefined;
  /** Minutes an item lives when its put names no ttl; null: for ever. */
  readonly defaultTtl: number | null;
  /** get and search restart the TTL of what they return (unless the operation says otherwise). */
  readonly refreshOnRead: boolean;
  /** The TTL sweeper deletes expired items this often. */
  readonly sweepIntervalMinutes: number;
}

/** An assistant declared in the config file (beside the default assistant of every graph). */
export interface DeclaredAssistant {
  readonly assistant_id: string;
  readonly graph_id: string;
  readonly name?: string;
  readonly description?: string;
  readonly config?: Record<string, unknown>;
  readonly context?: Record<string, unknown>;
  readonly metadata?: Record<string, unknown>;
}

/** An API key accepted as a bearer token (or `X-Api-Key`), bound to one tenant and its roles. */
export interface ApiKeySpec {
  /** SHA-256 of the key, hex. Config files should hold the hash, not the key. */
  readonly sha256: string;
  readonly tenantId: string;
  readonly roles: readonly Role[];
}

export interface AuthConfig {
  readonly jwtSecret: string | undefined;
  readonly jwksUrl: string | undefined;
  readonly jwksFile: string | undefined;
  readonly tenantClaim: string;
  readonly rolesClaim: string;
  readonly issuer: string | undefined;
  readonly audience: string | undefined;
  /** Refuse JWTs without `exp` (default true: such a token would be valid for ever). */
  readonly requireExp: boolean;
  readonly apiKeys: readonly ApiKeySpec[];
}

/** Everything a Rudder process needs, resolved once at the edge (defaults < file < env < flags). */
export interface RudderConfig {
  readonly configFile: string | undefined;
  readonly graphs: readonly GraphSpec[];
  readonly assistants: readonly DeclaredAssistant[];
  /** Variables for graph code, from the config file's `env` (an object or a .env path). */
  readonly graphEnv: Readonly<Record<string, string>>;
  readonly databaseUrl: string | undefined;
  readonly dataDir: string;
  /** Where the embedded database (PGlite) executes SQL: a worker thread (default) or the server's thread. */
  readonly pgliteThread: PgliteThreadSetting;
  /** PostgreSQL: connections in this process's pool (RUDDER_DB_POOL_SIZE). */
  readonly dbPoolSize: number;
  /** PostgreSQL: how long a statement waits for a free connection of a full pool before 503 (RUDDER_DB_POOL_WAIT_MS). */
  readonly dbPoolWaitMs: number;
  readonly host: string;
  readonly port: number;
  readonly auth: AuthConfig;
  readonly bodyLimitBytes: number;
  /** A request (headers and body) still arriving after this is answered 408 (RUDDER_REQUEST_TIMEOUT_MS). */
  readonly requestTimeoutMs: number;
  readonly logLevel: string;
  /** json (pino lines) or pretty (readable); undefined: the command's default (dev pretty, else json). */
  readonly logFormat: "json" | "pretty" | undefined;
  /**
   * Port of the metrics listener of a process without the API (`rudder worker`); 0 picks a free
   * port, undefined (the default, "off") serves none: several workers on one host would otherwise
   * fight over one default port. Processes with the API serve /metrics on the API's port.
   */
  readonly metricsPort: number | undefined;
  /** A bearer token that may read /metrics without a tenant's token (for Prometheus). */
  readonly metricsToken: string | undefined;
  /** /ready fails once the notifier's LISTEN connection has been down this long. */
  readonly readyListenGraceMs: number;
  /** Pending runs a tenant may have before creation answers 429 quota_exceeded. */
  readonly queuedRunQuota: number;
  /** Runs one worker process executes at once. */
  readonly workerConcurrency: number;
  /** A worker's lease on a run lasts this long without a heartbeat; a dead worker's runs are reclaimed after it. */
  readonly leaseMs: number;
  /** A worker renews its leases this often (well under leaseMs). */
  readonly heartbeatMs: number;
  /** A worker re-checks the queue this often when no notice arrives. */
  readonly workerPollMs: number;
  /** On SIGTERM a worker lets running attempts finish this long, then hands the rest back to the queue. */
  readonly shutdownGraceMs: number;
  /** A quiet SSE stream gets a heartbeat comment this often. */
  readonly streamHeartbeatMs: number;
  /**
   * Whether the processes that run a worker (`rudder dev`, `rudder worker`) also run the cron
   * executor (`RUDDER_CRON_ENABLED`, default true); when false, schedules are only stored.
   */
  readonly cronEnabled: boolean;
  /** Per-token model prices for max_cost, by model name (`pricing` in the config file). */
  readonly modelPrices: Readonly<Record<string, { input_per_token: number; output_per_token: number }>>;
  /** The long-term store: embedder and TTL (`store` in the config file). */
  readonly store: StoreConfig;
}

export interface ConfigFlags {
  config?: string | undefined;
  logFormat?: string | undefined;
  metricsPort?: string | undefined;
  port?: number | undefined;
  host?: string | undefined;
  dataDir?: string | undefined;
}

/** Thrown when the configuration cannot be used; the CLI prints the message and exits 1. */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

type Env = Readonly<Record<string, string | undefined>>;

export function resolveConfig(flags: ConfigFlags, env: Env = process.env, cwd = process.cwd()): RudderConfig {
  const configFile = findConfigFile(flags.config, cwd);
  const file = configFile ? readConfigFile(configFile) : {};
  const configDir = configFile ? dirname(configFile) : cwd;
  const port = flags.port ?? (env.PORT ? Number(env.PORT) : 2024);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    const given = flags.port !== undefined ? `--port` : `PORT=${JSON.stringify(env.PORT)}`;
    throw new ConfigError(`invalid port from ${given}: a whole number from 0 to 65535`);
  }
  return {
    configFile,
    graphs: parseGraphs(file.graphs, configDir, configFile),
    assistants: parseAssistants(file.assistants, configFile),
    graphEnv: parseGraphEnv(file.env, configDir),
    databaseUrl: nonEmpty(env.DATABASE_URL),
    dataDir: resolve(cwd, flags.dataDir ?? nonEmpty(env.RUDDER_DATA_DIR) ?? ".rudder"),
    pgliteThread: pgliteThread(env),
    dbPoolSize: positiveInteger(env, "RUDDER_DB_POOL_SIZE", DEFAULT_POOL_SIZE),
    dbPoolWaitMs: positiveInteger(env, "RUDDER_DB_POOL_WAIT_MS", DEFAULT_POOL_WAIT_MS),
    host: flags.host ?? nonEmpty(env.HOST) ?? "127.0.0.1",
    port,
    auth: parseAuth(file.auth, env),
    bodyLimitBytes: 1 * MIB,
    requestTimeoutMs: positiveInteger(env, "RUDDER_REQUEST_TIMEOUT_MS", 30 * SECOND),
    logLevel: logLevel(nonEmpty(env.RUDDER_LOG_LEVEL) ?? "info"),
    logFormat: logFormat(flags.logFormat ?? nonEmpty(env.RUDDER_LOG_FORMAT)),
    metricsPort: metricsPort(flags.metricsPort ?? nonEmpty(env.RUDDER_METRICS_PORT) ?? "off"),
    metricsToken: nonEmpty(env.RUDDER_METRICS_TOKEN),
    readyListenGraceMs: nonNegativeInteger(env, "RUDDER_READY_LISTEN_GRACE_MS", 10 * SECOND),
    queuedRunQuota: positiveInteger(env, "RUDDER_QUEUED_RUN_QUOTA", 1000),
    workerConcurrency: positiveInteger(env, "RUDDER_WORKER_CONCURRENCY", 10),
    leaseMs: positiveInteger(env, "RUDDER_LEASE_MS", 30 * SECOND),
    heartbeatMs: positiveInteger(env, "RUDDER_HEARTBEAT_MS", 5 * SECOND),
    workerPollMs: positiveInteger(env, "RUDDER_WORKER_POLL_MS", SECOND),
    shutdownGraceMs: nonNegativeInteger(env, "RUDDER_SHUTDOWN_GRACE_MS", 10 * SECOND),
    streamHeartbeatMs: positiveInteger(env, "RUDDER_STREAM_HEARTBEAT_MS", 15 * SECOND),
    cronEnabled: booleanSetting(env, "RUDDER_CRON_ENABLED") ?? true,
    modelPrices: parsePricing(file.pricing, configFile),
    store: parseStore(file.store, configDir, configFile),
  };
}

/** PostgreSQL pool defaults (docs/configuration.md says how to size the pool). */
export const DEFAULT_POOL_SIZE = 10;
export const DEFAULT_POOL_WAIT_MS = 30_000;

export type PgliteThreadSetting = "worker" | "main";

/** RUDDER_PGLITE_THREAD: `worker` (default) or `main` (docs/database.md, "PGlite on a worker thread"). */
export function pgliteThread(env: Env = process.env): PgliteThreadSetting {
  const raw = nonEmpty(env.RUDDER_PGLITE_THREAD) ?? "worker";
  if (raw === "worker" || raw === "main") return raw;
  throw new ConfigError(`RUDDER_PGLITE_THREAD must be worker or main, not "${raw}"`);
}

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

function logLevel(raw: string): string {
  if (!LOG_LEVELS.includes(raw)) throw new ConfigError(`RUDDER_LOG_LEVEL must be one of ${LOG_LEVELS.join(", ")}, not "${raw}"`);
  return raw;
}

function logFormat(raw: string | undefined): RudderConfig["logFormat"] {
  if (raw === undefined || raw === "json" || raw === "pretty") return raw;
  throw new ConfigError(`the log format (--log-format or RUDDER_LOG_FORMAT) must be json or pretty, not "${raw}"`);
}

/** A port, 0 for a free one, or "off". */
function metricsPort(raw: string): number | undefined {
  if (raw === "off") return undefined;
  const port = Number(raw);
  if (!/^\d+$/.test(raw) || port > 65535)
    throw new ConfigError(`the metrics port (--metrics-port or RUDDER_METRICS_PORT) must be 0 to 65535 or "off", not "${raw}"`);
  return port;
}

interface ConfigFile {
  store?: unknown;
  pricing?: unknown;
  graphs?: unknown;
  env?: unknown;
  assistants?: unknown;
  auth?: unknown;
}

function findConfigFile(explicit: string | undefined, cwd: string): string | undefined {
  if (explicit) {
    const path = resolve(cwd, explicit);
    if (!existsSync(path)) throw new ConfigError(`config file ${path} does not exist`);
    return path;
  }
  return ["rudder.json", "langgraph.json"].map((name) => resolve(cwd, name)).find((path) => existsSync(path));
}

function readConfigFile(path: string): ConfigFile {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new ConfigError(`config file ${path} is not valid JSON: ${(error as Error).message}`);
  }
  if (!isObject(parsed)) throw new ConfigError(`config file ${path} must hold a JSON object`);
  return parsed;
}

function parseGraphs(raw: unknown, configDir: string, configFile: string | undefined): GraphSpec[] {
  if (raw === undefined) return [];
  if (!isObject(raw)) throw new ConfigError(`"graphs" in ${configFile} must be an object of id -> "path:export"`);
  return Object.entries(raw).map(([graphId, target]) => {
    if (typeof target !== "string" || target.length === 0) {
      throw new ConfigError(`graph "${graphId}" in ${configFile} must be a string "path:export"`);
    }
    const colon = target.lastIndexOf(":");
    // A colon that belongs to a Windows drive letter or is absent means "the default export".
    const hasExport = colon > 1;
    const path = hasExport ? target.slice(0, colon) : target;
    return { graphId, file: resolve(configDir, path), exportName: hasExport ? target.slice(colon + 1) : "default" };
  });
}

/** The graph spec's "path:export" split, as `graphs` entries are. */
function splitTarget(target: string, configDir: string): { file: string; exportName: string } {
  const colon = target.lastIndexOf(":");
  // A colon that belongs to a Windows drive letter or is absent means "the default export".
  const hasExport = colon > 1;
  const path = hasExport ? target.slice(0, colon) : target;
  return { file: resolve(configDir, path), exportName: hasExport ? target.slice(colon + 1) : "default" };
}

export const DEFAULT_STORE_CONFIG: StoreConfig = { index: undefined, defaultTtl: null, refreshOnRead: true, sweepIntervalMinutes: 60 };

function parseStore(raw: unknown, configDir: string, configFile: string | undefined): StoreConfig {
  if (raw === undefined) return DEFAULT_STORE_CONFIG;
  if (!isObject(raw)) throw new ConfigError(`"store" in ${configFile} must be an object`);
  let index: EmbedderSpec | undefined;
  if (raw.index !== undefined) {
    const spec = raw.index;
    if (!isObject(spec)) throw new ConfigError(`"store.index" in ${configFile} must be an object {embed, dims, fields?}`);
    if (typeof spec.embed !== "string" || spec.embed === "")
      throw new ConfigError(`"store.index.embed" in ${configFile} must be a string "path:export"`);
    if (typeof spec.dims !== "number" || !Number.isInteger(spec.dims) || spec.dims < 1 || spec.dims > 16000) {
      throw new ConfigError(`"store.index.dims" in ${configFile} must be a whole number from 1 to 16000`);
    }
    const fields = spec.fields ?? ["$"];
    if (!Array.isArray(fields) || fields.length === 0 || !fields.every((field) => typeof field === "string" && field !== "")) {
      throw new ConfigError(`"store.index.fields" in ${configFile} must be a non-empty array of field paths`);
    }
    index = { ...splitTarget(spec.embed, configDir), dims: spec.dims, fields: fields as string[] };
  }
  const ttl = raw.ttl === undefined ? {} : raw.ttl;
  if (!isObject(ttl)) throw new ConfigError(`"store.ttl" in ${configFile} must be an object`);
  const defaultTtl = ttl.default_ttl ?? null;
  if (defaultTtl !== null && (typeof defaultTtl !== "number" || !(defaultTtl > 0))) {
    throw new ConfigError(`"store.ttl.default_ttl" in ${configFile} must be a positive number of minutes or null`);
  }
  const refreshOnRead = ttl.refresh_on_read ?? true;
  if (typeof refreshOnRead !== "boolean") throw new ConfigError(`"store.ttl.refresh_on_read" in ${configFile} must be true or false`);
  const sweep = ttl.sweep_interval_minutes ?? DEFAULT_STORE_CONFIG.sweepIntervalMinutes;
  if (typeof sweep !== "number" || !(sweep > 0))
    throw new ConfigError(`"store.ttl.sweep_interval_minutes" in ${configFile} must be a positive number`);
  return { index, defaultTtl, refreshOnRead, sweepIntervalMinutes: sweep };
}

function parseAssistants(raw: unknown, configFile: string | undefined): DeclaredAssistant[] {
  if (raw === undefined) return [];
  if (!Array.isArray(raw)) throw new ConfigError(`"assistants" in ${configFile} must be an array`);
  return raw.map((entry: unknown, index) => {
    if (!isObject(entry) || typeof entry.assistant_id !== "string" || typeof entry.graph_id !== "string") {
      throw new ConfigError(`assistants[${index}] in ${configFile} needs string "assistant_id" and "graph_id"`);
    }
    return entry as unknown as DeclaredAssistant;
  });
}

function parseGraphEnv(raw: unknown, configDir: string): Record<string, string> {
  if (raw === undefined) return {};
  if (typeof raw === "string") {
    const path = resolve(configDir, raw);
    return existsSync(path) ? parseDotEnv(readFileSync(path, "utf8")) : {};
  }
  if (!isObject(raw)) throw new ConfigError(`"env" must be an object or the path of a .env file`);
  return Object.fromEntries(Object.entries(raw).map(([key, value]) => [key, String(value)]));
}

/** A small .env reader: KEY=value lines, optional quotes, # comments. */
export function parseDotEnv(text: string): Record<string, string> {
  const vars: Record<string, string> = {};
  for (const line of text.split(/\r?\n/)) {
    const match = /^\s*(?:export\s+)?([A-Za-z_][\w.]*)\s*=\s*(.*?)\s*$/.exec(line);
    if (!match?.[1]) continue;
    const value = match[2] ?? "";
    vars[match[1]] = /^(["']).*\1$/.test(value) ? value.slice(1, -1) : value.replace(/\s+#.*$/, "");
  }
  return vars;
}

function parseAuth(raw: unknown, env: Env): AuthConfig {
  const file = isObject(raw) ? raw : {};
  return {
    jwtSecret: nonEmpty(env.RUDDER_JWT_SECRET),
    jwksUrl: nonEmpty(env.RUDDER_JWKS_URL),
    jwksFile: nonEmpty(env.RUDDER_JWKS_FILE),
    tenantClaim: stringOr(file.tenant_claim, "tenant_id"),
    rolesClaim: stringOr(file.roles_claim, "roles"),
    issuer: nonEmpty(env.RUDDER_JWT_ISSUER) ?? optionalString(file.issuer),
    audience: nonEmpty(env.RUDDER_JWT_AUDIENCE) ?? optionalString(file.audience),
    requireExp: booleanSetting(env, "RUDDER_JWT_REQUIRE_EXP") ?? (typeof file.require_exp === "boolean" ? file.require_exp : true),
    apiKeys: parseApiKeys(file.api_keys),
  };
}

function parseApiKeys(raw: unknown): ApiKeySpec[] {
  if (raw === undefined) return [];
  if (!Array.isArray(raw)) throw new ConfigError(`"auth.api_keys" must be an array`);
  return raw.map((entry: unknown, index) => {
    const where = `auth.api_keys[${index}]`;
    if (!isObject(entry)) throw new ConfigError(`${where} must be an object`);
    const sha256 = optionalString(entry.key_sha256)?.toLowerCase();
    if (!sha256 || !/^[0-9a-f]{64}$/.test(sha256)) {
      throw new ConfigError(`${where}.key_sha256 must be the hex SHA-256 of the key`);
    }
    const tenantId = optionalString(entry.tenant_id);
    if (!tenantId) throw new ConfigError(`${where}.tenant_id is required`);
    const tenantProblem = tenantIdProblem(tenantId);
    if (tenantProblem) throw new ConfigError(`${where}.tenant_id ${tenantProblem}`);
    const roles = Array.isArray(entry.roles) ? entry.roles : [];
    const invalid = roles.filter((role) => typeof role !== "string" || !isRole(role));
    if (roles.length === 0 || invalid.length > 0) {
      throw new ConfigError(`${where}.roles must be a non-empty array of viewer, operator, developer, admin`);
    }
    return { sha256, tenantId, roles: roles as Role[] };
  });
}

function parsePricing(raw: unknown, configFile: string | undefined): RudderConfig["modelPrices"] {
  if (raw === undefined) return {};
  if (!isObject(raw)) throw new ConfigError(`"pricing" in ${configFile} must be an object of model name -> prices`);
  return Object.fromEntries(
    Object.entries(raw).map(([model, price]) => {
      const p = isObject(price) ? price : {};
      if (typeof p.input_per_token !== "number" || typeof p.output_per_token !== "number") {
        throw new ConfigError(`pricing["${model}"] in ${configFile} needs numbers input_per_token and output_per_token`);
      }
      return [model, { input_per_token: p.input_per_token, output_per_token: p.output_per_token }];
    }),
  );
}

function positiveInteger(env: Env, name: string, fallback: number): number {
  const raw = nonEmpty(env[name]);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) throw new ConfigError(`${name} must be a positive whole number, not "${raw}"`);
  return value;
}

/** "true"/"1" or "false"/"0"; undefined when unset. */
function booleanSetting(env: Env, name: string): boolean | undefined {
  const raw = nonEmpty(env[name])?.toLowerCase();
  if (raw === undefined) return undefined;
  if (raw === "true" || raw === "1") return true;
  if (raw === "false" || raw === "0") return false;
  throw new ConfigError(`${name} must be true or false, not "${env[name]}"`);
}

function nonNegativeInteger(env: Env, name: string, fallback: number): number {
  const raw = nonEmpty(env[name]);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) throw new ConfigError(`${name} must be a whole number of milliseconds, not "${raw}"`);
  return value;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === "" ? undefined : value;
}

function optionalString(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}

function stringOr(value: unknown, fallback: string): string {
  return optionalString(value) ?? fallback;
}
