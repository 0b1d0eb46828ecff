import { randomUUID } from "node:crypto";
import { ApiError, notFound } from "../domain/errors.ts";
import { isSettled, requestFingerprint, type Durability, type MultitaskStrategy } from "../domain/runs.ts";
import type { AssistantCatalog } from "../graphs/assistants.ts";
import { validateGraphInput } from "../graphs/input.ts";
import type { GraphRegistry } from "../graphs/registry.ts";
import { waitForNotice, type Notifier } from "../notify/notifier.ts";
import { publicRun, type ClaimedRun, type Run, type RunEvent, type RunRepository } from "../storage/runs.ts";

/** The spec's run creation request fields. */
export interface CreateRunRequest {
  assistant_id: string;
  input?: unknown;
  context?: Record<string, unknown>;
  config?: Record<string, unknown>;
  resume?: unknown;
  update?: Record<string, unknown> | null;
  goto?: string | null;
  durability?: Durability;
  multitask_strategy?: MultitaskStrategy;
  run_timeout?: number | null;
  max_model_calls?: number | null;
  max_tool_calls?: number | null;
  max_tokens?: number | null;
  max_cost?: number | null;
  metadata?: Record<string, unknown>;
}

export interface RunLimits {
  readonly queuedRunQuota: number;
}

/** How often a waiter re-reads storage when no notice arrives (notices are only hints). */
const RECHECK_MS = 1000;

/**
 * Creating, reading, joining and cancelling runs: the rules the HTTP API, the scheduler and the
 * gateways share. Storage decides atomically; this layer resolves assistants and validates input.
 */
export class RunService {
  constructor(
    private readonly runs: RunRepository,
    private readonly assistants: AssistantCatalog,
    private readonly graphs: GraphRegistry,
    private readonly notifier: Notifier,
    private readonly limits: RunLimits,
  ) {}

  async create(
    tenantId: string,
    threadId: string | null,
    request: CreateRunRequest,
    idempotencyKey?: string,
  ): Promise<{ run: Run; replayed: boolean }> {
    const assistant = await this.assistants.get(tenantId, request.assistant_id).catch((error: unknown) => {
      // An unknown assistant is a fault in the body, not a missing resource at this URL.
      if (error instanceof ApiError && error.code === "not_found") {
        throw new ApiError("validation_error", `assistant_id "${request.assistant_id}" names no assistant`);
      }
      throw error;
    });
    const graph = await this.graphs.get(assistant.graph_id);
    if (!graph) throw new ApiError("validation_error", `the graph of assistant ${assistant.assistant_id} is not loaded`);
    await validateGraphInput(graph, request.input);
    const hasCommand = request.resume !== undefined || request.update != null || request.goto != null;
    const { run, replayed } = await this.runs.create(
      {
        tenantId,
        runId: randomUUID(),
        threadId,
        assistantId: assistant.assistant_id,
        graphId: assistant.graph_id,
        input: request.input ?? null,
        command: hasCommand ? { resume: request.resume, update: request.update ?? null, goto: request.goto ?? null } : null,
        context: { ...assistant.context, ...request.context },
        config: mergeConfig(assistant.config, request.config ?? {}),
        metadata: request.metadata ?? {},
        multitaskStrategy: request.multitask_strategy ?? "enqueue",
        durability: request.durability ?? "sync",
        runTimeout: request.run_timeout ?? null,
        maxModelCalls: request.max_model_calls ?? null,
        maxToolCalls: request.max_tool_calls ?? null,
        maxTokens: request.max_tokens ?? null,
        maxCost: request.max_cost ?? null,
        idempotencyKey,
        requestHash: requestFingerprint({ thread_id: threadId, ...request }),
      },
      this.limits.queuedRunQuota,
      (tx, cancelling) => this.notifier.publishWithin(tx, { topic: "run_created" }, ...cancelling.map((runId) => ({ topic: "run_changed", runId }) as const)),
    );
    return { run: publicRun(run), replayed };
  }

  async get(tenantId: string, runId: string): Promise<Run> {
    return publicRun(await this.own(tenantId, runId));
  }

  async listByThread(tenantId: string, threadId: string, page: { limit: number; offset: number }): Promise<Run[]> {
    return (await this.runs.listByThread(tenantId, threadId, page)).map(publicRun);
  }

  /**
   * Waits until the run is terminal or paused, waking on its change notices (and re-reading
   * storage every second in case a notice was lost). 408 join_timeout when the wait ends first.
   */
  async join(tenantId: string, runId: string, timeoutSeconds: number, signal?: AbortSignal): Promise<Run> {
    const deadline = Date.now() + timeoutSeconds * 1000;
    for (;;) {
      const wait = waitForNotice(this.notifier, (n) => n.topic === "run_changed" && n.runId === runId, Math.min(RECHECK_MS, Math.max(0, deadline - Date.now())), signal);
      const run = await this.own(tenantId, runId).catch((error: unknown) => {
        wait.cancel();
        throw error;
      });
      if (isSettled(run.status)) {
        wait.cancel();
        return publicRun(run);
      }
      if (Date.now() >= deadline || signal?.aborted) {
        wait.cancel();
        throw new ApiError("join_timeout", `run ${runId} is still ${run.status} after ${timeoutSeconds} s; join again to keep waiting`);
      }
      await wait.promise;
    }
  }

  async cancel(tenantId: string, runId: string): Promise<Run> {
    const { run, signalWorker } = await this.runs.cancel(tenantId, runId);
    await this.notifier.publish({ topic: "run_changed", runId }, ...(signalWorker ? [] : [{ topic: "run_events", runId } as const]));
    return publicRun(run);
  }

  /** 202 with the new run that continues a paused one (spec section 3, "paused → POST resume"). */
  async resume(tenantId: string, runId: string, command: { resume?: unknown; update?: Record<string, unknown> | null; goto?: string | null }): Promise<Run> {
    const run = await this.runs.resume(tenantId, runId, randomUUID(), {
      resume: command.resume,
      update: command.update ?? null,
      goto: command.goto ?? null,
    });
    await this.notifier.publish({ topic: "run_created" }, { topic: "run_changed", runId });
    return publicRun(run);
  }

  async redrive(tenantId: string, runId: string): Promise<Run> {
    const run = await this.runs.redrive(tenantId, runId);
    await this.notifier.publish({ topic: "run_created" }, { topic: "run_changed", runId });
    return publicRun(run);
  }

  async events(tenantId: string, runId: string, after: number, limit: number): Promise<RunEvent[]> {
    await this.own(tenantId, runId);
    return this.runs.readEvents(runId, after, limit);
  }

  private async own(tenantId: string, runId: string): Promise<ClaimedRun> {
    const run = await this.runs.get(tenantId, runId);
    if (!run) throw notFound("run", runId);
    return run;
  }
}

/** Request config over the assistant's; `configurable` merges one level deeper. */
function mergeConfig(base: Record<string, unknown>, override: Record<string, unknown>): Record<string, unknown> {
  const configurable = { ...asObject(base.configurable), ...asObject(override.configurable) };
  return { ...base, ...override, ...(Object.keys(configurable).length ? { configurable } : {}) };
}

function asObject(value: unknown): Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}
