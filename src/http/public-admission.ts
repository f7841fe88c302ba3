import type { Request } from 'restify';
import type { AppContext } from '../app';
import type { CachedForm } from '../domain/forms/form-cache';
import type { RateDecision } from '../domain/quotas/rate-limiter';
import { rateLimitClientKey } from '../lib/client-ip';
import { analyticsTokenKey, issueAnalyticsToken } from '../domain/public/analytics-token';
import { paymentsEnabled } from '../domain/payments/intents';
import { buildPublicForm } from '../domain/public/public-form';
import type { PublicFormJson } from '../domain/public/types';
import { requestedTag, resolveLanguage, type LanguageSources } from '../domain/public/language';
import type { Language } from '../domain/public/messages';
import { clientIpResolver } from './public-pipeline';

// What the public JSON routes and the hosted page share: admission of a public request (form lookup
// and abuse limits), its client's key, and the public form with a fresh analytics token.

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

/**
 * The language a public request is answered in: `?lang=`, else the form's `settings.language` (none
 * when no form is served), else the request's Accept-Language, else English (domain/public/language.ts).
 */
export function requestLanguage(req: Request, form: CachedForm | null): Language {
  return resolveLanguage(languageSources(req, form));
}

/** The request's language and the tag it asked for in it (which of a form's regional translations). */
export function requestLanguageTag(req: Request, form: CachedForm): { language: Language; tag: string | null } {
  const sources = languageSources(req, form);
  const language = resolveLanguage(sources);
  return { language, tag: requestedTag(sources, language) };
}

function languageSources(req: Request, form: CachedForm | null): LanguageSources {
  const query = req.query && typeof req.query === 'object' ? (req.query as Record<string, unknown>).lang : undefined;
  const header = req.headers['accept-language'];
  return { query, pinned: form?.settings?.language, acceptLanguage: typeof header === 'string' ? header : null };
}

/** Builds the public form as the JSON endpoint and the hosted page serve it, with a fresh analytics token. */
export function publicFormBuilder(app: AppContext): (form: CachedForm, language?: Language, languageTag?: string | null) => PublicFormJson {
  const tokenKey = analyticsTokenKey(app.encryptionKey);
  const publishableKey = paymentsEnabled(app.config) ? app.config.stripePublishableKey : null;
  return (form, language, languageTag) => buildPublicForm(form, {
    language,
    languageTag,
    siteKey: app.config.turnstileSiteKey,
    publishableKey,
    uploadMaxBytes: app.config.uploadMaxBytes,
    analyticsToken: issueAnalyticsToken(tokenKey, form.id),
  });
}

/** The rate-limit key of a public request's client (its address; an IPv6 client's /64). */
export function publicClientKey(app: AppContext): (req: Request) => string {
  const clientIp = clientIpResolver(app.config.trustedProxies);
  return (req) => rateLimitClientKey(clientIp(req));
}
