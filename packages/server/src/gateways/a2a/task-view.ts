import { Role, TaskState, type Artifact, type Message, type Part, type StreamResponse, type Task, type TaskStatus } from "@a2a-js/sdk";
import type { RunEvent } from "@rudder/api";
import { isTerminal, type RunStatus } from "../../domain/runs.ts";
import type { TaskRun } from "../../runs/a2a-tasks.ts";
import { dataPart, isObject, outputText, textPart, tokenText } from "./parts.ts";

/**
 * A task as A2A shows it, built from its current run (DESIGN.md "A2A gateway": states, output
 * artifact, interrupts as input-required), and the stream of updates a run's event log becomes.
 * Pure: no I/O.
 */

const TASK_STATE_OF: Readonly<Record<RunStatus, TaskState>> = {
  pending: TaskState.TASK_STATE_SUBMITTED,
  running: TaskState.TASK_STATE_WORKING,
  cancelling: TaskState.TASK_STATE_WORKING,
  paused: TaskState.TASK_STATE_INPUT_REQUIRED,
  succeeded: TaskState.TASK_STATE_COMPLETED,
  failed: TaskState.TASK_STATE_FAILED,
  timed_out: TaskState.TASK_STATE_FAILED,
  dead_letter: TaskState.TASK_STATE_FAILED,
  cancelled: TaskState.TASK_STATE_CANCELED,
};

export const taskStateOf = (status: RunStatus): TaskState => TASK_STATE_OF[status];

/** The run statuses a task state stands for (ListTasks' status filter); empty for states Rudder never reports. */
export function runStatusesOf(state: TaskState): RunStatus[] {
  return (Object.keys(TASK_STATE_OF) as RunStatus[]).filter((status) => TASK_STATE_OF[status] === state);
}

/** A task state as people read it: `completed`, `input-required`. */
export const stateLabel = (status: RunStatus): string =>
  TaskState[taskStateOf(status)].replace("TASK_STATE_", "").toLowerCase().replace("_", "-");

/** A task whose state no message or cancel can change any more. */
export const isTerminalTask = (run: Pick<TaskRun, "status">): boolean => isTerminal(run.status);

/** The one artifact of a task: its output, streamed as text while the run works, whole when it completes. */
export const OUTPUT_ARTIFACT_ID = "output";

export function taskOf(run: TaskRun): Task {
  return {
    id: run.task_id,
    contextId: run.thread_id ?? "",
    status: statusOf(run),
    artifacts: run.status === "succeeded" ? [outputArtifact(run.output)] : [],
    // The conversation lives in the thread's state (the context), not in task history.
    history: [],
    metadata: { rudder_run_id: run.run_id, rudder_run_status: run.status },
  };
}

function statusOf(run: TaskRun): TaskStatus {
  return { state: taskStateOf(run.status), message: statusMessage(run), timestamp: run.updated_at };
}

/** What the agent says with a status: the interrupts' question when input is required, the error when it failed. */
function statusMessage(run: TaskRun): Message | undefined {
  if (run.status === "paused") {
    const interrupts = isObject(run.output) && Array.isArray(run.output.__interrupt__) ? run.output.__interrupt__ : [];
    return agentMessage(run, "input-required", [textPart(interruptText(interrupts)), dataPart({ interrupts })]);
  }
  if (run.error && taskStateOf(run.status) === TaskState.TASK_STATE_FAILED) {
    return agentMessage(run, "failed", [textPart(`${run.error.code}: ${run.error.message}`), dataPart({ error: run.error })]);
  }
  return undefined;
}

/** A single string question reads as itself; anything else as the JSON of the interrupts' values. */
function interruptText(interrupts: unknown[]): string {
  const values = interrupts.map((found) => (isObject(found) && "value" in found ? found.value : found));
  if (values.length === 1 && typeof values[0] === "string") return values[0];
  return JSON.stringify(values.length === 1 ? values[0] : values);
}

function agentMessage(run: TaskRun, purpose: string, parts: Part[]): Message {
  return {
    // Stable for the run, so reading the task twice gives the same message.
    messageId: `${run.run_id}:${purpose}`,
    contextId: run.thread_id ?? "",
    taskId: run.task_id,
    role: Role.ROLE_AGENT,
    parts,
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

function outputArtifact(output: unknown): Artifact {
  return artifact([dataPart(isObject(output) ? output : { output }), textPart(outputText(output))]);
}

function artifact(parts: Part[]): Artifact {
  return { artifactId: OUTPUT_ARTIFACT_ID, name: "output", description: "", parts, metadata: undefined, extensions: [] };
}

/**
 * Turns a run's events into a task's stream updates: `working` when an attempt starts, the chat
 * model's tokens as chunks appended to the output artifact, and, once the run is terminal or
 * paused, the whole output artifact and the final status. One mapper per stream: it remembers
 * whether the output artifact is open, so an attempt that starts over (a retry, a resumed run)
 * replaces what was streamed instead of appending to it.
 */
export class TaskEventMapper {
  private artifactOpen = false;

  constructor(private readonly task: Pick<TaskRun, "task_id" | "thread_id">) {}

  updates(event: RunEvent): StreamResponse[] {
    switch (event.kind) {
      case "run_started":
        this.artifactOpen = false;
        return [this.statusUpdate({ state: TaskState.TASK_STATE_WORKING, message: undefined, timestamp: event.created_at })];
      case "run_retrying":
        this.artifactOpen = false;
        return [];
      case "messages": {
        const text = tokenText(event.data);
        if (text === undefined) return [];
        const append = this.artifactOpen;
        this.artifactOpen = true;
        return [this.artifactUpdate(artifact([textPart(text)]), append, false)];
      }
      default:
        return [];
    }
  }

  /** The last updates of a stream: the output artifact of a completed run, then the run's final status. */
  finish(run: TaskRun): StreamResponse[] {
    const artifacts = run.status === "succeeded" ? [this.artifactUpdate(outputArtifact(run.output), false, true)] : [];
    return [...artifacts, this.statusUpdate(statusOf(run))];
  }

  private statusUpdate(status: TaskStatus): StreamResponse {
    return {
      payload: {
        $case: "statusUpdate",
        value: { taskId: this.task.task_id, contextId: this.task.thread_id ?? "", status, metadata: undefined },
      },
    };
  }

  private artifactUpdate(value: Artifact, append: boolean, lastChunk: boolean): StreamResponse {
    return {
      payload: {
        $case: "artifactUpdate",
        value: { taskId: this.task.task_id, contextId: this.task.thread_id ?? "", artifact: value, append, lastChunk, metadata: undefined },
      },
    };
  }
}

export const taskResponse = (task: Task): StreamResponse => ({ payload: { $case: "task", value: task } });
