import type { Job } from 'bullmq';
import type { AppContext } from '../../src/app';
import { attemptDelivery } from '../../src/domain/webhooks/deliver';
import { deliveryGiveUpMessage } from '../../src/domain/webhooks/policy';
import { metrics } from '../../src/lib/metrics';
import { annotate, inSpan } from '../../src/lib/tracing';
import type { JobPayload } from '../../src/queues/catalogue';
import { settle } from '../settle';

const RESULT_LABEL = { succeeded: 'succeeded', retry: 'retrying', failed: 'failed', disable: 'disabled' } as const;

/** One attempt per job run; the row counts the attempts and decides when they are used up. */
export async function deliver(app: AppContext, job: Job<JobPayload<'webhooks', 'deliver'>>) {
  const { deliveryId } = job.data;
  return inSpan('webhook delivery attempt', { 'form_service.delivery.id': deliveryId, 'bullmq.job.attempts.made': job.attemptsMade }, async () => {
    const run = await attemptDelivery(app, deliveryId);
    if (run.kind === 'skipped') {
      annotate({ 'form_service.delivery.skipped': run.reason });
      return run;
    }
    metrics.webhookDeliveries.inc({ result: RESULT_LABEL[run.decision.kind] });
    return settle(run, deliveryGiveUpMessage);
  });
}
