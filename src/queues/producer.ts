import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { DEFAULT_JOB_OPTIONS, QUEUE_NAMES, type JobName, type JobPayload, type QueueName } from './catalogue';

interface PendingJob {
  name: string;
  data: unknown;
  opts: { jobId: string };
  settle: (err?: unknown) => void;
}

/** The one place that adds jobs; typed by the catalogue. */
export class Producer {
  private readonly queues = new Map<QueueName, Queue>();
  private readonly pending = new Map<QueueName, PendingJob[]>();
  private flushScheduled = false;

  constructor(connection: Redis, prefix: string) {
    for (const name of QUEUE_NAMES) {
      const queue = new Queue(name, { connection, prefix, defaultJobOptions: DEFAULT_JOB_OPTIONS[name] });
      // Connection errors reach the callers of add(); unheard, they would end the process.
      queue.on('error', () => {});
      this.queues.set(name, queue);
    }
  }

  queue(name: QueueName): Queue {
    return this.queues.get(name)!;
  }

  /**
   * Queues the job of a database row that is still owed work, whatever the queue remembers of it,
   * so that a job id derived from the row never runs twice at once and never starts a second chain:
   * - a job running now is left alone (it reads the row afresh when it settles): 'live';
   * - a waiting or delayed job is left alone ('live') unless `replaceWaiting`, which replaces it so
   *   its schedule gives way to `delay` (a manual retry runs now, not at the old retry time);
   * - a completed or failed job, or none at all (Redis forgot it), is (re)added: 'queued'.
   */
  async requeue<Q extends QueueName, N extends JobName<Q>>(
    queue: Q, name: N, payload: JobPayload<Q, N>,
    opts: { jobId: string; delay?: number; attempts?: number; replaceWaiting?: boolean },
  ): Promise<'queued' | 'live'> {
    const q = this.queue(queue);
    const existing = await q.getJob(opts.jobId);
    if (existing) {
      const state = await existing.getState();
      if (state === 'active') return 'live';
      if (!opts.replaceWaiting && state !== 'completed' && state !== 'failed' && state !== 'unknown') return 'live';
      try {
        await existing.remove();
      } catch {
        return 'live'; // a worker took it between the two calls: it is running now
      }
    }
    await q.add(name, payload, {
      jobId: opts.jobId, ...(opts.delay ? { delay: opts.delay } : {}), ...(opts.attempts ? { attempts: opts.attempts } : {}),
    });
    return 'queued';
  }

  async add<Q extends QueueName, N extends JobName<Q>>(
    queue: Q, name: N, payload: JobPayload<Q, N>, opts: { jobId: string; delay?: number; attempts?: number },
  ): Promise<void> {
    await this.queue(queue).add(name, payload, opts);
  }

  /**
   * Adds a job together with the others added in the same tick: one `addBulk` round trip per queue
   * instead of one per job, which matters on the submission hot path.
   */
  addSoon<Q extends QueueName, N extends JobName<Q>>(
    queue: Q, name: N, payload: JobPayload<Q, N>, opts: { jobId: string },
  ): Promise<void> {
    return new Promise((resolve, reject) => {
      const batch = this.pending.get(queue) ?? [];
      batch.push({ name, data: payload, opts, settle: (err) => (err ? reject(err) : resolve()) });
      this.pending.set(queue, batch);
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.flushScheduled = false;
    for (const [queue, batch] of this.pending) {
      this.pending.delete(queue);
      this.queue(queue).addBulk(batch.map(({ name, data, opts }) => ({ name, data, opts })))
        .then(() => batch.forEach((job) => job.settle()), (err) => batch.forEach((job) => job.settle(err)));
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close()));
  }
}
