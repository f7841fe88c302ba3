import type { Em } from '../../db/orm';

// The statements of the payment intents the service makes and of their refunds: recording an
// intent, taking one for a refund (its payment_claims row, as a submission would take it), the
// refund's outcome, and what the maintenance sweep looks for.

/** What a refund's payment_claims row holds instead of a submission id. */
export const REFUND_CLAIM = 'refund';

/** How long a claimed refund whose Stripe call did not finish waits before a sweep calls again. */
const REFUND_RETRY_AFTER_MINUTES = 10;
/** Intents looked at per maintenance run (each is a Stripe call): a backlog is worked off over runs. */
const SWEEP_BATCH = 100;

async function execute(em: Em, sql: string, params: unknown[]): Promise<any[]> {
  return em.getConnection().execute(sql, params);
}

/** Records an intent made at Stripe for a form's payment field. */
export async function recordPaymentIntent(em: Em, intent: {
  id: string; organizationId: string; formId: string; fieldId: string; amount: number; currency: string;
}): Promise<void> {
  await em.getConnection().execute(
    `insert into payment_intents (id, organization_id, form_id, field_id, amount, currency) values (?, ?, ?, ?, ?, ?)
     on conflict (id) do nothing`,
    [intent.id, intent.organizationId, intent.formId, intent.fieldId, intent.amount, intent.currency], 'run',
  );
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

/** A refunding intent is refunded; answers what it was for, or undefined when it was not refunding. */
export async function markIntentRefunded(em: Em, intentId: string, refundId: string | null)
  : Promise<{ form_id: string; amount: number | string; currency: string } | undefined> {
  const updated = await execute(em,
    `update payment_intents set state = 'refunded', refund_id = ?, refunded_at = now(), updated_at = now()
      where id = ? and state = 'refunding' returning form_id, amount, currency`, [refundId, intentId]);
  return updated[0];
}

/** The open intents of the form among `candidates`. */
export async function findOpenIntentsOfForm(em: Em, formId: string, candidates: string[]): Promise<Array<{ id: string }>> {
  return execute(em,
    `select id from payment_intents
      where id in (select jsonb_array_elements_text(?::jsonb)) and form_id = ? and state = 'open'`, [JSON.stringify(candidates), formId]);
}

const ABANDON_CUTOFF = `now() - (? * interval '1 hour')`;

/** Open intents older than `hours` that a submission holds are settled as claimed; answers how many. */
export async function settleClaimedIntents(em: Em, hours: number): Promise<number> {
  const claimed = await execute(em, `
    update payment_intents p set state = 'claimed', updated_at = now()
      where p.state = 'open' and p.created_at < ${ABANDON_CUTOFF}
        and exists (select 1 from payment_claims c where c.payment_intent_id = p.id and c.submission_id <> ?)
    returning p.id`, [hours, REFUND_CLAIM]);
  return claimed.length;
}

/** Open intents older than `hours`, oldest first, a sweep's batch of them. */
export async function findStaleOpenIntents(em: Em, hours: number): Promise<Array<{ id: string }>> {
  return execute(em,
    `select id from payment_intents where state = 'open' and created_at < ${ABANDON_CUTOFF} order by created_at limit ${SWEEP_BATCH}`, [hours]);
}

/**
 * Refunds claimed a while ago whose Stripe call did not finish. A lease: of several processes, only
 * the one that moves updated_at sends the refund again.
 */
export async function leaseOwedRefunds(em: Em): Promise<Array<{ id: string }>> {
  return execute(em, `
    update payment_intents set updated_at = now()
      where id in (select id from payment_intents where state = 'refunding'
                    and updated_at < now() - interval '${REFUND_RETRY_AFTER_MINUTES} minutes' limit ${SWEEP_BATCH})
        and state = 'refunding' and updated_at < now() - interval '${REFUND_RETRY_AFTER_MINUTES} minutes'
    returning id`, []);
}

/** An open intent is canceled. */
export async function markIntentCanceled(em: Em, intentId: string): Promise<void> {
  await execute(em, `update payment_intents set state = 'canceled', updated_at = now() where id = ? and state = 'open'`, [intentId]);
}
