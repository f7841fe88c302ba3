import { OutboundError, outboundFetch } from '../../lib/outbound';

export interface PaymentExpectation {
  amount: number;
  currency: string;
}

export interface StripeSettings {
  apiBase: string;
  secretKey: string | null;
  timeoutMs: number;
}

/** Stripe did not answer usefully; the client should retry later (503). */
export class PaymentBackendUnavailable extends Error {}

/**
 * Retrieves the payment intent and checks it backs this payment: succeeded, same amount and
 * currency. Returns a field error message, or null when it is good.
 */
export async function verifyPaymentIntent(
  stripe: StripeSettings, intentId: string, expected: PaymentExpectation,
): Promise<string | null> {
  if (!stripe.secretKey) throw new PaymentBackendUnavailable('payments are not configured on this service');
  let response;
  try {
    response = await outboundFetch(`${stripe.apiBase}/v1/payment_intents/${encodeURIComponent(intentId)}`, {
      headers: { Authorization: `Bearer ${stripe.secretKey}`, 'Stripe-Version': '2024-06-20' },
      timeoutMs: stripe.timeoutMs,
      // The Stripe base URL is operator configuration, not user input.
      allowPrivate: true,
    });
  } catch (err) {
    if (err instanceof OutboundError) throw new PaymentBackendUnavailable(`payment provider unreachable (${err.kind})`);
    throw err;
  }
  if (response.status === 404) return 'Payment intent not found';
  if (response.status !== 200) throw new PaymentBackendUnavailable(`payment provider answered ${response.status}`);
  let intent: any;
  try {
    intent = JSON.parse(response.body);
  } catch {
    throw new PaymentBackendUnavailable('payment provider answered with malformed JSON');
  }
  return paymentIntentProblem(intent, expected);
}

export function paymentIntentProblem(intent: any, expected: PaymentExpectation): string | null {
  if (intent?.object !== 'payment_intent') return 'Payment intent not found';
  if (intent.status !== 'succeeded') return 'Payment has not succeeded';
  if (intent.amount !== expected.amount || String(intent.currency).toLowerCase() !== expected.currency.toLowerCase()) {
    return 'Payment amount or currency does not match this form';
  }
  return null;
}
