// A submission through the public runtime: the request body's own rules, the bot challenge, then
// the one submission flow the API uses (same validation, quota, outbox, webhooks and CRM syncs).
import type { Plan } from '../../../config/plans';
import type { CachedForm } from '../forms/form-cache';
import { effectiveQuota, quotaMonth } from '../quotas/quota';
import { findQuotaStanding } from '../quotas/store';
import {
  checkSubmission, createSubmission, refusalOfChangedForm, submitterErrors, submittableForm, type SubmissionDeps,
  type SubmissionRefusal,
} from '../submissions/create-submission';
import { botProtectionEnabled } from './public-form';
import { isLanguage, LANGUAGES } from './messages';
import { verifyCaptcha, type CaptchaRefusal } from './turnstile';

const BODY_KEYS = new Set(['values', 'submitterEmail', 'submitterName', 'formVersion', 'captchaToken', 'language']);
/** POST /check takes the submission's body without the challenge token: checking charges no one, so it needs none. */
const CHECK_BODY_KEYS = new Set(['values', 'submitterEmail', 'submitterName', 'formVersion', 'language']);
const MAX_VERSION = 2_147_483_647;

/** The form version the answers were given to (`formVersion`, optional), as the body says it. */
function answeredVersion(body: Record<string, unknown>): number | null {
  return typeof body.formVersion === 'number' ? body.formVersion : null;
}

export interface PublicSubmissionRequest {
  formId: string;
  body: unknown;
  remoteIp: string;
}

export type PublicRefusal =
  | SubmissionRefusal
  | { kind: 'bad_body'; message: string }
  | { kind: 'captcha'; refusal: CaptchaRefusal };

export type PublicSubmissionResult =
  | { ok: true; submissionId: string }
  | { ok: false; refusal: PublicRefusal };

/** Why the body cannot be a public submission at all, or null when its shape is right. */
export function bodyProblem(body: unknown, keys: ReadonlySet<string> = BODY_KEYS): string | null {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return 'Request body must be a JSON object';
  const unknown = Object.keys(body).filter((key) => !keys.has(key));
  if (unknown.length) return `Unknown properties: ${unknown.join(', ')}`;
  const values = (body as Record<string, unknown>).values;
  if (!values || typeof values !== 'object' || Array.isArray(values)) return 'Request body must contain a "values" object';
  const language = (body as Record<string, unknown>).language;
  if (language !== undefined && language !== null && !isLanguage(language)) {
    return `"language" must be one of ${LANGUAGES.join(', ')} (the language the page was shown in)`;
  }
  const { formVersion } = body as Record<string, unknown>;
  if (formVersion !== undefined && !(Number.isInteger(formVersion) && (formVersion as number) >= 1 && (formVersion as number) <= MAX_VERSION)) {
    return '"formVersion" must be a positive integer (the public form\'s version)';
  }
  return null;
}

export async function submitPublicForm(deps: SubmissionDeps, request: PublicSubmissionRequest): Promise<PublicSubmissionResult> {
  const form = await deps.formCache.get(request.formId);
  if (!form || form.status !== 'published') return { ok: false, refusal: { kind: 'not_found' } };
  const problem = bodyProblem(request.body);
  if (problem) return { ok: false, refusal: { kind: 'bad_body', message: problem } };
  const body = request.body as Record<string, unknown>;

  if (botProtectionEnabled(form.settings ?? {})) {
    const verdict = await verifyCaptcha(
      { secretKey: deps.config.turnstileSecretKey, verifyUrl: deps.config.turnstileVerifyUrl },
      body.captchaToken, request.remoteIp,
    );
    if (!verdict.ok) {
      if (verdict.refusal === 'verification_unavailable') {
        deps.logger.warn({ formId: form.id, detail: verdict.detail }, 'bot challenge verification unavailable');
      }
      return { ok: false, refusal: { kind: 'captcha', refusal: verdict.refusal } };
    }
  }

  const result = await createSubmission(deps, {
    organizationId: null,
    formId: form.id,
    data: body.values,
    submitterEmail: typeof body.submitterEmail === 'string' ? body.submitterEmail : null,
    submitterName: typeof body.submitterName === 'string' ? body.submitterName : null,
    source: 'public',
    language: isLanguage(body.language) ? body.language : null,
    metadataErrors: submitterErrors(body.submitterEmail, body.submitterName),
    formVersion: answeredVersion(body),
  });
  return result.ok ? { ok: true, submissionId: result.submission.id } : { ok: false, refusal: result.refusal };
}

/** Whether the organization's monthly quota has no room left (what a submission would get a 402 for). */
async function quotaReached(deps: SubmissionDeps, form: CachedForm): Promise<boolean> {
  const row = await findQuotaStanding(deps.orm.em.fork(), form.organizationId, quotaMonth(new Date()));
  return !!row && Number(row.used) >= effectiveQuota(row.plan as Plan, row.monthly_quota);
}

/**
 * POST /public/forms/{formId}/check: the answer the submission would get before anyone is charged,
 * from the same checks, storing nothing. The payment is not made yet, so only its field's format is
 * checked; the quota is read as it stands (a submission racing for the last slot may still take it).
 */
export async function checkPublicSubmission(deps: SubmissionDeps, request: { formId: string; body: unknown })
  : Promise<{ ok: true } | { ok: false; refusal: PublicRefusal }> {
  const problem = bodyProblem(request.body, CHECK_BODY_KEYS);
  const body = request.body as Record<string, unknown>;
  // A second, fresh read of the form before answering form_changed (as decideAndStore does).
  for (const fresh of [false, true]) {
    const found = await submittableForm(deps, null, request.formId, fresh);
    if ('refusal' in found) return { ok: false, refusal: { kind: 'not_found' } };
    if (problem) return { ok: false, refusal: { kind: 'bad_body', message: problem } };
    const check = await checkSubmission(deps, found.form, {
      data: body.values,
      submitterEmail: typeof body.submitterEmail === 'string' ? body.submitterEmail : null,
      submitterName: typeof body.submitterName === 'string' ? body.submitterName : null,
      source: 'public',
      metadataErrors: submitterErrors(body.submitterEmail, body.submitterName),
    }, null, { paymentMade: false });
    if (!check.ok) {
      const refusal = refusalOfChangedForm(answeredVersion(body), found.form, check.refusal);
      if (refusal.kind === 'form_changed' && !fresh) continue;
      return { ok: false, refusal };
    }
    if (await quotaReached(deps, found.form)) return { ok: false, refusal: { kind: 'quota_exceeded' } };
    return { ok: true };
  }
  throw new Error('unreachable: the fresh read answers');
}
