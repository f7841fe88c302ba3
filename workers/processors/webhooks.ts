import type { Job } from 'bullmq';
import type { AppContext } from '../../src/app';
import { attemptDelivery } from '../../src/domain/webhooks/deliver';
import { deliveryGiveUpMessage } from '../../src/domain/webhooks/policy';
import { metrics } from '../../src/lib/metrics';
import type { JobPayload } from '../../src/queues/catalogue';
import { settle } from '../settle';

const RESULT_LABEL = { succeeded: 'succeeded', retry: 'retrying', failed: 'failed', disable: 'disabled' } as const;

/** One attempt per job run; the row counts the attempts and decides when they are used up. */
export async function deliver(app: AppContext, job: Job<JobPayload<'webhooks', 'deliver'>>) {
  const run = await attemptDelivery(app, job.data.deliveryId);
  if (run.kind === 'skipped') return run;
  metrics.webhookDeliveries.inc({ result: RESULT_LABEL[run.decision.kind] });
  return settle(run, deliveryGiveUpMessage);
}
