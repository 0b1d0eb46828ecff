/** One event of a `text/event-stream` body (the fields Rudder sends). */
export interface SseFrame {
  readonly id: string | undefined;
  readonly event: string;
  readonly data: string;
}

/**
 * Parses an event stream as the WHATWG format defines it (lines end in LF, CRLF or CR; a blank line
 * dispatches; `:` lines are comments), from a fetch body. Works in Node 20+ and browsers.
 */
export async function* parseEventStream(body: ReadableStream<Uint8Array>): AsyncGenerator<SseFrame, void, undefined> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let id: string | undefined;
  let event = "";
  let data: string[] = [];
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return; // an unterminated last frame is dropped, as a browser would
      buffer += decoder.decode(value, { stream: true });
      for (let end = lineEnd(buffer); end !== -1; end = lineEnd(buffer)) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(buffer[end] === "\r" && buffer[end + 1] === "\n" ? end + 2 : end + 1);
        if (line === "") {
          if (data.length > 0) yield { id, event: event || "message", data: data.join("\n") };
          event = "";
          data = [];
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon === -1 ? line : line.slice(0, colon);
        const text = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "id") id = text;
        else if (field === "event") event = text;
        else if (field === "data") data.push(text);
      }
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => {});
  }
}

/** Where the first line of `buffer` ends, or -1 (a trailing CR may still become CRLF). */
function lineEnd(buffer: string): number {
  for (let i = 0; i < buffer.length; i++) {
    const c = buffer[i];
    if (c === "\n") return i;
    if (c === "\r") return i + 1 < buffer.length ? i : -1;
  }
  return -1;
}
