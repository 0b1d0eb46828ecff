import type { Notice, Notifier } from "./notifier.ts";

/** Why a waiter was woken: its first look, a matching notice, or a quiet recheck interval. */
export type Wakeup = "start" | "notice" | "recheck";

/**
 * The wake-ups of a waiter that re-reads durable storage (notices are only hints): yields "start"
 * at once, then "notice" when a matching notice arrived (also one that arrived while the caller
 * was reading), or "recheck" when `intervalMs` passed without one. Ends when `signal` aborts. The
 * subscription is held for the whole iteration, so a notice between two reads is never missed.
 */
export async function* wakeups(
  notifier: Notifier,
  match: (notice: Notice) => boolean,
  options: { intervalMs: number; signal?: AbortSignal },
): AsyncGenerator<Wakeup, void, undefined> {
  const { signal } = options;
  let noticed = false;
  let wake: (() => void) | undefined;
  const unsubscribe = notifier.subscribe((notice) => {
    if (!match(notice)) return;
    noticed = true;
    wake?.();
  });
  const onAbort = () => wake?.();
  signal?.addEventListener("abort", onAbort);
  try {
    if (signal?.aborted) return;
    yield "start";
    while (!signal?.aborted) {
      if (!noticed) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, options.intervalMs);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = undefined;
      }
      if (signal?.aborted) return;
      const reason = noticed ? "notice" : "recheck";
      noticed = false;
      yield reason;
    }
  } finally {
    unsubscribe();
    signal?.removeEventListener("abort", onAbort);
  }
}
