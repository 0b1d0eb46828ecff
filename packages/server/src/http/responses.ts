import { Type, type TSchema } from "typebox";

/** The problem answers a route may give, for the OpenAPI document (the body is the `Problem` schema of @rudder/api). */
export function problems(...statuses: number[]): Record<number, TSchema> {
  return Object.fromEntries(statuses.map((status) => [status, Type.Ref("Problem")]));
}
