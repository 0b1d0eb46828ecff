import { isTerminal, LEASED_STATUSES, type RunStatus } from "./runs.ts";

/** Steering payload plus metadata, serialised, may take at most this many bytes (DESIGN.md). */
export const STEERING_MAX_BYTES = 32 * 1024;

/** The spec's size rule: UTF-8 bytes of JSON(payload) plus JSON(metadata ?? {}). */
export function steeringSize(payload: unknown, metadata: Record<string, unknown> | undefined): number {
  return Buffer.byteLength(JSON.stringify(payload) ?? "null", "utf8") + Buffer.byteLength(JSON.stringify(metadata ?? {}), "utf8");
}

/** What steering admission looks at (spec section 4, "Admission by run state"). */
export interface SteeringAdmissionFacts {
  readonly run_id: string;
  readonly status: RunStatus;
  readonly steering_closed: boolean;
  readonly superseded_by_run_id: string | null;
}

export type SteeringAdmission = { readonly admitted: true } | { readonly admitted: false; readonly code: "run_superseded" | "run_terminal" | "run_finalizing"; readonly detail: string };

/**
 * The spec's admission table for a steer with a new key, one row per case, checked in order (a
 * replay of a known key never gets here: spec rule 1). The first matching row decides.
 */
export const STEERING_ADMISSION_TABLE: readonly {
  readonly when: string;
  readonly applies: (run: SteeringAdmissionFacts) => boolean;
  readonly refuse?: { code: "run_superseded" | "run_terminal" | "run_finalizing"; detail: (run: SteeringAdmissionFacts) => string };
}[] = [
  {
    when: "old run that has been resumed (superseded_by_run_id set)",
    applies: (run) => run.superseded_by_run_id !== null,
    refuse: { code: "run_superseded", detail: (run) => `run ${run.run_id} was resumed as run ${run.superseded_by_run_id}; steer that run` },
  },
  {
    when: "succeeded, failed, cancelled, timed_out, dead_letter",
    applies: (run) => isTerminal(run.status),
    refuse: { code: "run_terminal", detail: (run) => `run ${run.run_id} is ${run.status}; nothing was written` },
  },
  {
    when: "running or cancelling with steering_closed true",
    applies: (run) => run.steering_closed && LEASED_STATUSES.includes(run.status),
    refuse: { code: "run_finalizing", detail: (run) => `run ${run.run_id} has finished its graph and is being finalized; steer a new run` },
  },
  // pending: visible once a worker claims the run; running: at the next safe point; cancelling:
  // accepted, but cancel still wins; paused: moved to the new run at resume.
  { when: "pending, running, cancelling, paused", applies: () => true },
];

export function steeringAdmission(run: SteeringAdmissionFacts): SteeringAdmission {
  const row = STEERING_ADMISSION_TABLE.find((candidate) => candidate.applies(run))!;
  return row.refuse ? { admitted: false, code: row.refuse.code, detail: row.refuse.detail(run) } : { admitted: true };
}
