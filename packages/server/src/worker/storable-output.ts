import { serializedFault, UnstorableOutputError } from "../domain/storable-json.ts";
import type { PendingEvent } from "../storage/events.ts";

/**
 * Throws `UnstorableOutputError` unless the event can be written, before it is buffered: an
 * event the database refuses fails the attempt here, once, saying where, rather than failing
 * every flush. Serialises the data as storage will, and returns that JSON: the writer stores it
 * as is instead of serialising the data again.
 */
export function assertStorable(event: PendingEvent): string | undefined {
  let text: string;
  try {
    text = JSON.stringify(event.data);
  } catch (error) {
    const reason = error instanceof RangeError ? "is nested too deeply to be serialised" : `is not JSON (${(error as Error).message})`;
    throw new UnstorableOutputError(`the graph's output cannot be stored: the data of its "${event.kind}" event ${reason}`);
  }
  const fault = serializedFault(text);
  if (fault)
    throw new UnstorableOutputError(
      `the graph's output cannot be stored: the data of its "${event.kind}" event at ${fault.path || "/"} ${fault.problem}`,
    );
  return text;
}
