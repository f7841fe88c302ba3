import Joi from 'joi';
import type { Request, Server } from 'restify';
import type { AppContext } from '../../app';
import type { Em } from '../../db/orm';
import { EVENT_ALIASES } from '../../domain/webhooks/events';
import { requeueDelivery } from '../../domain/webhooks/jobs';
import {
  createWebhook, deleteWebhook, findWebhook, listDeliveries, listWebhooks, releaseHeldDeliveries, resetDeliveryForRetry,
  checkFormOfOrganization, sendTestEvent, UnsafeWebhookTarget, updateWebhook, WebhookFormNotFound,
  WebhookLimitReached, rotateWebhookSecret, recoverFailedDeliveries, DEFAULT_ROTATION_GRACE_SECONDS,
  MAX_ROTATION_GRACE_SECONDS, MAX_THROTTLE_RATE, MIN_THROTTLE_RATE, OperationalEventsNeedOrganizationWide, type WebhookInput, type WebhookPatch,
} from '../../domain/webhooks/webhook-service';
import { ApiError, errors } from '../errors';
import { presentDelivery, presentWebhook } from '../presenters/webhooks';
import { authenticated } from '../pipeline';
import { validate } from '../validation';
import { FORM_ID, utcDateTime } from './schemas';

const WEBHOOK_ID = /^wh_[a-zA-Z0-9]+$/;
const DELIVERY_ID = /^dlv_[a-zA-Z0-9]+$/;

const fields = {
  name: Joi.string().trim().min(1).max(200),
  // Scheme and address rules are applied by assertSafeTarget, which knows the instance's policy.
  url: Joi.string().max(2048),
  events: Joi.array().min(1).max(10).items(Joi.string().valid(...Object.keys(EVENT_ALIASES))),
  formId: Joi.string().pattern(FORM_ID).allow(null).messages({ 'string.pattern.base': 'formId must be a form id' }),
  enabled: Joi.boolean(),
  throttleRate: Joi.number().integer().min(MIN_THROTTLE_RATE).max(MAX_THROTTLE_RATE).allow(null).strict(),
};

const createSchema = Joi.object({
  ...fields,
  name: fields.name.required(),
  url: fields.url.required(),
  events: fields.events.required(),
}).required();

const updateSchema = Joi.object(fields).min(1).required()
  .messages({ 'object.min': 'body must change at least one of name, url, events, formId, enabled, throttleRate' });

const listQuerySchema = Joi.object({
  formId: Joi.string().pattern(FORM_ID).messages({ 'string.pattern.base': 'formId must be a form id' }),
}).unknown(true);

const rotateSchema = Joi.object({
  graceSeconds: Joi.number().integer().min(0).max(MAX_ROTATION_GRACE_SECONDS).default(DEFAULT_ROTATION_GRACE_SECONDS),
}).required();

const recoverSchema = Joi.object({
  since: utcDateTime.required(),
  until: utcDateTime,
}).required().custom((window: { since: Date; until?: Date }, helpers) =>
  window.until && window.until.getTime() <= window.since.getTime()
    ? helpers.message({ custom: '"until" must be later than "since"' })
    : window);

const pageQuerySchema = Joi.object({
  limit: Joi.number().integer().min(1).max(100).default(50),
  offset: Joi.number().integer().min(0).default(0),
}).unknown(true);

function pathId(req: Request, name: string, pattern: RegExp): string | null {
  const id = req.params?.[name];
  return typeof id === 'string' && pattern.test(id) ? id : null;
}

function isEmptyBody(req: Request): boolean {
  const raw = req.body;
  return raw === undefined || raw === null || (typeof raw === 'string' ? raw.trim() === '' : Buffer.isBuffer(raw) && raw.length === 0);
}

const webhookNotFound = () => errors.notFound('Webhook not found');

/** A well-formed `formId` naming no form of the organization is a 404, which comes before body validation (a missing resource is named before a bad body). */
async function formOfBodyOrNotFound(em: Em, organizationId: string, body: unknown): Promise<void> {
  const formId = (body as { formId?: unknown } | null)?.formId;
  if (typeof formId === 'string' && FORM_ID.test(formId)) {
    await checkFormOfOrganization(em, organizationId, formId).catch(translateRefusal);
  }
}

/** Domain refusals as the API shows them. */
function translateRefusal(err: unknown): never {
  if (err instanceof WebhookFormNotFound) throw errors.notFound('Form not found');
  if (err instanceof UnsafeWebhookTarget) throw errors.validation([{ field: 'url', message: err.message }]);
  if (err instanceof OperationalEventsNeedOrganizationWide) throw errors.validation([{ field: 'events', message: err.message }]);
  if (err instanceof WebhookLimitReached) throw errors.validation([{ field: 'webhooks', message: err.message }], err.message);
  throw err;
}

/**
 * Queues a delivery's job under its one stable id: a waiting or delayed job of it (say, one sitting
 * out a long retry delay) is replaced so the delivery goes now, and a running one is left to
 * finish, so repeated requests never start a second chain of attempts. A live job of its storing
 * group holds its first attempt, which goes without delay: it is left to that job.
 */
async function queueDeliveryNow(app: AppContext, delivery: { id: string; jobGroup: string | null }): Promise<void> {
  await requeueDelivery(app.producer, delivery, { replaceWaiting: true });
}

const QUEUE_CONCURRENCY = 20;

async function queueDeliveriesNow(app: AppContext, deliveries: Array<{ id: string; jobGroup: string | null }>): Promise<void> {
  for (let i = 0; i < deliveries.length; i += QUEUE_CONCURRENCY) {
    await Promise.all(deliveries.slice(i, i + QUEUE_CONCURRENCY).map((delivery) => queueDeliveryNow(app, delivery)));
  }
}

const queueUnavailable = () => errors.serviceUnavailable('The delivery queue is unavailable; retry later');

export function registerWebhookRoutes(server: Server, app: AppContext): void {
  const targetPolicy = { allowPrivate: app.config.webhookAllowPrivateTargets };

  server.get('/v1/webhooks', authenticated(app, 'webhooks:read', async ({ em, organizationId, req }) => {
    const query = validate<{ formId?: string }>(listQuerySchema, req.query ?? {});
    const webhooks = await listWebhooks(em, organizationId, query.formId);
    return { status: 200, body: { webhooks: webhooks.map(presentWebhook) } };
  }));

  server.post('/v1/webhooks', authenticated(app, 'webhooks:write', async ({ em, organizationId, json }) => {
    const body = json();
    await formOfBodyOrNotFound(em, organizationId, body);
    const input = validate<WebhookInput>(createSchema, body);
    const { webhook, secret } = await createWebhook(em, organizationId, input, {
      ...targetPolicy, encryptionKey: app.encryptionKey,
    }).catch(translateRefusal);
    return { status: 201, body: { webhook: { ...presentWebhook(webhook), secret } } };
  }));

  server.get('/v1/webhooks/:webhookId', authenticated(app, 'webhooks:read', async ({ em, organizationId, req }) => {
    const id = pathId(req, 'webhookId', WEBHOOK_ID);
    const webhook = id && (await findWebhook(em, organizationId, id));
    if (!webhook) throw webhookNotFound();
    return { status: 200, body: { webhook: presentWebhook(webhook) } };
  }));

  server.put('/v1/webhooks/:webhookId', authenticated(app, 'webhooks:write', async ({ em, organizationId, req, json }) => {
    const body = json();
    const id = pathId(req, 'webhookId', WEBHOOK_ID);
    if (!id || !(await findWebhook(em, organizationId, id))) throw webhookNotFound();
    await formOfBodyOrNotFound(em, organizationId, body);
    const patch = validate<WebhookPatch>(updateSchema, body);
    const updated = await updateWebhook(em, organizationId, id, patch, targetPolicy).catch(translateRefusal);
    if (!updated) throw webhookNotFound();
    if (updated.releaseHeld !== 'none') {
      const released = await releaseHeldDeliveries(em, organizationId, id, { liftPause: false, awaitingFirstAttempt: updated.releaseHeld === 'first-attempts' });
      // The change is stored; deliveries the queue cannot take now are the sweep's once due.
      await queueDeliveriesNow(app, released).catch(() => undefined);
    }
    return { status: 200, body: { webhook: presentWebhook(updated.webhook) } };
  }));

  server.del('/v1/webhooks/:webhookId', authenticated(app, 'webhooks:write', async ({ em, organizationId, req }) => {
    const id = pathId(req, 'webhookId', WEBHOOK_ID);
    if (!id || !(await deleteWebhook(em, organizationId, id))) throw webhookNotFound();
    return { status: 204 };
  }));

  server.get('/v1/webhooks/:webhookId/deliveries', authenticated(app, 'webhooks:read', async ({ em, organizationId, req }) => {
    const id = pathId(req, 'webhookId', WEBHOOK_ID);
    if (!id || !(await findWebhook(em, organizationId, id))) throw webhookNotFound();
    const page = validate<{ limit: number; offset: number }>(pageQuerySchema, req.query ?? {});
    const { items, total } = await listDeliveries(em, organizationId, id, page);
    return { status: 200, body: { deliveries: items.map(presentDelivery), pagination: { ...page, total } } };
  }));

  server.post('/v1/webhooks/:webhookId/deliveries/:deliveryId/retry', authenticated(app, 'webhooks:write', async ({ em, organizationId, req }) => {
    const webhookId = pathId(req, 'webhookId', WEBHOOK_ID);
    const deliveryId = pathId(req, 'deliveryId', DELIVERY_ID);
    if (!webhookId || !(await findWebhook(em, organizationId, webhookId))) throw webhookNotFound();
    const delivery = deliveryId && (await resetDeliveryForRetry(em, organizationId, webhookId, deliveryId));
    if (!delivery) throw errors.notFound('Delivery not found');
    // Retrying says the receiver is back: its pause ends and what it held goes too.
    const released = await releaseHeldDeliveries(em, organizationId, webhookId, { liftPause: true });
    await queueDeliveriesNow(app, [delivery, ...released.filter((d) => d.id !== delivery.id)]).catch(() => { throw queueUnavailable(); });
    return { status: 202, body: { delivery: presentDelivery(delivery) } };
  }));

  server.post('/v1/webhooks/:webhookId/rotate-secret', authenticated(app, 'webhooks:write', async ({ em, organizationId, req, json }) => {
    // The body is optional here: nothing at all means the default grace.
    const body = isEmptyBody(req) ? {} : json();
    const id = pathId(req, 'webhookId', WEBHOOK_ID);
    if (!id || !(await findWebhook(em, organizationId, id))) throw webhookNotFound();
    const { graceSeconds } = validate<{ graceSeconds: number }>(rotateSchema, body);
    const rotated = await rotateWebhookSecret(em, organizationId, id, graceSeconds, app.encryptionKey);
    if (!rotated) throw webhookNotFound();
    return {
      status: 200,
      body: {
        webhook: { ...presentWebhook(rotated.webhook), secret: rotated.secret },
        previousSecretExpiresAt: rotated.previousSecretExpiresAt?.toISOString() ?? null,
      },
    };
  }));

  server.post('/v1/webhooks/:webhookId/recover', authenticated(app, 'webhooks:write', async ({ em, organizationId, req, json }) => {
    const body = json();
    const id = pathId(req, 'webhookId', WEBHOOK_ID);
    const webhook = id && (await findWebhook(em, organizationId, id));
    if (!webhook) throw webhookNotFound();
    const window = validate<{ since: Date; until?: Date }>(recoverSchema, body);
    if (!webhook.enabled) throw new ApiError(409, 'webhook_disabled', 'The webhook is disabled; enable it before recovering its deliveries');
    const recovered = await recoverFailedDeliveries(em, organizationId, webhook.id, { since: window.since, until: window.until ?? new Date() });
    const released = await releaseHeldDeliveries(em, organizationId, webhook.id, { liftPause: true });
    await queueDeliveriesNow(app, [...recovered, ...released]).catch(() => { throw queueUnavailable(); });
    return { status: 202, body: { queued: recovered.length } };
  }));

  server.post('/v1/webhooks/:webhookId/test', authenticated(app, 'webhooks:write', async ({ em, organizationId, req }) => {
    const id = pathId(req, 'webhookId', WEBHOOK_ID);
    const webhook = id && (await findWebhook(em, organizationId, id));
    if (!webhook) throw webhookNotFound();
    return { status: 200, body: await sendTestEvent(app.config, webhook, app.decryptionKeys) };
  }));
}
