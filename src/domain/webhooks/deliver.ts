import { unseal } from '../../lib/crypto';
import { withFileLinks, type FileLinks } from '../files/links';
import { annotate } from '../../lib/tracing';
import { maxAttempts, type AttemptDeps } from '../outbound/attempt';
import { failDelivery, findDeliveryForAttempt, holdDelivery, recordDeliveryAttempt } from './store';
import { decideDelivery, type DeliveryDecision } from './policy';
import { sendSigned, type SendResult } from './sender';

export type DeliveryRun =
  | { kind: 'skipped'; reason: 'missing' | 'already_succeeded' | 'already_failed' | 'already_attempted' | 'webhook_disabled' }
  /** Held back, not attempted: by the webhook's `throttleRate` (`rate`) or a receiver's 429 Retry-After (`paused`). */
  | { kind: 'throttled'; reason: 'rate' | 'paused'; waitMs: number }
  /** `events`: the deliveries of the operational events this attempt raised, to be queued. */
  | { kind: 'attempted'; decision: DeliveryDecision; result: SendResult; events: string[] };

/** Where a webhook's rate is kept, shared by every worker process (SharedThrottle). */
export interface DeliveryThrottle {
  /** 0: go now; otherwise the ms until the slot reserved for `ticket`. */
  take(key: string, ratePerSecond: number, ticket: string): Promise<number>;
}

/** Deliveries held back by a pause do not all come back at the same millisecond: up to this much later. */
const PAUSE_SPREAD_MS = 1_000;

const WEBHOOK_DISABLED = 'Webhook is disabled';

/**
 * Opened secrets by their sealed value: opening one costs a cipher per delivery. A rotation or a
 * re-encryption seals anew, so a changed secret is a new key here and a stale one is never used.
 * Kept per set of keys, so a value is only ever opened by keys that open it.
 */
const OPENED_SECRETS_MAX = 10_000;
const openedSecretsByKeys = new WeakMap<Buffer[], Map<string, string>>();

function openSecret(sealed: string, keys: Buffer[]): string {
  let openedSecrets = openedSecretsByKeys.get(keys);
  if (!openedSecrets) openedSecretsByKeys.set(keys, openedSecrets = new Map());
  let secret = openedSecrets.get(sealed);
  if (secret === undefined) {
    secret = unseal(sealed, keys);
    if (openedSecrets.size >= OPENED_SECRETS_MAX) openedSecrets.clear();
    openedSecrets.set(sealed, secret);
  }
  return secret;
}

/**
 * One attempt of one delivery. A deleted delivery or webhook (deliveries cascade), a delivery that
 * has ended, or a disabled webhook end the job without sending anything. The attempt's number comes
 * from the row (attempts since its current schedule began), not from the job, so a job queued again
 * by the sweep continues the schedule rather than restarting or extending it. With `firstOnly` (a
 * group job's member), a delivery attempted already is left to the job that continues it. A webhook
 * paused by its receiver's 429, or over its `throttleRate`, holds the delivery back without an attempt.
 */
export async function attemptDelivery(
  deps: AttemptDeps & { files: { links: FileLinks }; throttle: DeliveryThrottle }, deliveryId: string, { firstOnly = false } = {},
): Promise<DeliveryRun> {
  const em = deps.orm.em.fork();
  const row = await findDeliveryForAttempt(em, deliveryId);
  if (!row) return { kind: 'skipped', reason: 'missing' };
  if (firstOnly && row.attempts > 0) return { kind: 'skipped', reason: 'already_attempted' };
  const attempt = row.attempts - row.retry_base + 1;
  annotate({
    'form_service.organization.id': row.organization_id, 'form_service.webhook.id': row.webhook_id,
    'form_service.event.type': row.event_type, 'form_service.delivery.attempt': attempt,
  });
  if (row.status === 'succeeded') return { kind: 'skipped', reason: 'already_succeeded' };
  if (row.status === 'failed') return { kind: 'skipped', reason: 'already_failed' };
  if (!row.enabled) {
    await failDelivery(em, row.id, WEBHOOK_DISABLED);
    return { kind: 'skipped', reason: 'webhook_disabled' };
  }
  // Waiting for the webhook's turn is not an attempt: nothing is recorded, the caller waits and comes back.
  // The row then shows when it will be tried (holdDelivery), which keeps the sweeps off it meanwhile.
  if (row.paused_for_ms) {
    const waitMs = row.paused_for_ms + Math.floor(Math.random() * PAUSE_SPREAD_MS);
    await holdDelivery(em, row.id, waitMs, { paused: true });
    return { kind: 'throttled', reason: 'paused', waitMs };
  }
  if (row.throttle_rate !== null) {
    const waitMs = await deps.throttle.take(row.webhook_id, row.throttle_rate, row.id);
    if (waitMs > 0) {
      await holdDelivery(em, row.id, waitMs);
      return { kind: 'throttled', reason: 'rate', waitMs };
    }
  }

  const result = await sendSigned(deps.config, {
    url: row.url, secret: openSecret(row.secret_sealed, deps.decryptionKeys),
    previousSecret: row.previous_secret_sealed ? openSecret(row.previous_secret_sealed, deps.decryptionKeys) : null,
    body: withFileLinks(row.payload, deps.files.links),
    eventType: row.event_type, deliveryId: row.id, eventId: row.event_id,
  });
  const now = new Date();
  const schedule = deps.config.webhookRetryDelaysMs;
  const decision = decideDelivery({
    statusCode: result.statusCode, retryAfterMs: result.retryAfterMs, attempt,
    maxAttempts: maxAttempts(schedule), schedule, random: Math.random,
    failingSince: row.failing_since ? new Date(row.failing_since) : null, now,
  });
  annotate({ 'http.response.status_code': result.statusCode ?? undefined, 'form_service.delivery.outcome': decision.kind });
  const events = await recordDeliveryAttempt(em, row, result, decision, now);
  return { kind: 'attempted', decision, result, events };
}
