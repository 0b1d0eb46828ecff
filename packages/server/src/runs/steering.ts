import { ApiError } from "../domain/errors.ts";
import { STEERING_MAX_BYTES, steeringSize } from "../domain/steering.ts";
import type { Notifier } from "../notify/notifier.ts";
import type { SteeringEvent, SteeringRepository } from "../storage/steering.ts";

export interface SteerBody {
  kind: string;
  payload: unknown;
  metadata?: Record<string, unknown>;
  idempotency_key?: string;
}

/** The 202 body of a steer call (spec: id, run_id, sequence, kind, status, created_at). */
export type SteerAnswer = Pick<SteeringEvent, "id" | "run_id" | "sequence" | "kind" | "status" | "created_at">;

/** Accepting steering: the size rule, the key precedence, then storage's admission. */
export class SteeringService {
  constructor(
    private readonly steering: SteeringRepository,
    private readonly notifier: Notifier,
    private readonly maxBytes = STEERING_MAX_BYTES,
  ) {}

  async steer(tenantId: string, runId: string, body: SteerBody, headerKey: string | undefined): Promise<SteerAnswer> {
    const size = steeringSize(body.payload, body.metadata);
    if (size > this.maxBytes) {
      throw new ApiError("payload_too_large", `steering payload plus metadata is ${size} bytes; the limit is ${this.maxBytes}. Nothing was written.`);
    }
    const { event, replayed } = await this.steering.steer(tenantId, runId, {
      kind: body.kind,
      payload: body.payload,
      metadata: body.metadata ?? {},
      // The header wins over the body field when both are sent.
      idempotencyKey: headerKey ?? body.idempotency_key,
    });
    if (!replayed) {
      await this.notifier.publish({ topic: "steering", runId }, { topic: "run_events", runId });
    }
    return { id: event.id, run_id: event.run_id, sequence: event.sequence, kind: event.kind, status: event.status, created_at: event.created_at };
  }
}
