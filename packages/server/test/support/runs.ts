import { randomUUID } from "node:crypto";
import type { Db } from "../../src/storage/db.ts";
import type { Lease } from "../../src/storage/lease.ts";
import { NO_USAGE } from "../../src/domain/budget.ts";
import { claimRuns, insertRun, type NewRun, type SettleFields } from "../../src/storage/runs.ts";

/** A stateless `echo` run of `tenantId`, as the API would insert it with no options. */
export function stateless(tenantId: string, input: unknown = {}): NewRun {
  return {
    tenantId,
    runId: randomUUID(),
    threadId: null,
    assistantId: "echo",
    graphId: "echo",
    input,
    command: null,
    context: {},
    config: {},
    metadata: {},
    afterSeconds: null,
    multitaskStrategy: "enqueue",
    durability: "sync",
    runTimeout: null,
    maxModelCalls: null,
    maxToolCalls: null,
    maxTokens: null,
    maxCost: null,
    idempotencyKey: undefined,
    requestHash: randomUUID(),
  };
}

/** `count` stateless runs of a fresh tenant, inserted and claimed (running) by `owner`: their leases. */
export async function claimedRuns(db: Db, count: number, owner = `worker-${randomUUID()}`): Promise<Lease[]> {
  const tenant = `t-${randomUUID()}`;
  const ids = new Set<string>();
  for (let i = 0; i < count; i++) ids.add((await insertRun(db, stateless(tenant), 1000))!.run_id);
  const claims = await claimRuns(db, owner, 60_000, 1000, { to: "running", thread: "busy" });
  return claims
    .filter((claim) => ids.has(claim.run_id))
    .map((claim) => ({ tenantId: claim.tenant_id, runId: claim.run_id, attempt: claim.attempt, owner }));
}

/** A settle that ends a run succeeded, idle thread, with `events` appended (`settleAttempts`). */
export function succeededSettle(events: SettleFields["events"]): SettleFields {
  return {
    status: "succeeded",
    output: { ok: true },
    error: null,
    finishes: true,
    retryDelayMs: 0,
    threadStatus: "idle",
    usage: NO_USAGE,
    freesThread: true,
    events,
  };
}

/** Every optional field of a run creation, spelled out at the spec's default (docs/runs.md). */
export const SPELLED_OUT_DEFAULTS = {
  context: {},
  config: {},
  resume: null,
  update: null,
  goto: null,
  durability: "sync",
  multitask_strategy: "enqueue",
  run_timeout: null,
  max_model_calls: null,
  max_tool_calls: null,
  max_tokens: null,
  max_cost: null,
  metadata: {},
} as const;
