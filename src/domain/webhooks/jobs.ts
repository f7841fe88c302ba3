import { jobIds } from '../../queues/catalogue';
import type { Producer } from '../../queues/producer';

/**
 * Queues a delivery's own job (`deliver-<id>`) unless a live job holds it: its own job, or the job of
 * its storing group (`jobGroup`, the row's job_group), which makes the first attempt of every
 * delivery of the group. `replaceWaiting`: a waiting or delayed own job gives way to one due now
 * (Producer.requeue). `promoteDelayed`: a delayed own job goes now (the row says it is due).
 */
export function requeueDelivery(
  producer: Producer, delivery: { id: string; jobGroup: string | null }, { replaceWaiting = false, promoteDelayed = false } = {},
): Promise<'queued' | 'live'> {
  const heldBy = delivery.jobGroup ? jobIds.deliverGroup(delivery.jobGroup) : null;
  return producer.requeue('webhooks', 'deliver', { deliveryId: delivery.id }, { replaceWaiting, promoteDelayed, heldBy });
}
