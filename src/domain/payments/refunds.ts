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
  cancelPaymentIntent, PaymentBackendUnavailable, refundPaymentIntent, retrievePaymentIntent, StripeError,
} from './stripe';

/** What a refund's payment_claims row holds instead of a submission id. */
export const REFUND_CLAIM = 'refund';

export type RefundReason = 'refused_submission' | 'abandoned';

/** How long a claimed refund whose Stripe call did not finish waits before a sweep calls again. */
const REFUND_RETRY_AFTER_MINUTES = 10;
/** Intents looked at per maintenance run (each is a Stripe call): a backlog is worked off over runs. */
const SWEEP_BATCH = 100;

const PAYMENT_INTENT_ID = /^pi_[A-Za-z0-9_]{1,250}$/;

async function execute(em: Em, sql: string, params: unknown[]): Promise<any[]> {
  return em.getConnection().execute(sql, params);
}

/**
 * Takes the intent for a refund: inserts its claim (which fails if a submission, or another
 * refund, holds it) and marks it `refunding`, in one statement. True when this caller won.
 */
export async function claimForRefund(em: Em, intentId: string): Promise<boolean> {
  const rows = await execute(em, `
    with claim as (
      insert into payment_claims (payment_intent_id, organization_id, submission_id)
      select id, organization_id, ? from payment_intents where id = ? and state = 'open'
      on conflict (payment_intent_id) do nothing
      returning payment_intent_id
    )
    update payment_intents p set state = 'refunding', updated_at = now()
      from claim where p.id = claim.payment_intent_id
    returning p.id`, [REFUND_CLAIM, intentId]);
  return rows.length === 1;
}

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
  const updated = await execute(em,
    `update payment_intents set state = 'refunded', refund_id = ?, refunded_at = now(), updated_at = now()
      where id = ? and state = 'refunding' returning form_id, amount, currency`, [refundId, intentId]);
  if (updated.length) {
    metrics.paymentRefunds.inc({ reason });
    const { form_id: formId, amount, currency } = updated[0];
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
  const open = await execute(deps.orm.em.fork(),
    `select id from payment_intents
      where id in (select jsonb_array_elements_text(?::jsonb)) and form_id = ? and state = 'open'`, [JSON.stringify(candidates), formId]);
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
  const cutoff = `now() - (? * interval '1 hour')`;
  const hours = deps.config.paymentAbandonHours;
  const claimed = await execute(em, `
    update payment_intents p set state = 'claimed', updated_at = now()
      where p.state = 'open' and p.created_at < ${cutoff}
        and exists (select 1 from payment_claims c where c.payment_intent_id = p.id and c.submission_id <> ?)
    returning p.id`, [hours, REFUND_CLAIM]);
  report.paymentIntentsClaimed = claimed.length;

  const stale = await execute(em,
    `select id from payment_intents where state = 'open' and created_at < ${cutoff} order by created_at limit ${SWEEP_BATCH}`, [hours]);
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

  // A lease: of several processes, only the one that moves updated_at sends the refund again.
  const owed = await execute(em, `
    update payment_intents set updated_at = now()
      where id in (select id from payment_intents where state = 'refunding'
                    and updated_at < now() - interval '${REFUND_RETRY_AFTER_MINUTES} minutes' limit ${SWEEP_BATCH})
        and state = 'refunding' and updated_at < now() - interval '${REFUND_RETRY_AFTER_MINUTES} minutes'
    returning id`, []);
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
    await execute(em, `update payment_intents set state = 'canceled', updated_at = now() where id = ? and state = 'open'`, [intentId]);
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
  await execute(em, `update payment_intents set state = 'canceled', updated_at = now() where id = ? and state = 'open'`, [intentId]);
  return 'canceled';
}
