import type { Job } from 'bullmq';
import type { AppContext } from '../../src/app';
import { fanOutDeletion, fanOutSubmission } from '../../src/domain/submissions/fanout';
import { deleteMarkedFiles } from '../../src/domain/files/uploads';
import type { JobPayload } from '../../src/queues/catalogue';

async function queueDeliveries(app: AppContext, deliveryIds: string[]): Promise<void> {
  await Promise.all(deliveryIds.map((deliveryId) => app.producer.add('webhooks', 'deliver', { deliveryId })));
}

/**
 * Creates the deliveries and syncs of one submission, then queues them. Enqueuing happens after
 * commit; if it fails the job is retried, and the re-run finds the same rows and queues them again.
 */
export async function fanout(app: AppContext, job: Job<JobPayload<'submissions', 'fanout'>>) {
  const result = await fanOutSubmission(app.orm.em.fork(), job.data);
  await Promise.all([
    queueDeliveries(app, result.deliveryIds),
    ...result.syncIds.map((syncId) => app.producer.add('crm', 'sync', { syncId })),
  ]);
  return { submissionFound: result.submissionFound, deliveries: result.deliveryIds.length, syncs: result.syncIds.length };
}

/**
 * The deletion event's deliveries, created and queued the same way; then the submission's files
 * (marked `deleting` by the deleting statement) are deleted. A file store that fails fails the job,
 * which is retried, and the hourly sweep retries whatever is still marked after that.
 */
export async function fanoutDeletion(app: AppContext, job: Job<JobPayload<'submissions', 'fanout-deletion'>>) {
  const result = await fanOutDeletion(app.orm.em.fork(), job.data);
  await queueDeliveries(app, result.deliveryIds);
  const filesDeleted = await deleteMarkedFiles(app, { submissionId: job.data.submissionId });
  return { deliveries: result.deliveryIds.length, filesDeleted };
}
