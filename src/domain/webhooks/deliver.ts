import { unseal } from '../../lib/crypto';
import { maxAttempts, type AttemptDeps } from '../outbound/attempt';
import { failDelivery, findDeliveryForAttempt, recordDeliveryAttempt } from './store';
import { decideDelivery, type DeliveryDecision } from './policy';
import { sendSigned, type SendResult } from './sender';

export type DeliveryRun =
  | { kind: 'skipped'; reason: 'missing' | 'already_succeeded' | 'already_failed' | 'webhook_disabled' }
  | { kind: 'attempted'; decision: DeliveryDecision; result: SendResult };

const WEBHOOK_DISABLED = 'Webhook is disabled';

/**
 * One attempt of one delivery. A deleted delivery or webhook (deliveries cascade), a delivery that
 * has ended, or a disabled webhook end the job without sending anything. The attempt's number comes
 * from the row (attempts since its current schedule began), not from the job, so a job queued again
 * by the sweep continues the schedule rather than restarting or extending it.
 */
export async function attemptDelivery(deps: AttemptDeps, deliveryId: string): Promise<DeliveryRun> {
  const em = deps.orm.em.fork();
  const row = await findDeliveryForAttempt(em, deliveryId);
  if (!row) return { kind: 'skipped', reason: 'missing' };
  if (row.status === 'succeeded') return { kind: 'skipped', reason: 'already_succeeded' };
  if (row.status === 'failed') return { kind: 'skipped', reason: 'already_failed' };
  if (!row.enabled) {
    await failDelivery(em, row.id, WEBHOOK_DISABLED);
    return { kind: 'skipped', reason: 'webhook_disabled' };
  }

  const result = await sendSigned(deps.config, {
    url: row.url, secret: unseal(row.secret_sealed, deps.decryptionKeys),
    previousSecret: row.previous_secret_sealed ? unseal(row.previous_secret_sealed, deps.decryptionKeys) : null, body: row.payload,
    eventType: row.event_type, deliveryId: row.id,
  });
  const now = new Date();
  const schedule = deps.config.webhookRetryDelaysMs;
  const decision = decideDelivery({
    statusCode: result.statusCode, retryAfterMs: result.retryAfterMs, attempt: row.attempts - row.retry_base + 1,
    maxAttempts: maxAttempts(schedule), schedule, random: Math.random,
    failingSince: row.failing_since ? new Date(row.failing_since) : null, now,
  });
  await recordDeliveryAttempt(em, row, result, decision, now);
  return { kind: 'attempted', decision, result };
}
