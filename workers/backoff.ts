/** Thrown by a processor when the target asked for a later retry (429/503 Retry-After). */
export class RetryLaterError extends Error {
  constructor(message: string, readonly retryAfterMs: number) {
    super(message);
  }
}

/**
 * The delay before retry `attempt` (1-based) from the configured schedule, with up to 20% jitter.
 * A Retry-After is honoured: at least the scheduled delay, at most twice it.
 */
export function retryDelay(schedule: readonly number[], attempt: number, retryAfterMs: number | null, random = Math.random): number {
  const scheduled = schedule[Math.min(attempt, schedule.length) - 1] ?? 0;
  const jittered = Math.round(scheduled * (1 + 0.2 * random()));
  if (retryAfterMs === null) return jittered;
  return Math.min(Math.max(retryAfterMs, jittered), 2 * scheduled || retryAfterMs);
}

/** BullMQ custom backoff for jobs with `backoff.type = 'webhook-schedule'`. */
export function backoffStrategy(schedule: readonly number[]) {
  return (attemptsMade: number, type?: string, err?: Error): number => {
    if (type !== 'webhook-schedule') return 1000 * 2 ** Math.max(0, attemptsMade - 1);
    return retryDelay(schedule, attemptsMade, err instanceof RetryLaterError ? err.retryAfterMs : null);
  };
}
