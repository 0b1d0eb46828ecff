/**
 * A small Server-Sent Events client for tests: parses `id:`, `event:` and `data:` fields and `:`
 * comments from a fetch body (per the WHATWG event-stream format: lines end in LF, CRLF or CR, a
 * blank line dispatches, one space after the colon is dropped, data lines join with LF), and
 * reconnects with Last-Event-ID.
 */

export interface SseEvent {
  readonly type: "event";
  /** The last event id in effect when the event was dispatched (ids persist across events). */
  readonly id: string | undefined;
  /** `message` when the frame named no event. */
  readonly event: string;
  readonly data: string;
}

export interface SseComment {
  readonly type: "comment";
  readonly text: string;
}

export type SseItem = SseEvent | SseComment;

/** Parses an event stream into events and comments, in order, until the body ends. */
export async function* parseSse(body: AsyncIterable<Uint8Array>): AsyncGenerator<SseItem> {
  const decoder = new TextDecoder();
  let buffer = "";
  let lastId: string | undefined;
  let event = "";
  let data: string[] = [];
  let hasData = false;

  function* line(text: string): Generator<SseItem> {
    if (text === "") {
      if (hasData) yield { type: "event", id: lastId, event: event || "message", data: data.join("\n") };
      event = "";
      data = [];
      hasData = false;
      return;
    }
    if (text.startsWith(":")) {
      yield { type: "comment", text: text.slice(1).replace(/^ /, "") };
      return;
    }
    const colon = text.indexOf(":");
    const field = colon === -1 ? text : text.slice(0, colon);
    const value = colon === -1 ? "" : text.slice(colon + 1).replace(/^ /, "");
    if (field === "event") event = value;
    else if (field === "data") {
      data.push(value);
      hasData = true;
    } else if (field === "id" && !value.includes("\0")) lastId = value;
    // `retry` and unknown fields are ignored.
  }

  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    for (;;) {
      const end = buffer.search(/\r\n|\r|\n/);
      if (end === -1) break;
      // A lone CR at the very end may be the first half of a CRLF split across chunks: wait for more.
      if (buffer[end] === "\r" && end === buffer.length - 1) break;
      const width = buffer.startsWith("\r\n", end) ? 2 : 1;
      const text = buffer.slice(0, end);
      buffer = buffer.slice(end + width);
      yield* line(text);
    }
  }
  buffer += decoder.decode();
  if (buffer.endsWith("\r")) yield* line(buffer.slice(0, -1));
  // An unterminated last frame is discarded, as a browser would.
}

export interface SseConnection {
  readonly response: Response;
  /** The next event (comments are collected in `comments`), or undefined once the server closed the stream. */
  next(): Promise<SseEvent | undefined>;
  /** Every event until the server closes the stream. */
  rest(): Promise<SseEvent[]>;
  /** The id of the last event received: what a client sends as Last-Event-ID when it reconnects. */
  readonly lastEventId: string | undefined;
  /** Comments received so far (e.g. heartbeats). */
  readonly comments: string[];
  /** True once the server ended the stream (not when `close()` aborted it). */
  readonly ended: boolean;
  /** Aborts the connection from the client side. */
  close(): void;
}

/**
 * Opens `url` as an event stream (GET, Accept text/event-stream) with `headers`, and Last-Event-ID
 * when `lastEventId` is given. Throws unless the server answers 200 with text/event-stream.
 */
export async function openSse(
  url: string,
  options: { headers?: Record<string, string>; lastEventId?: string } = {},
): Promise<SseConnection> {
  const controller = new AbortController();
  const headers: Record<string, string> = { accept: "text/event-stream", ...options.headers };
  if (options.lastEventId !== undefined) headers["last-event-id"] = options.lastEventId;
  const response = await fetch(url, { headers, signal: controller.signal });
  if (response.status !== 200 || !response.headers.get("content-type")?.startsWith("text/event-stream") || !response.body) {
    const text = await response.text().catch(() => "");
    controller.abort();
    throw new Error(`expected an event stream from ${url}, got ${response.status} ${response.headers.get("content-type")}: ${text}`);
  }
  const items = parseSse(response.body as unknown as AsyncIterable<Uint8Array>);
  const comments: string[] = [];
  let lastEventId = options.lastEventId;
  let ended = false;
  const next = async (): Promise<SseEvent | undefined> => {
    for (;;) {
      const item = await items.next();
      if (item.done) {
        ended = true;
        return undefined;
      }
      if (item.value.type === "comment") {
        comments.push(item.value.text);
        continue;
      }
      if (item.value.id !== undefined) lastEventId = item.value.id;
      return item.value;
    }
  };
  return {
    response,
    next,
    async rest() {
      const events: SseEvent[] = [];
      for (let event = await next(); event; event = await next()) events.push(event);
      return events;
    },
    get lastEventId() {
      return lastEventId;
    },
    comments,
    get ended() {
      return ended;
    },
    close() {
      controller.abort();
      void items.return(undefined).catch(() => {});
    },
  };
}
