import { RudderError } from "./errors.ts";

/** How the client retries (spec section 7, "Client retry rules"). */
export interface RetryOptions {
  /** Attempts in all, the first included (default 4; 1 turns retries off). */
  readonly attempts?: number;
  /** The first backoff (default 250 ms); each further one doubles, with full jitter. */
  readonly baseMs?: number;
  /** The longest backoff, and the longest Retry-After honoured (default 10 s). */
  readonly capMs?: number;
}

export const DEFAULT_RETRY: Required<RetryOptions> = { attempts: 4, baseMs: 250, capMs: 10_000 };

/** Temporary 5xx answers: worth another try. */
const TEMPORARY_STATUSES = new Set([500, 502, 503, 504]);

/**
 * Rule 1: retry only on `retryable: true`, network failures, 429 and temporary 5xx. Rule 6:
 * never after `idempotency_conflict` (nor any other non-retryable 4xx); rule 5: never redrive.
 */
export function shouldRetry(error: unknown): boolean {
  if (!(error instanceof RudderError)) return false;
  if (error.code === "idempotency_conflict") return false;
  if (error.status === 0 || error.retryable) return true;
  return error.status === 429 || TEMPORARY_STATUSES.has(error.status);
}

/** Rule 2: Retry-After when the server sent one (bounded by the cap), else exponential backoff with full jitter. */
export function backoffMs(error: unknown, attempt: number, options: Required<RetryOptions>, random: () => number = Math.random): number {
  if (error instanceof RudderError && error.retryAfterSeconds !== undefined) return Math.min(options.capMs, error.retryAfterSeconds * 1000);
  const ceiling = Math.min(options.capMs, options.baseMs * 2 ** (attempt - 1));
  return Math.round(random() * ceiling);
}

/** Waits `ms`, or rejects at once when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Runs `call` until it succeeds, fails for good, or the attempts run out; the last error is thrown. */
export async function withRetries<T>(
  call: (attempt: number) => Promise<T>,
  options: Required<RetryOptions>,
  signal?: AbortSignal,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call(attempt);
    } catch (error) {
      if (signal?.aborted || attempt >= options.attempts || !shouldRetry(error)) throw error;
      await sleep(backoffMs(error, attempt, options), signal);
    }
  }
}
