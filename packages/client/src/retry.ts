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
 * This is the rule for calls that are safe to repeat: reads, and writes that carry an
 * Idempotency-Key or are idempotent by nature.
 */
export function shouldRetry(error: unknown): boolean {
  if (!(error instanceof RudderError)) return false;
  if (error.code === "idempotency_conflict") return false;
  if (error.status === 0 || error.retryable) return true;
  return error.status === 429 || TEMPORARY_STATUSES.has(error.status);
}

/**
 * The rule for writes that are not safe to repeat (create a thread, cancel, resume, redrive,
 * delete, fork, create a schedule or an assistant without an id): retried only when the answer
 * says the request was not carried out. That is a 503 (Rudder's: the database rolled the
 * transaction back, or this instance is closing or cannot reach its database; a proxy's: no
 * upstream took it) or a 4xx that `shouldRetry` allows (429, a 408 whose body never fully
 * arrived, a retryable refusal). Never after a network failure, nor after a 500, 502 or 504: the
 * server may have done the write before it failed (a Rudder 500 is a bug and may follow a commit;
 * a proxy's 502 or 504 may have lost the upstream's answer), and a second send would do it twice.
 */
export function shouldRetryUnsafeWrite(error: unknown): boolean {
  if (!shouldRetry(error)) return false;
  const { status } = error as RudderError;
  return status === 503 || (status >= 400 && status < 500);
}

/**
 * The Retry-After header in seconds (from now), in either of HTTP's forms: delay-seconds, or an
 * HTTP-date (a date in the past is 0). Undefined when absent or unreadable.
 */
export function retryAfterSeconds(header: string | null, now: number = Date.now()): number | undefined {
  const value = header?.trim();
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Number(value);
  // An HTTP-date starts with the day's name ("Wed, 21 Oct 2015 07:28:00 GMT"; the obsolete forms too).
  if (!/^[A-Za-z]{3}/.test(value)) return undefined;
  const date = Date.parse(value);
  return Number.isFinite(date) ? Math.max(0, (date - now) / 1000) : undefined;
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

/** Runs `call` until it succeeds, fails for good (`retryIf` says no), or the attempts run out; the last error is thrown. */
export async function withRetries<T>(
  call: (attempt: number) => Promise<T>,
  options: Required<RetryOptions>,
  signal?: AbortSignal,
  retryIf: (error: unknown) => boolean = shouldRetry,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call(attempt);
    } catch (error) {
      if (signal?.aborted || attempt >= options.attempts || !retryIf(error)) throw error;
      await sleep(backoffMs(error, attempt, options), signal);
    }
  }
}
