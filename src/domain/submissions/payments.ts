import { PaymentBackendUnavailable, retrievePaymentIntent, StripeError, type StripeSettings } from '../payments/stripe';

export { PaymentBackendUnavailable, type StripeSettings };

export interface PaymentExpectation {
  amount: number;
  currency: string;
  /** The form the submission is for: an intent made for another form does not back it. */
  formId: string;
}

/**
 * Retrieves the payment intent and checks it backs this payment: succeeded, same amount and
 * currency, not made for another form. Returns a field error message, or null when it is good.
 */
export async function verifyPaymentIntent(
  stripe: StripeSettings, intentId: string, expected: PaymentExpectation,
): Promise<string | null> {
  let intent;
  try {
    intent = await retrievePaymentIntent(stripe, intentId);
  } catch (err) {
    if (err instanceof StripeError && err.status === 404) return 'Payment intent not found';
    if (err instanceof StripeError) throw new PaymentBackendUnavailable(`payment provider answered ${err.status} (${err.type})`);
    throw err;
  }
  return paymentIntentProblem(intent, expected);
}

export function paymentIntentProblem(intent: any, expected: PaymentExpectation): string | null {
  if (intent?.object !== 'payment_intent') return 'Payment intent not found';
  const boundTo = intent.metadata?.form_id;
  if (typeof boundTo === 'string' && boundTo !== expected.formId) return 'This payment was made for another form';
  if (intent.status !== 'succeeded') return 'Payment has not succeeded';
  if (intent.amount !== expected.amount || String(intent.currency).toLowerCase() !== expected.currency.toLowerCase()) {
    return 'Payment amount or currency does not match this form';
  }
  return null;
}
