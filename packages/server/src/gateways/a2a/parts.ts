import type { Part } from "@a2a-js/sdk";
import { ContentTypeNotSupportedError, RequestMalformedError } from "@a2a-js/sdk/errors";

/**
 * How an A2A message's parts become a graph's input or a resume value, and how a run's output and
 * token chunks become text (DESIGN.md "A2A gateway"). Pure rules: no I/O.
 */

/** Where a message's text goes: the graph's `messages` channel, or a named input field. */
export interface InputTarget {
  readonly messagesChannel: boolean;
  /** `metadata.a2a_text_field` of the assistant, default `input`. */
  readonly textField: string;
}

export const DEFAULT_TEXT_FIELD = "input";

export const textPart = (text: string): Part => ({
  content: { $case: "text", value: text },
  metadata: undefined,
  filename: "",
  mediaType: "text/plain",
});

export const dataPart = (value: Record<string, unknown>): Part => ({
  content: { $case: "data", value },
  metadata: undefined,
  filename: "",
  mediaType: "application/json",
});

/**
 * The graph input a message asks for: object data parts merge into it, in order; the text parts,
 * joined by newlines, become a user message on the `messages` channel or the target's text field.
 */
export function inputFromParts(parts: readonly Part[], target: InputTarget): Record<string, unknown> {
  const { texts, data } = splitParts(parts);
  const input: Record<string, unknown> = {};
  for (const value of data) {
    if (!isObject(value)) throw new RequestMalformedError("a data part must hold a JSON object: its fields merge into the graph's input");
    Object.assign(input, value);
  }
  if (texts.length > 0) {
    const text = texts.join("\n");
    if (target.messagesChannel) {
      const earlier = Array.isArray(input.messages) ? input.messages : [];
      input.messages = [...earlier, { role: "user", content: text }];
    } else {
      input[target.textField] = text;
    }
  }
  return input;
}

/** The value `interrupt()` returns when a message answers it: the first data part's value, else the text. */
export function resumeValueFromParts(parts: readonly Part[]): unknown {
  const { texts, data } = splitParts(parts);
  return data.length > 0 ? data[0] : texts.join("\n");
}

function splitParts(parts: readonly Part[]): { texts: string[]; data: unknown[] } {
  if (parts.length === 0) throw new RequestMalformedError("the message has no parts");
  const texts: string[] = [];
  const data: unknown[] = [];
  for (const part of parts) {
    switch (part.content?.$case) {
      case "text":
        texts.push(part.content.value);
        break;
      case "data":
        data.push(part.content.value);
        break;
      case "raw":
      case "url":
        throw new ContentTypeNotSupportedError("file parts are not supported: send text or data parts");
      default:
        throw new RequestMalformedError("a message part has no content");
    }
  }
  return { texts, data };
}

/** The text of a completed run: its last AI message's content, or the whole output as JSON. */
export function outputText(output: unknown): string {
  const messages = isObject(output) && Array.isArray(output.messages) ? output.messages : [];
  for (let index = messages.length - 1; index >= 0; index--) {
    const content = aiMessageContent(messages[index]);
    if (content !== undefined) return content;
  }
  return JSON.stringify(output ?? null);
}

/** The text of a `messages` event (a chat model's token chunk), when it is an AI message's and not empty. */
export function tokenText(eventData: Record<string, unknown>): string | undefined {
  const text = aiMessageContent(eventData.message);
  return text ? text : undefined;
}

const AI_CLASSES = new Set(["AIMessage", "AIMessageChunk"]);
const AI_TYPES = new Set(["ai", "AIMessageChunk"]);

/**
 * An AI message's content as text, in either form a message takes in Rudder's JSON: LangChain's
 * serialised constructor (`{lc: 1, type: "constructor", id: [..., "AIMessage"], kwargs}`, as
 * state values are stored) or a plain dict (`{type: "ai", content}`, as token chunks are).
 */
function aiMessageContent(message: unknown): string | undefined {
  if (!isObject(message)) return undefined;
  if (message.lc === 1 && Array.isArray(message.id)) {
    const kwargs = isObject(message.kwargs) ? message.kwargs : {};
    return AI_CLASSES.has(String(message.id.at(-1))) ? contentText(kwargs.content) : undefined;
  }
  return AI_TYPES.has(String(message.type)) || message.role === "assistant" ? contentText(message.content) : undefined;
}

/** A message's content: a string, or content blocks whose text blocks are joined. */
function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((block) => (isObject(block) && block.type === "text" && typeof block.text === "string" ? block.text : "")).join("");
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
