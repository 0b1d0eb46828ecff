import { END, START } from "@langchain/langgraph";
import { ApiError } from "../domain/errors.ts";
import type { RunnableGraph } from "./registry.ts";

/** The parts of a compiled StateGraph that describe its input (not public API, so read by shape). */
interface InputDescribed {
  builder?: { _inputDefinition?: unknown };
  _validateInput?: (input: unknown) => Promise<unknown>;
}

/**
 * Checks a run's input against the graph's input schema before the run is accepted: an object
 * whose keys are input channels of the graph, then the graph's own validation (zod or standard
 * schemas validate there). A graph that describes no input schema accepts any input.
 */
export async function validateGraphInput(graph: RunnableGraph, input: unknown): Promise<void> {
  if (input === null || input === undefined) return;
  const described = graph as unknown as InputDescribed;
  const channels = graphInputChannels(graph);
  if (channels) {
    if (typeof input !== "object" || Array.isArray(input)) {
      throw new ApiError("validation_error", "input must be an object of the graph's input channels");
    }
    const unknown = Object.keys(input).filter((key) => !channels.includes(key));
    if (unknown.length > 0 && channels.length > 0) {
      throw new ApiError(
        "validation_error",
        `input has unknown key(s) ${unknown.join(", ")}; the graph's input channels are ${channels.join(", ")}`,
      );
    }
  }
  if (typeof described._validateInput === "function") {
    try {
      await described._validateInput.call(graph, input);
    } catch (error) {
      throw new ApiError("validation_error", `input does not match the graph's input schema: ${(error as Error).message}`);
    }
  }
}

/** The graph's input channels, when it describes them (a StateGraph does); undefined otherwise. */
export function graphInputChannels(graph: RunnableGraph): string[] | undefined {
  const definition = (graph as unknown as InputDescribed).builder?._inputDefinition;
  return definition && typeof definition === "object" && !Array.isArray(definition) ? Object.keys(definition) : undefined;
}

/** The node names a `goto` may take (a graph that lists none takes any): its nodes, and END. */
function gotoTargets(graph: RunnableGraph): string[] | undefined {
  const nodes = (graph as unknown as { nodes?: unknown }).nodes;
  if (typeof nodes !== "object" || nodes === null) return undefined;
  return [...Object.keys(nodes).filter((name) => name !== START), END];
}

/**
 * Checks a command's `goto` against the graph's nodes before the run is accepted: LangGraph
 * ignores a goto that names no node, so the run would quietly do something else (a paused run
 * paused again where it was).
 */
export function validateGoto(graph: RunnableGraph, goto: string | null | undefined, where = "goto"): void {
  if (goto === null || goto === undefined) return;
  const targets = gotoTargets(graph);
  if (targets && !targets.includes(goto)) {
    throw new ApiError("validation_error", `${where} "${goto}" names no node of the graph; its nodes are ${targets.join(", ")}`);
  }
}
