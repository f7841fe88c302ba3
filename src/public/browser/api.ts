// Calls from the hosted page to the public runtime (same origin as the page).
import type { PublicFormJson } from '../../domain/public/types';
import { language, problemText, t } from './i18n';
import { failureMessage, networkFailure, uploadFailureMessage, uploadStalled } from './values';

/** A server's message in the page's language: the validator's own are translated; others, on a page not in English, give way to `fallback`. */
function localized(message: string, fallback: string): string {
  const shown = problemText(message);
  return shown === message && language() !== 'en' ? fallback : shown;
}

export type AnalyticsEvent = 'view' | 'start' | 'complete' | 'page';

export interface SubmissionBody {
  values: Record<string, unknown>;
  submitterEmail?: string;
  submitterName?: string;
  /** The version of the form the answers were given to (the public form's `version`). */
  formVersion?: number;
  captchaToken?: string;
  /** The page's language, recorded with the submission. */
  language?: string;
}

/** 409 form_changed: the form's current version, which did not accept answers given to an older one. */
export type FormChanged = { kind: 'form-changed'; form: PublicFormJson };

export type SubmitOutcome =
  | { kind: 'success'; submissionId: string }
  | { kind: 'field-errors'; errors: Record<string, string> }
  | FormChanged
  | { kind: 'failed'; message: string };

const SUBMIT_TIMEOUT_MS = 30000;

function formPath(formId: string): string {
  return `/public/forms/${encodeURIComponent(formId)}`;
}

/** Fire-and-forget: analytics must never delay or break the form. */
export function sendEvent(formId: string, token: string, type: AnalyticsEvent, page?: string): void {
  const url = `${formPath(formId)}/events`;
  const body = JSON.stringify(page === undefined ? { token, type } : { token, type, page });
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
    result[fieldId] = typeof message === 'string' ? localized(message, t('answerNotAccepted')) : t('answerNotAccepted');
  }
  return result;
}

export type CheckOutcome =
  | { kind: 'success' }
  | { kind: 'field-errors'; errors: Record<string, string> }
  | FormChanged
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
function refusal(response: Response, payload: any)
  : { kind: 'field-errors'; errors: Record<string, string> } | FormChanged | { kind: 'failed'; message: string } {
  if (response.status === 409 && payload && payload.error === 'form_changed' && payload.form && Array.isArray(payload.form.fields)) {
    return { kind: 'form-changed', form: payload.form as PublicFormJson };
  }
  const errors = response.status === 422 ? stringErrors(payload && payload.errors) : null;
  if (errors && Object.keys(errors).length) return { kind: 'field-errors', errors };
  return { kind: 'failed', message: failureMessage(response.status, response.headers.get('Retry-After')) };
}

export async function postSubmission(formId: string, body: SubmissionBody): Promise<SubmitOutcome> {
  const answer = await postJson(formPath(formId), body);
  if (!answer) return { kind: 'failed', message: networkFailure() };
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
  if (!answer) return { kind: 'failed', message: networkFailure() };
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

/** Where the bytes of an upload go (README "Files"): a presigned URL, or the service's own upload URL. */
export interface UploadTicket {
  uploadId: string;
  url: string;
  method: string;
  headers: Record<string, string>;
  expiresAt: string;
}

export interface UploadRequest {
  fieldId: string;
  name: string;
  type: string;
  size: number;
}

/** `refused`: the field does not take this file (asking again will not help); `failed`: try again. */
export type TicketOutcome =
  | { kind: 'ticket'; ticket: UploadTicket }
  | { kind: 'refused'; message: string }
  | { kind: 'failed'; message: string };

function ticketOf(payload: any): UploadTicket | null {
  if (!payload || typeof payload.uploadId !== 'string' || typeof payload.url !== 'string') return null;
  const headers = payload.headers && typeof payload.headers === 'object' ? payload.headers as Record<string, string> : {};
  return {
    uploadId: payload.uploadId,
    url: payload.url,
    method: typeof payload.method === 'string' ? payload.method : 'PUT',
    headers,
    expiresAt: typeof payload.expiresAt === 'string' ? payload.expiresAt : '',
  };
}

/** Asks the service where to send a file's bytes; the declared name, type and size are checked there. */
export async function requestUpload(formId: string, upload: UploadRequest): Promise<TicketOutcome> {
  const answer = await postJson(`${formPath(formId)}/uploads`, upload);
  if (!answer) return { kind: 'failed', message: networkFailure() };
  const { response, payload } = answer;
  const ticket = response.status === 201 ? ticketOf(payload) : null;
  if (ticket) return { kind: 'ticket', ticket };
  if (response.status === 400 || response.status === 422) {
    const onField = payload && payload.errors && typeof payload.errors[upload.fieldId] === 'string' ? payload.errors[upload.fieldId] : null;
    const message = onField ?? (payload && typeof payload.message === 'string' ? payload.message : null);
    const cantAttach = t('cantAttach', { name: upload.name });
    if (!message) return { kind: 'refused', message: cantAttach };
    const shown = localized(message, cantAttach);
    return { kind: 'refused', message: shown.includes(upload.name) ? shown : `${upload.name}: ${shown}` };
  }
  if (response.status === 404) return { kind: 'refused', message: failureMessage(404) };
  return { kind: 'failed', message: uploadFailureMessage(response.status, response.headers.get('Retry-After')) };
}

export type SendOutcome = { kind: 'sent' } | { kind: 'failed'; status: number; message: string };

export interface Sending {
  done: Promise<SendOutcome>;
  abort(): void;
}

/**
 * An upload that sends no byte and gets no answer for this long has stalled (a connection that died
 * without a reset, a phone between networks): it is given up, with Retry, rather than sitting at
 * "Uploading… n%" for ever. A time limit on the whole upload would fail big files on slow links.
 */
export const UPLOAD_STALL_MS = 30_000;

/**
 * Sends a file's bytes where its ticket says, with XMLHttpRequest: fetch cannot report upload
 * progress. `progress` gets the bytes sent so far.
 */
export function sendUpload(ticket: UploadTicket, file: Blob, progress: (sent: number) => void): Sending {
  const xhr = new XMLHttpRequest();
  let stalled = false;
  let stallTimer: ReturnType<typeof setTimeout> | undefined;
  const watch = (): void => {
    clearTimeout(stallTimer);
    stallTimer = setTimeout(() => { stalled = true; xhr.abort(); }, UPLOAD_STALL_MS);
  };
  const done = new Promise<SendOutcome>((resolve) => {
    const settle = (outcome: SendOutcome): void => { clearTimeout(stallTimer); resolve(outcome); };
    const failed = (status: number): void => settle({ kind: 'failed', status, message: uploadFailureMessage(status, xhr.getResponseHeader('Retry-After')) });
    xhr.upload.addEventListener('progress', (event) => { watch(); progress(event.loaded); });
    xhr.addEventListener('load', () => (xhr.status >= 200 && xhr.status < 300 ? settle({ kind: 'sent' }) : failed(xhr.status)));
    xhr.addEventListener('error', () => failed(0));
    xhr.addEventListener('timeout', () => failed(0));
    xhr.addEventListener('abort', () => (stalled ? settle({ kind: 'failed', status: 0, message: uploadStalled() }) : failed(0)));
  });
  xhr.open(ticket.method || 'PUT', ticket.url);
  for (const [name, value] of Object.entries(ticket.headers)) {
    // The browser sets these itself and refuses to be told.
    if (!/^(?:content-length|host|connection)$/i.test(name)) xhr.setRequestHeader(name, String(value));
  }
  xhr.send(file);
  watch();
  return { done, abort: () => xhr.abort() };
}
