import { MAX_TENANT_ID_LENGTH } from "./limits.ts";
import { textProblem } from "./storable-json.ts";

/**
 * Why a value cannot be a tenant id, or undefined when it can. A tenant id scopes every row, and
 * the database compares it as text, so it must be text the database stores as sent: otherwise
 * two different claims (lone surrogates the driver turns into U+FFFD, or U+FFFD itself, the mark
 * of text already mangled) would name one tenant. Control characters are refused too: they are
 * never part of a real identifier and only serve to confuse logs.
 */
export function tenantIdProblem(value: unknown): string | undefined {
  if (typeof value !== "string" || value === "") return "must be a non-empty string";
  // Characters are code points, as PostgreSQL's char_length counts them (an emoji is one, not two UTF-16 units).
  if (value.length > MAX_TENANT_ID_LENGTH && [...value].length > MAX_TENANT_ID_LENGTH)
    return `is longer than ${MAX_TENANT_ID_LENGTH} characters`;
  const text = textProblem(value);
  if (text) return text;
  if (value.includes("\ufffd")) return "contains U+FFFD (a replacement character: the text was already mangled)";
  if (hasControlCharacter(value)) return "contains a control character";
  return undefined;
}

/** C0 controls, DEL and C1 controls. */
function hasControlCharacter(text: string): boolean {
  for (let index = 0; index < text.length; index++) {
    const unit = text.charCodeAt(index);
    if (unit < 0x20 || (unit >= 0x7f && unit <= 0x9f)) return true;
  }
  return false;
}
