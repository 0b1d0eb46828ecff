import { ElicitRequestFormParamsSchema, type ElicitRequest } from "@modelcontextprotocol/sdk/types.js";
import { Ajv } from "ajv";
import addFormats from "ajv-formats";
import type { Run } from "@rudder/api";
import { MAX_REQUEST_JSON_DEPTH } from "../../domain/limits.ts";
import { findJsonFault } from "../../domain/storable-json.ts";
import type { JsonSchema } from "../../graphs/schemas.ts";
import { isObject } from "../a2a/parts.ts";

/**
 * A paused run's question as an MCP elicitation request, and the answer as the run's resume
 * value (docs/mcp.md "Human in the loop"). Pure rules: no I/O.
 *
 * The request's id names the run and how its answer becomes the resume value, because the answer
 * comes back in a new HTTP request, to any process: that process resumes the run from the id
 * alone, and the call that asked (following the run in the database) carries on with the new run.
 */

/** How an answer becomes the resume value: the form's `answer` field, or the whole form. */
export type AnswerMode = "answer" | "content";

const ID_PREFIX = "rudder-elicit:";
const ID = /^rudder-elicit:([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}):(answer|content)$/;

/** A free-text answer, for a question that declares no form of its own. */
const ANSWER_SCHEMA = { type: "object", properties: { answer: { type: "string", title: "Answer" } }, required: ["answer"] } as const;

/** The form-mode elicitation request's params. */
type FormParams = Extract<ElicitRequest["params"], { requestedSchema: unknown }>;

export interface Elicitation {
  readonly id: string;
  readonly params: FormParams;
}

/**
 * The elicitation for a paused run with exactly one interrupt, from its value: a string is the
 * question (a free-text answer resumes the run); an object may give `message` (or `question`) and
 * a `requestedSchema` (a flat object schema, as MCP allows), whose filled-in form is the resume
 * value; any other value (a `requestedSchema` MCP does not allow included) is shown as JSON, with a
 * free-text answer. Undefined for a run paused at several interrupts at once (it is answered over the API).
 */
export function elicitationFor(run: Run): Elicitation | undefined {
  const interrupts = isObject(run.output) && Array.isArray(run.output.__interrupt__) ? run.output.__interrupt__ : [];
  if (interrupts.length !== 1) return undefined;
  const value: unknown = isObject(interrupts[0]) && "value" in interrupts[0] ? interrupts[0].value : interrupts[0];
  const asked = isObject(value)
    ? typeof value.message === "string"
      ? value.message
      : typeof value.question === "string"
        ? value.question
        : undefined
    : undefined;
  const form = isObject(value) && isFormSchema(value.requestedSchema) ? value.requestedSchema : undefined;
  // A value whose requestedSchema is no form MCP allows is any other value: shown as JSON (the user sees what it asks for).
  const unusable = isObject(value) && value.requestedSchema !== undefined && !form;
  const message = typeof value === "string" ? value : !unusable && asked !== undefined ? asked : JSON.stringify(value);
  const mode: AnswerMode = form ? "content" : "answer";
  return {
    id: `${ID_PREFIX}${run.run_id}:${mode}`,
    params: { message, requestedSchema: (form ?? ANSWER_SCHEMA) as FormParams["requestedSchema"] },
  };
}

/** The run and answer mode an elicitation id names; undefined for any other id. */
export function parseElicitationId(id: unknown): { runId: string; mode: AnswerMode } | undefined {
  const match = typeof id === "string" ? ID.exec(id) : null;
  return match ? { runId: match[1]!, mode: match[2] as AnswerMode } : undefined;
}

/** The resume value of an accepted answer; undefined when the user declined, dismissed, or the client failed. */
export function resumeValueOf(mode: AnswerMode, result: unknown): { value: unknown } | undefined {
  if (!isObject(result) || result.action !== "accept") return undefined;
  const content = isObject(result.content) ? result.content : {};
  return { value: mode === "answer" ? (content.answer ?? null) : content };
}

/**
 * Why an accepted answer's resume value cannot resume a run, or undefined: a free-text question's
 * answer is the string its form requires (ANSWER_SCHEMA; without it the run would resume with
 * null), and every answer keeps the storage rules every input follows (no U+0000, no lone
 * surrogates, finite numbers) and the nesting limit as `POST /v1/runs/{id}/resume` has it (its
 * body, `{"resume": <value>}`, is one level more).
 */
export function answerProblem(mode: AnswerMode, value: unknown): string | undefined {
  if (mode === "answer" && typeof value !== "string") return "result.content/answer must be a string: the question asked for one";
  const fault = findJsonFault(value, MAX_REQUEST_JSON_DEPTH - 1);
  return fault && `result.content${mode === "answer" ? "/answer" : ""}${fault.path} ${fault.problem}`;
}

/**
 * The form's own answers: formats as MCP's string fields name them (email, uri, date, date-time).
 * Each check compiles the form and forgets it (Ajv would otherwise keep every form it saw: a
 * run's form is read afresh each time, so it is never the same object twice).
 */
const formAjv = new Ajv({ strict: false, allErrors: false, validateSchema: false });
addFormats.default(formAjv);

/**
 * Why an accepted answer does not fill in the form the question asked for, or undefined (as the
 * MCP SDK's own server checks a form's answer before it returns it). A form that does not compile
 * is the graph's to fix, not the user's: its answer is held to the storage rules alone.
 */
export function formProblem(asked: Elicitation, content: unknown): string | undefined {
  const schema = asked.params.requestedSchema;
  try {
    const validate = formAjv.compile(schema);
    if (validate(content)) return undefined;
    const error = validate.errors?.[0];
    return `result.content${error?.instancePath ?? ""} ${error?.message ?? "does not match the form"}: the form the question asked for is not filled in`;
  } catch {
    return undefined;
  } finally {
    // Forgotten whether it compiled or not: Ajv caches a schema before compiling it.
    formAjv.removeSchema(schema);
  }
}

/**
 * Whether a `requestedSchema` is a form MCP allows: an object schema whose properties are each a
 * primitive (string, number, integer, boolean, enum), checked with the SDK's own schema, which a
 * client checks an `elicitation/create` request with. Any other schema (nested objects, arrays)
 * would be refused by the client, and the refusal would cancel the run: the question is asked as
 * JSON with a free-text answer instead.
 */
function isFormSchema(schema: unknown): schema is JsonSchema {
  return ElicitRequestFormParamsSchema.shape.requestedSchema.safeParse(schema).success;
}
