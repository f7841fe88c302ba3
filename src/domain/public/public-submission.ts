// A submission through the public runtime: the request body's own rules, the bot challenge, then
// the one submission flow the API uses (same validation, quota, outbox, webhooks and CRM syncs).
import { createSubmission, submitterErrors, type SubmissionDeps, type SubmissionRefusal } from '../submissions/create-submission';
import { botProtectionEnabled } from './public-form';
import { verifyCaptcha, type CaptchaRefusal } from './turnstile';

const BODY_KEYS = new Set(['values', 'submitterEmail', 'submitterName', 'captchaToken']);

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
export function bodyProblem(body: unknown): string | null {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return 'Request body must be a JSON object';
  const unknown = Object.keys(body).filter((key) => !BODY_KEYS.has(key));
  if (unknown.length) return `Unknown properties: ${unknown.join(', ')}`;
  const values = (body as Record<string, unknown>).values;
  if (!values || typeof values !== 'object' || Array.isArray(values)) return 'Request body must contain a "values" object';
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
    metadataErrors: submitterErrors(body.submitterEmail, body.submitterName),
  });
  return result.ok ? { ok: true, submissionId: result.submission.id } : { ok: false, refusal: result.refusal };
}
