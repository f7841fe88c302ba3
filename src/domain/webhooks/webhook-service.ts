import { LockMode } from '@mikro-orm/core';
import type { Config } from '../../../config';
import type { Em } from '../../db/orm';
import { seal, unseal } from '../../lib/crypto';
import { newId, randomBase62 } from '../../lib/ids';
import { assertSafeTarget, OutboundError } from '../../lib/outbound';
import { findForm } from '../forms/form-service';
import { Webhook, WebhookDelivery } from './entities';
import { buildTestEvent, normalizeEvents, WEBHOOK_TEST } from './events';
import { isSuccess } from '../outbound/attempt';
import { sendSigned } from './sender';
import { operationalEventsRefusal } from './policy';
import { liftWebhookPause, lockOrganizationCountingWebhooks, releaseHeld, resetFailedDeliveries, retryDelivery } from './store';

export const SECRET_PREFIX = 'whsec_';
/**
 * Base62 characters after `whsec_`. A multiple of 4, so the same characters read as base64 (24
 * bytes, the least Standard Webhooks allows) and sign `webhook-signature` too.
 */
const SECRET_LENGTH = 32;
export const MAX_WEBHOOKS_PER_ORGANIZATION = 100;
/** `throttleRate` bounds, deliveries a second (README "Webhooks"). */
export const MIN_THROTTLE_RATE = 1;
export const MAX_THROTTLE_RATE = 10_000;
export const DEFAULT_ROTATION_GRACE_SECONDS = 86_400;
export const MAX_ROTATION_GRACE_SECONDS = 604_800;
/** Deliveries one recovery call re-queues at most, oldest first; a later call picks up the rest. */
export const RECOVERY_BATCH = 1_000;

export interface WebhookInput {
  name: string;
  url: string;
  events: string[];
  formId?: string | null;
  enabled?: boolean;
  /** Deliveries a second at most (1..10000); null: unlimited. */
  throttleRate?: number | null;
}

export type WebhookPatch = Partial<WebhookInput>;

/** `formId` names no live form of the organization. */
export class WebhookFormNotFound extends Error {}

/** The URL is malformed, of a refused scheme, or resolves to a refused address. */
export class UnsafeWebhookTarget extends Error {}

/** Operational events asked for by (or kept on) a webhook tied to one form. */
export class OperationalEventsNeedOrganizationWide extends Error {}

function checkOperationalEvents(events: readonly string[], formId: string | null): void {
  const refusal = operationalEventsRefusal(normalizeEvents(events), formId);
  if (refusal) throw new OperationalEventsNeedOrganizationWide(refusal);
}

/** The organization already has as many webhooks as it may. */
export class WebhookLimitReached extends Error {}

export async function checkFormOfOrganization(em: Em, organizationId: string, formId: string | null | undefined): Promise<void> {
  if (formId && !(await findForm(em, organizationId, formId))) throw new WebhookFormNotFound('Form not found');
}

/** One answer for every host that cannot be used, so the answers cannot map internal networks. */
export const UNREACHABLE_TARGET_MESSAGE = 'url must name a host that resolves to publicly reachable addresses only';

async function checkTarget(url: string, allowPrivate: boolean): Promise<void> {
  try {
    await assertSafeTarget(url, { allowPrivate });
  } catch (err) {
    if (!(err instanceof OutboundError)) throw err;
    throw new UnsafeWebhookTarget(err.kind === 'invalid_url' ? err.message : UNREACHABLE_TARGET_MESSAGE);
  }
}

export function newWebhookSecret(): string {
  return `${SECRET_PREFIX}${randomBase62(SECRET_LENGTH)}`;
}

/**
 * The secret is returned here only; it is stored sealed. The count and the insert happen under a
 * lock on the organization's row, so concurrent creates cannot pass the cap together (`no key
 * update` leaves the row's foreign-key users, such as submission inserts, unblocked).
 */
export async function createWebhook(
  em: Em, organizationId: string, input: WebhookInput, opts: { allowPrivate: boolean; encryptionKey: Buffer },
): Promise<{ webhook: Webhook; secret: string }> {
  checkOperationalEvents(input.events, input.formId ?? null);
  await checkFormOfOrganization(em, organizationId, input.formId);
  await checkTarget(input.url, opts.allowPrivate);
  const secret = newWebhookSecret();
  const webhook = Object.assign(new Webhook(), {
    id: newId('wh'), organizationId, formId: input.formId ?? null, name: input.name, url: input.url, throttleRate: input.throttleRate ?? null,
    events: normalizeEvents(input.events), enabled: input.enabled ?? true, secretSealed: seal(secret, opts.encryptionKey),
  });
  await em.transactional(async (tx) => {
    const count = await lockOrganizationCountingWebhooks(tx, organizationId);
    if (count >= MAX_WEBHOOKS_PER_ORGANIZATION) {
      throw new WebhookLimitReached(`An organization may have at most ${MAX_WEBHOOKS_PER_ORGANIZATION} webhooks; delete one first`);
    }
    tx.persist(webhook);
  });
  return { webhook, secret };
}

export interface RotatedSecret {
  webhook: Webhook;
  secret: string;
  previousSecretExpiresAt: Date | null;
}

/**
 * A new signing secret. The one it replaces keeps signing (as the previous signature) for
 * `graceSeconds`; 0 retires it at once. Only the secret just replaced is kept, whatever an earlier
 * rotation left, and the row lock makes concurrent rotations take turns.
 */
export async function rotateWebhookSecret(
  em: Em, organizationId: string, webhookId: string, graceSeconds: number, encryptionKey: Buffer,
): Promise<RotatedSecret | null> {
  return em.transactional(async (tx) => {
    const webhook = await tx.findOne(Webhook, { id: webhookId, organizationId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
    if (!webhook) return null;
    const now = new Date();
    const secret = newWebhookSecret();
    const previousSecretExpiresAt = graceSeconds > 0 ? new Date(now.getTime() + graceSeconds * 1000) : null;
    Object.assign(webhook, {
      previousSecretSealed: previousSecretExpiresAt ? webhook.secretSealed : null,
      previousSecretExpiresAt,
      secretSealed: seal(secret, encryptionKey),
      updatedAt: now,
    });
    return { webhook, secret, previousSecretExpiresAt };
  });
}

/** The rotated-out secret, in clear, while it is within its grace; null otherwise. */
export function previousSecretInGrace(webhook: Webhook, decryptionKeys: readonly Buffer[], now = new Date()): string | null {
  if (!webhook.previousSecretSealed || !webhook.previousSecretExpiresAt) return null;
  if (webhook.previousSecretExpiresAt.getTime() <= now.getTime()) return null;
  return unseal(webhook.previousSecretSealed, decryptionKeys);
}

export async function listWebhooks(em: Em, organizationId: string, formId?: string): Promise<Webhook[]> {
  return em.find(Webhook, { organizationId, ...(formId ? { formId } : {}) }, { orderBy: { createdAt: 'asc', id: 'asc' } });
}

export async function findWebhook(em: Em, organizationId: string, webhookId: string): Promise<Webhook | null> {
  return em.findOne(Webhook, { id: webhookId, organizationId });
}

export interface UpdatedWebhook {
  webhook: Webhook;
  /**
   * Its held deliveries should go now (releaseHeldDeliveries): `all` when its pause was lifted,
   * `first-attempts` when only its throttleRate changed (those waiting for a slot at the old rate;
   * retries keep their delay), `none` otherwise.
   */
  releaseHeld: 'all' | 'first-attempts' | 'none';
}

/**
 * Re-enabling clears the failure streak so the 5-day rule starts afresh. A new URL or `enabled:
 * true` ends a receiver's pause (`pausedUntil`): the pause was that receiver's word, or the operator
 * says the endpoint is back. Either, or a new throttleRate, asks the caller to release the deliveries
 * held meanwhile, so they are tried (at the new rate) rather than waiting out the old hold.
 */
export async function updateWebhook(
  em: Em, organizationId: string, webhookId: string, patch: WebhookPatch, opts: { allowPrivate: boolean },
): Promise<UpdatedWebhook | null> {
  const webhook = await findWebhook(em, organizationId, webhookId);
  if (!webhook) return null;
  checkOperationalEvents(patch.events ?? webhook.events, patch.formId !== undefined ? patch.formId : webhook.formId);
  if (patch.formId !== undefined) await checkFormOfOrganization(em, organizationId, patch.formId);
  if (patch.url !== undefined) await checkTarget(patch.url, opts.allowPrivate);
  if (patch.enabled === true && !webhook.enabled) webhook.failingSince = null;
  const liftsPause = (patch.url !== undefined && patch.url !== webhook.url) || patch.enabled === true;
  const rateChanged = patch.throttleRate !== undefined && patch.throttleRate !== webhook.throttleRate;
  // A pause that already ended held nothing back: lifting it releases nothing (retries keep their delay).
  const wasPaused = webhook.pausedUntil !== null && webhook.pausedUntil > new Date();
  if (liftsPause) webhook.pausedUntil = null;
  Object.assign(webhook, {
    ...patch,
    ...(patch.events ? { events: normalizeEvents(patch.events) } : {}),
    updatedAt: new Date(),
  });
  await em.flush();
  return { webhook, releaseHeld: liftsPause && wasPaused ? 'all' : rateChanged ? 'first-attempts' : 'none' };
}

export async function deleteWebhook(em: Em, organizationId: string, webhookId: string): Promise<boolean> {
  return (await em.nativeDelete(Webhook, { id: webhookId, organizationId })) > 0;
}

export async function listDeliveries(
  em: Em, organizationId: string, webhookId: string, page: { limit: number; offset: number },
): Promise<{ items: WebhookDelivery[]; total: number }> {
  const [items, total] = await em.findAndCount(WebhookDelivery, { webhookId, organizationId }, {
    orderBy: { createdAt: 'desc', id: 'desc' }, limit: page.limit, offset: page.offset,
  });
  return { items, total };
}

/**
 * Ends a receiver's pause of the webhook (a manual retry or a recovery says: try now) and, when one
 * was running, puts its held deliveries back to due now, all of them, answering at most RELEASE_BATCH for the caller to
 * queue (their waiting jobs replaced by ones due now); the sweep of owed work brings the others' jobs
 * forward. A delivery held by the throttle that comes back
 * before its slot is told to wait for it again, so releasing never breaks the rate.
 */
export async function releaseHeldDeliveries(
  em: Em, organizationId: string, webhookId: string, { liftPause, awaitingFirstAttempt = false }: { liftPause: boolean; awaitingFirstAttempt?: boolean },
): Promise<Array<{ id: string; jobGroup: string | null }>> {
  // Without a running pause there is nothing it held: retries waiting their delay keep it (releasing
  // them would spend their attempts early on a receiver that may still fail).
  if (liftPause && !(await liftWebhookPause(em, organizationId, webhookId))) return [];
  return releaseHeld(em, organizationId, webhookId, RELEASE_BATCH, { awaitingFirstAttempt });
}

/** Released deliveries one call queues at most (those due soonest); the sweep of owed work brings the others' jobs forward. */
export const RELEASE_BATCH = 1_000;

/** Back to pending, due now, with a fresh retry schedule; the caller queues its job again. */
export async function resetDeliveryForRetry(
  em: Em, organizationId: string, webhookId: string, deliveryId: string,
): Promise<WebhookDelivery | null> {
  const row = await retryDelivery(em, organizationId, webhookId, deliveryId);
  return row ? em.map(WebhookDelivery, row) : null;
}

/**
 * Failed deliveries of the webhook created in [since, until) go back to pending, due now, keeping
 * their ids, each with a fresh retry schedule; at most RECOVERY_BATCH per call, oldest first. A delivery some other call is
 * recovering at the same moment is skipped rather than waited for. The caller queues the ids.
 */
export async function recoverFailedDeliveries(
  em: Em, organizationId: string, webhookId: string, window: { since: Date; until: Date },
): Promise<Array<{ id: string; jobGroup: string | null }>> {
  return resetFailedDeliveries(em, organizationId, webhookId, window, RECOVERY_BATCH);
}

export interface TestSendOutcome {
  delivered: boolean;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

/** A signed `webhook.test` event, sent once and not recorded as a delivery. */
export async function sendTestEvent(config: Readonly<Config>, webhook: Webhook, decryptionKeys: readonly Buffer[]): Promise<TestSendOutcome> {
  const eventId = newId('evt');
  const body = JSON.stringify(buildTestEvent(eventId, webhook.id, new Date()));
  const result = await sendSigned(config, {
    url: webhook.url, secret: unseal(webhook.secretSealed, decryptionKeys),
    previousSecret: previousSecretInGrace(webhook, decryptionKeys), body, eventType: WEBHOOK_TEST,
    deliveryId: newId('dlv'), eventId,
  });
  return {
    delivered: isSuccess(result.statusCode), statusCode: result.statusCode, error: result.error, durationMs: result.durationMs,
  };
}
