import type { Job } from 'bullmq';
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
  // Best effort: a note that fails (a slow Redis on the fail-fast client) costs the gauge its
  // precision for this job, never the job its hold.
  await redis.hset(`${job.queueQualifiedName}:${job.id}`, DUE_AT_FIELD, String(Math.round(untilMs))).catch(() => undefined);
  await job.moveToDelayed(untilMs, job.token);
}
