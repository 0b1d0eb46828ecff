import { Writable } from "node:stream";

/** A log destination that keeps every line written to it (tests read what the server logged). */
export function logLines(): { lines: string[]; destination: Writable } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
      done();
    },
  });
  return { lines, destination };
}
