// Calls to Stripe's API: form-encoded requests, JSON answers, Stripe's error objects
// ({error: {type, code, message, ...}}). One place for the transport, the key and the timeout.
import { OutboundError, outboundFetch } from '../../lib/outbound';

export interface StripeSettings {
  apiBase: string;
  secretKey: string | null;
  timeoutMs: number;
}

export const STRIPE_VERSION = '2024-06-20';
export const STRIPE_TIMEOUT_MS = 10_000;

/** Stripe did not answer usefully (unreachable, 5xx, 429, malformed); the caller should retry later. */
export class PaymentBackendUnavailable extends Error {}

/** Stripe answered with one of its error objects (4xx). */
export class StripeError extends Error {
  constructor(readonly status: number, readonly type: string, readonly code: string | null, message: string) {
    super(message);
  }
}

export type StripeObject = Record<string, any>;

/** `{a: {b: 1}}` → `a[b]=1`, as Stripe reads nested parameters. */
export function stripeForm(params: Record<string, unknown>, prefix = ''): string[] {
  const pairs: string[] = [];
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined || value === null) continue;
    const name = prefix ? `${prefix}[${key}]` : key;
    if (typeof value === 'object') pairs.push(...stripeForm(value as Record<string, unknown>, name));
    else pairs.push(`${encodeURIComponent(name)}=${encodeURIComponent(String(value))}`);
  }
  return pairs;
}

export async function stripeRequest(
  stripe: StripeSettings, method: 'GET' | 'POST', path: string,
  opts: { params?: Record<string, unknown>; idempotencyKey?: string } = {},
): Promise<StripeObject> {
  if (!stripe.secretKey) throw new PaymentBackendUnavailable('payments are not configured on this service');
  const headers: Record<string, string> = { Authorization: `Bearer ${stripe.secretKey}`, 'Stripe-Version': STRIPE_VERSION };
  let body: string | undefined;
  if (method === 'POST') {
    headers['Content-Type'] = 'application/x-www-form-urlencoded';
    body = stripeForm(opts.params ?? {}).join('&');
  }
  if (opts.idempotencyKey) headers['Idempotency-Key'] = opts.idempotencyKey;
  let response;
  try {
    response = await outboundFetch(`${stripe.apiBase}${path}`, {
      method, headers, body, timeoutMs: stripe.timeoutMs,
      // The Stripe base URL is operator configuration, not user input.
      allowPrivate: true,
    });
  } catch (err) {
    if (err instanceof OutboundError) throw new PaymentBackendUnavailable(`payment provider unreachable (${err.kind})`);
    throw err;
  }
  let parsed: any;
  try {
    parsed = JSON.parse(response.body);
  } catch {
    throw new PaymentBackendUnavailable(`payment provider answered ${response.status} with malformed JSON`);
  }
  if (response.status >= 200 && response.status < 300 && parsed && typeof parsed === 'object') return parsed;
  // 409: an idempotent request with the same key is still running at Stripe; 429: rate limited.
  if (response.status >= 500 || response.status === 429 || response.status === 409 || !parsed?.error) {
    throw new PaymentBackendUnavailable(`payment provider answered ${response.status}`);
  }
  const error = parsed.error;
  throw new StripeError(response.status, String(error.type ?? 'api_error'), error.code ? String(error.code) : null, String(error.message ?? ''));
}

export function createPaymentIntent(
  stripe: StripeSettings, p: { amount: number; currency: string; formId: string; fieldId: string },
): Promise<StripeObject> {
  return stripeRequest(stripe, 'POST', '/v1/payment_intents', {
    params: {
      amount: p.amount,
      currency: p.currency,
      automatic_payment_methods: { enabled: true },
      metadata: { form_id: p.formId, field_id: p.fieldId },
    },
  });
}

export function retrievePaymentIntent(stripe: StripeSettings, intentId: string): Promise<StripeObject> {
  return stripeRequest(stripe, 'GET', `/v1/payment_intents/${encodeURIComponent(intentId)}`);
}

export function cancelPaymentIntent(stripe: StripeSettings, intentId: string): Promise<StripeObject> {
  return stripeRequest(stripe, 'POST', `/v1/payment_intents/${encodeURIComponent(intentId)}/cancel`, {
    params: { cancellation_reason: 'abandoned' },
  });
}

/** The key Stripe dedupes the refund of one intent by: retries and racing processes make one refund. */
export function refundIdempotencyKey(intentId: string): string {
  return `formservice-refund-${intentId}`;
}

export function refundPaymentIntent(stripe: StripeSettings, intentId: string): Promise<StripeObject> {
  return stripeRequest(stripe, 'POST', '/v1/refunds', {
    params: { payment_intent: intentId, metadata: { reason: 'no_submission' } },
    idempotencyKey: refundIdempotencyKey(intentId),
  });
}
