import type { SteerAccepted, SteerBody, SteeringEvent } from "@rudder/api";
import { ApiError, notFound } from "../domain/errors.ts";
import { STEERING_MAX_BYTES, steeringAdmission, steeringSize } from "../domain/steering.ts";
import type { Notifier } from "../notify/notifier.ts";
import type { Metrics } from "../observability/metrics.ts";
import type { Db, Transaction } from "../storage/db.ts";
import { findSteeringByKey, insertSteeringEvent, lockRunForSteering, type SteerRequest } from "../storage/steering.ts";

/** Accepting steering: the size rule, the key precedence, the replay rule, then admission by run state. */
export class SteeringService {
  constructor(
    private readonly db: Db,
    private readonly notifier: Notifier,
    private readonly maxBytes = STEERING_MAX_BYTES,
    private readonly metrics?: Metrics,
  ) {}

  async steer(tenantId: string, runId: string, body: SteerBody, headerKey: string | undefined): Promise<SteerAccepted> {
    const size = steeringSize(body.payload, body.metadata);
    if (size > this.maxBytes) {
      throw new ApiError(
        "payload_too_large",
        `steering payload plus metadata is ${size} bytes; the limit is ${this.maxBytes}. Nothing was written.`,
      );
    }
    const request: SteerRequest = {
      kind: body.kind,
      payload: body.payload,
      metadata: body.metadata ?? {},
      // The header wins over the body field when both are sent.
      idempotencyKey: headerKey ?? body.idempotency_key,
    };
    const event = await this.db
      .transaction((tx) => this.accept(tx, tenantId, runId, request))
      .catch(async (error: unknown) => {
        // A concurrent request with the same key committed first: answer as its replay.
        if ((error as { code?: string }).code === "23505" && request.idempotencyKey !== undefined) {
          const existing = await findSteeringByKey(this.db, tenantId, runId, request.idempotencyKey);
          if (existing) return existing;
        }
        throw error;
      });
    return {
      id: event.id,
      run_id: event.run_id,
      sequence: event.sequence,
      kind: event.kind,
      status: event.status,
      created_at: event.created_at,
    };
  }

  /**
   * The spec's order of checks: a known (tenant, run, key) returns the existing row as it is now
   * (a replay never gets a state error); only a new key goes through admission by run state, on
   * the locked run row. The row, its run.steer.accepted event and the wake-up notices commit together.
   */
  private async accept(tx: Transaction, tenantId: string, runId: string, request: SteerRequest): Promise<SteeringEvent> {
    if (request.idempotencyKey !== undefined) {
      const existing = await findSteeringByKey(tx, tenantId, runId, request.idempotencyKey);
      if (existing) return existing;
    }
    const run = await lockRunForSteering(tx, tenantId, runId);
    if (!run) throw notFound("run", runId);
    const admission = steeringAdmission(run);
    if (!admission.admitted) {
      const link = run.superseded_by_run_id ? { fields: { superseded_by_run_id: run.superseded_by_run_id } } : {};
      throw new ApiError(admission.code, admission.detail, link);
    }
    const event = await insertSteeringEvent(tx, tenantId, runId, request);
    await this.notifier.publishWithin(tx, { topic: "steering", runId }, { topic: "run_events", runId });
    const metrics = this.metrics;
    if (metrics) tx.afterCommit(() => metrics.steeringAccepted.inc());
    return event;
  }
}
