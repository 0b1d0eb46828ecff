import { STORE_MAX_ADDRESS_BYTES, type StoreFilter } from "@rudder/api";
import { ApiError } from "./errors.ts";

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

/** The database indexes namespace and key together: refuse an address too long to index. */
export function checkAddressSize(namespace: readonly string[], key: string, where: string): void {
  const bytes = new TextEncoder().encode(namespacePath(namespace)).length + new TextEncoder().encode(key).length;
  if (bytes > STORE_MAX_ADDRESS_BYTES) {
    throw new ApiError("validation_error", `${where}: namespace and key together are ${bytes} UTF-8 bytes, more than ${STORE_MAX_ADDRESS_BYTES}`);
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
