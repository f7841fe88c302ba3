import type { Job } from 'bullmq';
import type { AppContext } from '../../src/app';
import type { QueueName } from '../../src/queues/catalogue';

export type Processor = (app: AppContext, job: Job) => Promise<unknown>;

export const PROCESSORS: { [Q in QueueName]: Record<string, Processor> } = {
  submissions: {},
  webhooks: {},
  crm: {},
  usage: {},
};

/** Per-queue start-up work (e.g. scheduling repeatable jobs). */
export const PROCESSORS_INIT: Partial<Record<QueueName, (app: AppContext) => Promise<void>>> = {};
