/** A camelCase name in snake_case (`historyLength` → `history_length`), as the wire formats Rudder reads spell their fields. */
export const snakeCase = (name: string): string => name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
