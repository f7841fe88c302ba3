import type { Queue, RedisQueueBackend } from 'bullmq';
import type { Redis } from 'ioredis';
import type { AppContext } from '../app';
import { countOutboxBacklog } from '../domain/outbox/store';
import { QUEUE_NAMES } from '../queues/catalogue';
import { DUE_AT_FIELD } from '../queues/held-jobs';

export interface QueueStats {
  name: string;
  waiting: number;
  active: number;
  delayed: number;
  failed: number;
  completed: number;
  paused: boolean;
  /** How long the longest-due job has waited since it became due (readOldestDue); null when none is due. */
  oldestWaitingAgeSeconds: number | null;
}

export interface QueueHealth extends QueueStats {
  /** Worker connections BullMQ sees for this queue. */
  workers: number;
}

export interface QueueHealthReport {
  queues: QueueHealth[];
  outboxBacklog: number;
  /** Webhook deliveries held back, not attempted, by their webhook's throttleRate or a receiver's 429 Retry-After. */
  throttledDeliveries: number;
}

const COUNTED_STATES = ['waiting', 'prioritized', 'active', 'delayed', 'failed', 'completed'] as const;

/** What a job's hash tells of when it became due (the fields BullMQ keeps, and ours). */
export interface DueFields {
  timestamp: number;
  opts: { delay?: number };
  processedOn?: number;
  attemptsMade: number;
  /** Set by holdJobUntil (src/queues/held-jobs.ts) when a processor held the job back. */
  dueAt?: number;
}

/**
 * When a waiting job became due: its creation plus its initial delay; for a job its processor held
 * back (a throttled or paused delivery, a paused CRM connection) the end of that hold, which BullMQ
 * itself forgets on promotion (`delay` back to 0, `timestamp` still the creation), and for a
 * webhook or CRM retry the end of its backoff (noted by notingRetryDue); for another retry the start
 * of the previous attempt (BullMQ keeps no trace of when BullMQ's own backoff ended, so such a retry
 * reads late by at most that backoff, seconds to minutes, for as long as it waits).
 */
export function dueSince(job: DueFields): number {
  const firstDue = job.timestamp + (job.opts.delay ?? 0);
  const retried = job.attemptsMade > 0 && job.processedOn ? job.processedOn : 0;
  return Math.max(firstDue, retried, job.dueAt ?? 0);
}

/** A delayed job's time: BullMQ scores the delayed set `dueMs * 0x1000 + n` (getDelayedScore.lua). */
export function dueOfDelayedScore(score: number): number {
  return Math.floor(score / 0x1000);
}

type QueueRedis = Pick<Redis, 'pipeline' | 'hmget'>;

/** The raw client of a queue (BullMQ's Redis backend's documented escape hatch). */
function clientOf(queue: Queue): Promise<QueueRedis> {
  return (queue.getBackend() as unknown as RedisQueueBackend).client as unknown as Promise<QueueRedis>;
}

/**
 * The epoch ms since which the longest-due job of a queue has waited, or null when none is due:
 * the tail of the wait list (jobs enter it at the head as they become due, and workers take from
 * the tail) and the head of the delayed set when its time has passed (no worker promoted it).
 * Two round trips, whatever the number of jobs.
 */
export async function readOldestDue(queue: Queue, now = Date.now()): Promise<number | null> {
  const client = await clientOf(queue);
  const replies = await client.pipeline()
    .lrange(queue.keys.wait, -1, -1)
    .zrange(queue.keys.delayed, '0', '0', 'WITHSCORES')
    .exec();
  const [[waitErr, tail], [delayedErr, head]] = replies as Array<[Error | null, string[]]>;
  if (waitErr) throw waitErr;
  if (delayedErr) throw delayedErr;
  const candidates: number[] = [];
  if (head.length === 2) {
    const due = dueOfDelayedScore(Number(head[1]));
    if (due <= now) candidates.push(due);
  }
  if (tail.length === 1) {
    const [timestamp, opts, processedOn, attemptsMade, dueAt] = await client.hmget(
      queue.toKey(tail[0]), 'timestamp', 'opts', 'processedOn', 'atm', DUE_AT_FIELD,
    );
    // Gone meanwhile (taken and removed): the next sample sees the new tail.
    if (timestamp) {
      const parsedOpts = (() => { try { return JSON.parse(opts ?? '{}') as { delay?: number }; } catch { return {}; } })();
      candidates.push(dueSince({
        timestamp: Number(timestamp),
        opts: { delay: typeof parsedOpts.delay === 'number' ? parsedOpts.delay : undefined },
        processedOn: processedOn ? Number(processedOn) : undefined,
        attemptsMade: Number(attemptsMade ?? 0),
        // A job in wait is due: a noted time still ahead is a hold or retry that never happened
        // (its move to delayed failed when the lock was lost, and the stall check put it back).
        dueAt: dueAt && Number(dueAt) <= now ? Number(dueAt) : undefined,
      }));
    }
  }
  return candidates.length ? Math.min(...candidates) : null;
}

/**
 * One queue's counts in a few commands sent together, whatever the number of jobs: a scrape or a
 * health check never costs a round trip per job.
 */
export async function readQueueStats(queue: Queue, now = Date.now()): Promise<QueueStats> {
  const [counts, oldestDue, paused] = await Promise.all([
    // BullMQ 6 has no 'paused' list: a paused queue's jobs are counted as waiting.
    queue.getJobCounts(...COUNTED_STATES),
    readOldestDue(queue, now),
    queue.isPaused(),
  ]);
  return {
    name: queue.name,
    waiting: (counts.waiting ?? 0) + (counts.prioritized ?? 0),
    active: counts.active ?? 0,
    delayed: counts.delayed ?? 0,
    failed: counts.failed ?? 0,
    completed: counts.completed ?? 0,
    paused,
    oldestWaitingAgeSeconds: oldestDue === null ? null : Math.max(0, now - oldestDue) / 1000,
  };
}

export async function readOutboxBacklog(app: AppContext): Promise<number> {
  return countOutboxBacklog(app.orm.em.fork());
}

/** One queue's counts and the worker connections BullMQ sees for it. */
export async function readQueueHealthOf(queue: Queue): Promise<QueueHealth> {
  const [stats, workers] = await Promise.all([readQueueStats(queue), queue.getWorkersCount()]);
  return { ...stats, workers };
}

export async function readQueueHealth(app: AppContext): Promise<QueueHealthReport> {
  const [queues, outboxBacklog, throttledDeliveries] = await Promise.all([
    Promise.all(QUEUE_NAMES.map((name) => readQueueHealthOf(app.producer.queue(name)))),
    readOutboxBacklog(app),
    app.throttle.countWaiting(),
  ]);
  return { queues, outboxBacklog, throttledDeliveries };
}
