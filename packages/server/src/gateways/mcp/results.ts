import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { Run } from "@rudder/api";
import { isTerminal } from "../../domain/runs.ts";
import type { JsonSchema } from "../../graphs/schemas.ts";
import { isObject, outputText } from "../a2a/parts.ts";

/**
 * A run's end as an MCP tool result (DESIGN.md "MCP endpoint"), and the output schema that
 * admits every result a tool gives. Pure rules: no I/O.
 */

/** What a tool reports instead of the output when it did not produce one. */
export interface ToolFailure {
  readonly code: string;
  readonly message: string;
  readonly retryable: boolean;
}

/** The structured content of a paused run: its id and what it asks. */
const PAUSED_SCHEMA: JsonSchema = {
  type: "object",
  properties: { status: { const: "paused" }, run_id: { type: "string" }, interrupts: { type: "array" } },
  required: ["status", "run_id", "interrupts"],
};

/** The structured content of a failed call: the run's status (when a run exists) and the error. */
const FAILED_SCHEMA: JsonSchema = {
  type: "object",
  properties: {
    status: { type: "string" },
    run_id: { type: ["string", "null"] },
    error: {
      type: "object",
      properties: { code: { type: "string" }, message: { type: "string" }, retryable: { type: "boolean" } },
      required: ["code", "message"],
    },
  },
  required: ["status", "error"],
};

/**
 * A tool's output schema: the graph's output, or a paused run, or a failure (a client validates
 * every result against it, and the MCP SDK's client refuses a result that does not match). The
 * graph's output is its final state, which holds only the fields that were set: the input schema
 * lets a caller omit any field and a node need not set one, so the output schema requires none
 * (its `required` is dropped at the top level). The types stay: LangGraph checks every value a
 * node writes to a zod or StateSchema state against them.
 */
export function toolOutputSchema(graphOutput: JsonSchema | undefined): JsonSchema | undefined {
  if (!graphOutput) return undefined;
  const { required: _notGuaranteed, ...output } = graphOutput;
  return { type: "object", anyOf: [output, PAUSED_SCHEMA, FAILED_SCHEMA] };
}

/** The result of a run that is terminal or paused. */
export function resultOfRun(run: Run): CallToolResult {
  if (run.status === "succeeded") {
    const output = isObject(run.output) ? run.output : { output: run.output ?? null };
    return { content: [{ type: "text", text: outputText(run.output) }], structuredContent: output, _meta: runMeta(run) };
  }
  if (run.status === "paused") return pausedResult(run);
  const error = run.error ?? {
    code: run.status === "cancelled" ? "run_cancelled" : "run_failed",
    message: `the run ended ${run.status}`,
    retryable: false,
  };
  return failure({ code: error.code, message: error.message, retryable: error.retryable }, run);
}

/** A call that failed, with or without a run; the run "ended" only when it did (a call cut short at shutdown leaves it going on). */
export function failure(error: ToolFailure, run?: Pick<Run, "run_id" | "status">): CallToolResult {
  const where = run ? ` (run ${run.run_id} ${isTerminal(run.status) ? "ended" : "is"} ${run.status})` : "";
  return {
    isError: true,
    content: [{ type: "text", text: `${error.code}: ${error.message}${where}` }],
    structuredContent: {
      status: run?.status ?? "rejected",
      run_id: run?.run_id ?? null,
      error: { code: error.code, message: error.message, retryable: error.retryable },
    },
    ...(run ? { _meta: runMeta(run) } : {}),
  };
}

/** A paused run: what it asks, and how to answer over the HTTP API. */
function pausedResult(run: Run): CallToolResult {
  const interrupts = isObject(run.output) && Array.isArray(run.output.__interrupt__) ? run.output.__interrupt__ : [];
  const asks = interrupts
    .map((interrupt) => JSON.stringify(isObject(interrupt) && "value" in interrupt ? interrupt.value : interrupt))
    .join("; ");
  const text =
    `The run paused and waits for input (run ${run.run_id}). It asks: ${asks || "(no question given)"}. ` +
    `Answer with POST /v1/runs/${run.run_id}/resume and body {"resume": <answer>}; the answer starts a new run ` +
    "(its id is in the response), which you can wait for with GET /v1/runs/<new run id>/join.";
  return {
    content: [{ type: "text", text }],
    structuredContent: { status: "paused", run_id: run.run_id, interrupts },
    _meta: runMeta(run),
  };
}

/** Every result of a run names it, for the HTTP API (`GET /v1/runs/{run_id}`, its events). */
export const RUN_META_KEY = "rudder/run_id";
const runMeta = (run: Pick<Run, "run_id">) => ({ [RUN_META_KEY]: run.run_id });
