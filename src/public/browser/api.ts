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

export async function postSubmission(formId: string, body: SubmissionBody): Promise<SubmitOutcome> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), SUBMIT_TIMEOUT_MS);
  let response: Response;
  try {
    response = await fetch(formPath(formId), {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(body),
      signal: controller.signal,
    });
  } catch {
    return { kind: 'failed', message: NETWORK_FAILURE };
  } finally {
    clearTimeout(timer);
  }
  const payload: any = await response.json().catch(() => null);
  if (response.ok && payload && payload.success === true && typeof payload.submissionId === 'string') {
    return { kind: 'success', submissionId: payload.submissionId };
  }
  const errors = response.status === 422 ? stringErrors(payload && payload.errors) : null;
  if (errors && Object.keys(errors).length) return { kind: 'field-errors', errors };
  return { kind: 'failed', message: failureMessage(response.status, response.headers.get('Retry-After')) };
}
