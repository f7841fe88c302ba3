// Server-side verification of the public runtime's bot challenge (Cloudflare Turnstile siteverify).
// It fails closed: a submission to a protected form is stored only after a positive answer.
import { randomUUID } from 'node:crypto';
import { outboundFetch, type OutboundRequest, type OutboundResponse } from '../../lib/outbound';

export const CAPTCHA_TOKEN_MIN = 8;
export const CAPTCHA_TOKEN_MAX = 4096;
/** Both attempts together stay within it, so a submission still answers within 5 seconds. */
const VERIFY_BUDGET_MS = 4_500;
const MIN_ATTEMPT_MS = 250;

export type CaptchaRefusal = 'captcha_required' | 'captcha_invalid' | 'captcha_failed' | 'verification_unavailable';
export type CaptchaVerdict = { ok: true } | { ok: false; refusal: CaptchaRefusal; detail?: string };

/** What one siteverify answer means: pass, the token was refused, ask again once, or give up. */
export type SiteverifyOutcome = 'pass' | 'fail' | 'retry' | 'unavailable';

export interface TurnstileSettings {
  secretKey: string | null;
  verifyUrl: string;
}

export type Fetcher = (url: string, req: OutboundRequest) => Promise<OutboundResponse>;

/** Missing or malformed tokens are refused without asking the backend. */
export function tokenProblem(token: unknown): 'captcha_required' | 'captcha_invalid' | null {
  if (token === undefined || token === null || token === '') return 'captcha_required';
  if (typeof token !== 'string' || token.length < CAPTCHA_TOKEN_MIN || token.length > CAPTCHA_TOKEN_MAX) return 'captcha_invalid';
  return null;
}

// Codes that blame our request rather than the visitor's token: the operator has to fix them.
const OUR_FAULT = new Set(['missing-input-secret', 'invalid-input-secret', 'bad-request']);

export function interpretSiteverify(status: number, body: string): { outcome: SiteverifyOutcome; codes: string[] } {
  if (status >= 500) return { outcome: 'unavailable', codes: [] };
  let answer: any;
  try {
    answer = JSON.parse(body);
  } catch {
    return { outcome: 'unavailable', codes: [] };
  }
  const codes: string[] = Array.isArray(answer?.['error-codes'])
    ? answer['error-codes'].filter((code: unknown): code is string => typeof code === 'string')
    : [];
  if (status === 200 && answer?.success === true) return { outcome: 'pass', codes };
  if (codes.includes('internal-error')) return { outcome: 'retry', codes };
  if (status !== 200 || codes.some((code) => OUR_FAULT.has(code)) || answer?.success !== false) {
    return { outcome: 'unavailable', codes };
  }
  return { outcome: 'fail', codes };
}

/**
 * Asks siteverify about `token`. One retry, with the same idempotency key, when the backend reports
 * an internal error; an unreachable backend, a 5xx or a configuration problem is `verification_unavailable`.
 */
export async function verifyCaptcha(
  settings: TurnstileSettings, token: unknown, remoteIp: string | null, fetcher: Fetcher = outboundFetch,
): Promise<CaptchaVerdict> {
  const problem = tokenProblem(token);
  if (problem) return { ok: false, refusal: problem };
  if (!settings.secretKey) return { ok: false, refusal: 'verification_unavailable', detail: 'TURNSTILE_SECRET_KEY is not set' };

  const form = new URLSearchParams({ secret: settings.secretKey, response: token as string, idempotency_key: randomUUID() });
  if (remoteIp) form.set('remoteip', remoteIp);
  const deadline = Date.now() + VERIFY_BUDGET_MS;
  let last = 'no answer';
  for (let attempt = 0; attempt < 2; attempt++) {
    const timeoutMs = deadline - Date.now();
    if (timeoutMs < MIN_ATTEMPT_MS) break;
    let response: OutboundResponse;
    try {
      response = await fetcher(settings.verifyUrl, {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'application/json' },
        body: form.toString(),
        timeoutMs,
        // The operator configures this URL; tests and self-hosted verifiers may live on private addresses.
        allowPrivate: true,
      });
    } catch (err) {
      return { ok: false, refusal: 'verification_unavailable', detail: (err as Error).message };
    }
    const { outcome, codes } = interpretSiteverify(response.status, response.body);
    if (outcome === 'pass') return { ok: true };
    if (outcome === 'fail') return { ok: false, refusal: 'captcha_failed', detail: codes.join(',') };
    last = `status ${response.status} ${codes.join(',')}`.trim();
    if (outcome === 'unavailable') break;
  }
  return { ok: false, refusal: 'verification_unavailable', detail: last };
}
