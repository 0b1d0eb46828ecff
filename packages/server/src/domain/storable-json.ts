/**
 * What PostgreSQL can store, as rules on JSON values. Its text and jsonb types refuse U+0000, and
 * a lone UTF-16 surrogate has no UTF-8 form (the driver would silently turn it into U+FFFD, so
 * different strings would become one); JSON has no Infinity or NaN; and deep nesting exhausts
 * stacks (ours and the database's). Requests are held to these rules at the HTTP edge, graph
 * output in the worker, token claims in the authenticator.
 */

import { MAX_REQUEST_JSON_DEPTH } from "./limits.ts";

/** Where a JSON value breaks a rule (a JSON Pointer, "" for the value itself) and what is wrong. */
export interface JsonFault {
  readonly path: string;
  readonly problem: string;
}

/** Why a string cannot be stored, or undefined when it can. */
export function textProblem(text: string): string | undefined {
  if (text.includes("\u0000")) return "contains U+0000 (NUL), which cannot be stored";
  const lone = LONE_SURROGATE.exec(text);
  if (lone) return `contains a lone surrogate (U+${lone[0].charCodeAt(0).toString(16).toUpperCase()}), which is not valid Unicode text`;
  return undefined;
}

/** Human text (error messages) made storable: NUL and lone surrogates become U+FFFD. */
export function storableText(text: string): string {
  return text.replaceAll("\u0000", "\ufffd").replace(LONE_SURROGATES, "\ufffd");
}

/** A UTF-16 code unit of a surrogate pair without its other half. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, "g");

interface Pending {
  readonly value: unknown;
  readonly depth: number;
  readonly parent: Pending | undefined;
  readonly key: string | undefined;
}

/** The members a JSON request may not have (they could reach an object's prototype), as refusals name them. */
export const PROTOTYPE_MEMBERS = 'a "__proto__" member, or a "constructor" member holding "prototype"';

/** Whether a member of parsed JSON is one of `PROTOTYPE_MEMBERS`. */
const isPrototypeMember = (key: string, value: unknown): boolean =>
  key === "__proto__" || (key === "constructor" && typeof value === "object" && value !== null && Object.hasOwn(value, "prototype"));

/**
 * The first place where a parsed JSON value breaks a storage rule: a string or member name that
 * `textProblem` refuses, a number that is not finite, or nesting deeper than `maxDepth`; with
 * `refusePrototypeMembers`, also one of `PROTOTYPE_MEMBERS` (what Fastify's parser refuses in a
 * REST body, for bodies parsed elsewhere). The walk is iterative, so a hostile value cannot
 * overflow the stack here.
 */
export function findJsonFault(
  value: unknown,
  maxDepth: number = MAX_REQUEST_JSON_DEPTH,
  options: { refusePrototypeMembers?: boolean } = {},
): JsonFault | undefined {
  const stack: Pending[] = [{ value, depth: 0, parent: undefined, key: undefined }];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const current = item.value;
    if (typeof current === "string") {
      const problem = textProblem(current);
      if (problem) return { path: pointerOf(item), problem };
    } else if (typeof current === "number") {
      if (!Number.isFinite(current)) return { path: pointerOf(item), problem: "is not a finite number (JSON numbers must be finite)" };
    } else if (typeof current === "object" && current !== null) {
      const depth = item.depth + 1;
      if (depth > maxDepth) return { path: pointerOf(item), problem: `nests objects and arrays deeper than ${maxDepth} levels` };
      const entries: [string, unknown][] = Array.isArray(current)
        ? current.map((element, index) => [String(index), element])
        : Object.entries(current);
      for (let index = entries.length - 1; index >= 0; index--) {
        const [key, member] = entries[index]!;
        const keyProblem = Array.isArray(current) ? undefined : textProblem(key);
        if (keyProblem) return { path: pointerOf(item), problem: `has a member name that ${keyProblem}` };
        if (options.refusePrototypeMembers && !Array.isArray(current) && isPrototypeMember(key, member))
          return { path: pointerOf(item), problem: `has ${PROTOTYPE_MEMBERS}: these are refused (rename the key)` };
        stack.push({ value: member, depth, parent: item, key });
      }
    }
  }
  return undefined;
}

/** The JSON Pointer (RFC 6901) of a walked value; member names are shown storable. */
function pointerOf(item: Pending): string {
  const keys: string[] = [];
  for (let at: Pending | undefined = item; at?.key !== undefined; at = at.parent) {
    keys.push(storableText(at.key).replaceAll("~", "~0").replaceAll("/", "~1"));
  }
  return keys
    .reverse()
    .map((key) => `/${key}`)
    .join("");
}

/**
 * Where JSON text made by `JSON.stringify` holds something PostgreSQL refuses, or undefined.
 * Stringify writes U+0000 and lone surrogates as `\u` escapes (and paired surrogates as
 * themselves), so an escape that is not itself escaped (an odd run of backslashes) gives them
 * away: a fast test of the text, and only when it hits, a walk of the parsed text to say where.
 */
export function serializedFault(serialized: string): JsonFault | undefined {
  if (!UNSTORABLE_ESCAPE.test(serialized)) return undefined;
  return findJsonFault(JSON.parse(serialized), Number.POSITIVE_INFINITY) ?? { path: "", problem: "holds text that cannot be stored" };
}

/**
 * Graph output the database cannot store (U+0000, a lone surrogate, a value that is not JSON or
 * is nested too deeply to serialise). Not retryable: the same graph would produce it again, so
 * the attempt fails once, with a message that says what and where, instead of failing every
 * write until the run is dead-lettered as if its worker were lost.
 */
export class UnstorableOutputError extends Error {
  override readonly name = "UnstorableOutputError";
  readonly retryable = false;
}

const UNSTORABLE_ESCAPE = /(?:^|[^\\])(?:\\\\)*\\u(?:0000|d[89a-f][0-9a-f]{2})/i;
