/**
 * JSON containment with PostgreSQL's `jsonb @>` semantics, for filters applied in memory (the
 * config-declared assistants) exactly as the database applies them to stored rows.
 */
export function contains(container: unknown, contained: unknown): boolean {
  if (Array.isArray(contained)) {
    return Array.isArray(container) && contained.every((item) => container.some((candidate) => contains(candidate, item)));
  }
  if (typeof contained === "object" && contained !== null) {
    if (typeof container !== "object" || container === null || Array.isArray(container)) return false;
    return Object.entries(contained).every(([key, value]) => contains((container as Record<string, unknown>)[key], value));
  }
  return container === contained;
}
