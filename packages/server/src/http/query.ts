import { ApiError } from "../domain/errors.ts";
import { findJsonFault } from "../domain/storable-json.ts";
import { faultError } from "./validation.ts";

/** A query parameter that carries a JSON object (e.g. `metadata={"user":"a"}`), held to the body rules. */
export function parseJsonObjectParam(name: string, raw: string | undefined): Record<string, unknown> | undefined {
  if (raw === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new ApiError("validation_error", `query parameter "${name}" must be a JSON object`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new ApiError("validation_error", `query parameter "${name}" must be a JSON object`);
  }
  const fault = findJsonFault(parsed);
  if (fault) throw faultError("querystring", { path: `/${name}${fault.path}`, problem: fault.problem });
  return parsed as Record<string, unknown>;
}

/**
 * Why a request's query string is not valid percent-encoded UTF-8 (`%ZZ`, a lone surrogate's
 * bytes `%ED%A0%80`, a cut sequence), or undefined. The query parser decodes such bytes
 * leniently, so this is checked on the raw URL, as the router checks the path.
 */
export function queryEncodingProblem(url: string): string | undefined {
  const start = url.indexOf("?");
  if (start < 0 || !url.includes("%", start)) return undefined;
  for (const component of url.slice(start + 1).split(/[&=]/)) {
    if (!component.includes("%")) continue;
    try {
      decodeURIComponent(component);
    } catch {
      const shown = component.length > 40 ? `${component.slice(0, 40)}…` : component;
      return `the query string is not valid percent-encoded UTF-8 (at "${shown}")`;
    }
  }
  return undefined;
}
