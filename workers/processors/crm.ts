import { DelayedError, type Job } from 'bullmq';
import type { AppContext } from '../../src/app';
import { attemptCrmSync, type ConnectionPauses } from '../../src/domain/crm/crm-sync';
import type { JobPayload } from '../../src/queues/catalogue';
import { holdJobUntil } from '../../src/queues/held-jobs';
import { crmGiveUpMessage } from '../../src/domain/crm/policy';
import { settle } from '../settle';
import { inSpan } from '../../src/lib/tracing';

/** Pauses live in Redis so every crm worker process honours them; without Redis, nothing is paused. */
function redisPauses(app: AppContext): ConnectionPauses {
  const key = (connectionId: string) => `${app.config.queuePrefix}:crm-pause:${connectionId}`;
  return {
    async remainingMs(connectionId) {
      return Math.max(0, await app.redis.pttl(key(connectionId)).catch(() => 0));
    },
    async pause(connectionId, ms) {
      await app.redis.set(key(connectionId), '1', 'PX', Math.max(1, ms)).catch(() => undefined);
    },
  };
}

/**
 * HubSpot 429: the job that got it retries after Retry-After (a delayed retry through the backoff),
 * and the connection is paused so its other syncs wait too. A job that finds its connection paused
 * is moved back to delayed without spending an attempt.
 */
export async function sync(app: AppContext, job: Job<JobPayload<'crm', 'sync'>>) {
  return inSpan('crm sync attempt', { 'form_service.crm_sync.id': job.data.syncId, 'bullmq.job.attempts.made': job.attemptsMade }, () => syncOnce(app, job));
}

async function syncOnce(app: AppContext, job: Job<JobPayload<'crm', 'sync'>>) {
  const run = await attemptCrmSync(app, job.data.syncId, redisPauses(app));
  switch (run.kind) {
    case 'skipped':
    case 'unsyncable':
      return run;
    case 'paused':
      await holdJobUntil(app.redis, job, Date.now() + run.remainingMs);
      throw new DelayedError();
  }
  return settle(run, crmGiveUpMessage);
}
