import type { AppContext } from '../../src/app';
import { DEFAULT_CHANGE_RETENTION_DAYS, purgeSubmissionChanges } from '../../src/domain/submissions/changes';
import { relayOutbox, rollupUsage, runMaintenance } from '../../src/domain/usage/usage-jobs';
import type { JobName } from '../../src/queues/catalogue';

/** Repeatable jobs; upsertJobScheduler is idempotent, so every usage worker process may call it. */
export const USAGE_SCHEDULE: Record<JobName<'usage'>, number> = {
  'relay-outbox': 5_000,
  'rollup-usage': 60_000,
  'maintenance': 3_600_000,
};

export async function scheduleUsageJobs(app: AppContext): Promise<void> {
  const queue = app.producer.queue('usage');
  for (const [name, every] of Object.entries(USAGE_SCHEDULE)) {
    await queue.upsertJobScheduler(name, { every }, { name, data: {} });
  }
}

export const relay = async (app: AppContext) => ({ relayed: await relayOutbox(app) });
export const rollup = async (app: AppContext) => rollupUsage(app.orm.em.fork());
export const maintenance = async (app: AppContext) => {
  const em = app.orm.em.fork();
  const retentionDays = (app.config as { retentionDays?: number }).retentionDays ?? DEFAULT_CHANGE_RETENTION_DAYS;
  return { ...(await runMaintenance(em)), submissionChangesDeleted: await purgeSubmissionChanges(em, retentionDays) };
};
