import { requeueDelivery } from '../webhooks/jobs';
import type { OutboxDeps } from './relay';
import { findOverdue } from './store';

export interface SweepReport {
  deliveriesQueued: number;
  syncsQueued: number;
}

/**
 * The database decides what is still owed: a pending delivery or sync whose next attempt is overdue
 * by more than `graceMs` is queued again under its own job id, unless a live job holds that id or,
 * for a delivery not attempted yet, its storing group's job is live and will attempt it. So
 * an emptied Redis, a job that stalled for good, or an enqueue lost after a commit all end in an
 * attempt, with the same delivery id. Bounded per run, oldest first.
 */
export async function sweepOwed(deps: OutboxDeps, graceMs = deps.config.owedSweepIntervalMs): Promise<SweepReport> {
  return sweep(deps, graceMs, false);
}

/** How long a new delivery or sync may wait for its first job before the relay's run queues it. */
export const UNQUEUED_GRACE_MS = 5_000;

/**
 * A new submission's deliveries and syncs have no outbox row: its storing statement writes them and
 * the API queues their jobs after commit. When that enqueue is lost (Redis down, the process died),
 * the outbox relay's run (every 5 s) queues the ones never attempted and due for more than 5 s, so
 * they recover as fast as outbox rows do, not only at the slower sweep of everything owed.
 */
export async function sweepUnqueued(deps: OutboxDeps): Promise<SweepReport> {
  return sweep(deps, UNQUEUED_GRACE_MS, true);
}

async function sweep(deps: OutboxDeps, graceMs: number, neverAttempted: boolean): Promise<SweepReport> {
  const em = deps.orm.em.fork();
  let deliveriesQueued = 0;
  for (const { id, job_group: group } of await findOverdue(em, 'webhook_deliveries', graceMs, neverAttempted)) {
    const outcome = await requeueDelivery(deps.producer, { id, jobGroup: group });
    if (outcome === 'queued') deliveriesQueued++;
  }
  let syncsQueued = 0;
  for (const { id } of await findOverdue(em, 'crm_syncs', graceMs, neverAttempted)) {
    const outcome = await deps.producer.requeue('crm', 'sync', { syncId: id });
    if (outcome === 'queued') syncsQueued++;
  }
  return { deliveriesQueued, syncsQueued };
}
