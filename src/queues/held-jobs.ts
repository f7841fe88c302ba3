import type { Job, MinimalJob } from 'bullmq';
import type { Redis } from 'ioredis';

/**
 * A job field of ours, beside BullMQ's: the epoch ms at which a job held back by its processor (a
 * webhook's throttleRate or a receiver's Retry-After, a CRM connection's pause) becomes due again.
 *
 * BullMQ keeps no such time once the job is due: `moveToDelayed` writes its delay to the job's
 * `delay` field and a score to the delayed set, and the promotion to wait (promoteDelayedJobs.lua)
 * drops the job from that set and sets `delay` back to 0, while `timestamp` stays the job's
 * creation. So the queue's lateness (src/ops/queue-health.ts) would read a delivery held for an
 * hour as an hour late the moment its turn comes. This field survives the promotion.
 */
export const DUE_AT_FIELD = 'fsDueAt';

/**
 * Moves an active job, which this worker holds the lock of, back to delayed until `untilMs`,
 * without spending an attempt, and notes when it will be due. The caller then throws BullMQ's
 * `DelayedError`. The field is written first, while the lock guarantees the job exists (a write
 * after the move could recreate the key of a job already finished and removed).
 */
export async function holdJobUntil(redis: Redis, job: Job, untilMs: number): Promise<void> {
  await noteDueAt(redis, job, untilMs);
  await job.moveToDelayed(untilMs, job.token);
}

/**
 * Notes when an active job, which this worker holds the lock of, will be due again. Best effort: a
 * note that fails (a slow Redis on the fail-fast client) costs the gauge its precision for this
 * job, never the job its hold or its retry.
 */
async function noteDueAt(redis: Redis, job: Pick<MinimalJob, "queueQualifiedName" | "id">, untilMs: number): Promise<void> {
  await redis.hset(`${job.queueQualifiedName}:${job.id}`, DUE_AT_FIELD, String(Math.round(untilMs))).catch(() => undefined);
}

type BackoffStrategy = (attemptsMade: number, type?: string, err?: Error, job?: MinimalJob) => number;

/**
 * A custom backoff strategy that also notes when the retry it spaces will be due. BullMQ calls the
 * strategy while the failed job is still active and locked, just before it moves the job to
 * delayed (Job.shouldRetryJob, then moveToDelayed), and the promotion forgets the retry's time as
 * it forgets a hold's: without the note, a webhook retry after a 24 h backoff would read as a day
 * late the moment it is due (dueSince would fall back to the start of the failed attempt).
 */
export function notingRetryDue(redis: Redis, strategy: BackoffStrategy) {
  return async (attemptsMade: number, type?: string, err?: Error, job?: MinimalJob): Promise<number> => {
    const delay = strategy(attemptsMade, type, err, job);
    if (job && delay > 0) await noteDueAt(redis, job, Date.now() + delay);
    return delay;
  };
}
