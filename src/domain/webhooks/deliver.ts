import type { AppContext } from '../../app';
import type { Em } from '../../db/orm';
import { unseal } from '../../lib/crypto';
import { decideDelivery, type DeliveryDecision } from './policy';
import { sendSigned, type SendResult } from './sender';

export type DeliveryRun =
  | { kind: 'skipped'; reason: 'missing' | 'already_succeeded' | 'webhook_disabled' }
  | { kind: 'attempted'; decision: DeliveryDecision; result: SendResult };

interface DeliveryRow {
  id: string;
  payload: string;
  status: string;
  event_type: string;
  webhook_id: string;
  url: string;
  enabled: boolean;
  secret_sealed: string;
  /** Set only while the rotated-out secret is within its grace. */
  previous_secret_sealed: string | null;
  failing_since: Date | null;
}

const WEBHOOK_DISABLED = 'Webhook is disabled';

function rowStatus(decision: DeliveryDecision): string {
  if (decision.kind === 'succeeded') return 'succeeded';
  return decision.kind === 'retry' ? 'pending' : 'failed';
}

/** How the webhook's failure streak (and, on `disable`, its switch) follows one attempt. */
const WEBHOOK_UPDATE = {
  succeeded: 'update webhooks set failing_since = null where id = ? and failing_since is not null',
  failed: 'update webhooks set failing_since = now() where id = ? and failing_since is null',
  disable: 'update webhooks set enabled = false, failing_since = coalesce(failing_since, now()), updated_at = now() where id = ?',
};

function webhookUpdate(decision: DeliveryDecision): string {
  if (decision.kind === 'succeeded' || decision.kind === 'disable') return WEBHOOK_UPDATE[decision.kind];
  return WEBHOOK_UPDATE.failed;
}

/**
 * The attempt, the delivery's summary and the webhook's failure streak change together, in one
 * statement. The webhook row is written only when its streak starts or ends, so deliveries to one
 * busy webhook do not queue on its row lock.
 */
async function recordAttempt(em: Em, row: DeliveryRow, result: SendResult, decision: DeliveryDecision, now: Date): Promise<void> {
  const nextAttemptAt = decision.kind === 'retry' ? new Date(now.getTime() + decision.delayMs) : null;
  await em.execute(
    `with d as (
       update webhook_deliveries
          set attempts = attempts + 1, status = ?, last_status_code = ?, last_error = ?, next_attempt_at = ?, updated_at = now()
        where id = ? returning id, attempts
     ), a as (
       insert into delivery_attempts (delivery_id, attempt_no, status_code, error, duration_ms, response_excerpt)
       select id, attempts, ?, ?, ?, ? from d
     )
     ${webhookUpdate(decision)}`,
    [
      rowStatus(decision), result.statusCode, result.error, nextAttemptAt, row.id,
      result.statusCode, result.error, result.durationMs, result.responseExcerpt, row.webhook_id,
    ],
  );
}

/**
 * One attempt of one delivery. A deleted delivery or webhook (deliveries cascade), a delivery that
 * already succeeded, or a disabled webhook end the job without sending anything.
 */
export async function attemptDelivery(
  app: AppContext, deliveryId: string, attempt: { number: number; max: number },
): Promise<DeliveryRun> {
  const em = app.orm.em.fork();
  const [row] = await em.execute<DeliveryRow[]>(
    `select d.id, d.payload, d.status, d.event_type, w.id as webhook_id, w.url, w.enabled, w.secret_sealed,
            case when w.previous_secret_expires_at > now() then w.previous_secret_sealed end as previous_secret_sealed, w.failing_since
       from webhook_deliveries d join webhooks w on w.id = d.webhook_id
      where d.id = ?`,
    [deliveryId],
  );
  if (!row) return { kind: 'skipped', reason: 'missing' };
  if (row.status === 'succeeded') return { kind: 'skipped', reason: 'already_succeeded' };
  if (!row.enabled) {
    await em.execute(
      `update webhook_deliveries set status = 'failed', last_error = ?, next_attempt_at = null, updated_at = now() where id = ?`,
      [WEBHOOK_DISABLED, row.id],
    );
    return { kind: 'skipped', reason: 'webhook_disabled' };
  }

  const result = await sendSigned(app.config, {
    url: row.url, secret: unseal(row.secret_sealed, app.decryptionKeys),
    previousSecret: row.previous_secret_sealed ? unseal(row.previous_secret_sealed, app.decryptionKeys) : null, body: row.payload,
    eventType: row.event_type, deliveryId: row.id,
  });
  const now = new Date();
  const decision = decideDelivery({
    statusCode: result.statusCode, retryAfterMs: result.retryAfterMs, attempt: attempt.number, maxAttempts: attempt.max,
    schedule: app.config.webhookRetryDelaysMs, failingSince: row.failing_since ? new Date(row.failing_since) : null, now,
  });
  await recordAttempt(em, row, result, decision, now);
  return { kind: 'attempted', decision, result };
}
