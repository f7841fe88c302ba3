// Payment intents the service makes for a form's payment field, and the record it keeps of them.
import type { Config } from '../../../config';
import type { Orm } from '../../db/orm';
import type { Logger } from '../../lib/logger';
import type { CachedForm } from '../forms/form-cache';
import type { Field } from '../forms/types';
import { recordPaymentIntent } from './store';
import {
  createPaymentIntent, PaymentBackendUnavailable, STRIPE_TIMEOUT_MS, StripeError, type StripeSettings,
} from './stripe';

/** What the payment rules use; an AppContext satisfies it. */
export interface PaymentDeps {
  orm: Orm;
  config: Readonly<Config>;
  logger: Logger;
}

export function stripeSettings(config: Readonly<Config>): StripeSettings {
  return { apiBase: config.stripeApiBase, secretKey: config.stripeSecretKey, timeoutMs: STRIPE_TIMEOUT_MS };
}

/** The hosted page takes payments only with both keys: the secret one makes intents, the publishable one confirms them. */
export function paymentsEnabled(config: Pick<Config, 'stripeSecretKey' | 'stripePublishableKey'>): boolean {
  return !!config.stripeSecretKey && !!config.stripePublishableKey;
}

/** The payment field `fieldId` names, with an amount Stripe can charge, or why there is none. */
export function payableField(form: CachedForm, fieldId: unknown): { field: Field; amount: number; currency: string } | { problem: string } {
  if (typeof fieldId !== 'string' || !fieldId) return { problem: 'Request body must contain a "fieldId" string' };
  const field = form.structure.fields.find((f) => f.id === fieldId);
  if (!field || field.type !== 'payment') return { problem: `${fieldId} is not a payment field of this form` };
  const { amount, currency } = field.config ?? {};
  if (!Number.isSafeInteger(amount) || amount <= 0 || typeof currency !== 'string' || !/^[a-z]{3}$/.test(currency)) {
    return { problem: `${fieldId} has no valid amount and currency` };
  }
  return { field, amount, currency };
}

export interface CreatedIntent {
  paymentIntentId: string;
  clientSecret: string;
  amount: number;
  currency: string;
}

export type IntentOutcome =
  | { ok: true; intent: CreatedIntent }
  | { ok: false; kind: 'invalid'; message: string }
  | { ok: false; kind: 'rate_limited'; retryAfter: number }
  | { ok: false; kind: 'unavailable'; message: string };

/**
 * Makes a PaymentIntent at Stripe for the field's amount, bound to the form by its metadata, and
 * records it so that a payment no submission holds can be found and refunded.
 */
export async function createFormPaymentIntent(
  deps: PaymentDeps, form: CachedForm, fieldId: unknown,
  opts: { admit?: () => Promise<IntentOutcome | null> } = {},
): Promise<IntentOutcome> {
  if (!paymentsEnabled(deps.config)) return { ok: false, kind: 'invalid', message: 'Payments are not enabled on this service' };
  const payable = payableField(form, fieldId);
  if ('problem' in payable) return { ok: false, kind: 'invalid', message: payable.problem };
  // Only a request that could make an intent counts against the form's bound.
  const refused = await opts.admit?.();
  if (refused) return refused;
  let intent;
  try {
    intent = await createPaymentIntent(stripeSettings(deps.config), {
      amount: payable.amount, currency: payable.currency, formId: form.id, fieldId: payable.field.id,
    });
  } catch (err) {
    if (err instanceof PaymentBackendUnavailable) return { ok: false, kind: 'unavailable', message: err.message };
    // Stripe refused the field's own settings (e.g. an amount below its minimum): the form must change.
    if (err instanceof StripeError) {
      deps.logger.warn({ formId: form.id, fieldId: payable.field.id, code: err.code, err: err.message }, 'Stripe refused to create a payment intent');
      return { ok: false, kind: 'invalid', message: `The payment provider refused this payment: ${err.message}` };
    }
    throw err;
  }
  if (typeof intent.id !== 'string' || typeof intent.client_secret !== 'string') {
    return { ok: false, kind: 'unavailable', message: 'payment provider answered without an intent id or client secret' };
  }
  await recordPaymentIntent(deps.orm.em.fork(), {
    id: intent.id, organizationId: form.organizationId, formId: form.id, fieldId: payable.field.id, amount: payable.amount, currency: payable.currency,
  });
  return { ok: true, intent: { paymentIntentId: intent.id, clientSecret: intent.client_secret, amount: payable.amount, currency: payable.currency } };
}
