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
