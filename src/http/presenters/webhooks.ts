import type { Webhook, WebhookDelivery } from '../../domain/webhooks/entities';

/** `pausedUntil`: while a receiver's 429 Retry-After holds the webhook's deliveries back, until when; null otherwise. */
export function presentWebhook(webhook: Webhook) {
  const now = new Date();
  return {
    id: webhook.id, name: webhook.name, url: webhook.url, events: webhook.events, formId: webhook.formId,
    enabled: webhook.enabled, throttleRate: webhook.throttleRate,
    pausedUntil: webhook.pausedUntil && webhook.pausedUntil > now ? webhook.pausedUntil.toISOString() : null,
    createdAt: webhook.createdAt.toISOString(), updatedAt: webhook.updatedAt.toISOString(),
  };
}

export function presentDelivery(delivery: WebhookDelivery) {
  return {
    id: delivery.id, eventId: delivery.eventId, eventType: delivery.eventType, status: delivery.status,
    attempts: delivery.attempts, lastStatusCode: delivery.lastStatusCode, lastError: delivery.lastError,
    nextAttemptAt: delivery.nextAttemptAt?.toISOString() ?? null,
    createdAt: delivery.createdAt.toISOString(), updatedAt: delivery.updatedAt.toISOString(),
  };
}
