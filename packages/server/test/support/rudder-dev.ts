import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startRudder, waitForOutput } from "./cli.ts";
import { createTestDatabase, TEST_DRIVER } from "./db.ts";

export interface RudderDev {
  readonly url: string;
  /** The dev token `rudder dev` printed (tenant "default", admin). */
  readonly token: string;
  stop(): Promise<void>;
}

/**
 * `rudder dev --config <configFile>` as a child process on the test's driver: an on-disk PGlite
 * in a temp dir, or a private PostgreSQL database. Resolves once it printed its URL and dev token.
 */
export async function startRudderDev(configFile: string): Promise<RudderDev> {
  const dataDir = mkdtempSync(join(tmpdir(), "rudder-dev-"));
  const database = TEST_DRIVER === "postgres" ? await createTestDatabase({ migrated: false }) : undefined;
  await database?.db.close();
  const env = { DATABASE_URL: database?.url, RUDDER_JWT_SECRET: undefined };
  const child = startRudder(["dev", "--config", configFile, "--port", "0", "--data-dir", dataDir], env);
  const cleanUp = async () => {
    rmSync(dataDir, { recursive: true, force: true });
    await database?.drop();
  };
  try {
    const banner = await waitForOutput(child, /Dev token[^\n]*\n\s+(\S+)\n/, 180_000);
    const url = /ready at (http:\/\/127\.0\.0\.1:\d+)/.exec(banner)?.[1];
    const token = /Dev token[^\n]*\n\s+(\S+)\n/.exec(banner)?.[1];
    if (!url || !token) throw new Error(`rudder dev printed no URL or token:\n${banner}`);
    return {
      url,
      token,
      async stop() {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill("SIGTERM");
          await once(child, "close");
        }
        await cleanUp();
      },
    };
  } catch (error) {
    child.kill("SIGKILL");
    await cleanUp();
    throw error;
  }
}
