/** A camelCase name in snake_case (`historyLength` → `history_length`), as the wire formats Rudder reads spell their fields. */
export const snakeCase = (name: string): string => name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);

/** The textual form the server writes ids in: lowercase 8-4-4-4-12 hex, nothing around it. */
export const CANONICAL_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const ANY_CASE_UUID = new RegExp(CANONICAL_UUID.source, "i");

/** A UUID in either case: what ids of runs, threads and tasks look like before they reach a `::uuid` cast. */
export const isUuid = (value: string): boolean => ANY_CASE_UUID.test(value);
