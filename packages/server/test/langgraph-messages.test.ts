import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import type { Client } from "@langchain/langgraph-sdk";
import { AIMessage, AIMessageChunk, HumanMessage, RemoveMessage, ToolMessage } from "@langchain/core/messages";
import { messageDict, plainMessages } from "../src/domain/langchain-messages.ts";
import { formatSse } from "../src/gateways/langgraph/mapping.ts";
import { collect, lgClient } from "./support/langgraph.ts";
import { startTestServer, type TestServer } from "./support/server.ts";

const TESTING_CONFIG = fileURLToPath(new URL("./fixtures/testing.rudder.json", import.meta.url));

/** What a LangChain message looks like stored in a checkpoint or a run event: its JSON. */
const serialized = (message: object): unknown => JSON.parse(JSON.stringify(message));

describe("LangChain messages as plain dicts (the rule)", () => {
  test("each message class becomes {...kwargs, type} as BaseMessage.toDict() gives", () => {
    const messages = [
      new HumanMessage({ content: "hi", id: "h1" }),
      new AIMessage({ content: "yo", id: "a1", tool_calls: [{ id: "c1", name: "look", args: { q: 1 } }] }),
      new AIMessageChunk({ content: "y", id: "a2" }),
      new ToolMessage({ content: "42", tool_call_id: "c1", id: "t1" }),
      new RemoveMessage({ id: "h1" }),
    ];
    for (const message of messages) {
      const { type, data } = message.toDict();
      assert.deepEqual(messageDict(serialized(message)), serialized({ ...data, type }), message.constructor.name);
      assert.deepEqual(serialized(plainMessages({ live: message })), { live: serialized({ ...data, type }) }, "a live message object too");
    }
  });

  test("messages at any depth are converted; other values are left alone, by reference when nothing changes", () => {
    const values = {
      messages: [serialized(new HumanMessage({ content: "a", id: "1" }))],
      nested: { last: serialized(new AIMessage("b")) },
    };
    assert.deepEqual(plainMessages(values), {
      messages: [{ content: "a", id: "1", type: "human", additional_kwargs: {}, response_metadata: {} }],
      nested: { last: { content: "b", type: "ai", tool_calls: [], invalid_tool_calls: [], additional_kwargs: {}, response_metadata: {} } },
    });
    const plain = { a: [1, { b: "c" }], lc: 1 };
    assert.equal(plainMessages(plain), plain);
    // Not a message: another serialized class, or a constructor without kwargs.
    const prompt = { lc: 1, type: "constructor", id: ["langchain_core", "prompts", "PromptTemplate"], kwargs: {} };
    assert.equal(messageDict(prompt), undefined);
    assert.equal(messageDict({ lc: 1, type: "constructor", id: ["langchain_core", "messages", "AIMessage"] }), undefined);
    assert.equal(messageDict({ lc: 1, type: "constructor", id: ["x", "messages", "MadeUpMessage"], kwargs: {} }), undefined);
    assert.equal(plainMessages(null), null);
  });

  test("SSE data carries plain message dicts", () => {
    const sse = formatSse({ id: "3", event: "values", data: { messages: [serialized(new HumanMessage({ content: "q", id: "h" }))] } });
    assert.equal(
      sse,
      'event: values\ndata: {"messages":[{"content":"q","id":"h","additional_kwargs":{},"response_metadata":{},"type":"human"}]}\nid: 3\n\n',
    );
  });
});

/**
 * Through the SDK, as useStream and agent-chat-ui read them: values, updates, state, history,
 * thread values and wait bodies hold `{type: "ai", content, id, ...}` (the LangGraph.js dev
 * server's form), and a run records `graph_id` / `assistant_id` in its thread's metadata.
 */
describe("LangGraph API: messages and thread metadata as LangGraph clients expect them", () => {
  let server: TestServer;
  let client: Client;
  before(async () => {
    server = await startTestServer({ configFile: TESTING_CONFIG });
    client = await lgClient(server);
  });
  after(() => server.close());

  type Message = { type: string; content: string; id: string };
  const shape = (messages: Message[]) => messages.map(({ type, content }) => ({ type, content }));

  test("values, updates, state, history, thread values and wait bodies hold plain message dicts", async () => {
    const thread = await client.threads.create();
    const parts = await collect(
      client.runs.stream(thread.thread_id, "chat_messages", {
        input: { messages: [{ type: "human", content: "yo" }] },
        streamMode: ["values", "updates", "messages-tuple"],
      }),
    );
    const last = parts.filter((part) => part.event === "values").at(-1)!.data as { messages: Message[] };
    assert.deepEqual(shape(last.messages), [
      { type: "human", content: "yo" },
      { type: "ai", content: "You said: yo (turn 1)" },
    ]);
    for (const message of last.messages) assert.ok(!("lc" in message) && !("kwargs" in message), JSON.stringify(message));
    const [chunk] = parts.find((part) => part.event === "messages")!.data as [Message, unknown];
    assert.equal(chunk.type, "ai");
    assert.equal(chunk.id, last.messages[1]!.id, "the streamed tokens and the final message share the id useStream merges by");
    const update = parts.find((part) => part.event === "updates")!.data as { reply: { messages: Message[] } };
    assert.deepEqual(shape(update.reply.messages), [{ type: "ai", content: "You said: yo (turn 1)" }]);

    const state = await client.threads.getState<{ messages: Message[] }>(thread.thread_id);
    assert.deepEqual(state.values.messages, last.messages);
    const [newest] = await client.threads.getHistory<{ messages: Message[] }>(thread.thread_id, { limit: 1 });
    assert.deepEqual(newest!.values.messages, last.messages);
    const fetched = (await client.threads.get<{ messages: Message[] }>(thread.thread_id)).values;
    assert.deepEqual(fetched.messages, last.messages);
    const [searched] = await client.threads.search<{ messages: Message[] }>({ ids: [thread.thread_id] });
    assert.deepEqual(searched!.values.messages, last.messages);

    const waited = (await client.runs.wait(thread.thread_id, "chat_messages", {
      input: { messages: [{ type: "human", content: "again" }] },
    })) as { messages: Message[] };
    assert.deepEqual(shape(waited.messages).at(-1), { type: "ai", content: "You said: again (turn 2)" });
    assert.equal(waited.messages.length, 4);
  });

  test("runs that stream tokens at the same time each deliver every token, in order", async () => {
    // LangChain runs callbacks in the background by default, one global queue for all runs; a
    // run's graph then ended before its queued tokens were pushed, and they were lost once two
    // runs overlapped. The worker awaits callbacks (worker/langchain-callbacks.ts).
    const said = Array.from({ length: 8 }, (_, index) => `overlap ${index}`);
    const streamed = await Promise.all(
      said.map(async (content) => {
        const parts = await collect(
          client.runs.stream(null, "chat_messages", { input: { messages: [{ type: "human", content }] }, streamMode: "messages-tuple" }),
        );
        return parts
          .filter((part) => part.event === "messages")
          .map((part) => (part.data as [Message, unknown])[0].content)
          .join("");
      }),
    );
    assert.deepEqual(
      streamed,
      said.map((content) => `You said: ${content} (turn 1)`),
    );
  });

  test("a run records graph_id and assistant_id in its thread's metadata; threads are found by them", async () => {
    const thread = await client.threads.create({ metadata: { owner: "ana" } });
    await client.runs.wait(thread.thread_id, "echo-loud", { input: { message: "x" } });
    assert.deepEqual((await client.threads.get(thread.thread_id)).metadata, { owner: "ana", graph_id: "echo", assistant_id: "echo-loud" });
    // The latest run's assistant wins, as on the Platform.
    await client.runs.wait(thread.thread_id, "echo", { input: { message: "y" } });
    assert.deepEqual((await client.threads.get(thread.thread_id)).metadata, { owner: "ana", graph_id: "echo", assistant_id: "echo" });
    const byGraph = await client.threads.search({ metadata: { graph_id: "echo", owner: "ana" } });
    assert.deepEqual(
      byGraph.map((found) => found.thread_id),
      [thread.thread_id],
    );
    // A resume through a command records them too; a refused run (unknown assistant) records nothing.
    const other = await client.threads.create();
    await assert.rejects(client.runs.wait(other.thread_id, "no-such-assistant", { input: {} }));
    assert.deepEqual((await client.threads.get(other.thread_id)).metadata, {});
    await client.runs.wait(other.thread_id, "approval", { input: { request: "deploy" } });
    await client.threads.update(other.thread_id, { metadata: { graph_id: "changed" } });
    await client.runs.wait(other.thread_id, "approval", { command: { resume: { approved: true } } });
    assert.equal((await client.threads.get(other.thread_id)).metadata?.graph_id, "approval");
  });
});
