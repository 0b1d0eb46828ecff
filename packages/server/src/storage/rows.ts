/** Row helpers shared by the repositories: the wire uses ISO 8601 UTC strings for timestamps. */
export function iso(value: Date | string): string {
  return new Date(value).toISOString();
}

/** jsonb parameters are sent as text: `pg` would turn a JS array into a PostgreSQL array literal. */
export function json(value: unknown): string {
  return JSON.stringify(value);
}
