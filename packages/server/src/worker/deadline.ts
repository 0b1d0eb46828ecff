/** The longest delay Node's timers take (2^31 − 1 ms, about 24.8 days); longer ones fire at once. */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * Calls `fire` at `deadlineMs` (epoch ms), however far away: a wait beyond what one timer holds is
 * re-armed in steps, so a run_timeout of months is honoured instead of firing immediately.
 */
export function atDeadline(deadlineMs: number, fire: () => void): { cancel(): void } {
  let timer: NodeJS.Timeout;
  const arm = () => {
    const remaining = deadlineMs - Date.now();
    timer = remaining > MAX_TIMER_MS ? setTimeout(arm, MAX_TIMER_MS) : setTimeout(fire, Math.max(0, remaining));
  };
  arm();
  return { cancel: () => clearTimeout(timer) };
}
