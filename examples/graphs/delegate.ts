import { randomUUID } from "node:crypto";
import { Role, TaskState, type Message, type Part, type Task } from "@a2a-js/sdk";
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  createAuthenticatingFetchWithRetry,
  type Client,
} from "@a2a-js/sdk/client";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";

/**
 * An agent that delegates: it hands its task to another agent over A2A (any A2A 1.0 agent, for
 * instance a Rudder assistant behind its gateway) and answers with that agent's answer. The other
 * agent is named by the run's context: `agent_card_url` (its agent card) and `token` (a bearer
 * token for it; else the A2A_TOKEN environment variable). Later turns on the same thread continue
 * the same remote context, so the other agent keeps the conversation too.
 */
const DelegateState = Annotation.Root({
  task: Annotation<string>(),
  answer: Annotation<string>(),
  remote_context_id: Annotation<string>(),
  remote_task_id: Annotation<string>(),
  remote_state: Annotation<string>(),
});

const DelegateContext = Annotation.Root({
  agent_card_url: Annotation<string>(),
  token: Annotation<string>(),
});

export const graph = new StateGraph(DelegateState, DelegateContext)
  .addNode("delegate", async (state, runtime) => {
    const cardUrl = runtime.context?.agent_card_url;
    if (!cardUrl) throw new Error("context.agent_card_url must name the agent to delegate to");
    const client = await connect(cardUrl, runtime.context?.token ?? process.env.A2A_TOKEN);
    // LangGraph's task id is the same when this step runs again after a failure, so is the
    // message id: an agent that dedupes by message id (Rudder's gateway does) answers the repeat
    // with the task the first attempt started instead of starting another.
    const message: Message = {
      messageId: runtime.executionInfo?.taskId ?? randomUUID(),
      contextId: state.remote_context_id ?? "",
      taskId: "",
      role: Role.ROLE_USER,
      parts: [{ content: { $case: "text", value: state.task ?? "" }, metadata: undefined, filename: "", mediaType: "text/plain" }],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    };
    const result = await client.sendMessage(
      { tenant: "", message, configuration: undefined, metadata: undefined },
      { signal: runtime.signal },
    );
    if (!("status" in result)) return { answer: textOf(result.parts), remote_context_id: result.contextId };
    return { answer: answerOf(result), remote_context_id: result.contextId, remote_task_id: result.id, remote_state: stateName(result) };
  })
  .addEdge(START, "delegate")
  .addEdge("delegate", END)
  .compile({ name: "delegate" });

/** An A2A client for the agent whose card is at `cardUrl`, sending `token` as a bearer token. */
async function connect(cardUrl: string, token: string | undefined): Promise<Client> {
  const fetchImpl = token
    ? createAuthenticatingFetchWithRetry(fetch, {
        headers: async () => ({ authorization: `Bearer ${token}` }),
        shouldRetryWithHeaders: async () => undefined,
      })
    : fetch;
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    }),
  );
  // The card URL is complete: no well-known path is appended to it.
  return factory.createFromUrl(cardUrl, "");
}

/** The other agent's answer: the text of its artifacts, else of its status message (a question, an error). */
function answerOf(task: Task): string {
  const artifactText = task.artifacts
    .map((artifact) => textOf(artifact.parts))
    .filter(Boolean)
    .join("\n");
  return artifactText || textOf(task.status?.message?.parts ?? []);
}

function textOf(parts: readonly Part[]): string {
  return parts.map((part) => (part.content?.$case === "text" ? part.content.value : "")).join("");
}

/** `TASK_STATE_COMPLETED`, `TASK_STATE_INPUT_REQUIRED`, … */
function stateName(task: Task): string {
  return TaskState[task.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED];
}
