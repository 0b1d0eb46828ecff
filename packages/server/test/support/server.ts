import { fileURLToPath } from "node:url";
import { mintToken } from "../../src/auth/authenticator.ts";
import { resolveConfig, type AuthConfig, type DeclaredAssistant, type RudderConfig } from "../../src/config/config.ts";
import type { Role } from "../../src/domain/roles.ts";
import { startServer, type RunningServer } from "../../src/server.ts";
import type { WorkerOptions } from "../../src/worker/worker.ts";
import type { SchedulerOptions } from "../../src/scheduler/executor.ts";
import type { Notifier } from "../../src/notify/notifier.ts";
import type { Logger } from "pino";
import { createTestDatabase, type TestDatabase } from "./db.ts";

export const TEST_SECRET = "rudder-test-secret-rudder-test-secret";
export const EXAMPLES_CONFIG = fileURLToPath(new URL("../../../../examples/rudder.json", import.meta.url));

export interface TestServer {
  readonly url: string;
  readonly server: RunningServer;
  readonly database: TestDatabase;
  readonly config: RudderConfig;
  /** A token of `tenant` with `roles` (default: tenant "t1", admin). */
  token(tenant?: string, roles?: Role[]): Promise<string>;
  /** fetch against the server with a bearer token for (tenant, roles), JSON in and out. */
  request(method: string, path: string, options?: RequestOptions): Promise<TestResponse>;
  close(): Promise<void>;
}

export interface RequestOptions {
  body?: unknown;
  /** Sent as-is (not JSON-encoded) when a string is wanted, e.g. malformed JSON. */
  rawBody?: string;
  tenant?: string;
  roles?: Role[];
  /** A token to send instead of a minted one; null sends no Authorization header. */
  token?: string | null;
  headers?: Record<string, string>;
}

export interface TestResponse {
  readonly status: number;
  readonly headers: Headers;
  /** Parsed JSON, or undefined for an empty body. Tests read it freely, so it is left untyped. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly body: any;
}

/**
 * A real Rudder server on a free port, over a private database (PGlite in memory, or a fresh
 * PostgreSQL database when RUDDER_TEST_DATABASE_URL is set), with the example graphs.
 */
export async function startTestServer(
  options: {
    configFile?: string;
    assistants?: DeclaredAssistant[];
    auth?: Partial<AuthConfig>;
    database?: TestDatabase;
    /** A worker runs in the server by default (fast polling); false for none. */
    worker?: Partial<WorkerOptions> | false;
    config?: Partial<RudderConfig>;
    /** Replaces the notifier the server would choose (benchmarks drop notices with it). */
    notifier?: Notifier;
    /** The cron executor's options (default: it runs where the worker does, as in production); false for none. */
    scheduler?: Partial<SchedulerOptions> | false;
    /** The clock schedules compute due times from. */
    clock?: () => Date;
    /** The server's logger (default: silent); tests capture log lines with one. */
    logger?: Logger;
  } = {},
): Promise<TestServer> {
  const database = options.database ?? (await createTestDatabase({ migrated: false }));
  const base = resolveConfig({ config: options.configFile ?? EXAMPLES_CONFIG, port: 0 }, {});
  const config: RudderConfig = {
    ...base,
    assistants: [...base.assistants, ...(options.assistants ?? [])],
    auth: { ...base.auth, jwtSecret: TEST_SECRET, ...options.auth },
    streamHeartbeatMs: 250,
    ...options.config,
  };
  const worker = options.worker === false ? false : { pollMs: 200, heartbeatMs: 500, ...options.worker };
  const server: RunningServer = await startServer({
    config,
    db: database.db,
    schema: "migrate",
    logger: options.logger ?? false,
    worker,
    notifier: options.notifier,
    scheduler: options.scheduler,
    clock: options.clock,
  });
  const url = server.url!;
  const token = (tenant = "t1", roles: Role[] = ["admin"]) => mintToken(TEST_SECRET, { tenantId: tenant, roles });
  return {
    url,
    server,
    database,
    config,
    token,
    async request(method, path, requestOptions = {}) {
      const headers: Record<string, string> = { ...requestOptions.headers };
      const bearer = requestOptions.token === undefined ? await token(requestOptions.tenant, requestOptions.roles) : requestOptions.token;
      if (bearer !== null) headers.authorization = `Bearer ${bearer}`;
      let body: string | undefined = requestOptions.rawBody;
      if (requestOptions.body !== undefined) body = JSON.stringify(requestOptions.body);
      if (body !== undefined) headers["content-type"] ??= "application/json";
      const response = await fetch(url + path, { method, headers, body });
      const text = await response.text();
      return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : undefined };
    },
    async close() {
      await server.close();
      await database.drop();
    },
  };
}
