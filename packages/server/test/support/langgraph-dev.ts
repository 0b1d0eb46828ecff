import { spawn } from "node:child_process";
import { once } from "node:events";
import { copyFileSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The LangGraph.js dev server's CLI, pinned as a devDependency of @rudder/server (`@langchain/langgraph-cli` 1.5.1). */
const CLI = fileURLToPath(new URL("../../../../node_modules/@langchain/langgraph-cli/dist/cli/cli.mjs", import.meta.url));
const NODE_MODULES = fileURLToPath(new URL("../../../../node_modules", import.meta.url));

export interface LangGraphDev {
  readonly url: string;
  /** What the dev server printed so far (stdout and stderr). */
  output(): string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const probe = createServer();
  probe.listen(0, "127.0.0.1");
  await once(probe, "listening");
  const { port } = probe.address() as AddressInfo;
  probe.close();
  await once(probe, "close");
  return port;
}

/**
 * `langgraphjs dev` (in memory, no reload, no browser, no analytics, no tracing: offline) on a free
 * port, in a temp dir holding a copy of `graphFile` and a langgraph.json naming `graphs` (graph id
 * → export). Resolves once `/ok` answers; rejects with everything the server printed if it exits
 * or does not answer within `timeoutMs` (never skips).
 */
export async function startLangGraphDev(graphFile: string, graphs: Record<string, string>, timeoutMs = 120_000): Promise<LangGraphDev> {
  const dir = mkdtempSync(join(tmpdir(), "langgraph-dev-"));
  copyFileSync(graphFile, join(dir, "graphs.ts"));
  symlinkSync(NODE_MODULES, join(dir, "node_modules"));
  const spec = Object.fromEntries(Object.entries(graphs).map(([id, name]) => [id, `./graphs.ts:${name}`]));
  writeFileSync(join(dir, "langgraph.json"), JSON.stringify({ node_version: "20", graphs: spec, dependencies: ["."] }));
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [CLI, "dev", "--port", String(port), "--host", "127.0.0.1", "--no-browser", "--no-reload", "--config", join(dir, "langgraph.json")],
    {
      cwd: dir,
      // Its own process group: stop() ends the CLI and the server it spawned, nothing else.
      detached: true,
      env: {
        ...process.env,
        LANGGRAPH_CLI_NO_ANALYTICS: "1",
        LANGSMITH_TRACING: "false",
        LANGCHAIN_TRACING_V2: "false",
        BROWSER: "none",
        NO_COLOR: "1",
        FORCE_COLOR: "0",
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let printed = "";
  child.stdout.on("data", (chunk: Buffer) => (printed += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (printed += chunk.toString()));
  const exited = once(child, "exit");
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(-child.pid!, "SIGTERM");
      } catch {
        // already gone
      }
      const late = setTimeout(() => {
        try {
          process.kill(-child.pid!, "SIGKILL");
        } catch {
          // already gone
        }
      }, 5000);
      await exited;
      clearTimeout(late);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) break;
    const ok = await fetch(`${url}/ok`).then(
      (response) => response.ok,
      () => false,
    );
    if (ok) return { url, output: () => printed, stop };
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  await stop();
  throw new Error(`the LangGraph.js dev server did not start (${child.exitCode ?? child.signalCode ?? "timed out"}):\n${printed}`);
}
