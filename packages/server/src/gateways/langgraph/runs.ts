import type { CreateRunBody, JsonObject, LgCancelManyBody, LgRunCreateBody, LgStreamMode, Run, RunStatus } from "@rudder/api";
import { isTerminal, startCheckpointOf } from "../../domain/runs.ts";
import { ApiError, undefinedOn } from "../../domain/errors.ts";
import type { AppServices } from "../../http/services.ts";
import {
  checkpointIdOf,
  LG_KWARGS_KEY,
  requestedStreamModes,
  requestKwargs,
  rudderMultitask,
  unknownBreakpointNodes,
  unservedStreamModes,
  unsupportedRunFields,
  withKwargs,
} from "./mapping.ts";

/** Runs of a thread the facade looks at when deciding a command or a rollback. */
const RECENT_RUNS = 100;

/**
 * Creates (or, for a `command` on a thread with a paused run, resumes) a run from a LangGraph
 * request, through the same `RunService` as `/v1`: the run is a Rudder run with the same id.
 * An Idempotency-Key makes the creation replay as on `/v1` (a command that resumes a paused run
 * has the resume's own rule instead: one answer wins). Returns the run and the stream modes the
 * request asked for.
 */
export async function startRun(
  services: AppServices,
  tenantId: string,
  threadId: string | null,
  body: LgRunCreateBody,
  idempotencyKey?: string,
): Promise<{ run: Run; modes: LgStreamMode[] }> {
  const refused = unsupportedRunFields(body);
  if (refused.length) throw new ApiError("validation_error", `not supported on this server: ${refused.join("; ")}`);
  // A stateless run's checkpoints are dropped when it ends: that is "delete"; there is no thread to keep.
  if (threadId === null && body.on_completion === "keep")
    throw new ApiError("validation_error", 'on_completion: a stateless run has no thread to keep ("delete" is what happens)');
  const modes = requestedStreamModes(body.stream_mode);
  const unserved = unservedStreamModes(modes);
  if (unserved.length)
    throw new ApiError("validation_error", `stream_mode ${unserved.join(", ")} is not supported yet (docs/langgraph-api.md)`);
  const { runService, threads } = services;
  // LangGraph answers 404 for an unknown assistant (Rudder's /v1 says 422 for the body's assistant);
  // an unknown thread is already a 404 from RunService.create.
  const assistant = await services.assistants.get(tenantId, body.assistant_id);
  // As the Platform does, a thread records the graph and assistant of its latest run (agent-chat-ui
  // lists threads by them), in the run's own transaction.
  const threadMetadata: JsonObject = { graph_id: assistant.graph_id, assistant_id: body.assistant_id };
  await checkBreakpoints(services, assistant.graph_id, body);
  const requested = body.checkpoint_id ?? checkpointIdOf(body.checkpoint);
  const config = body.config ?? {};
  // The checkpoint the run is to start from, named by the request (here or in its config).
  const start = startCheckpointOf({
    configurable: { ...asObject(config.configurable), ...(requested !== undefined ? { checkpoint_id: requested } : {}) },
  });
  // A thread that has the checkpoint the run names exists: one created here could not have it,
  // and the create below answers 404 with nothing made.
  if (threadId !== null && body.if_not_exists === "create" && start === undefined) {
    // As the Platform names a thread it creates for a run: the graph and assistant, then the run's metadata.
    await threads.create(tenantId, { ...threadMetadata, ...body.metadata }, { threadId, ifExists: "do_nothing" });
  }
  const strategy = body.multitask_strategy ?? "reject";
  const kwargs = requestKwargs(body, modes, strategy);

  const command = body.command ?? undefined;
  if (threadId !== null && command) {
    await threads.get(tenantId, threadId);
    // LangGraph resumes an interrupted thread with a Command: Rudder's resume of its paused run.
    const paused = (await runService.listByThread(tenantId, threadId, { limit: RECENT_RUNS, offset: 0 })).find(
      (run) => run.status === "paused" && run.superseded_by_run_id === null,
    );
    if (paused) {
      // The resume starts where Rudder's resume does, but a checkpoint it names must still exist.
      await runService.requireStartCheckpoint(tenantId, threadId, start);
      // The run that continues it records this request's modes and breakpoints, not the paused run's.
      const run = await runService.resume(
        tenantId,
        paused.run_id,
        { resume: command.resume, update: command.update ?? null, goto: command.goto ?? null },
        { config: withKwargs(paused.config, kwargs), threadMetadata },
      );
      return { run, modes };
    }
  }

  let checkpointId = requested;
  if (threadId !== null && strategy === "rollback" && checkpointId === undefined) {
    checkpointId = await checkpointBeforeActiveRuns(services, tenantId, threadId);
  }
  const configurable: JsonObject = {
    ...asObject(config.configurable),
    ...(checkpointId !== undefined ? { checkpoint_id: checkpointId } : {}),
    [LG_KWARGS_KEY]: kwargs,
  };
  const request: CreateRunBody = {
    assistant_id: body.assistant_id,
    ...(body.input !== undefined && body.input !== null ? { input: body.input } : {}),
    ...(body.context ? { context: body.context } : {}),
    config: { ...config, configurable },
    ...(body.metadata ? { metadata: body.metadata } : {}),
    multitask_strategy: rudderMultitask(strategy),
    ...(body.durability ? { durability: body.durability } : {}),
    ...(command?.resume !== undefined ? { resume: command.resume } : {}),
    ...(command?.update ? { update: command.update } : {}),
    ...(command?.goto ? { goto: command.goto } : {}),
  };
  const { run } = await runService.create(tenantId, threadId, request, {
    threadMetadata,
    ...(idempotencyKey === undefined ? {} : { idempotencyKey }),
    ...(body.after_seconds ? { afterSeconds: body.after_seconds } : {}),
  });
  return { run, modes };
}

/** Breakpoints must name nodes of the assistant's graph (LangGraph would stop nowhere, silently). */
async function checkBreakpoints(services: AppServices, graphId: string, body: LgRunCreateBody): Promise<void> {
  if (!Array.isArray(body.interrupt_before) && !Array.isArray(body.interrupt_after)) return;
  const graph = await services.graphs.get(graphId);
  const nodes = Object.keys((graph as unknown as { nodes?: Record<string, unknown> } | undefined)?.nodes ?? {});
  const unknown = unknownBreakpointNodes(body, nodes);
  if (unknown.length)
    throw new ApiError("validation_error", `interrupt_before / interrupt_after: ${unknown.join(", ")} names no node of graph ${graphId}`);
}

/**
 * `rollback`: the new run starts from the newest checkpoint no active run of the thread wrote,
 * so what the cancelled runs wrote is not part of its state (their checkpoints stay in history as
 * a side branch). A thread with no earlier checkpoint starts from its latest, as `interrupt` does.
 */
async function checkpointBeforeActiveRuns(services: AppServices, tenantId: string, threadId: string): Promise<string | undefined> {
  const recent = await services.runService.listByThread(tenantId, threadId, { limit: RECENT_RUNS, offset: 0 });
  const active = new Set(
    recent.filter((run) => run.status === "pending" || run.status === "running" || run.status === "cancelling").map((run) => run.run_id),
  );
  if (active.size === 0) return undefined;
  for (const state of await services.threads.history(tenantId, threadId, { limit: 1000 })) {
    const writer = state.metadata.run_id;
    if (typeof writer === "string" && active.has(writer)) continue;
    return state.checkpoint?.checkpoint_id;
  }
  return undefined;
}

function asObject(value: unknown): JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as JsonObject) : {};
}

/** Runs cancelled at a time by one `runs.cancelMany`; a page of this many is listed at a time. */
const CANCEL_CONCURRENCY = 16;
const CANCEL_PAGE = 1000;

/**
 * LangGraph's `runs.cancelMany`: the runs named (of the thread, when one is given; 404 when none of
 * them is the tenant's), or the pending and running runs (or those of `status`) of the thread, or
 * of the tenant when only a status is given. A run that has ended meanwhile is left as it is.
 */
export async function cancelRuns(
  services: AppServices,
  tenantId: string,
  body: LgCancelManyBody,
  action: CancelAction = "interrupt",
): Promise<void> {
  const { runService } = services;
  const threadId = body.thread_id ?? undefined;
  if (threadId !== undefined) await services.threads.get(tenantId, threadId);
  if (body.run_ids) {
    const named = await Promise.all(body.run_ids.map((runId) => runService.get(tenantId, runId).catch(undefinedOn("not_found"))));
    const runs = named.filter((run): run is Run => run !== undefined && (threadId === undefined || run.thread_id === threadId));
    if (runs.length === 0) throw new ApiError("not_found", "none of run_ids names a run of this tenant" + (threadId ? " and thread" : ""));
    await cancelEach(services, tenantId, runs, action);
    return;
  }
  if (threadId === undefined && body.status == null) {
    throw new ApiError("validation_error", "name the runs to cancel: run_ids, a thread_id, or a status");
  }
  const statuses: RunStatus[] = body.status === "pending" ? ["pending"] : body.status === "running" ? ["running"] : ["pending", "running"];
  const tried = new Set<string>();
  for (const status of statuses) {
    // Cancelled runs leave the status, so the first page is read again until it holds nothing new.
    for (;;) {
      const page = await runService.list(tenantId, { threadId, status }, { limit: CANCEL_PAGE, offset: 0 });
      const fresh = page.filter((run) => !tried.has(run.run_id));
      if (fresh.length === 0) break;
      for (const run of fresh) tried.add(run.run_id);
      await cancelEach(services, tenantId, fresh, action);
    }
  }
}

async function cancelEach(services: AppServices, tenantId: string, runs: readonly Run[], action: CancelAction): Promise<void> {
  for (let start = 0; start < runs.length; start += CANCEL_CONCURRENCY) {
    const batch = runs.slice(start, start + CANCEL_CONCURRENCY);
    await Promise.all(
      batch.map((run) => cancelRun(services, tenantId, run, action).catch(undefinedOn("conflict", "not_found", "run_superseded"))),
    );
  }
}

/** LangGraph's cancel actions: `interrupt` stops the run; `rollback` also deletes a run that had not started. */
export type CancelAction = "interrupt" | "rollback";

/**
 * Cancels a run, and answers whether it is stopping, gone or had already ended. A run that has
 * ended is left as it is, as the Platform answers it (202): a UI's stop button races the run's
 * end, and the SDK would throw on a 409. A run paused at an interrupt has ended on this surface
 * (`success`, its thread `interrupted`), as on the Platform, so it is left paused and resumable.
 * With `rollback`, a run that ended at once (it was pending: nothing of it ran) is deleted with its
 * events, as the Platform deletes an unstarted run; a running run is stopped as by `interrupt` (so
 * does the Platform: what it wrote stays).
 */
export async function cancelRun(
  services: AppServices,
  tenantId: string,
  run: Pick<Run, "run_id" | "status">,
  action: CancelAction,
): Promise<"stopping" | "deleted" | "ended"> {
  if (run.status === "paused") return "ended";
  const runId = run.run_id;
  const { runService } = services;
  const cancelled = await runService.cancel(tenantId, runId).catch(async (error: unknown) => {
    if (error instanceof ApiError && error.code === "conflict" && isTerminal((await runService.get(tenantId, runId)).status))
      return undefined;
    throw error;
  });
  if (cancelled === undefined) return "ended";
  if (action !== "rollback" || !isTerminal(cancelled.status)) return "stopping";
  await runService.delete(tenantId, runId);
  return "deleted";
}

/** Where the SDK finds a created run (`onRunCreated`): `Content-Location`. */
export const runLocation = (run: Pick<Run, "run_id" | "thread_id">): string =>
  run.thread_id === null ? `/runs/${run.run_id}` : `/threads/${run.thread_id}/runs/${run.run_id}`;

/** Waits until the run is terminal or paused (undefined when the signal ends the wait first: the client left, or shutdown). */
export async function waitForRun(services: AppServices, tenantId: string, runId: string, signal: AbortSignal): Promise<Run | undefined> {
  for await (const update of services.runService.follow(tenantId, runId, { events: false, signal })) {
    if (update.type === "settled") return update.run;
  }
  return undefined;
}
