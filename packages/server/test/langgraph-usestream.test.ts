import "./support/dom.ts";
import { after, before, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { cleanup, renderHook, waitFor } from "@testing-library/react";
import { Client, type Message } from "@langchain/langgraph-sdk";
import { useStream } from "@langchain/langgraph-sdk/react";
import { TEST_DRIVER } from "./support/db.ts";
import { page } from "./support/dom.ts";
import { startRudderDev, type RudderDev } from "./support/rudder-dev.ts";

const CONFIG = fileURLToPath(new URL("./fixtures/clients.rudder.json", import.meta.url));
const WAIT = { timeout: 60_000, interval: 20 };

/** A browser tab: every request it made ends when it closes, as on a reload. */
class Tab {
  private readonly closed = new AbortController();
  readonly callerOptions = {
    maxRetries: 0,
    fetch: (input: string | URL | Request, init?: RequestInit) =>
      fetch(input, { ...init, signal: init?.signal ? AbortSignal.any([init.signal, this.closed.signal]) : this.closed.signal }),
  };
  close(): void {
    this.closed.abort();
  }
}

type ChatState = { messages: Message[] };
/** What one render of the hook showed. */
interface Frame {
  loading: boolean;
  messages: string[];
}

const text = (message: Message): string =>
  `${message.type}: ${typeof message.content === "string" ? message.content : JSON.stringify(message.content)}`;

/**
 * `useStream` (`@langchain/langgraph-sdk/react`, React 19) rendered headless in happy-dom, against
 * a real `rudder dev` process (PGlite on disk, or PostgreSQL): messages stream token by token from a
 * fake chat model, an interrupt is shown and resumed with `submit({command: {resume}})`, and with
 * `reconnectOnMount` a tab closed mid-run and opened again joins the run and sees it complete.
 */
describe(`useStream against rudder dev on ${TEST_DRIVER}`, () => {
  let server: RudderDev;
  let client: Client;
  let headers: Record<string, string>;
  before(async () => {
    (globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = false;
    server = await startRudderDev(CONFIG);
    headers = { authorization: `Bearer ${server.token}` };
    client = new Client({ apiUrl: server.url, defaultHeaders: headers, callerOptions: { maxRetries: 0 } });
  });
  beforeEach(() => page.sessionStorage.clear());
  after(async () => {
    cleanup();
    await server?.stop();
  });

  function mount(tab: Tab, frames: Frame[], threadId?: string) {
    return renderHook(() => {
      const stream = useStream<ChatState>({
        apiUrl: server.url,
        assistantId: "chat",
        defaultHeaders: headers,
        callerOptions: tab.callerOptions,
        reconnectOnMount: true,
        ...(threadId ? { threadId } : {}),
      });
      frames.push({ loading: stream.isLoading, messages: stream.messages.map(text) });
      return stream;
    });
  }

  test("messages stream token by token; an interrupt is shown and resumed with submit({command: {resume}})", async () => {
    const frames: Frame[] = [];
    const tab = new Tab();
    const { result, unmount } = mount(tab, frames);
    const reply = "ai: You said: hi slowly (turn 1)";
    void result.current.submit({ messages: [{ type: "human", content: "hi slowly" }] });
    await waitFor(() => {
      assert.equal(result.current.isLoading, false);
      assert.deepEqual(result.current.messages.map(text), ["human: hi slowly", reply]);
    }, WAIT);
    // The reply grew on screen: frames showed it partly streamed, with the run still loading.
    const partial = frames.filter(
      (frame) => frame.loading && frame.messages.length === 2 && frame.messages[1]!.length > 4 && frame.messages[1]!.length < reply.length,
    );
    assert.ok(partial.length >= 3, `partial replies seen: ${JSON.stringify(partial.map((frame) => frame.messages[1]))}`);
    for (const frame of partial) assert.ok(reply.startsWith(frame.messages[1]!), frame.messages[1]);
    const threadId = (await client.threads.search({ metadata: { graph_id: "chat" }, limit: 100 })).find(
      (thread) => (thread.values as ChatState).messages?.length === 2,
    )?.thread_id;
    assert.ok(threadId, "the hook created a thread, recorded as the chat graph's");

    void result.current.submit({ messages: [{ type: "human", content: "ask me" }] });
    await waitFor(() => {
      assert.equal(result.current.isLoading, false);
      assert.deepEqual(result.current.interrupt?.value, { question: "Sure?" });
    }, WAIT);
    assert.equal(result.current.messages.map(text).at(-1), "ai: You said: ask me (turn 2)");
    assert.equal((await client.threads.get(threadId)).status, "interrupted");

    void result.current.submit(undefined, { command: { resume: "yes" } });
    await waitFor(() => {
      assert.equal(result.current.isLoading, false);
      assert.equal(result.current.messages.map(text).at(-1), 'ai: Answer: "yes"');
    }, WAIT);
    assert.equal(result.current.interrupt, undefined);
    assert.equal(result.current.error, undefined);
    const state = await client.threads.getState<ChatState>(threadId);
    assert.deepEqual(state.values.messages.map(text), [
      "human: hi slowly",
      reply,
      "human: ask me",
      "ai: You said: ask me (turn 2)",
      'ai: Answer: "yes"',
    ]);
    assert.equal((await client.threads.get(threadId)).status, "idle");
    unmount();
    tab.close();
  });

  test("reconnectOnMount: a tab closed mid-run and opened again joins the run and sees it complete", async () => {
    const thread = await client.threads.create();
    const reply = "ai: You said: tell me slowly (turn 1)";
    const first: Frame[] = [];
    const tab = new Tab();
    const opened = mount(tab, first, thread.thread_id);
    void opened.result.current.submit({ messages: [{ type: "human", content: "tell me slowly" }] });
    await waitFor(() => assert.ok((opened.result.current.messages[1]?.content.length ?? 0) > 3, "a few tokens in"), WAIT);
    const stored = page.sessionStorage.getItem(`lg:stream:${thread.thread_id}`);
    assert.ok(stored, "useStream remembered the run to rejoin");
    tab.close();
    opened.unmount();
    const [run] = await client.runs.list(thread.thread_id);
    assert.equal(run!.run_id, stored);
    assert.equal(run!.status, "running", "the tab left mid-run; the run goes on (on_disconnect: continue)");

    const second: Frame[] = [];
    const reopened = mount(new Tab(), second, thread.thread_id);
    await waitFor(() => {
      assert.equal(reopened.result.current.isLoading, false);
      assert.deepEqual(reopened.result.current.messages.map(text), ["human: tell me slowly", reply]);
    }, WAIT);
    assert.ok(
      second.some((frame) => frame.loading && frame.messages.length === 2 && frame.messages[1] !== reply),
      "the reopened tab showed the run still streaming before it ended",
    );
    assert.equal(page.sessionStorage.getItem(`lg:stream:${thread.thread_id}`), null, "done: nothing left to rejoin");
    assert.equal((await client.runs.get(thread.thread_id, stored)).status, "success");
    reopened.unmount();
  });
});
