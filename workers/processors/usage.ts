import type { AppContext } from '../../src/app';
import { purgeSubmissionChanges } from '../../src/domain/submissions/changes';
import { buildDayMarks } from '../../src/domain/submissions/day-marks';
import { metrics } from '../../src/lib/metrics';
import { dropExpiredSubmissionPartitions, ensureSubmissionPartitions } from '../../src/domain/submissions/partitions';
import { runMaintenance } from '../../src/domain/maintenance/maintenance';
import { sweepAbandonedPayments } from '../../src/domain/payments/refunds';
import { sweepUploads } from '../../src/domain/files/uploads';
import { relayOutbox } from '../../src/domain/outbox/relay';
import { sweepOwed, sweepUnqueued } from '../../src/domain/outbox/sweep-owed';
import { rollupUsage } from '../../src/domain/usage/rollup';
import { usageSchedule } from '../../src/queues/catalogue';

/**
 * Repeatable jobs; upsertJobScheduler is idempotent, so every usage worker process may call it. The
 * schedules live in Redis, which may forget them: written anew each time the connection opens again
 * (a Redis that came back empty), and looked for every sweep interval (a Redis that lost its data
 * while connected: FLUSHALL, eviction, a failover that keeps the address), so the relay and the sweep
 * that recover what Redis forgot always run again. Answers a stop for the periodic look.
 */
export async function scheduleUsageJobs(app: AppContext): Promise<() => void> {
  const queue = app.producer.queue('usage');
  const schedule = Object.entries(usageSchedule(app.config));
  const upsert = (name: string, every: number) => queue.upsertJobScheduler(name, { every }, { name, data: {} });
  const upsertAll = async () => {
    for (const [name, every] of schedule) await upsert(name, every);
  };
  const restoreMissing = async () => {
    for (const [name, every] of schedule) {
      if (await queue.getJobScheduler(name)) continue;
      app.logger.warn({ scheduler: name }, 'a usage job schedule was missing from Redis; written again');
      await upsert(name, every);
    }
  };
  await upsertAll();
  app.producer.onConnected(() => {
    upsertAll().catch((err) => app.logger.warn({ err: err.message }, 'cannot restore the usage job schedules'));
  });
  const timer = setInterval(() => {
    app.producer.bounded(restoreMissing).catch((err) => app.logger.warn({ err: err.message }, 'cannot check the usage job schedules'));
  }, app.config.owedSweepIntervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

export const relay = async (app: AppContext) => ({ relayed: await relayOutbox(app), unqueued: await sweepUnqueued(app) });
export const rollup = async (app: AppContext) => rollupUsage(app.orm.em.fork());
export const maintenance = async (app: AppContext) => {
  const em = app.orm.em.fork();
  const { retentionDays } = app.config;
  const { submissionRetentionMonths } = app.config;
  const report = await runMaintenance(em, { retentionDays });
  if (report.dayCountsRepairFailed) {
    app.logger.warn({ err: report.dayCountsRepairFailed },
      'the hourly repair of recently written day counts stopped; the next run starts again where it stopped (deploy/README.md: counts repair)');
  }
  for (const { formId, days } of report.dayCountsRepairSkipped) {
    app.logger.warn({ formId, days },
      `a day of this form was too big to recount within the statement timeout; run: npm run --silent cli -- counts repair --form ${formId} --since ${days[0]}`);
  }
  return {
    ...report,
    submissionChangesDeleted: await purgeSubmissionChanges(em, retentionDays),
    submissionPartitionsCreated: await ensureSubmissionPartitions(em),
    submissionPartitionsDropped: submissionRetentionMonths ? await dropExpiredSubmissionPartitions(em, submissionRetentionMonths) : [],
    ...(await sweepAbandonedPayments(app)),
    // After the partitions: the files of dropped ones were marked for deletion on the way.
    ...(await sweepUploads(app)),
  };
};
export const sweep = async (app: AppContext) => sweepOwed(app);
export const markDays = async (app: AppContext) => {
  const run = await buildDayMarks(app.orm.em.fork(), app.config.dayMarks);
  for (const { formId, day, code, message } of run.failed) {
    app.logger.warn({ formId, day, code, err: message },
      'the day marks of this form and day could not be built; the other days went on, and this one takes its turn after them (deploy/README.md: FormServiceDayMarksFailing)');
  }
  metrics.dayMarkFailures.inc(run.failed.length);
  return run;
};
