/**
 * Thrown by a processor to retry after exactly `delayMs`: the delay the attempt recorded on its row
 * as the next attempt time, so the queue and the database agree on when the retry is due.
 */
export class RetryLaterError extends Error {
  constructor(message: string, readonly delayMs: number) {
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
    if (err instanceof RetryLaterError) return err.delayMs;
    if (type !== 'webhook-schedule') return 1000 * 2 ** Math.max(0, attemptsMade - 1);
    return retryDelay(schedule, attemptsMade, null);
  };
}
