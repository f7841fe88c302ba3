import { UnrecoverableError, type Job } from 'bullmq';
import type { AppContext } from '../../src/app';
import { attemptDelivery } from '../../src/domain/webhooks/deliver';
import { metrics } from '../../src/lib/metrics';
import type { JobPayload } from '../../src/queues/catalogue';
import { RetryLaterError } from '../backoff';

/**
 * One attempt per job run. Throwing is how a retry is asked for: RetryLaterError carries the delay
 * the attempt recorded as the row's next attempt time. The row, not the job, counts the attempts and
 * decides when they are used up.
 */
export async function deliver(app: AppContext, job: Job<JobPayload<'webhooks', 'deliver'>>) {
  const run = await attemptDelivery(app, job.data.deliveryId);
  if (run.kind === 'skipped') return run;
  const { decision, result } = run;
  const reason = result.error ?? '';
  switch (decision.kind) {
    case 'succeeded':
      metrics.webhookDeliveries.inc({ result: 'succeeded' });
      return { statusCode: result.statusCode };
    case 'retry':
      metrics.webhookDeliveries.inc({ result: 'retrying' });
      throw new RetryLaterError(reason, decision.delayMs);
    case 'failed':
      metrics.webhookDeliveries.inc({ result: 'failed' });
      throw new UnrecoverableError(`retries exhausted: ${reason}`);
    case 'disable':
      metrics.webhookDeliveries.inc({ result: 'disabled' });
      throw new UnrecoverableError(`webhook disabled (${decision.reason}): ${reason}`);
  }
}
