import type { Job, Queue } from 'bullmq';
import type { AppContext } from '../app';
import { countOutboxBacklog } from '../domain/outbox/store';
import { QUEUE_NAMES } from '../queues/catalogue';

export interface QueueStats {
  name: string;
  waiting: number;
  active: number;
  delayed: number;
  failed: number;
  completed: number;
  paused: boolean;
  /** null when nothing waits. */
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

/**
 * When the job became due: its creation plus its initial delay, or for a retry the start of the
 * previous attempt (BullMQ keeps no trace of when a retry's backoff ended).
 */
export function dueSince(job: Pick<Job, 'timestamp' | 'opts' | 'processedOn' | 'attemptsMade'>): number {
  const firstDue = job.timestamp + (job.opts.delay ?? 0);
  return job.attemptsMade > 0 && job.processedOn ? Math.max(firstDue, job.processedOn) : firstDue;
}

/**
 * One queue's counts in three commands sent together on one connection, whatever the number
 * of jobs: a scrape or a health check never costs a round trip per job.
 */
export async function readQueueStats(queue: Queue, now = Date.now()): Promise<QueueStats> {
  const [counts, oldest, paused] = await Promise.all([
    // BullMQ 6 has no 'paused' list: a paused queue's jobs are counted as waiting.
    queue.getJobCounts(...COUNTED_STATES),
    // New jobs are pushed at the head of the wait list, so the first one in ascending order is the oldest.
    queue.getJobs(['wait'], 0, 0, true),
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
    oldestWaitingAgeSeconds: oldest[0] ? Math.max(0, now - dueSince(oldest[0])) / 1000 : null,
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
