import { Type, type Static, type TSchema } from "typebox";
import { ERROR_CODES } from "../domain/errors.ts";

/** A JSON object with any members (metadata, config, context, values). */
export const JsonObject = Type.Record(Type.String(), Type.Unknown());
export type JsonObject = Static<typeof JsonObject>;

export const Timestamp = Type.String({ format: "date-time" });

export const Problem = Type.Object(
  {
    type: Type.Literal("about:blank"),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    code: Type.Union(Object.keys(ERROR_CODES).map((code) => Type.Literal(code))),
    request_id: Type.String(),
    retryable: Type.Boolean(),
  },
  { $id: "Problem", additionalProperties: true, description: "application/problem+json; unknown codes must be tolerated" },
);

/** `limit` (default 50, max 1000) and `offset`, as every list endpoint takes them. */
export const Pagination = {
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 50 })),
  offset: Type.Optional(Type.Integer({ minimum: 0, default: 0 })),
};

/** The problem answers a route may give, for the OpenAPI document. */
export function problems(...statuses: number[]): Record<number, TSchema> {
  return Object.fromEntries(statuses.map((status) => [status, Type.Ref("Problem")]));
}
