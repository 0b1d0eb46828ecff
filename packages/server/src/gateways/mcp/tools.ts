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
 * (shortened so the suffix fits in 128 characters). The order decides who keeps the plain name,
 * so callers pass a stable one (config-declared first, then by creation).
 */
export function assignToolNames<T extends Assistant>(assistants: readonly T[]): { name: string; assistant: T }[] {
  const taken = new Set<string>();
  return assistants.map((assistant) => {
    const base = validName(preferredName(assistant));
    let name = base;
    for (let n = 2; taken.has(name); n++) {
      const suffix = `_${n}`;
      name = `${base.slice(0, MAX_TOOL_NAME_LENGTH - suffix.length)}${suffix}`;
    }
    taken.add(name);
    return { name, assistant };
  });
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
