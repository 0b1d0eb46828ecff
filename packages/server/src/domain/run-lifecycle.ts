import type { CancelReason, RunEventBody, ThreadStatus } from "@rudder/api";
import { freesThread, isRetryableError, retryDelayMs, runErrorOf, type RunError, type RunStatus } from "./runs.ts";

/**
 * The run state machine: every status change a run can make, in one table (spec section 3 "Run
 * states" plus DESIGN.md's decisions for what the spec leaves open). Storage executes what this
 * decides; nothing else picks a status, an event or a thread status.
 */

/** What can happen to a run. */
export type RunTrigger =
  /** A worker takes the run: a new delivery attempt. */
  | "claim"
  /** POST /cancel. */
  | "cancel"
  /** A newer run on the thread with multitask_strategy cancel_previous. */
  | "cancel_previous"
  /** POST /resume: the paused run stays paused, linked to the run that continues it. */
  | "resume"
  /** POST /redrive. */
  | "redrive"
  /** The attempt's graph ran to its end. */
  | "succeed"
  /** The graph stopped at an interrupt. */
  | "pause"
  /** A non-retryable error. */
  | "fail"
  /** A retryable error with attempts left: back to the queue after a backoff. */
  | "retry"
  /** A retryable error with no attempts left, or a run that kept losing its worker. */
  | "give_up"
  /** run_timeout passed. */
  | "time_out"
  /** The worker stopped a cancelling run. */
  | "stop_cancelled"
  /** The worker shuts down: the attempt is handed back untouched. */
  | "hand_back"
  /** A cancelling run whose worker died: its lease expired, so the reaper ends it. */
  | "reap";

export type { ThreadStatus } from "@rudder/api";

/** Every event kind a transition appends; its one data shape is in @rudder/api (`RUN_EVENT_DATA`, docs/events.md). */
export type LifecycleEventKind =
  | "run_started"
  | "run_succeeded"
  | "run_paused"
  | "run_failed"
  | "run_timed_out"
  | "run_dead_letter"
  | "run_retrying"
  | "run_cancelled"
  | "run_redriven";
export type LifecycleEvent = RunEventBody<LifecycleEventKind>;

export type { CancelReason } from "@rudder/api";

/** One row of the table: from which states a trigger applies, and what it does. */
export interface TransitionRule {
  readonly from: readonly RunStatus[];
  readonly trigger: RunTrigger;
  /** `unchanged`: the status stays (resume; cancel of a run already cancelling). */
  readonly to: RunStatus | "unchanged";
  /** Whether `finished_at` is written now. */
  readonly finishes: boolean;
  /** The event appended with the change (its data comes from `eventOf`). */
  readonly event: LifecycleEventKind | null;
  /** The thread's new status, for a run on a thread (null: unchanged). */
  readonly thread: ThreadStatus | null;
}

const ACTIVE = ["running", "cancelling"] as const;

/** The table. Order matters only for readability: (from, trigger) pairs never overlap. */
export const RUN_TRANSITIONS: readonly TransitionRule[] = [
  { from: ["pending"], trigger: "claim", to: "running", finishes: false, event: "run_started", thread: "busy" },
  // A running run whose lease expired (its worker died) is claimed again; so is a cancelling one,
  // which its new worker stops at once.
  { from: ["running"], trigger: "claim", to: "running", finishes: false, event: "run_started", thread: "busy" },
  { from: ["pending", "paused"], trigger: "cancel", to: "cancelled", finishes: true, event: "run_cancelled", thread: "idle" },
  { from: ["running"], trigger: "cancel", to: "cancelling", finishes: false, event: null, thread: null },
  { from: ["cancelling"], trigger: "cancel", to: "unchanged", finishes: false, event: null, thread: null },
  { from: ["pending"], trigger: "cancel_previous", to: "cancelled", finishes: true, event: "run_cancelled", thread: null },
  { from: ["running"], trigger: "cancel_previous", to: "cancelling", finishes: false, event: null, thread: null },
  { from: ["paused"], trigger: "resume", to: "unchanged", finishes: false, event: null, thread: null },
  { from: ["failed", "dead_letter"], trigger: "redrive", to: "pending", finishes: false, event: "run_redriven", thread: null },
  { from: ACTIVE, trigger: "succeed", to: "succeeded", finishes: true, event: "run_succeeded", thread: "idle" },
  { from: ACTIVE, trigger: "pause", to: "paused", finishes: false, event: "run_paused", thread: "paused" },
  { from: ACTIVE, trigger: "fail", to: "failed", finishes: true, event: "run_failed", thread: "error" },
  { from: ACTIVE, trigger: "retry", to: "pending", finishes: false, event: "run_retrying", thread: "idle" },
  { from: ACTIVE, trigger: "give_up", to: "dead_letter", finishes: true, event: "run_dead_letter", thread: "error" },
  { from: ACTIVE, trigger: "time_out", to: "timed_out", finishes: true, event: "run_timed_out", thread: "error" },
  { from: ["cancelling"], trigger: "stop_cancelled", to: "cancelled", finishes: true, event: "run_cancelled", thread: "idle" },
  { from: ACTIVE, trigger: "hand_back", to: "pending", finishes: false, event: "run_retrying", thread: "idle" },
  { from: ["cancelling"], trigger: "reap", to: "cancelled", finishes: true, event: "run_cancelled", thread: "idle" },
];

/** The refusal of a trigger: an API error code and why. */
export interface Refusal {
  readonly refused: "conflict" | "run_superseded" | "run_resume_conflict";
  readonly detail: string;
}

/** What the run looks like when a trigger arrives. */
export interface RunFacts {
  readonly run_id: string;
  readonly status: RunStatus;
  /** Set once a resume created the run that continues this paused one (spec: the typed field). */
  readonly superseded_by_run_id: string | null;
}

/**
 * The rule for `trigger` on a run in `run.status`, or the refusal the API answers with. A resumed
 * run is decided on the typed `superseded_by_run_id` only, never on metadata.
 */
export function transitionFor(run: RunFacts, trigger: RunTrigger): TransitionRule | Refusal {
  if (run.superseded_by_run_id !== null && trigger === "cancel") {
    return {
      refused: "run_superseded",
      detail: `run ${run.run_id} was resumed as run ${run.superseded_by_run_id}; cancel that run instead`,
    };
  }
  if (run.superseded_by_run_id !== null && trigger === "resume") {
    return { refused: "run_resume_conflict", detail: `run ${run.run_id} was already resumed as run ${run.superseded_by_run_id}` };
  }
  const rule = RUN_TRANSITIONS.find((candidate) => candidate.trigger === trigger && candidate.from.includes(run.status));
  if (rule) return rule;
  return { refused: "conflict", detail: refusalDetail(run, trigger) };
}

export const isRefusal = (decision: TransitionRule | Refusal): decision is Refusal => "refused" in decision;

function refusalDetail(run: RunFacts, trigger: RunTrigger): string {
  const allowed = RUN_TRANSITIONS.filter((rule) => rule.trigger === trigger).flatMap((rule) => rule.from);
  const verb =
    { cancel: "cancelled", resume: "resumed", redrive: "redriven" }[trigger as "cancel" | "resume" | "redrive"] ?? `given ${trigger}`;
  return `run ${run.run_id} is ${run.status}; only ${[...new Set(allowed)].join(", ")} runs can be ${verb}`;
}

/**
 * What `trigger` does to a run in each status where it changes the run's row and nothing else: no
 * event, no thread status, and a run on a thread keeps holding it. Such a move needs neither the
 * thread's lock nor a transaction of its own: one statement applies it to the status it finds (a
 * cancel of a running run, docs/runs.md), on a run no resume superseded (`transitionFor` refuses
 * those first). Rules that leave the status unchanged write nothing and are left out.
 */
export function rowOnlyMoves(trigger: RunTrigger): ReadonlyMap<RunStatus, RunStatus> {
  const moves = new Map<RunStatus, RunStatus>();
  for (const rule of RUN_TRANSITIONS) {
    if (rule.trigger !== trigger || rule.event !== null || rule.thread !== null || rule.to === "unchanged") continue;
    for (const from of rule.from) if (!freesThread(from, rule.to)) moves.set(from, rule.to);
  }
  return moves;
}

/** The new status a rule gives a run now in `from`. */
export const nextStatus = (rule: TransitionRule, from: RunStatus): RunStatus => (rule.to === "unchanged" ? from : rule.to);

const CANCEL_MESSAGES: Record<CancelReason, string> = {
  cancel_requested: "cancelled by request",
  cancel_previous: "cancelled by a newer run on its thread (multitask_strategy cancel_previous)",
  lease_expired: "cancelled by request; its worker stopped before it could finish",
};

/** The error object a run cancelled for `reason` ends with. */
export const cancelError = (reason: CancelReason): RunError => ({
  code: "run_cancelled",
  message: CANCEL_MESSAGES[reason],
  retryable: false,
});

/** The `run_cancelled` event of a run cancelled for `reason` from `from`. */
export const cancelledEvent = (reason: CancelReason, from: RunStatus): LifecycleEvent => ({
  kind: "run_cancelled",
  data: { reason, from, error: cancelError(reason) },
});

/** Which cancel reason each cancelling trigger stands for. */
export const CANCEL_REASON_OF: Partial<Record<RunTrigger, CancelReason>> = {
  cancel: "cancel_requested",
  cancel_previous: "cancel_previous",
  stop_cancelled: "cancel_requested",
  reap: "lease_expired",
};

// ---------------------------------------------------------------------------------------------
// How an attempt ends: the worker reports what happened, this decides the trigger.

/** What the graph did in one attempt (the executor's result). */
export type AttemptResult =
  | { kind: "succeeded"; output: Record<string, unknown> }
  | { kind: "paused"; output: Record<string, unknown>; interrupts: unknown[] }
  | { kind: "threw"; error: unknown };

/** Why an attempt's execution was stopped from outside the graph. */
export type StopReason = "cancelled" | "lease_lost" | "shutdown" | "timed_out" | "attempts_exhausted";

export interface AttemptFacts {
  readonly status: RunStatus;
  readonly attempt: number;
  readonly run_timeout: number | null;
  /** The run's first start (its clock's start), ISO; null before it ever started. */
  readonly started_at: string | null;
  /**
   * Of its attempts, how many its workers handed back at shutdown (a rolling restart is not a
   * failure: they count toward no limit). Known only near the limit (`countHandBacks`); 0 elsewhere.
   */
  readonly handed_back?: number;
}

/** The attempts that count toward the delivery limit: every attempt but those handed back at shutdown. */
export const countedAttempts = (run: Pick<AttemptFacts, "attempt" | "handed_back">): number => run.attempt - (run.handed_back ?? 0);

/** When the run's run_timeout passes (epoch ms); undefined without one. */
export function runDeadline(run: Pick<AttemptFacts, "run_timeout" | "started_at">): number | undefined {
  if (run.run_timeout === null || run.started_at === null) return undefined;
  return Date.parse(run.started_at) + run.run_timeout * 1000;
}

export interface RetryPolicy {
  /** Delivery attempts before a retryable failure becomes dead_letter. */
  readonly maxAttempts: number;
  /** First retry delay; each further one doubles, up to 60 s. */
  readonly retryBaseMs: number;
}

/** The settle an attempt ends with: the trigger, the run's new status and fields, and its event. */
export interface AttemptOutcome {
  readonly trigger: RunTrigger;
  readonly rule: TransitionRule;
  readonly status: RunStatus;
  readonly output: unknown;
  readonly error: RunError | null;
  /** Back in the queue after this long (retry, hand back). */
  readonly retryDelayMs: number;
  readonly event: LifecycleEvent;
}

/**
 * DESIGN.md "Which failures are retried", and the run's end: a stop from outside wins over what
 * the graph did (cancel, timeout, shutdown, a run that keeps killing its workers); a retryable
 * error is retried with exponential backoff until the attempts run out.
 */
export function attemptOutcome(
  run: AttemptFacts,
  result: AttemptResult,
  stopped: Exclude<StopReason, "lease_lost"> | undefined,
  policy: RetryPolicy,
  now: number = Date.now(),
): AttemptOutcome {
  // A run is stopped as cancelled only once it reads cancelling (at its claim or on a heartbeat).
  const from: RunStatus = stopped === "cancelled" ? "cancelling" : run.status;
  const outcome = (
    trigger: RunTrigger,
    fields: { output?: unknown; error?: RunError | null; retryDelayMs?: number },
    event: LifecycleEvent,
  ): AttemptOutcome => {
    const rule = transitionFor({ run_id: "", status: from, superseded_by_run_id: null }, trigger);
    if (isRefusal(rule)) throw new Error(`no transition ${from} --${trigger}-->: ${rule.detail}`);
    return {
      trigger,
      rule,
      status: nextStatus(rule, from),
      output: fields.output ?? null,
      error: fields.error ?? null,
      retryDelayMs: fields.retryDelayMs ?? 0,
      event,
    };
  };
  if (stopped === "attempts_exhausted") {
    const error: RunError = {
      code: "dead_letter",
      message: `its worker was lost on each of ${countedAttempts(run) - 1} attempts`,
      retryable: true,
    };
    return outcome("give_up", { error }, { kind: "run_dead_letter", data: { error } });
  }
  const timedOut = () => {
    const error: RunError = {
      code: "run_timed_out",
      message: `the run exceeded its run_timeout of ${run.run_timeout} s`,
      retryable: false,
    };
    return outcome("time_out", { error }, { kind: "run_timed_out", data: { error } });
  };
  if (stopped === "timed_out") return timedOut();
  if (stopped === "cancelled")
    return outcome("stop_cancelled", { error: cancelError("cancel_requested") }, cancelledEvent("cancel_requested", from));
  if (stopped === "shutdown") {
    // Handed back untouched: the next claim is a new attempt that continues from the checkpoint.
    return outcome(
      "hand_back",
      {},
      { kind: "run_retrying", data: { attempt: run.attempt, reason: "worker_shutdown", delay_ms: 0, error: null } },
    );
  }
  if (result.kind === "succeeded") return outcome("succeed", { output: result.output }, { kind: "run_succeeded", data: {} });
  if (result.kind === "paused")
    return outcome("pause", { output: result.output }, { kind: "run_paused", data: { interrupts: result.interrupts } });
  const error = runErrorOf(result.error);
  if (!isRetryableError(result.error)) return outcome("fail", { error }, { kind: "run_failed", data: { error } });
  const attempts = countedAttempts(run);
  if (attempts < policy.maxAttempts) {
    const delay = retryDelayMs(attempts, policy.retryBaseMs);
    // A retry that could start only after the deadline would never run: the run is out of time now.
    const deadline = runDeadline(run);
    if (deadline !== undefined && now + delay >= deadline) return timedOut();
    return outcome(
      "retry",
      { error, retryDelayMs: delay },
      { kind: "run_retrying", data: { attempt: run.attempt, reason: "error", delay_ms: delay, error } },
    );
  }
  const dead: RunError = { code: "dead_letter", message: `gave up after ${attempts} attempts: ${error.message}`, retryable: true };
  return outcome("give_up", { error: dead }, { kind: "run_dead_letter", data: { error: dead } });
}
