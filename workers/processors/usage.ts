import type { AppContext } from '../../src/app';
import { purgeSubmissionChanges } from '../../src/domain/submissions/changes';
import { dropExpiredSubmissionPartitions, ensureSubmissionPartitions } from '../../src/domain/submissions/partitions';
import { runMaintenance } from '../../src/domain/maintenance/maintenance';
import { sweepAbandonedPayments } from '../../src/domain/payments/refunds';
import { relayOutbox } from '../../src/domain/outbox/relay';
import { sweepOwed, sweepUnqueued } from '../../src/domain/outbox/sweep-owed';
import { rollupUsage } from '../../src/domain/usage/rollup';
import { usageSchedule } from '../../src/queues/catalogue';

/**
 * Repeatable jobs; upsertJobScheduler is idempotent, so every usage worker process may call it. The
 * schedules live in Redis: each time the connection opens again they are written anew, so a Redis
 * that came back empty still runs the relay and the sweep that recover what it forgot.
 */
export async function scheduleUsageJobs(app: AppContext): Promise<void> {
  const queue = app.producer.queue('usage');
  const upsertAll = async () => {
    for (const [name, every] of Object.entries(usageSchedule(app.config))) {
      await queue.upsertJobScheduler(name, { every }, { name, data: {} });
    }
  };
  await upsertAll();
  app.producer.onConnected(() => {
    upsertAll().catch((err) => app.logger.warn({ err: err.message }, 'cannot restore the usage job schedules'));
  });
}

export const relay = async (app: AppContext) => ({ relayed: await relayOutbox(app), unqueued: await sweepUnqueued(app) });
export const rollup = async (app: AppContext) => rollupUsage(app.orm.em.fork());
export const maintenance = async (app: AppContext) => {
  const em = app.orm.em.fork();
  const { retentionDays } = app.config;
  const { submissionRetentionMonths } = app.config;
  return {
    ...(await runMaintenance(em, { retentionDays })),
    submissionChangesDeleted: await purgeSubmissionChanges(em, retentionDays),
    submissionPartitionsCreated: await ensureSubmissionPartitions(em),
    submissionPartitionsDropped: submissionRetentionMonths ? await dropExpiredSubmissionPartitions(em, submissionRetentionMonths) : [],
    ...(await sweepAbandonedPayments(app)),
  };
};
export const sweep = async (app: AppContext) => sweepOwed(app);
