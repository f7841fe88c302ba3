import type { Webhook, WebhookDelivery } from '../../domain/webhooks/entities';

export function presentWebhook(webhook: Webhook) {
  return {
    id: webhook.id, name: webhook.name, url: webhook.url, events: webhook.events, formId: webhook.formId,
    enabled: webhook.enabled, throttleRate: webhook.throttleRate, createdAt: webhook.createdAt.toISOString(), updatedAt: webhook.updatedAt.toISOString(),
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
