import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { DEFAULT_JOB_OPTIONS, QUEUE_NAMES, type JobName, type JobPayload, type QueueName } from './catalogue';

/** The one place that adds jobs; typed by the catalogue. */
export class Producer {
  private readonly queues = new Map<QueueName, Queue>();

  constructor(connection: Redis, prefix: string) {
    for (const name of QUEUE_NAMES) {
      this.queues.set(name, new Queue(name, { connection, prefix, defaultJobOptions: DEFAULT_JOB_OPTIONS[name] }));
    }
  }

  queue(name: QueueName): Queue {
    return this.queues.get(name)!;
  }

  async add<Q extends QueueName, N extends JobName<Q>>(
    queue: Q, name: N, payload: JobPayload<Q, N>, opts: { jobId: string; delay?: number; attempts?: number },
  ): Promise<void> {
    await this.queue(queue).add(name, payload, opts);
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close()));
  }
}
