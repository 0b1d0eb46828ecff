import { Type, type Static, type TLiteral, type TUnion } from "typebox";

/** A JSON object with any members (metadata, config, context, values). */
export const JsonObject = Type.Record(Type.String(), Type.Unknown());
export type JsonObject = Static<typeof JsonObject>;

/** ISO 8601 UTC, as every timestamp on the wire. */
export const Timestamp = Type.String({ format: "date-time" });
export type Timestamp = Static<typeof Timestamp>;

export const Uuid = Type.String({ format: "uuid" });

/**
 * `offset`, an event list's `after` and `Last-Event-ID` are at most this: run event sequences are
 * 32-bit integers, so nothing lies beyond it, and a larger value would overflow the column's type.
 */
export const MAX_INT32 = 2_147_483_647;

/** `limit` (default 50, max 1000) and `offset`, as every list endpoint takes them: spread into a query schema. */
export const Pagination = {
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 50 })),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_INT32, default: 0 })),
};

/**
 * The query of a route that takes no query parameters: any parameter is a 422 (DESIGN.md "Status
 * codes": an unknown field in the query is a schema violation like one in the body).
 */
export const NoQuery = Type.Object({}, { additionalProperties: false });
export type NoQuery = Static<typeof NoQuery>;

/** A position in a run's event log (`after`, `Last-Event-ID`): 0 is before the first event. */
export const EventCursor = (options: { description?: string } = {}) => Type.Integer({ minimum: 0, maximum: MAX_INT32, ...options });

/** The literal schemas of a constant list, as a tuple (TypeBox derives a union's static type from a tuple). */
type Literals<T extends readonly string[]> = { -readonly [K in keyof T]: TLiteral<T[K]> };

/** A union of string literals from a constant list, so the list stays the one place a value is named. */
export function literals<const T extends readonly string[]>(values: T): TUnion<Literals<T>> {
  return Type.Union(values.map((value) => Type.Literal(value))) as TUnion<Literals<T>>;
}
