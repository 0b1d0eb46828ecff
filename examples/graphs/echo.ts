import { Annotation, END, START, StateGraph } from "@langchain/langgraph";

/** The smallest useful graph: one node that echoes its input message back. */
const EchoState = Annotation.Root({
  message: Annotation<string>(),
  reply: Annotation<string>(),
});

const EchoContext = Annotation.Root({ suffix: Annotation<string>() });

export const graph = new StateGraph(EchoState, EchoContext)
  .addNode("echo", (state, runtime) => ({ reply: `${state.message ?? ""}${runtime.context?.suffix ?? ""}` }))
  .addEdge(START, "echo")
  .addEdge("echo", END)
  .compile({ name: "echo" });
