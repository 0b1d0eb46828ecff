import { createHash } from "node:crypto";
import type { Assistant } from "@rudder/api";

/**
 * How assistants become MCP tools (DESIGN.md "MCP endpoint"): which are exposed, their names, and
 * the cursors of `tools/list`. Pure rules: no I/O.
 */

/** MCP's tool-name rule: 1 to 128 of these characters. */
const NAME_CHARACTER = /^[A-Za-z0-9_.-]$/;
export const MAX_TOOL_NAME_LENGTH = 128;

/** An assistant is a tool when its `metadata.mcp_expose` is exactly `true`. */
export const isExposed = (assistant: Assistant): boolean => assistant.metadata.mcp_expose === true;

/**
 * The name an assistant asks for: `metadata.mcp_tool_name`, else `metadata.name`, else its
 * `name`, else its id (the first non-empty string of these).
 */
export function preferredName(assistant: Assistant): string {
  const candidates = [assistant.metadata.mcp_tool_name, assistant.metadata.name, assistant.name, assistant.assistant_id];
  return (
    candidates.find((candidate): candidate is string => typeof candidate === "string" && candidate.length > 0) ?? assistant.assistant_id
  );
}

/** A name made valid for MCP: each character outside `[A-Za-z0-9_.-]` becomes `_`, at most 128 characters. */
export function validName(name: string): string {
  const valid = [...name].map((character) => (NAME_CHARACTER.test(character) ? character : "_")).join("");
  return (valid || "_").slice(0, MAX_TOOL_NAME_LENGTH);
}

/**
 * Unique valid names for assistants in the given order: a name already taken gets `_2`, `_3`…
 * (shortened so the suffix fits in 128 characters). The order decides who keeps the plain name:
 * for the config file's assistants, which change only with the file, in file order.
 */
export function assignToolNames<T extends Assistant>(
  assistants: readonly T[],
  taken = new Set<string>(),
): { name: string; assistant: T }[] {
  return assistants.map((assistant) => {
    const name = freeName(validName(preferredName(assistant)), taken);
    taken.add(name);
    return { name, assistant };
  });
}

function freeName(base: string, taken: ReadonlySet<string>): string {
  let name = base;
  for (let n = 2; taken.has(name); n++) {
    const suffix = `_${n}`;
    name = `${base.slice(0, MAX_TOOL_NAME_LENGTH - suffix.length)}${suffix}`;
  }
  return name;
}

/**
 * Names for the config file's assistants (`declared`, in file order, as `assignToolNames` gives
 * them) and a tenant's own (`stored`), such that a name never passes to another assistant while
 * its holder is a tool under it. Nothing is stored, so who asked for a name first is known only
 * from the assistants themselves:
 *
 * - the config file's names come first: a tenant's assistant never takes one;
 * - a tenant's assistant whose name no other asks for has it;
 * - of several asking for one name, the oldest has it when it has not been changed since the
 *   next-oldest was created (so it was a tool under that name before the others existed, and a
 *   new assistant never renames it); each of the others is named `<name>_<tag>`, the tag being
 *   the first 8 hex digits of the SHA-256 of its assistant id, which names that assistant only;
 * - when the oldest has been changed since (it may have been exposed or renamed after another
 *   already had the name), none has the plain name: each is named with its tag. A client calling
 *   the plain name then gets `Unknown tool`, never another agent.
 *
 * Two names that still clash (a tagged name some other assistant asks for as it is) get `_2`,
 * `_3`… in order of creation.
 */
export function toolNamesOf<T extends Assistant>(declared: readonly T[], stored: readonly T[]): { name: string; assistant: T }[] {
  const taken = new Set<string>();
  const named = assignToolNames(declared, taken);
  const byCreation = [...stored].sort(byCreationTime);
  const groups = new Map<string, T[]>();
  for (const assistant of byCreation) {
    const base = validName(preferredName(assistant));
    groups.set(base, [...(groups.get(base) ?? []), assistant]);
  }
  const wanted = new Map<T, string>();
  for (const [base, group] of groups) {
    const [oldest, nextOldest] = group;
    const oldestKeeps = !taken.has(base) && (nextOldest === undefined || oldest!.updated_at <= nextOldest.created_at);
    for (const assistant of group) wanted.set(assistant, oldestKeeps && assistant === oldest ? base : taggedName(base, assistant));
  }
  for (const assistant of byCreation) {
    const name = freeName(wanted.get(assistant)!, taken);
    taken.add(name);
    named.push({ name, assistant });
  }
  return named;
}

/** `<name>_<tag>`: the tag is the first 8 hex digits of the SHA-256 of the assistant id (the name shortened so it fits). */
export function taggedName(base: string, assistant: Assistant): string {
  const tag = createHash("sha256").update(assistant.assistant_id).digest("hex").slice(0, 8);
  return `${base.slice(0, MAX_TOOL_NAME_LENGTH - tag.length - 1)}_${tag}`;
}

function byCreationTime(a: Assistant, b: Assistant): number {
  if (a.created_at !== b.created_at) return a.created_at < b.created_at ? -1 : 1;
  return a.assistant_id < b.assistant_id ? -1 : a.assistant_id > b.assistant_id ? 1 : 0;
}

/** Cursors are opaque to clients; here they carry the offset of the next page. */
export function encodeCursor(offset: number): string {
  return Buffer.from(`tools:${offset}`).toString("base64url");
}

/** The offset a cursor names; undefined for a cursor this server did not give. */
export function decodeCursor(cursor: string | undefined): number | undefined {
  if (cursor === undefined || cursor === "") return 0;
  const match = /^tools:(\d{1,9})$/.exec(Buffer.from(cursor, "base64url").toString());
  return match ? Number(match[1]) : undefined;
}
