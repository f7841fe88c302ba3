import { UnrecoverableError, type Job } from 'bullmq';
import type { AppContext } from '../../src/app';
import { attemptDelivery } from '../../src/domain/webhooks/deliver';
import { metrics } from '../../src/lib/metrics';
import type { JobPayload } from '../../src/queues/catalogue';
import { RetryLaterError } from '../backoff';

/**
 * One attempt per job run; BullMQ's attempts and the `webhook-schedule` backoff space the retries.
 * Throwing is how a retry is asked for: RetryLaterError carries the receiver's Retry-After.
 */
export async function deliver(app: AppContext, job: Job<JobPayload<'webhooks', 'deliver'>>) {
  const run = await attemptDelivery(app, job.data.deliveryId, { number: job.attemptsMade + 1, max: job.opts.attempts ?? 1 });
  if (run.kind === 'skipped') return run;
  const { decision, result } = run;
  const reason = result.error ?? '';
  switch (decision.kind) {
    case 'succeeded':
      metrics.webhookDeliveries.inc({ result: 'succeeded' });
      return { statusCode: result.statusCode };
    case 'retry':
      metrics.webhookDeliveries.inc({ result: 'retrying' });
      if (decision.retryAfterMs !== null) throw new RetryLaterError(reason, decision.retryAfterMs);
      throw new Error(reason);
    case 'failed':
      metrics.webhookDeliveries.inc({ result: 'failed' });
      throw new UnrecoverableError(`retries exhausted: ${reason}`);
    case 'disable':
      metrics.webhookDeliveries.inc({ result: 'disabled' });
      throw new UnrecoverableError(`webhook disabled (${decision.reason}): ${reason}`);
  }
}
