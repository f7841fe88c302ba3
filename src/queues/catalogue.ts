import type { JobsOptions } from 'bullmq';
import type { Config } from '../../config';
import { maxAttempts } from '../domain/outbound/attempt';

/**
 * Every queue, its job names and their payloads. Payloads carry ids only, never secrets or
 * submitted values: workers read the rest from PostgreSQL.
 */
export interface JobCatalogue {
  submissions: {
    /** Only for outbox rows of created submissions written before their statement decided the fan-out itself. */
    fanout: { submissionId: string; outboxId: string };
    'fanout-deletion': { submissionId: string; outboxId: string };
  };
  webhooks: {
    deliver: { deliveryId: string };
    /**
     * The first attempt of each delivery one storing group created (job_group), in one job: one
     * BullMQ round trip for the lot. Each member carries the trace of the request that stored it.
     */
    'deliver-group': { group: string; deliveries: DeliveryGroupMember[] };
  };
  crm: { sync: { syncId: string } };
  usage: {
    'relay-outbox': Record<string, never>;
    'rollup-usage': Record<string, never>;
    'maintenance': Record<string, never>;
    'sweep-owed': Record<string, never>;
    'mark-days': Record<string, never>;
  };
}

export interface DeliveryGroupMember {
  deliveryId: string;
  /** The storing request's trace context (jobTraceMetadata), so the attempt continues its trace. */
  trace?: string;
}

export type QueueName = keyof JobCatalogue;
export type JobName<Q extends QueueName> = keyof JobCatalogue[Q] & string;
export type JobPayload<Q extends QueueName, N extends JobName<Q>> = JobCatalogue[Q][N];

export const QUEUE_NAMES: readonly QueueName[] = ['submissions', 'webhooks', 'crm', 'usage'];

export const JOB_NAMES: { [Q in QueueName]: readonly JobName<Q>[] } = {
  submissions: ['fanout', 'fanout-deletion'],
  webhooks: ['deliver', 'deliver-group'],
  crm: ['sync'],
  usage: ['relay-outbox', 'rollup-usage', 'maintenance', 'sweep-owed', 'mark-days'],
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
  // Webhook and CRM retries follow the configured delay list (see workers/backoff.ts); their attempts
  // come from its length (jobOptions).
  webhooks: { ...RETENTION, backoff: { type: 'webhook-schedule' } },
  crm: { ...RETENTION, backoff: { type: 'webhook-schedule' } },
  usage: { ...RETENTION, attempts: 3, backoff: { type: 'exponential', delay: 1000 } },
};

/** How often each repeatable job of the usage queue runs, in ms. */
export function usageSchedule(config: Pick<Config, 'owedSweepIntervalMs'>): Record<JobName<'usage'>, number> {
  return {
    'relay-outbox': 5_000,
    'rollup-usage': 60_000,
    'maintenance': 3_600_000,
    'sweep-owed': config.owedSweepIntervalMs,
    // the day marks of busy days (src/domain/submissions/day-marks.ts), kept within a minute of their margin
    'mark-days': 30_000,
  };
}

/** Job ids derive from database ids so enqueuing twice is harmless; BullMQ forbids ':' in them. */
export const jobIds = {
  fanout: (submissionId: string) => `fanout-${submissionId}`,
  fanoutDeletion: (submissionId: string) => `fanout-deleted-${submissionId}`,
  /** One id per delivery for its whole life: a manual retry or a recovery replaces its job (Producer.requeue). */
  deliver: (deliveryId: string) => `deliver-${deliveryId}`,
  /**
   * The job holding the first attempts of a storing group's deliveries: while it is live, so are
   * its members' (Producer.requeue's `heldBy`), so nothing queues them a second time.
   */
  deliverGroup: (group: string) => `deliver-group-${group}`,
  crmSync: (syncId: string, generation = 0) => generation ? `crm-${syncId}-r${generation}` : `crm-${syncId}`,
};

/** What every job of the catalogue is added with: an id derived from its payload, and its attempts. */
export interface JobOptions {
  jobId: string;
  attempts?: number;
  delay?: number;
  removeOnComplete?: boolean;
}

type Payloads = { [Q in QueueName]: { [N in JobName<Q>]: (payload: JobPayload<Q, N>) => string } };

/** The job id of each job added by id (the usage jobs run on schedulers and have none here). */
const JOB_ID: { [Q in Exclude<QueueName, 'usage'>]: Payloads[Q] } = {
  submissions: {
    fanout: ({ submissionId }) => jobIds.fanout(submissionId),
    'fanout-deletion': ({ submissionId }) => jobIds.fanoutDeletion(submissionId),
  },
  webhooks: {
    deliver: ({ deliveryId }) => jobIds.deliver(deliveryId),
    'deliver-group': ({ group }) => jobIds.deliverGroup(group),
  },
  crm: { sync: ({ syncId }) => jobIds.crmSync(syncId) },
};

/** Queues whose jobs retry on the configured delay list: one attempt more than it has delays. */
const SCHEDULED_RETRIES: ReadonlySet<QueueName> = new Set(['webhooks', 'crm']);

/**
 * Jobs that run once: a group's members that need a second attempt continue as jobs of their own,
 * and a group job that failed leaves its unattempted members to the sweeps. Kept only when failed:
 * a completed one tells nothing its rows do not.
 */
const SINGLE_RUN: ReadonlySet<string> = new Set(['webhooks/deliver-group']);

/**
 * The options of one job. `retrySchedule` is the configured delay list; without it, scheduled jobs
 * keep the queue's default attempts.
 */
export function jobOptions<Q extends Exclude<QueueName, 'usage'>, N extends JobName<Q>>(
  queue: Q, name: N, payload: JobPayload<Q, N>, retrySchedule?: readonly number[],
): JobOptions {
  const jobId = (JOB_ID[queue] as Record<string, (p: unknown) => string>)[name](payload);
  if (SINGLE_RUN.has(`${queue}/${name}`)) return { jobId, attempts: 1, removeOnComplete: true };
  if (!retrySchedule || !SCHEDULED_RETRIES.has(queue)) return { jobId };
  return { jobId, attempts: maxAttempts(retrySchedule) };
}
