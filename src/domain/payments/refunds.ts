// No one is charged without a stored submission: a succeeded intent the service made that no
// submission claimed is refunded, at once when its submission is refused for a reason the person
// cannot fix, and by the hourly maintenance once it is PAYMENT_ABANDON_HOURS old.
//
// The refund first takes the intent's payment_claims row (the row a submission would take): so a
// refunded intent can never back a submission, and of several processes only the one whose insert
// won goes on to call Stripe. The call carries an Idempotency-Key derived from the intent, so a
// retry after a lost answer makes no second refund either.
import type { Em } from '../../db/orm';
import { metrics } from '../../lib/metrics';
import { isPlainObject } from '../../lib/objects';
import { type PaymentDeps, stripeSettings } from './intents';
import {
  claimForRefund, findOpenIntentsOfForm, findStaleOpenIntents, leaseOwedRefunds, markIntentCanceled, markIntentRefunded,
  settleClaimedIntents,
} from './store';
import {
  cancelPaymentIntent, PaymentBackendUnavailable, refundPaymentIntent, retrievePaymentIntent, StripeError,
} from './stripe';

export type RefundReason = 'refused_submission' | 'abandoned';

const PAYMENT_INTENT_ID = /^pi_[A-Za-z0-9_]{1,250}$/;

/** Calls Stripe for a claimed refund and records the answer; false when Stripe must be asked again later. */
async function sendRefund(deps: PaymentDeps, em: Em, intentId: string, reason: RefundReason): Promise<boolean> {
  let refundId: string | null = null;
  try {
    const refund = await refundPaymentIntent(stripeSettings(deps.config), intentId);
    refundId = typeof refund.id === 'string' ? refund.id : null;
  } catch (err) {
    const alreadyRefunded = err instanceof StripeError && err.code === 'charge_already_refunded';
    if (!alreadyRefunded) {
      const level = err instanceof PaymentBackendUnavailable ? 'warn' : 'error';
      deps.logger[level]({ paymentIntentId: intentId, reason, err: (err as Error).message }, 'payment refund not made yet; the maintenance job will retry');
      return false;
    }
  }
  const refunded = await markIntentRefunded(em, intentId, refundId);
  if (refunded) {
    metrics.paymentRefunds.inc({ reason });
    const { form_id: formId, amount, currency } = refunded;
    deps.logger.info({ paymentIntentId: intentId, refundId, formId, amount: Number(amount), currency, reason }, 'payment refunded: no stored submission holds it');
  }
  return true;
}

/**
 * Refunds the intent if the service made it, it succeeded and nothing claimed it. Stripe is asked
 * for its status first: an intent not paid (yet) is left alone.
 */
export async function refundUnclaimedIntent(deps: PaymentDeps, intentId: string, reason: RefundReason): Promise<'refunded' | 'pending' | 'skipped'> {
  const em = deps.orm.em.fork();
  const intent = await retrievePaymentIntent(stripeSettings(deps.config), intentId);
  if (intent.status !== 'succeeded') return 'skipped';
  if (!(await claimForRefund(em, intentId))) return 'skipped';
  return (await sendRefund(deps, em, intentId, reason)) ? 'refunded' : 'pending';
}

/**
 * A submission carrying a payment the service made was refused for good (402, form gone or
 * unpublished): refund it now. `submitted` is the submission's values (`values` / `data`). Only an intent recorded for this very form and still open is
 * looked at, so a stranger cannot make this call Stripe about anything else. Stripe being down is
 * logged and left to the maintenance job.
 */
export async function refundPaymentsOfRefusedSubmission(deps: PaymentDeps, formId: string, submitted: unknown): Promise<void> {
  const values = isPlainObject(submitted) ? submitted : null;
  if (!values || !deps.config.stripeSecretKey) return;
  const candidates = Object.values(values).filter((v): v is string => typeof v === 'string' && PAYMENT_INTENT_ID.test(v)).slice(0, 5);
  if (!candidates.length) return;
  const open = await findOpenIntentsOfForm(deps.orm.em.fork(), formId, candidates);
  for (const { id } of open) {
    try {
      await refundUnclaimedIntent(deps, id, 'refused_submission');
    } catch (err) {
      deps.logger.warn({ paymentIntentId: id, formId, err: (err as Error).message }, 'refund of a refused submission\'s payment left to the maintenance job');
    }
  }
}

export interface PaymentSweepReport {
  paymentsRefunded: number;
  paymentIntentsCanceled: number;
  paymentIntentsClaimed: number;
}

/**
 * The maintenance job's part: intents older than PAYMENT_ABANDON_HOURS that a submission holds are
 * settled as claimed; succeeded ones nothing holds are refunded; unpaid ones are canceled at Stripe
 * so they cannot be paid later with no one to refund them; refunds whose Stripe call failed are
 * sent again (same Idempotency-Key).
 */
export async function sweepAbandonedPayments(deps: PaymentDeps): Promise<PaymentSweepReport> {
  const report: PaymentSweepReport = { paymentsRefunded: 0, paymentIntentsCanceled: 0, paymentIntentsClaimed: 0 };
  if (!deps.config.stripeSecretKey) return report;
  const em = deps.orm.em.fork();
  const hours = deps.config.paymentAbandonHours;
  report.paymentIntentsClaimed = await settleClaimedIntents(em, hours);

  const stale = await findStaleOpenIntents(em, hours);
  for (const { id } of stale) {
    try {
      const outcome = await settleAbandoned(deps, em, id);
      if (outcome === 'refunded') report.paymentsRefunded++;
      if (outcome === 'canceled') report.paymentIntentsCanceled++;
    } catch (err) {
      // Unreachable, or refusing the key: nothing more can be settled in this run.
      if (!(err instanceof PaymentBackendUnavailable || err instanceof StripeError)) throw err;
      deps.logger.warn({ paymentIntentId: id, err: err.message }, 'payment sweep stopped: Stripe did not answer usefully; the next run goes on');
      return report;
    }
  }

  const owed = await leaseOwedRefunds(em);
  for (const { id } of owed) {
    if (await sendRefund(deps, em, id, 'abandoned')) report.paymentsRefunded++;
  }
  return report;
}

async function settleAbandoned(deps: PaymentDeps, em: Em, intentId: string): Promise<'refunded' | 'canceled' | 'left'> {
  const stripe = stripeSettings(deps.config);
  let intent;
  try {
    intent = await retrievePaymentIntent(stripe, intentId);
  } catch (err) {
    if (!(err instanceof StripeError && err.status === 404)) throw err;
    await markIntentCanceled(em, intentId);
    return 'canceled';
  }
  if (intent.status === 'succeeded') {
    if (!(await claimForRefund(em, intentId))) return 'left';
    return (await sendRefund(deps, em, intentId, 'abandoned')) ? 'refunded' : 'left';
  }
  if (['requires_payment_method', 'requires_confirmation', 'requires_action'].includes(intent.status)) {
    try {
      await cancelPaymentIntent(stripe, intentId);
    } catch (err) {
      // It moved on meanwhile (e.g. it is being paid right now): the next run looks again.
      if (err instanceof StripeError) return 'left';
      throw err;
    }
  } else if (intent.status !== 'canceled') {
    return 'left'; // processing, or awaiting capture: not settled yet
  }
  await markIntentCanceled(em, intentId);
  return 'canceled';
}
