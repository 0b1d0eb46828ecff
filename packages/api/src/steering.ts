import { Type, type Static } from "typebox";
import { JsonObject, literals, Timestamp, Uuid } from "./common.ts";

export const STEERING_STATUSES = ["pending", "delivered", "consumed", "superseded"] as const;
export const SteeringStatus = literals(STEERING_STATUSES);
export type SteeringStatus = Static<typeof SteeringStatus>;

/** A durable steering row (spec section 2, "Steering event"). */
export const SteeringEvent = Type.Object({
  id: Uuid,
  run_id: Uuid,
  sequence: Type.Integer({ minimum: 1 }),
  kind: Type.String(),
  payload: Type.Unknown(),
  metadata: JsonObject,
  idempotency_key: Type.Union([Type.String(), Type.Null()]),
  status: SteeringStatus,
  source_event_id: Type.Union([Uuid, Type.Null()], { description: "the id the client first received; null until a resume moves the row" }),
  created_at: Timestamp,
});
export type SteeringEvent = Static<typeof SteeringEvent>;

/** The spec's steering request (POST /v1/runs/{run_id}/steer). */
export const SteerBody = Type.Object(
  {
    kind: Type.String({ minLength: 1, maxLength: 256, description: "client-defined, passed through" }),
    payload: Type.Unknown({ description: "any JSON; delivered to graph code unchanged" }),
    metadata: Type.Optional(JsonObject),
    idempotency_key: Type.Optional(Type.String({ minLength: 1, maxLength: 255, description: "the Idempotency-Key header wins" })),
  },
  { additionalProperties: false, required: ["kind", "payload"] },
);
export type SteerBody = Static<typeof SteerBody>;

/** The 202 body of a steer call (spec: id, run_id, sequence, kind, status, created_at). */
export const SteerAccepted = Type.Pick(SteeringEvent, ["id", "run_id", "sequence", "kind", "status", "created_at"]);
export type SteerAccepted = Static<typeof SteerAccepted>;
