import type { Request, Response, Server } from 'restify';
import type { AppContext } from '../../app';
import { isAnalyticsEvent, recordAnalyticsEvent } from '../../domain/forms/analytics';
import type { CachedForm } from '../../domain/forms/form-cache';
import { analyticsTokenKey, issueAnalyticsToken, verifyAnalyticsToken } from '../../public/analytics-token';
import { buildPublicForm } from '../../public/public-form';
import { submitPublicForm, type PublicRefusal } from '../../public/public-submission';
import type { PublicFormJson } from '../../public/types';
import { parseJsonBody } from '../pipeline';
import type { RateDecision } from '../../domain/quotas/rate-limiter';
import { rateLimitClientKey } from '../../lib/client-ip';
import { metrics } from '../../lib/metrics';
import { clientIpResolver, publicPreflight, PublicError, publicErrors, publicRoute } from '../public-pipeline';
import { formIdParam } from './schemas';

const PUBLIC_FORM_CACHE_CONTROL = 'public, max-age=30';

export function publicRefusalError(refusal: PublicRefusal): PublicError {
  switch (refusal.kind) {
    case 'not_found':
    case 'not_published': return publicErrors.formNotFound();
    case 'bad_body': return publicErrors.invalidData(refusal.message);
    case 'invalid_data': return publicErrors.invalidData('Request body must contain a "values" object');
    case 'missing_required': return new PublicError(422, {
      success: false,
      errors: Object.fromEntries(refusal.fields.map((field) => [field.id, `${field.label || 'This field'} is required`])),
    });
    case 'invalid_fields': return new PublicError(422, {
      success: false,
      errors: Object.fromEntries(refusal.errors.map((error) => [error.field, error.message])),
    });
    case 'captcha': return refusal.refusal === 'verification_unavailable'
      ? new PublicError(503, { success: false, error: 'service_unavailable', message: 'Bot verification is unavailable; retry later' }, { 'Retry-After': 5 })
      : new PublicError(422, { success: false, error: refusal.refusal });
    case 'quota_exceeded': return new PublicError(402, { success: false, error: 'limit_exceeded' });
    case 'payment_used': return new PublicError(409, {
      success: false, error: 'payment_already_used',
      message: 'This payment has already been used for a submission; start a new payment to submit again',
    });
    case 'payment_unavailable': return new PublicError(503, { success: false, error: 'service_unavailable' }, { 'Retry-After': 5 });
    case 'idempotency_key_reused':
    case 'idempotency_key_in_use': return publicErrors.internal(); // public submissions carry no idempotency key
  }
}

/** The published form if it is one; anything else is answered as missing. */
export async function publishedForm(app: AppContext, formId: string): Promise<CachedForm | null> {
  const form = await app.formCache.get(formId);
  return form && form.status === 'published' ? form : null;
}

export type PublicAdmission =
  | { ok: true; form: CachedForm }
  | { ok: false; kind: 'not_found' }
  | { ok: false; kind: 'rate_limited'; decision: RateDecision };

/**
 * Abuse limits of a public request. A request that names a missing or unpublished form counts in
 * its client's miss bucket (an IPv4 address or an IPv6 /64), whatever the form id, and gets 429
 * once that is spent; a published form counts in the client's bucket for that form (`perForm`),
 * so a client that spent its misses is still served published forms. Misses are remembered only
 * in the form cache's small negative cache, never among live forms.
 */
export async function admitPublicRequest(
  app: AppContext, clientKey: string, formId: string | null, perForm: { name: string; limit: number },
): Promise<{ admission: PublicAdmission; headers: Record<string, string> }> {
  const form = formId ? await publishedForm(app, formId) : null;
  const decision = form
    ? await app.rateLimiter.hit(`${perForm.name}:${clientKey}:${form.id}`, perForm.limit)
    : await app.rateLimiter.hit(`pub-miss:${clientKey}`, app.config.publicRateLimitMisses);
  const headers = rateHeaders(decision);
  if (!decision.allowed) return { admission: { ok: false, kind: 'rate_limited', decision }, headers };
  return { admission: form ? { ok: true, form } : { ok: false, kind: 'not_found' }, headers };
}

function rateHeaders(decision: RateDecision): Record<string, string> {
  return { 'X-RateLimit-Remaining': String(decision.remaining), 'X-RateLimit-Reset': String(decision.resetAt) };
}

/** The published form for a public JSON request, or the public 404 / 429; headers are set either way. */
async function admittedFormOrRefusal(
  app: AppContext, req: Request, res: Response, clientKey: string, perForm: { name: string; limit: number },
): Promise<CachedForm> {
  const { admission, headers } = await admitPublicRequest(app, clientKey, formIdParam(req), perForm);
  for (const [name, value] of Object.entries(headers)) res.header(name, value);
  if (admission.ok) {
    (req as any).organizationId = admission.form.organizationId;
    return admission.form;
  }
  if (admission.kind === 'not_found') throw publicErrors.formNotFound();
  metrics.rateLimitRejections.inc({ scope: 'public' });
  throw publicErrors.rateLimited(admission.decision.retryAfter);
}

/** Builds the public form as the JSON endpoint and the hosted page serve it, with a fresh analytics token. */
export function publicFormBuilder(app: AppContext): (form: CachedForm) => PublicFormJson {
  const tokenKey = analyticsTokenKey(app.encryptionKey);
  return (form) => buildPublicForm(form, {
    siteKey: app.config.turnstileSiteKey,
    analyticsToken: issueAnalyticsToken(tokenKey, form.id),
  });
}

export function registerPublicRoutes(server: Server, app: AppContext): void {
  const tokenKey = analyticsTokenKey(app.encryptionKey);
  const toPublicForm = publicFormBuilder(app);
  const { publicRateLimitGet, publicRateLimitPost } = app.config;
  const clientIp = clientIpResolver(app.config.trustedProxies);
  const clientKeyOf = (req: Request) => rateLimitClientKey(clientIp(req));

  server.opts('/public/forms/:formId', publicPreflight);
  server.opts('/public/forms/:formId/events', publicPreflight);

  server.get('/public/forms/:formId', publicRoute(app, async (req: Request, res: Response) => {
    const form = await admittedFormOrRefusal(app, req, res, clientKeyOf(req), { name: 'pub-get', limit: publicRateLimitGet });
    return { status: 200, body: toPublicForm(form), headers: { 'Cache-Control': PUBLIC_FORM_CACHE_CONTROL } };
  }));

  server.post('/public/forms/:formId', publicRoute(app, async (req: Request, res: Response) => {
    const remoteIp = clientIp(req);
    const form = await admittedFormOrRefusal(app, req, res, rateLimitClientKey(remoteIp), { name: 'pub-post', limit: publicRateLimitPost });
    const body = parseJsonBody(req);
    const result = await submitPublicForm(app, { formId: form.id, body, remoteIp });
    if (!result.ok) throw publicRefusalError(result.refusal);
    return { status: 200, body: { success: true, submissionId: result.submissionId }, headers: { 'Cache-Control': 'no-store' } };
  }));

  server.post('/public/forms/:formId/events', publicRoute(app, async (req: Request, res: Response) => {
    const form = await admittedFormOrRefusal(app, req, res, clientKeyOf(req), { name: 'pub-evt', limit: publicRateLimitGet });
    const body = parseJsonBody(req);
    const { token, type } = (body && typeof body === 'object' ? body : {}) as Record<string, unknown>;
    if (!verifyAnalyticsToken(tokenKey, token, form.id)) throw new PublicError(400, { success: false, error: 'invalid_token' });
    if (!isAnalyticsEvent(type)) throw publicErrors.invalidData('type must be one of view, start, complete');
    await recordAnalyticsEvent(app.orm.em.fork(), form.id, type);
    return { status: 204 };
  }));
}

/** The rate-limit key of a public request's client (its address; an IPv6 client's /64). */
export function publicClientKey(app: AppContext): (req: Request) => string {
  const clientIp = clientIpResolver(app.config.trustedProxies);
  return (req) => rateLimitClientKey(clientIp(req));
}
