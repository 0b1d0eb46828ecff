import { Annotation, END, interrupt, START, StateGraph } from "@langchain/langgraph";

/**
 * Drafts an action, then pauses for a human: `interrupt()` stops the run until it is resumed with
 * `{"approved": true|false}`; the last node records the decision.
 */
const ApprovalState = Annotation.Root({
  request: Annotation<string>(),
  draft: Annotation<string>(),
  approved: Annotation<boolean>(),
  outcome: Annotation<string>(),
});

export const graph = new StateGraph(ApprovalState)
  .addNode("plan", (state) => ({ draft: `Plan for: ${state.request ?? "(nothing)"}` }))
  .addNode("review", (state) => {
    const decision = interrupt<{ question: string; draft: string }, { approved?: boolean }>({
      question: "Approve this plan?",
      draft: state.draft,
    });
    return { approved: decision?.approved === true };
  })
  .addNode("act", (state) => ({ outcome: state.approved ? `done: ${state.draft}` : "rejected" }))
  .addEdge(START, "plan")
  .addEdge("plan", "review")
  .addEdge("review", "act")
  .addEdge("act", END);
