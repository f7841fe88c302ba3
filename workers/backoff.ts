import { retryDelay } from '../src/domain/outbound/attempt';

/**
 * Thrown by a processor to retry after exactly `delayMs`: the delay the attempt recorded on its row
 * as the next attempt time, so the queue and the database agree on when the retry is due.
 */
export class RetryLaterError extends Error {
  constructor(message: string, readonly delayMs: number) {
    super(message);
  }
}

/** BullMQ custom backoff for jobs with `backoff.type = 'webhook-schedule'`. */
export function backoffStrategy(schedule: readonly number[]) {
  return (attemptsMade: number, type?: string, err?: Error): number => {
    if (err instanceof RetryLaterError) return err.delayMs;
    if (type !== 'webhook-schedule') return 1000 * 2 ** Math.max(0, attemptsMade - 1);
    return retryDelay(schedule, attemptsMade, null);
  };
}
