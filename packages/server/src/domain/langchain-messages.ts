/**
 * LangChain messages as LangGraph clients read them. A checkpoint or a run event holds a message
 * in LangChain's serialized constructor form (`{lc: 1, type: "constructor", id: [..., "messages",
 * "AIMessage"], kwargs}`); the LangGraph Platform sends it as a plain message dict (`{...kwargs,
 * type: "ai"}`, what `BaseMessage.toDict()` gives), which `useStream` and agent-chat-ui expect.
 * Pure: no I/O.
 */

/** The `type` of each LangChain message class (`BaseMessage._getType()`), chunks as their message. */
const MESSAGE_TYPES: Readonly<Record<string, string>> = {
  HumanMessage: "human",
  HumanMessageChunk: "human",
  AIMessage: "ai",
  AIMessageChunk: "ai",
  SystemMessage: "system",
  SystemMessageChunk: "system",
  ToolMessage: "tool",
  ToolMessageChunk: "tool",
  FunctionMessage: "function",
  FunctionMessageChunk: "function",
  ChatMessage: "generic",
  ChatMessageChunk: "generic",
  RemoveMessage: "remove",
};

type Plain = Record<string, unknown>;

const isPlainObject = (value: unknown): value is Plain => typeof value === "object" && value !== null && !Array.isArray(value);

/** The message dict of a serialized LangChain message, or undefined when `value` is not one. */
export function messageDict(value: unknown): Plain | undefined {
  if (!isPlainObject(value) || value.lc !== 1 || value.type !== "constructor" || !isPlainObject(value.kwargs)) return undefined;
  const id = value.id;
  if (!Array.isArray(id) || id.length < 2 || id[id.length - 2] !== "messages") return undefined;
  const type = MESSAGE_TYPES[String(id[id.length - 1])];
  return type === undefined ? undefined : { ...value.kwargs, type };
}

/**
 * `value` with every serialized LangChain message in it (at any depth) replaced by its message
 * dict (a live message object too, through its `toJSON`); the same reference when there is none, so
 * a value without messages costs a walk, no copy.
 */
export function plainMessages<T>(value: T): T {
  return convert(value) as T;
}

function convert(value: unknown): unknown {
  if (typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      const converted = convert(item);
      if (converted !== item) (copy ??= value.slice())[i] = converted;
    }
    return copy ?? value;
  }
  // A live object (a message read back from a checkpoint) is converted as JSON would see it.
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === "function") {
    const json: unknown = toJSON.call(value);
    return typeof json === "object" && json !== null ? convert(json) : json;
  }
  const dict = messageDict(value);
  if (dict !== undefined) return convert(dict);
  let copy: Plain | undefined;
  for (const [key, item] of Object.entries(value)) {
    const converted = convert(item);
    if (converted !== item) (copy ??= { ...value })[key] = converted;
  }
  return copy ?? value;
}
