/** A camelCase name in snake_case (`historyLength` → `history_length`), as the wire formats Rudder reads spell their fields. */
export const snakeCase = (name: string): string => name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);

/** A UUID in either case: what ids of runs, threads and tasks look like before they reach a `::uuid` cast. */
export const isUuid = (value: string): boolean => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value);
