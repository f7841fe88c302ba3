import type { Request, Response, Server } from 'restify';
import type { AppContext } from '../../app';
import { isAnalyticsEvent, recordAnalyticsEvent } from '../../domain/forms/analytics';
import type { CachedForm } from '../../domain/forms/form-cache';
import { analyticsTokenKey, issueAnalyticsToken, verifyAnalyticsToken } from '../../public/analytics-token';
import { buildPublicForm } from '../../public/public-form';
import { submitPublicForm, type PublicRefusal } from '../../public/public-submission';
import type { PublicFormJson } from '../../public/types';
import { parseJsonBody } from '../pipeline';
import { clientIpResolver, limitPublicRequest, publicPreflight, PublicError, publicErrors, publicRoute } from '../public-pipeline';
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

function formIdOrNotFound(req: Request): string {
  const formId = formIdParam(req);
  if (!formId) throw publicErrors.formNotFound();
  return formId;
}

/** The form if it is published; anything else is answered as missing. */
export async function publishedForm(app: AppContext, formId: string): Promise<CachedForm | null> {
  const form = await app.formCache.get(formId);
  return form && form.status === 'published' ? form : null;
}

/** The published form, or 404; the request is logged under the form's organization. */
async function publishedFormOrNotFound(app: AppContext, req: Request, formId: string): Promise<CachedForm> {
  const form = await publishedForm(app, formId);
  if (!form) throw publicErrors.formNotFound();
  (req as any).organizationId = form.organizationId;
  return form;
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

  server.opts('/public/forms/:formId', publicPreflight);
  server.opts('/public/forms/:formId/events', publicPreflight);

  server.get('/public/forms/:formId', publicRoute(app, async (req: Request, res: Response) => {
    const formId = formIdOrNotFound(req);
    await limitPublicRequest(app, res, `pub-get:${clientIp(req)}:${formId}`, publicRateLimitGet);
    const form = await publishedFormOrNotFound(app, req, formId);
    return { status: 200, body: toPublicForm(form), headers: { 'Cache-Control': PUBLIC_FORM_CACHE_CONTROL } };
  }));

  server.post('/public/forms/:formId', publicRoute(app, async (req: Request, res: Response) => {
    const formId = formIdOrNotFound(req);
    const remoteIp = clientIp(req);
    await limitPublicRequest(app, res, `pub-post:${remoteIp}:${formId}`, publicRateLimitPost);
    const body = parseJsonBody(req);
    await publishedFormOrNotFound(app, req, formId);
    const result = await submitPublicForm(app, { formId, body, remoteIp });
    if (!result.ok) throw publicRefusalError(result.refusal);
    return { status: 200, body: { success: true, submissionId: result.submissionId }, headers: { 'Cache-Control': 'no-store' } };
  }));

  server.post('/public/forms/:formId/events', publicRoute(app, async (req: Request, res: Response) => {
    const formId = formIdOrNotFound(req);
    await limitPublicRequest(app, res, `pub-evt:${clientIp(req)}:${formId}`, publicRateLimitGet);
    const body = parseJsonBody(req);
    const { token, type } = (body && typeof body === 'object' ? body : {}) as Record<string, unknown>;
    await publishedFormOrNotFound(app, req, formId);
    if (!verifyAnalyticsToken(tokenKey, token, formId)) throw new PublicError(400, { success: false, error: 'invalid_token' });
    if (!isAnalyticsEvent(type)) throw publicErrors.invalidData('type must be one of view, start, complete');
    await recordAnalyticsEvent(app.orm.em.fork(), formId, type);
    return { status: 204 };
  }));
}
