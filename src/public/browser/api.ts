// Calls from the hosted page to the public runtime (same origin as the page).
import { failureMessage, NETWORK_FAILURE } from './values';

export type AnalyticsEvent = 'view' | 'start' | 'complete';

export interface SubmissionBody {
  values: Record<string, unknown>;
  submitterEmail?: string;
  submitterName?: string;
  captchaToken?: string;
}

export type SubmitOutcome =
  | { kind: 'success'; submissionId: string }
  | { kind: 'field-errors'; errors: Record<string, string> }
  | { kind: 'failed'; message: string };

const SUBMIT_TIMEOUT_MS = 30000;

function formPath(formId: string): string {
  return `/public/forms/${encodeURIComponent(formId)}`;
}

/** Fire-and-forget: analytics must never delay or break the form. */
export function sendEvent(formId: string, token: string, type: AnalyticsEvent): void {
  const url = `${formPath(formId)}/events`;
  const body = JSON.stringify({ token, type });
  try {
    if (navigator.sendBeacon && navigator.sendBeacon(url, new Blob([body], { type: 'application/json' }))) return;
  } catch {
    // Some browsers refuse beacons in some states; fall through to fetch.
  }
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body, keepalive: true })
    .catch(() => undefined);
}

function stringErrors(errors: unknown): Record<string, string> | null {
  if (!errors || typeof errors !== 'object' || Array.isArray(errors)) return null;
  const result: Record<string, string> = {};
  for (const [fieldId, message] of Object.entries(errors)) {
    result[fieldId] = typeof message === 'string' ? message : 'This answer was not accepted.';
  }
  return result;
}

export type CheckOutcome =
  | { kind: 'success' }
  | { kind: 'field-errors'; errors: Record<string, string> }
  | { kind: 'failed'; message: string };

async function postJson(path: string, body: unknown): Promise<{ response: Response; payload: any } | null> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), SUBMIT_TIMEOUT_MS);
  try {
    const response = await fetch(path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    return { response, payload: await response.json().catch(() => null) };
  } catch {
    return null;
  } finally {
    clearTimeout(timer);
  }
}

/** A refusal in the page's terms: a 422 becomes messages per field, anything else one message. */
function refusal(response: Response, payload: any): { kind: 'field-errors'; errors: Record<string, string> } | { kind: 'failed'; message: string } {
  const errors = response.status === 422 ? stringErrors(payload && payload.errors) : null;
  if (errors && Object.keys(errors).length) return { kind: 'field-errors', errors };
  return { kind: 'failed', message: failureMessage(response.status, response.headers.get('Retry-After')) };
}

export async function postSubmission(formId: string, body: SubmissionBody): Promise<SubmitOutcome> {
  const answer = await postJson(formPath(formId), body);
  if (!answer) return { kind: 'failed', message: NETWORK_FAILURE };
  const { response, payload } = answer;
  if (response.ok && payload && payload.success === true && typeof payload.submissionId === 'string') {
    return { kind: 'success', submissionId: payload.submissionId };
  }
  return refusal(response, payload);
}

/** What the submission would get, asked before anyone is charged; stores nothing. */
export async function postCheck(formId: string, body: SubmissionBody): Promise<CheckOutcome> {
  const { captchaToken: _token, ...unchallenged } = body;
  const answer = await postJson(`${formPath(formId)}/check`, unchallenged);
  if (!answer) return { kind: 'failed', message: NETWORK_FAILURE };
  const { response, payload } = answer;
  if (response.ok && payload && payload.success === true) return { kind: 'success' };
  return refusal(response, payload);
}

export interface PaymentIntentAnswer {
  paymentIntentId: string;
  clientSecret: string;
}

/** A payment intent for the field, made by the service at Stripe; null when it could not be made. */
export async function createPaymentIntent(formId: string, fieldId: string): Promise<PaymentIntentAnswer | null> {
  const answer = await postJson(`${formPath(formId)}/payments`, { fieldId });
  const payload = answer && answer.response.status === 201 ? answer.payload : null;
  if (!payload || typeof payload.paymentIntentId !== 'string' || typeof payload.clientSecret !== 'string') return null;
  return { paymentIntentId: payload.paymentIntentId, clientSecret: payload.clientSecret };
}
