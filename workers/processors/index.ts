import type { Job } from 'bullmq';
import type { AppContext } from '../../src/app';
import type { JobName, QueueName } from '../../src/queues/catalogue';
import { sync } from './crm';
import { fanout, fanoutDeletion } from './submissions';
import { markDays, maintenance, relay, rollup, scheduleUsageJobs, sweep } from './usage';
import { deliver, deliverGroup } from './webhooks';

export type Processor = (app: AppContext, job: Job) => Promise<unknown>;

export const PROCESSORS: { [Q in QueueName]: Record<JobName<Q>, Processor> } = {
  submissions: { fanout, 'fanout-deletion': fanoutDeletion },
  webhooks: { deliver, 'deliver-group': deliverGroup },
  crm: { sync },
  usage: { 'relay-outbox': relay, 'rollup-usage': rollup, 'maintenance': maintenance, 'sweep-owed': sweep, 'mark-days': markDays },
};

/** Per-queue start-up work (e.g. scheduling repeatable jobs); what it answers stops its timers. */
export const PROCESSORS_INIT: Partial<Record<QueueName, (app: AppContext) => Promise<() => void>>> = {
  usage: scheduleUsageJobs,
};
