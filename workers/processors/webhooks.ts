import { DelayedError, type Job } from 'bullmq';
import type { AppContext } from '../../src/app';
import { attemptDelivery, type DeliveryRun } from '../../src/domain/webhooks/deliver';
import { deliveryGiveUpMessage } from '../../src/domain/webhooks/policy';
import { mapAtMost } from '../../src/lib/map-at-most';
import { metrics } from '../../src/lib/metrics';
import { annotate, continuingTrace, inSpan } from '../../src/lib/tracing';
import type { DeliveryGroupMember, JobPayload } from '../../src/queues/catalogue';
import { holdJobUntil } from '../../src/queues/held-jobs';
import { attemptEnd, settle } from '../settle';

const RESULT_LABEL = { succeeded: 'succeeded', retry: 'retrying', failed: 'failed', disable: 'disabled' } as const;

type Attempted = Extract<DeliveryRun, { kind: 'attempted' }>;
type Throttled = Extract<DeliveryRun, { kind: 'throttled' }>;

/**
 * Counts an attempt made and queues the deliveries of the operational events it raised (an enqueue
 * that fails leaves them to the sweep of deliveries never queued); a skipped run is named on its
 * span instead, a throttled one is the caller's to carry out.
 */
function noted(app: AppContext, run: DeliveryRun): run is Attempted {
  if (run.kind === 'skipped') {
    annotate({ 'form_service.delivery.skipped': run.reason });
    return false;
  }
  if (run.kind === 'throttled') return false;
  metrics.webhookDeliveries.inc({ result: RESULT_LABEL[run.decision.kind] });
  for (const deliveryId of run.events) {
    app.producer.addSoon('webhooks', 'deliver', { deliveryId })
      .catch((err: Error) => app.logger.debug({ err: err.message, deliveryId }, 'operational event left to the sweep of unqueued deliveries'));
  }
  return true;
}

/** A delivery held back by its webhook's rate or pause is counted and shown as waiting (queue health, metrics). */
function noteThrottled(app: AppContext, deliveryId: string, run: Throttled): number {
  const until = Date.now() + run.waitMs;
  annotate({ 'form_service.delivery.throttled': run.reason, 'form_service.delivery.throttled_ms': run.waitMs });
  metrics.webhookThrottleWaits.inc({ reason: run.reason });
  app.throttle.noteWaiting(deliveryId, until).catch(() => undefined);
  return until;
}

/**
 * One attempt per job run; the row counts the attempts and decides when they are used up. A
 * delivery over its webhook's rate, or paused by a 429, goes back to delayed until its turn without
 * spending an attempt (moveToDelayed skips the attempt count; DelayedError tells BullMQ so).
 */
export async function deliver(app: AppContext, job: Job<JobPayload<'webhooks', 'deliver'>>) {
  const { deliveryId } = job.data;
  return inSpan('webhook delivery attempt', { 'form_service.delivery.id': deliveryId, 'bullmq.job.attempts.made': job.attemptsMade }, async () => {
    const run = await attemptDelivery(app, deliveryId);
    if (run.kind === 'throttled') {
      await holdJobUntil(app.redis, job, noteThrottled(app, deliveryId, run));
      throw new DelayedError();
    }
    if (!noted(app, run)) return run;
    return settle(run, deliveryGiveUpMessage);
  });
}

/**
 * The first attempt of each delivery a storing group created, up to the worker's concurrency at a
 * time. A member that needs another attempt continues as a job of its own (`deliver-<id>`), due
 * when its row says; if that job cannot be added, the row's next attempt time leaves it to the
 * sweep of owed work.
 *
 * Only members never attempted are attempted: while this job is live the sweeps, a manual retry
 * and a recovery leave its members to it (Producer.requeue's `heldBy`), and a member attempted once
 * is its own job's. So a run after a stall (its worker died) attempts just what the dead run had
 * not recorded, as a stalled job of one delivery would. A member whose attempt could not be made
 * (the database away) fails the job once the others are done; its row, never attempted, goes to
 * the sweep of unqueued deliveries.
 */
export async function deliverGroup(app: AppContext, job: Job<JobPayload<'webhooks', 'deliver-group'>>) {
  const { deliveries } = job.data;
  const outcomes = await mapAtMost(deliveries, app.config.webhookWorkerConcurrency, (member) => firstAttempt(app, member)
    .then((made) => ({ made }), (err: Error) => ({ error: `${member.deliveryId}: ${err.message}` })));
  const errors = outcomes.flatMap((o) => ('error' in o ? [o.error] : []));
  const attempted = outcomes.filter((o) => 'made' in o && o.made).length;
  if (errors.length) throw new Error(`${errors.length} of ${deliveries.length} deliveries could not be attempted (${errors.slice(0, 3).join('; ')})`);
  return { deliveries: deliveries.length, attempted };
}

/** A member's first attempt, in the trace of the request that stored it; whether it was made. */
function firstAttempt(app: AppContext, { deliveryId, trace }: DeliveryGroupMember): Promise<boolean> {
  const attributes = { 'form_service.delivery.id': deliveryId };
  return continuingTrace(trace, 'process webhooks.deliver', attributes, () => inSpan('webhook delivery attempt', attributes, async () => {
    const run = await attemptDelivery(app, deliveryId, { firstOnly: true });
    if (run.kind === 'throttled') {
      // Its turn comes later: it waits as a job of its own, delayed until then, still never attempted.
      const until = noteThrottled(app, deliveryId, run);
      await app.producer.add('webhooks', 'deliver', { deliveryId }, { delay: Math.max(1, until - Date.now()) })
        .catch((err: Error) => app.logger.debug({ err: err.message, deliveryId }, 'throttled delivery left to the sweep of owed work'));
      return false;
    }
    if (!noted(app, run)) return false;
    // What settle() throws for a job of its own is carried out here without failing the group's job.
    const end = attemptEnd(run, deliveryGiveUpMessage);
    if (end.kind === 'retry') {
      await app.producer.add('webhooks', 'deliver', { deliveryId }, { delay: end.delayMs })
        .catch((err: Error) => app.logger.debug({ err: err.message, deliveryId }, 'retry left to the sweep of owed work'));
    } else if (end.kind === 'gave_up') {
      app.logger.error({ deliveryId, err: end.message }, 'delivery failed for good');
    }
    return true;
  }));
}
