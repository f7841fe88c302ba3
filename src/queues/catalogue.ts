import type { JobsOptions } from 'bullmq';

/**
 * Every queue, its job names and their payloads. Payloads carry ids only, never secrets or
 * submitted values: workers read the rest from PostgreSQL.
 */
export interface JobCatalogue {
  submissions: {
    fanout: { submissionId: string; outboxId: string };
    'fanout-deletion': { submissionId: string; outboxId: string };
  };
  webhooks: { deliver: { deliveryId: string } };
  crm: { sync: { syncId: string } };
  usage: {
    'relay-outbox': Record<string, never>;
    'rollup-usage': Record<string, never>;
    'maintenance': Record<string, never>;
  };
}

export type QueueName = keyof JobCatalogue;
export type JobName<Q extends QueueName> = keyof JobCatalogue[Q] & string;
export type JobPayload<Q extends QueueName, N extends JobName<Q>> = JobCatalogue[Q][N];

export const QUEUE_NAMES: readonly QueueName[] = ['submissions', 'webhooks', 'crm', 'usage'];

export const JOB_NAMES: { [Q in QueueName]: readonly JobName<Q>[] } = {
  submissions: ['fanout', 'fanout-deletion'],
  webhooks: ['deliver'],
  crm: ['sync'],
  usage: ['relay-outbox', 'rollup-usage', 'maintenance'],
};

/** Failed jobs are kept longer than completed ones so operators can inspect them. */
const RETENTION = {
  removeOnComplete: { age: 3600, count: 10_000 },
  removeOnFail: { age: 7 * 24 * 3600, count: 50_000 },
};

export const DEFAULT_JOB_OPTIONS: { [Q in QueueName]: JobsOptions } = {
  // One fan-out per submission: keeping each completed one would cost Redis work on the hot path and
  // show nothing the outbox does not (processed_at). Failures are kept like everywhere else.
  submissions: { ...RETENTION, removeOnComplete: true, attempts: 10, backoff: { type: 'exponential', delay: 1000 } },
  // Webhook and CRM retries follow the configured delay list (see workers/backoff.ts).
  webhooks: { ...RETENTION, backoff: { type: 'webhook-schedule' } },
  crm: { ...RETENTION, backoff: { type: 'webhook-schedule' } },
  usage: { ...RETENTION, attempts: 3, backoff: { type: 'exponential', delay: 1000 } },
};

/** Job ids derive from database ids so enqueuing twice is harmless; BullMQ forbids ':' in them. */
export const jobIds = {
  fanout: (submissionId: string) => `fanout-${submissionId}`,
  fanoutDeletion: (submissionId: string) => `fanout-deleted-${submissionId}`,
  /** One id per delivery for its whole life: a manual retry or a recovery replaces its job (Producer.requeue). */
  deliver: (deliveryId: string) => `deliver-${deliveryId}`,
  crmSync: (syncId: string, generation = 0) => generation ? `crm-${syncId}-r${generation}` : `crm-${syncId}`,
};
