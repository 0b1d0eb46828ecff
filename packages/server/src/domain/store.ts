import { STORE_MAX_ADDRESS_BYTES, STORE_MAX_KEY_LENGTH, STORE_MAX_SEGMENT_LENGTH, STORE_MAX_SEGMENTS, type StoreFilter } from "@rudder/api";
import { ApiError } from "./errors.ts";
import { findJsonFault, textProblem } from "./storable-json.ts";

/**
 * The store's pure rules (DESIGN.md "Store"): namespace paths, filter parsing, TTL, vector
 * arithmetic. The SQL that applies them is in storage/store.ts, the service in store/.
 */

/** Segments joined by "/": the stored `ns_path` (segments never hold "/"). */
export function namespacePath(namespace: readonly string[]): string {
  return namespace.join("/");
}

/** The GET route's `namespace=a/b`: empty or absent is the whole store; an empty segment is refused. */
export function parseNamespaceParam(raw: string | undefined): string[] {
  if (raw === undefined || raw === "") return [];
  const segments = raw.split("/");
  if (segments.some((segment) => segment === "")) {
    throw new ApiError("validation_error", `querystring/namespace "${raw}" has an empty segment (segments are joined by a single /)`);
  }
  if (segments.length > 32) throw new ApiError("validation_error", "querystring/namespace has more than 32 segments");
  return segments;
}

/**
 * The rules the API's schema holds a namespace to (packages/api `Namespace`, `NamespacePrefix`,
 * `NamespacePattern`), for callers no schema checks: graph code, through its run's store. They are
 * not tidiness: segments are stored joined by "/", so a segment holding "/" would alias another
 * namespace (["a/b"] is ["a", "b"]), and an item the API cannot name could never be read or
 * deleted over HTTP. `minSegments` 0: a prefix or a pattern, where `[]` is the whole store.
 */
export function checkNamespace(namespace: unknown, where: string, minSegments: 0 | 1): asserts namespace is string[] {
  if (!Array.isArray(namespace)) throw new ApiError("validation_error", `${where}: a namespace is an array of strings`);
  if (namespace.length < minSegments) throw new ApiError("validation_error", `${where}: a namespace needs at least one segment`);
  if (namespace.length > STORE_MAX_SEGMENTS) {
    throw new ApiError("validation_error", `${where}: a namespace has at most ${STORE_MAX_SEGMENTS} segments`);
  }
  namespace.forEach((segment: unknown, index) => {
    const problem = segmentProblem(segment);
    if (problem) throw new ApiError("validation_error", `${where}/${index}: ${problem}`);
  });
}

function segmentProblem(segment: unknown): string | undefined {
  if (typeof segment !== "string" || segment === "") return "a namespace segment is a non-empty string";
  if (segment.includes("/")) return 'a namespace segment cannot contain "/" (segments are joined by it)';
  if (codePoints(segment) > STORE_MAX_SEGMENT_LENGTH) return `a namespace segment has at most ${STORE_MAX_SEGMENT_LENGTH} characters`;
  return textProblem(segment);
}

/** An item's key, as the API's `StoreKey` has it. */
export function checkKey(key: unknown, where: string): asserts key is string {
  if (typeof key !== "string" || key === "") throw new ApiError("validation_error", `${where}: a key is a non-empty string`);
  if (codePoints(key) > STORE_MAX_KEY_LENGTH) {
    throw new ApiError("validation_error", `${where}: a key has at most ${STORE_MAX_KEY_LENGTH} characters`);
  }
  const problem = textProblem(key);
  if (problem) throw new ApiError("validation_error", `${where}: ${problem}`);
}

/** An item's value, as the API's `JsonObject` has it, and storable (no U+0000, no lone surrogate). */
export function checkValue(value: unknown, where: string): asserts value is Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ApiError("validation_error", `${where}: an item's value is a JSON object`);
  }
  const fault = findJsonFault(value);
  if (fault) throw new ApiError("validation_error", `${where}${fault.path}: ${fault.problem}`);
}

/** An item's address (put, get, delete): its namespace and key by their rules, then together by size. */
export function checkItemAddress(operation: { readonly namespace: unknown; readonly key: unknown }, where: string): void {
  checkNamespace(operation.namespace, `${where}/namespace`, 1);
  checkKey(operation.key, `${where}/key`);
  checkAddressSize(operation.namespace, operation.key, where);
}

/** Characters as JSON Schema's maxLength counts them: code points, not UTF-16 units. */
const codePoints = (text: string): number => {
  let count = 0;
  for (const _ of text) count += 1;
  return count;
};

/** The database indexes namespace and key together: refuse an address too long to index. */
function checkAddressSize(namespace: readonly string[], key: string, where: string): void {
  const bytes = new TextEncoder().encode(namespacePath(namespace)).length + new TextEncoder().encode(key).length;
  if (bytes > STORE_MAX_ADDRESS_BYTES) {
    throw new ApiError(
      "validation_error",
      `${where}: namespace and key together are ${bytes} UTF-8 bytes, more than ${STORE_MAX_ADDRESS_BYTES}`,
    );
  }
}

export const FILTER_OPERATORS = ["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"] as const;
export type FilterOperator = (typeof FILTER_OPERATORS)[number];

/** One condition on a top-level field of an item's value. */
export type FilterCondition =
  | { readonly field: string; readonly op: "$eq" | "$ne"; readonly value: unknown }
  | { readonly field: string; readonly op: "$gt" | "$gte" | "$lt" | "$lte"; readonly value: number | string };

const isOperator = (key: string): key is FilterOperator => (FILTER_OPERATORS as readonly string[]).includes(key);

/**
 * A filter as a list of conditions, all of which must hold. A field's filter value is matched by
 * equality, unless it is an object whose keys all start with "$": then each key is an operator.
 * `$gt $gte $lt $lte` compare numbers with numbers and strings with strings (an item whose field
 * has the other type does not match); `$eq`/`$ne` compare JSON values. `where` names the filter in
 * a 422 (e.g. `body/operations/2/filter`).
 */
export function parseFilter(filter: StoreFilter | undefined, where: string): FilterCondition[] {
  if (filter === undefined) return [];
  const conditions: FilterCondition[] = [];
  for (const [field, expected] of Object.entries(filter)) {
    // The schema's key rule does not survive its JSON Schema form (a record's keys are a pattern).
    if (field === "") throw new ApiError("validation_error", `${where}: a field name must not be empty`);
    const operators = typeof expected === "object" && expected !== null && !Array.isArray(expected) ? Object.keys(expected) : [];
    if (operators.length === 0 || !operators.some((key) => key.startsWith("$"))) {
      conditions.push({ field, op: "$eq", value: expected });
      continue;
    }
    for (const op of operators) {
      if (!isOperator(op)) {
        throw new ApiError("validation_error", `${where}/${field}: unknown operator "${op}" (use ${FILTER_OPERATORS.join(" ")})`);
      }
      const value = (expected as Record<string, unknown>)[op];
      if (op === "$eq" || op === "$ne") {
        conditions.push({ field, op, value });
      } else if (typeof value === "number" || typeof value === "string") {
        conditions.push({ field, op, value });
      } else {
        throw new ApiError("validation_error", `${where}/${field}/${op}: must be a number or a string`);
      }
    }
  }
  return conditions;
}

/** The TTL an item is put with: its own when given (null: none), else the configured default. */
export function effectiveTtl(requested: number | null | undefined, defaultTtl: number | null): number | null {
  return requested === undefined ? defaultTtl : requested;
}

/** Euclidean length of a vector (cosine similarity divides by it). */
export function vectorNorm(vector: readonly number[]): number {
  let sum = 0;
  for (const component of vector) sum += component * component;
  return Math.sqrt(sum);
}

/** An embedder's answer must be one vector of `dims` finite numbers per text. */
export function checkEmbeddings(vectors: unknown, count: number, dims: number): number[][] {
  if (!Array.isArray(vectors) || vectors.length !== count) {
    throw new Error(`the store's embedder returned ${Array.isArray(vectors) ? vectors.length : "no"} vectors for ${count} texts`);
  }
  for (const vector of vectors) {
    if (!Array.isArray(vector) || vector.length !== dims || !vector.every((x) => typeof x === "number" && Number.isFinite(x))) {
      throw new Error(`the store's embedder returned a vector that is not ${dims} finite numbers (store.index.dims)`);
    }
  }
  return vectors as number[][];
}

/**
 * How much of an item's indexed text the index takes, in UTF-8 bytes. PostgreSQL refuses a
 * tsvector over 1 MiB, and a text can need up to about four times its own size there (hyphenated
 * words index as the whole and each part), so a bigger text would make the put fail: the text is
 * cut, at a character, and what lies past the cut is not found by a query (the item is stored whole).
 */
export const STORE_MAX_INDEXED_TEXT_BYTES = 128 * 1024;

/** The part of `text` an index takes: at most STORE_MAX_INDEXED_TEXT_BYTES of UTF-8, whole characters. */
export function indexableText(text: string): string {
  if (text.length * 3 <= STORE_MAX_INDEXED_TEXT_BYTES) return text;
  const { read } = new TextEncoder().encodeInto(text, new Uint8Array(STORE_MAX_INDEXED_TEXT_BYTES));
  return text.slice(0, read);
}

/**
 * The texts at a field path of a value, as LangGraph's InMemoryStore reads them for indexing:
 * "$" is the whole value as JSON; "a.b" a nested field; "a[0]", "a[-1]", "a[*]" array elements;
 * "a.*" every member; "{x,y}" several fields. Strings, numbers and booleans give their text,
 * objects and arrays their JSON. (The `getTextAtPath` that @langchain/langgraph-checkpoint
 * exports is a simpler one that knows neither "$" nor wildcards.)
 */
export function textsAtPath(value: unknown, path: string): string[] {
  if (path === "" || path === "$") return [JSON.stringify(value, null, 2)];
  return extract(value, tokenizeFieldPath(path), 0);
}

function leafText(value: unknown): string[] {
  if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") return [String(value)];
  if (value === null || value === undefined) return [];
  return typeof value === "object" ? [JSON.stringify(value, null, 2)] : [];
}

function extract(value: unknown, tokens: readonly string[], position: number): string[] {
  if (position >= tokens.length) return leafText(value);
  const token = tokens[position]!;
  const texts: string[] = position === 0 && token === "$" ? [JSON.stringify(value, null, 2)] : [];
  if (token.startsWith("[") && token.endsWith("]")) {
    if (!Array.isArray(value)) return [];
    const index = token.slice(1, -1);
    if (index === "*") {
      for (const element of value) texts.push(...extract(element, tokens, position + 1));
    } else {
      let at = Number.parseInt(index, 10);
      if (at < 0) at += value.length;
      if (at >= 0 && at < value.length) texts.push(...extract(value[at], tokens, position + 1));
    }
  } else if (token.startsWith("{") && token.endsWith("}")) {
    if (typeof value !== "object" || value === null) return [];
    for (const field of token
      .slice(1, -1)
      .split(",")
      .map((f) => f.trim())) {
      let current: unknown = value;
      for (const part of tokenizeFieldPath(field)) {
        current =
          typeof current === "object" && current !== null && part in current ? (current as Record<string, unknown>)[part] : undefined;
        if (current === undefined) break;
      }
      if (current !== undefined && current !== null) texts.push(...leafText(current));
    }
  } else if (token === "*") {
    const members = Array.isArray(value) ? value : typeof value === "object" && value !== null ? Object.values(value) : [];
    for (const member of members) texts.push(...extract(member, tokens, position + 1));
  } else if (typeof value === "object" && value !== null && token in value) {
    texts.push(...extract((value as Record<string, unknown>)[token], tokens, position + 1));
  }
  return texts;
}

/** "a.b[0].{x,y}" → ["a", "b", "[0]", "{x,y}"], brackets and braces kept whole. */
export function tokenizeFieldPath(path: string): string[] {
  const tokens: string[] = [];
  let current = "";
  for (let i = 0; i < path.length;) {
    const char = path[i]!;
    if (char === "[" || char === "{") {
      if (current) tokens.push(current);
      current = "";
      const close = char === "[" ? "]" : "}";
      let depth = 1;
      let token = char;
      i += 1;
      while (i < path.length && depth > 0) {
        if (path[i] === char) depth += 1;
        else if (path[i] === close) depth -= 1;
        token += path[i];
        i += 1;
      }
      tokens.push(token);
      continue;
    }
    if (char === ".") {
      if (current) tokens.push(current);
      current = "";
    } else {
      current += char;
    }
    i += 1;
  }
  if (current) tokens.push(current);
  return tokens;
}
