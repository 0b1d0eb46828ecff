import { mkdirSync, openSync, readFileSync, unlinkSync, writeSync, closeSync } from "node:fs";
import { dirname } from "node:path";

/** Another live process has the embedded database's data dir open. */
export class DataDirInUseError extends Error {
  override readonly name = "DataDirInUseError";
}

/**
 * Takes the data dir of an embedded database for this process: one process at a time may open
 * one (PGlite keeps its own state in memory and writes the files as it alone owned them; a second
 * `rudder dev` on the same dir also ended the first one's leases at start-up). A lock file beside
 * the dir holds the owner's pid; one whose process is gone (killed) is taken over. Returns its release.
 */
export function lockDataDir(dataDir: string): () => void {
  const path = `${dataDir}.lock`;
  mkdirSync(dirname(path), { recursive: true });
  for (let attempt = 0; ; attempt++) {
    try {
      const fd = openSync(path, "wx");
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => unlinkSync(path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST" || attempt > 0) throw error;
      const owner = Number.parseInt(readFileSync(path, "utf8"), 10);
      if (Number.isInteger(owner) && owner !== process.pid && isAlive(owner)) {
        throw new DataDirInUseError(
          `the data dir ${dirname(path)} is in use by process ${owner}: one process at a time may open it (stop that one, or choose another --data-dir)`,
        );
      }
      unlinkSync(path); // its owner is gone (or is this process, reopening): take it over
    }
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"; // alive, another user's
  }
}
