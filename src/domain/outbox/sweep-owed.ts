import type { OutboxDeps } from './relay';
import { findOverdue } from './store';

export interface SweepReport {
  deliveriesQueued: number;
  syncsQueued: number;
}

/**
 * The database decides what is still owed: a pending delivery or sync whose next attempt is overdue
 * by more than `graceMs` is queued again under its own job id, unless a live job holds that id. So
 * an emptied Redis, a job that stalled for good, or an enqueue lost after a commit all end in an
 * attempt, with the same delivery id. Bounded per run, oldest first.
 */
export async function sweepOwed(deps: OutboxDeps, graceMs = deps.config.owedSweepIntervalMs): Promise<SweepReport> {
  const em = deps.orm.em.fork();
  let deliveriesQueued = 0;
  for (const { id } of await findOverdue(em, 'webhook_deliveries', graceMs)) {
    const outcome = await deps.producer.requeue('webhooks', 'deliver', { deliveryId: id });
    if (outcome === 'queued') deliveriesQueued++;
  }
  let syncsQueued = 0;
  for (const { id } of await findOverdue(em, 'crm_syncs', graceMs)) {
    const outcome = await deps.producer.requeue('crm', 'sync', { syncId: id });
    if (outcome === 'queued') syncsQueued++;
  }
  return { deliveriesQueued, syncsQueued };
}
