import type { Request, Response, Server } from 'restify';
import type { AppContext } from '../../app';
import { isAnalyticsEvent, recordAnalyticsEvent } from '../../domain/forms/analytics';
import type { CachedForm } from '../../domain/forms/form-cache';
import { analyticsTokenKey, verifyAnalyticsToken } from '../../domain/public/analytics-token';
import { submitPublicForm } from '../../domain/public/public-submission';
import { parseJsonBody } from '../pipeline';
import { publicRefusalError } from '../presenters/refusals';
import { rateLimitClientKey } from '../../lib/client-ip';
import { metrics } from '../../lib/metrics';
import { annotate } from '../../lib/tracing';
import { admitPublicRequest, publicFormBuilder } from '../public-admission';
import { clientIpResolver, publicPreflight, PublicError, publicErrors, publicRoute } from '../public-pipeline';
import { formIdParam } from './schemas';
import { requestState } from '../request-state';

const PUBLIC_FORM_CACHE_CONTROL = 'public, max-age=30';

/** The published form for a public JSON request, or the public 404 / 429; headers are set either way. */
async function admittedFormOrRefusal(
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
