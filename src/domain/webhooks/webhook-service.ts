import type { Config } from '../../../config';
import type { Em } from '../../db/orm';
import { seal, unseal } from '../../lib/crypto';
import { newId, randomBase62 } from '../../lib/ids';
import { assertSafeTarget, OutboundError } from '../../lib/outbound';
import { findForm } from '../forms/form-service';
import { Webhook, WebhookDelivery } from './entities';
import { buildTestEvent, normalizeEvents, WEBHOOK_TEST } from './events';
import { isSuccess } from './policy';
import { sendSigned } from './sender';

export const SECRET_PREFIX = 'whsec_';
const SECRET_LENGTH = 32;

export interface WebhookInput {
  name: string;
  url: string;
  events: string[];
  formId?: string | null;
  enabled?: boolean;
}

export type WebhookPatch = Partial<WebhookInput>;

/** `formId` names no live form of the organization. */
export class WebhookFormNotFound extends Error {}

/** The URL is malformed, of a refused scheme, or resolves to a refused address. */
export class UnsafeWebhookTarget extends Error {}

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

/** The secret is returned here only; it is stored sealed. */
export async function createWebhook(
  em: Em, organizationId: string, input: WebhookInput, opts: { allowPrivate: boolean; encryptionKey: Buffer },
): Promise<{ webhook: Webhook; secret: string }> {
  await checkFormOfOrganization(em, organizationId, input.formId);
  await checkTarget(input.url, opts.allowPrivate);
  const secret = newWebhookSecret();
  const webhook = Object.assign(new Webhook(), {
    id: newId('wh'), organizationId, formId: input.formId ?? null, name: input.name, url: input.url,
    events: normalizeEvents(input.events), enabled: input.enabled ?? true, secretSealed: seal(secret, opts.encryptionKey),
  });
  await em.persistAndFlush(webhook);
  return { webhook, secret };
}

export async function listWebhooks(em: Em, organizationId: string, formId?: string): Promise<Webhook[]> {
  return em.find(Webhook, { organizationId, ...(formId ? { formId } : {}) }, { orderBy: { createdAt: 'asc', id: 'asc' } });
}

export async function findWebhook(em: Em, organizationId: string, webhookId: string): Promise<Webhook | null> {
  return em.findOne(Webhook, { id: webhookId, organizationId });
}

/** Re-enabling clears the failure streak so the 5-day rule starts afresh. */
export async function updateWebhook(
  em: Em, organizationId: string, webhookId: string, patch: WebhookPatch, opts: { allowPrivate: boolean },
): Promise<Webhook | null> {
  const webhook = await findWebhook(em, organizationId, webhookId);
  if (!webhook) return null;
  if (patch.formId !== undefined) await checkFormOfOrganization(em, organizationId, patch.formId);
  if (patch.url !== undefined) await checkTarget(patch.url, opts.allowPrivate);
  if (patch.enabled === true && !webhook.enabled) webhook.failingSince = null;
  Object.assign(webhook, {
    ...patch,
    ...(patch.events ? { events: normalizeEvents(patch.events) } : {}),
    updatedAt: new Date(),
  });
  await em.flush();
  return webhook;
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

/** Back to pending, due now; the caller enqueues a new job for it. */
export async function resetDeliveryForRetry(
  em: Em, organizationId: string, webhookId: string, deliveryId: string,
): Promise<WebhookDelivery | null> {
  const delivery = await em.findOne(WebhookDelivery, { id: deliveryId, webhookId, organizationId });
  if (!delivery) return null;
  const now = new Date();
  Object.assign(delivery, { status: 'pending', nextAttemptAt: now, updatedAt: now });
  await em.flush();
  return delivery;
}

export interface TestSendOutcome {
  delivered: boolean;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

/** A signed `webhook.test` event, sent once and not recorded as a delivery. */
export async function sendTestEvent(config: Readonly<Config>, webhook: Webhook, decryptionKeys: readonly Buffer[]): Promise<TestSendOutcome> {
  const body = JSON.stringify(buildTestEvent(newId('evt'), webhook.id, new Date()));
  const result = await sendSigned(config, {
    url: webhook.url, secret: unseal(webhook.secretSealed, decryptionKeys), body, eventType: WEBHOOK_TEST,
    deliveryId: newId('dlv'),
  });
  return {
    delivered: isSuccess(result.statusCode), statusCode: result.statusCode, error: result.error, durationMs: result.durationMs,
  };
}
