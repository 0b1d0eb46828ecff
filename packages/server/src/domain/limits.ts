/**
 * Input limits the server enforces beyond the wire schemas (those, such as `MAX_INT32` for
 * offsets and `MAX_RUN_TIMEOUT_SECONDS`, are in @rudder/api). docs/operations.md lists them all.
 * Each keeps hostile input from reaching a layer that cannot take it: a stack, a column type.
 */

/** Request bodies (and JSON query parameters) may nest objects and arrays this deep. */
export const MAX_REQUEST_JSON_DEPTH = 128;

/** A tenant id (the token's tenant claim, or an API key's tenant) is at most this many characters. */
export const MAX_TENANT_ID_LENGTH = 128;
