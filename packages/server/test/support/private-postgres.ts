import { execFile } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/**
 * A PostgreSQL server of the test's own (initdb into a temporary directory, on a free port), so
 * an outage test can stop and restart it without disturbing the shared server other tests (and
 * other people's suites) use. Binaries: RUDDER_TEST_PG_BIN, else `pg_config --bindir`, else the
 * newest /usr/lib/postgresql/N/bin. PostgreSQL refuses to run as root, so as root it runs as the
 * `postgres` user.
 */
export class PrivatePostgres {
  private constructor(
    private readonly bin: string,
    private readonly dir: string,
    private readonly port: number,
    private readonly asPostgres: boolean,
  ) {}

  /** Connection string of the server's `postgres` database. */
  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  static async create(): Promise<PrivatePostgres> {
    const bin = await findBinaries();
    const asPostgres = process.getuid?.() === 0;
    const dir = mkdtempSync(join(tmpdir(), "rudder-private-pg-"));
    if (asPostgres) {
      const uid = Number((await run("id", ["-u", "postgres"])).stdout.trim());
      const gid = Number((await run("id", ["-g", "postgres"])).stdout.trim());
      chownSync(dir, uid, gid);
    }
    const server = new PrivatePostgres(bin, dir, await freePort(), asPostgres);
    await server.command("initdb", ["-D", server.dataDir, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"]);
    await server.start();
    return server;
  }

  private get dataDir(): string {
    return join(this.dir, "data");
  }

  /** Starts the server and waits until it accepts connections. */
  async start(): Promise<void> {
    const options = `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off`;
    await this.command("pg_ctl", ["-D", this.dataDir, "-o", options, "-l", join(this.dir, "server.log"), "-w", "-t", "60", "start"]);
  }

  /** Stops the server: "immediate" is a crash (no shutdown checkpoint; recovery on start), "fast" ends sessions first. */
  async stop(mode: "fast" | "immediate" = "immediate"): Promise<void> {
    await this.command("pg_ctl", ["-D", this.dataDir, "-m", mode, "-w", "-t", "60", "stop"]);
  }

  /** Stops the server if it runs and removes its files. */
  async destroy(): Promise<void> {
    await this.stop("immediate").catch(() => {});
    rmSync(this.dir, { recursive: true, force: true });
  }

  private async command(name: string, args: string[]): Promise<void> {
    const program = join(this.bin, name);
    const [file, argv] = this.asPostgres ? ["runuser", ["-u", "postgres", "--", program, ...args]] : [program, args];
    await run(file, argv, { cwd: this.dir, timeout: 120_000 });
  }
}

async function findBinaries(): Promise<string> {
  const candidates = [process.env.RUDDER_TEST_PG_BIN];
  try {
    candidates.push((await run("pg_config", ["--bindir"])).stdout.trim());
  } catch {
    // no pg_config on the PATH: look where Debian and Ubuntu install the server
  }
  if (existsSync("/usr/lib/postgresql")) {
    const versions = readdirSync("/usr/lib/postgresql").sort((a, b) => Number(b) - Number(a));
    candidates.push(...versions.map((version) => `/usr/lib/postgresql/${version}/bin`));
  }
  const found = candidates.find((dir) => dir && existsSync(join(dir, "initdb")) && existsSync(join(dir, "pg_ctl")));
  if (!found) throw new Error("no PostgreSQL server binaries (initdb, pg_ctl) found: set RUDDER_TEST_PG_BIN");
  return found;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
