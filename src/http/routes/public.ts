import type { Request, Response, Server } from 'restify';
import type { AppContext } from '../../app';
import { AnalyticsEventWriter, isAnalyticsEvent } from '../../domain/forms/analytics';
import type { CachedForm } from '../../domain/forms/form-cache';
import { analyticsTokenKey, verifyAnalyticsToken } from '../../domain/public/analytics-token';
import { createFormPaymentIntent } from '../../domain/payments/intents';
import { refundPaymentsOfRefusedSubmission } from '../../domain/payments/refunds';
import { checkPublicSubmission, submitPublicForm } from '../../domain/public/public-submission';
import { parseJsonBody } from '../pipeline';
import { publicRefusalError } from '../presenters/refusals';
import { rateLimitClientKey } from '../../lib/client-ip';
import { metrics } from '../../lib/metrics';
import { annotate } from '../../lib/tracing';
import { admitPublicRequest, publicFormBuilder, requestLanguageTag } from '../public-admission';
import { isLanguageTag } from '../../domain/forms/translations';
import { isLanguage } from '../../domain/public/messages';
import { clientIpResolver, publicPreflight, PublicError, publicErrors, publicRoute } from '../public-pipeline';
import { formIdParam } from './schemas';
import { requestState } from '../request-state';

const PUBLIC_FORM_CACHE_CONTROL = 'public, max-age=30';
/** What an event's body may hold (`POST /public/forms/{id}/events`). */
const EVENT_KEYS: ReadonlySet<string> = new Set(['token', 'type', 'page']);
/**
 * Payment intents one form may have made per minute, whoever asks: with many client addresses a
 * stranger still cannot make Stripe create intents without bound.
 */
export const PAYMENT_INTENTS_PER_FORM_PER_MINUTE = 120;
/** Refusals a person cannot fix by trying again: 402 (quota) and 404 (form gone or unpublished). */
const FINAL_REFUSAL_STATUSES = new Set([402, 404]);

/** The published form for a public JSON request, or the public 404 / 429; headers are set either way. */
export async function admittedFormOrRefusal(
  app: AppContext, req: Request, res: Response, clientKey: string, perForm: { name: string; limit: number },
): Promise<CachedForm> {
  const { admission, headers } = await admitPublicRequest(app, clientKey, formIdParam(req), perForm);
  for (const [name, value] of Object.entries(headers)) res.header(name, value);
  if (admission.ok) {
    requestState(req).organizationId = admission.form.organizationId;
    annotate({ 'form_service.organization.id': admission.form.organizationId, 'form_service.form.id': admission.form.id });
    return admission.form;
  }
  if (admission.kind === 'not_found') throw publicErrors.formNotFound();
  metrics.rateLimitRejections.inc({ scope: 'public' });
  throw publicErrors.rateLimited(admission.decision.retryAfter);
}

/** The request's JSON body, or null when it has none that parses (the refusal already says why). */
function parsedBodyOrNull(req: Request): unknown {
  try {
    return parseJsonBody(req);
  } catch {
    return null;
  }
}

export function registerPublicRoutes(server: Server, app: AppContext): void {
  const tokenKey = analyticsTokenKey(app.encryptionKey);
  const analyticsEvents = AnalyticsEventWriter.forDatabase(() => app.orm.em.fork());
  const toPublicForm = publicFormBuilder(app);
  const { publicRateLimitGet, publicRateLimitPost } = app.config;
  const clientIp = clientIpResolver(app.config.trustedProxies);
  const clientKeyOf = (req: Request) => rateLimitClientKey(clientIp(req));
  /** The current form a 409 form_changed carries, in the language the page was shown in (its `language`). */
  const changedFormIn = (req: Request, body: unknown) => (changed: CachedForm) => {
    const language = body && typeof body === 'object' ? (body as Record<string, unknown>).language : undefined;
    if (isLanguage(language)) return toPublicForm(changed, language);
    const asked = requestLanguageTag(req, changed);
    return toPublicForm(changed, asked.language, asked.tag);
  };

  server.opts('/public/forms/:formId', publicPreflight);
  server.opts('/public/forms/:formId/events', publicPreflight);

  server.get('/public/forms/:formId', publicRoute(app, async (req: Request, res: Response) => {
    const form = await admittedFormOrRefusal(app, req, res, clientKeyOf(req), { name: 'pub-get', limit: publicRateLimitGet });
    const lang = req.query?.lang;
    if (lang !== undefined && (typeof lang !== 'string' || !isLanguageTag(lang))) {
      throw new PublicError(400, { success: false, error: 'invalid_lang', message: 'lang must be a BCP 47 language tag such as fr or fr-FR' });
    }
    // The answer depends on Accept-Language unless ?lang= names a language: caches keep one per header.
    const asked = requestLanguageTag(req, form);
    return {
      status: 200, body: toPublicForm(form, asked.language, asked.tag),
      headers: { 'Cache-Control': PUBLIC_FORM_CACHE_CONTROL, Vary: 'Accept-Language' },
    };
  }));

  server.opts('/public/forms/:formId/check', publicPreflight);
  server.opts('/public/forms/:formId/payments', publicPreflight);

  server.post('/public/forms/:formId', publicRoute(app, async (req: Request, res: Response) => {
    try {
      const remoteIp = clientIp(req);
      const form = await admittedFormOrRefusal(app, req, res, rateLimitClientKey(remoteIp), { name: 'pub-post', limit: publicRateLimitPost });
      const body = parseJsonBody(req);
      const result = await submitPublicForm(app, { formId: form.id, body, remoteIp });
      if (!result.ok) throw publicRefusalError(result.refusal, changedFormIn(req, body));
      return { status: 200, body: { success: true, submissionId: result.submissionId }, headers: { 'Cache-Control': 'no-store' } };
    } catch (err) {
      // No one is charged without a stored submission: a payment this refusal strands is refunded now.
      if (err instanceof PublicError && FINAL_REFUSAL_STATUSES.has(err.status)) {
        const body = parsedBodyOrNull(req);
        const values = body && typeof body === 'object' ? (body as Record<string, unknown>).values : null;
        await refundPaymentsOfRefusedSubmission(app, formIdParam(req) ?? '', values);
      }
      throw err;
    }
  }));

  server.post('/public/forms/:formId/check', publicRoute(app, async (req: Request, res: Response) => {
    const form = await admittedFormOrRefusal(app, req, res, clientKeyOf(req), { name: 'pub-post', limit: publicRateLimitPost });
    const body = parseJsonBody(req);
    const result = await checkPublicSubmission(app, { formId: form.id, body });
    if (!result.ok) throw publicRefusalError(result.refusal, changedFormIn(req, body));
    return { status: 200, body: { success: true }, headers: { 'Cache-Control': 'no-store' } };
  }));

  server.post('/public/forms/:formId/payments', publicRoute(app, async (req: Request, res: Response) => {
    const form = await admittedFormOrRefusal(app, req, res, clientKeyOf(req), { name: 'pub-pay', limit: publicRateLimitPost });
    const body = parseJsonBody(req);
    const fieldId = body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>).fieldId : undefined;
    const outcome = await createFormPaymentIntent(app, form, fieldId, {
      admit: async () => {
        const perForm = await app.rateLimiter.hit(`pay-form:${form.id}`, PAYMENT_INTENTS_PER_FORM_PER_MINUTE);
        return perForm.allowed ? null : { ok: false, kind: 'rate_limited', retryAfter: perForm.retryAfter };
      },
    });
    if (!outcome.ok && outcome.kind === 'invalid') throw new PublicError(400, { success: false, error: 'invalid_payment', message: outcome.message });
    if (!outcome.ok && outcome.kind === 'rate_limited') {
      metrics.rateLimitRejections.inc({ scope: 'public' });
      throw publicErrors.rateLimited(outcome.retryAfter);
    }
    if (!outcome.ok) {
      app.logger.warn({ formId: form.id, detail: outcome.message }, 'payment intent not created: Stripe unavailable');
      throw new PublicError(503, { success: false, error: 'service_unavailable', message: 'Payments are unavailable; retry later' }, { 'Retry-After': 5 });
    }
    return { status: 201, body: outcome.intent, headers: { 'Cache-Control': 'no-store' } };
  }));

  server.post('/public/forms/:formId/events', publicRoute(app, async (req: Request, res: Response) => {
    const form = await admittedFormOrRefusal(app, req, res, clientKeyOf(req), { name: 'pub-evt', limit: publicRateLimitGet });
    const body = parseJsonBody(req);
    const event = (body && typeof body === 'object' && !Array.isArray(body) ? body : {}) as Record<string, unknown>;
    const { token, type, page } = event;
    if (!verifyAnalyticsToken(tokenKey, token, form.id)) throw new PublicError(400, { success: false, error: 'invalid_token' });
    // Only counters are kept: no answer, no address; a body of anything else is refused.
    const extra = Object.keys(event).filter((key) => !EVENT_KEYS.has(key));
    if (extra.length) throw publicErrors.invalidData(`unknown properties: ${extra.slice(0, 5).map((key) => key.slice(0, 40)).join(', ')}`);
    if (!isAnalyticsEvent(type)) throw publicErrors.invalidData('type must be one of view, start, complete, page');
    if (type === 'page' && !(typeof page === 'string' && form.structure.pages.some((p) => p.id === page))) {
      throw publicErrors.invalidData('page must be the id of one of the form\'s pages');
    }
    if (type !== 'page' && page !== undefined) throw publicErrors.invalidData('page goes only with type page');
    await analyticsEvents.record(form.id, type, { pageId: type === 'page' ? page as string : undefined });
    return { status: 204 };
  }));
}
