import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { fileURLToPath } from "node:url";

export const RUDDER_BIN = fileURLToPath(new URL("../../bin/rudder.js", import.meta.url));

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `rudder ...args` to completion (bounded by `timeoutMs`). */
export function runRudder(args: string[], env: Record<string, string | undefined> = {}, timeoutMs = 60_000): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = startRudder(args, env);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`rudder ${args.join(" ")} did not finish in ${timeoutMs} ms\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * Starts `rudder ...args` as a child process with the test's environment plus `env`; `nodeArgs`
 * go to node itself (flags such as --cpu-prof, which Node 20 refuses in NODE_OPTIONS).
 */
export function startRudder(
  args: string[],
  env: Record<string, string | undefined> = {},
  nodeArgs: readonly string[] = [],
): ChildProcessWithoutNullStreams {
  const merged: Record<string, string | undefined> = { ...process.env, RUDDER_LOG_LEVEL: "warn", ...env };
  for (const key of Object.keys(merged)) if (merged[key] === undefined) delete merged[key];
  return spawn(process.execPath, [...nodeArgs, RUDDER_BIN, ...args], { env: merged as NodeJS.ProcessEnv });
}

/** Resolves with everything printed so far once stdout matches `pattern`. */
export function waitForOutput(child: ChildProcessWithoutNullStreams, pattern: RegExp, timeoutMs = 60_000): Promise<string> {
  return new Promise((resolve, reject) => {
    let stdout = "";
    let stderr = "";
    const timer = setTimeout(() => reject(new Error(`no ${pattern} within ${timeoutMs} ms:\n${stdout}\n${stderr}`)), timeoutMs);
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      if (pattern.test(stdout)) {
        clearTimeout(timer);
        resolve(stdout);
      }
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      reject(new Error(`exited ${code} before printing ${pattern}:\n${stdout}\n${stderr}`));
    });
  });
}
