import { randomUUID } from "node:crypto";
import { Annotation, END, getStore, START, StateGraph, type LangGraphRunnableConfig } from "@langchain/langgraph";

/**
 * Remembers facts about a user across threads, through the store (LangGraph's own store API: on
 * Rudder it is the run's tenant's store, the same data as /v1/store). A message starting with
 * "remember " saves the rest under ["memories", user_id]; every message then recalls the user's
 * memories that match it (ranked by the store: full text, or by meaning with an embedder).
 *
 * Input: {"user_id": "ada", "message": "remember I prefer dark mode"}, then, on any thread,
 * {"user_id": "ada", "message": "which mode do I prefer?"} → recalled: ["I prefer dark mode"].
 */
const MemoryState = Annotation.Root({
  user_id: Annotation<string>(),
  message: Annotation<string>(),
  saved: Annotation<string | null>(),
  recalled: Annotation<string[]>(),
});

export const graph = new StateGraph(MemoryState)
  .addNode("remember", async (state, config: LangGraphRunnableConfig) => {
    const match = /^remember\s+(.+)$/is.exec(state.message ?? "");
    if (!match || !config.store) return { saved: null };
    const text = match[1]!.trim();
    await config.store.put(["memories", state.user_id], randomUUID(), { text, saved_at: new Date().toISOString() });
    return { saved: text };
  })
  .addNode("recall", async (state) => {
    // getStore() is the same store, for code that has no config at hand.
    const store = getStore();
    if (!store) return { recalled: [] };
    const query = (state.message ?? "").replace(/^remember\s+/i, "");
    const hits = await store.search(["memories", state.user_id], { query, limit: 5 });
    return { recalled: hits.map((hit) => String(hit.value.text)) };
  })
  .addEdge(START, "remember")
  .addEdge("remember", "recall")
  .addEdge("recall", END);
