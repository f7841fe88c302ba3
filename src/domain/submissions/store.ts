import { randomBytes } from 'node:crypto';
import { PLAN_LIMITS, PLANS } from '../../../config/plans';
import type { Em, Orm } from '../../db/orm';
import { preparedQuery } from '../../db/prepared';
import type { SubmissionSource } from './entities';

export interface SubmissionRow {
  id: string;
  organizationId: string;
  formId: string;
  formUpdatedAt: Date;
  month: string;
  data: Record<string, unknown>;
  submitterEmail: string | null;
  submitterName: string | null;
  source: SubmissionSource;
  createdAt: Date;
  paymentIntentId: string | null;
  /** A key this request holds (see claimIdempotencyKey); completed by the insert itself. */
  idempotency: { key: string; claimToken: string; responseBody: unknown } | null;
}

export type InsertOutcome =
  | { kind: 'created'; outboxId: string }
  | { kind: 'form_changed' }
  | { kind: 'quota_exceeded' }
  | { kind: 'payment_used' }
  /** The idempotency key's lease lapsed and another request holds it now: nothing was stored. */
  | { kind: 'idempotency_lost' };

const PLAN_QUOTA_SQL = `case o.plan ${PLANS.map((p) => `when '${p}' then ${PLAN_LIMITS[p].monthlySubmissions}`).join(' ')} end`;

/**
 * One statement, so one implicit transaction and one round trip: the form is still what was
 * validated against, the idempotency key (if any) is still held by this request, the monthly counter
 * is incremented only while under quota (a conditional update decided by PostgreSQL under the row
 * lock), the payment claim is unique-keyed, the idempotency record gets its answer, and the outbox
 * row is written beside the submission. Any failure undoes all of it.
 */
const INSERT_SUBMISSION_SQL = `
with p as (
  select $1::text as org, $2::text as form, $3::timestamptz as form_updated, $4::text as month, $5::text as id,
         $6::jsonb as data, $7::text as email, $8::text as name, $9::text as source, $10::timestamptz as created,
         $11::text as intent, $12::text as idem_key, $13::text as idem_token, $14::jsonb as idem_body
), idem_held as (
  select 1 from idempotency_keys k, p
   where k.organization_id = p.org and k.key = p.idem_key and k.claim_token = p.idem_token and k.response_status is null
  for update of k
), gate as (
  select 1 from p where p.idem_key is null
  union all select 1 from idem_held
), org as (
  select coalesce(o.monthly_quota, ${PLAN_QUOTA_SQL}) as quota from organizations o, p where o.id = p.org
), form_ok as (
  select 1 from forms f, p
   where f.id = p.form and f.organization_id = p.org and f.status = 'published'
     and f.deleted_at is null and f.updated_at = p.form_updated
), quota as (
  insert into usage_counters as u (organization_id, month, used)
  select p.org, p.month, 1 from p, org, form_ok, gate where org.quota > 0
  on conflict (organization_id, month) do update set used = u.used + 1
   where u.used < (select quota from org)
  returning used
), sub as (
  insert into submissions (id, organization_id, form_id, data, submitter_email, submitter_name, source, created_at)
  select p.id, p.org, p.form, p.data, p.email, p.name, p.source, p.created from p, quota
  returning id
), claim as (
  insert into payment_claims (payment_intent_id, organization_id, submission_id)
  select p.intent, p.org, sub.id from p, sub where p.intent is not null
  returning 1
), idem as (
  update idempotency_keys k set response_status = 201, response_body = p.idem_body, claim_token = null, lease_expires_at = null
    from p, sub where k.organization_id = p.org and k.key = p.idem_key
  returning 1
), outbox_row as (
  insert into outbox (topic, payload)
  select 'submission.created', jsonb_build_object('submissionId', sub.id) from sub
  returning id
)
select (select count(*) from form_ok)::int as form_ok,
       (select count(*) from gate)::int as idem_held,
       (select count(*) from quota)::int as quota_ok,
       (select id from outbox_row)::text as outbox_id,
       (select count(*) from claim)::int as claimed,
       (select count(*) from idem)::int as idem`;

function violatedConstraint(err: any): string | null {
  return err?.code === '23505' ? String(err.constraint ?? '') : null;
}

export async function insertSubmission(orm: Orm, row: SubmissionRow): Promise<InsertOutcome> {
  let result: any[];
  try {
    result = await preparedQuery(orm.em, 'insert_submission', INSERT_SUBMISSION_SQL, [
      row.organizationId, row.formId, row.formUpdatedAt.toISOString(), row.month, row.id,
      JSON.stringify(row.data), row.submitterEmail, row.submitterName, row.source, row.createdAt.toISOString(),
      row.paymentIntentId, row.idempotency?.key ?? null, row.idempotency?.claimToken ?? null,
      row.idempotency ? JSON.stringify(row.idempotency.responseBody) : null,
    ]);
  } catch (err) {
    const constraint = violatedConstraint(err);
    if (constraint === 'payment_claims_pkey') return { kind: 'payment_used' };
    throw err;
  }
  const [r] = result;
  if (!r.form_ok) return { kind: 'form_changed' };
  if (!r.idem_held) return { kind: 'idempotency_lost' };
  if (!r.quota_ok) return { kind: 'quota_exceeded' };
  return { kind: 'created', outboxId: r.outbox_id };
}

export interface StoredIdempotency {
  requestHash: string;
  status: number;
  body: unknown;
}

export const IDEMPOTENCY_TTL_HOURS = 24;
/** How long a claim holds its key without an answer: a request that died frees it after this. */
export const IDEMPOTENCY_LEASE_SECONDS = 30;

export type IdempotencyClaim =
  /** This request holds the key: it does the work, then completes or releases the claim. */
  | { kind: 'claimed'; token: string }
  /** An earlier request answered: replay its answer (or refuse a different body). */
  | { kind: 'completed'; stored: StoredIdempotency }
  /** An earlier request with this key is still running: answer 409 `idempotency_key_in_use`, Retry-After 1. */
  | { kind: 'in_progress' };

/**
 * Idempotency keys for any endpoint that replays its first answer (single and batch submissions):
 *
 *   const claim = await claimIdempotencyKey(em, org, key, requestHash);
 *   - 'completed'   → replay claim.stored, or 422 idempotency_key_reused when its hash differs;
 *   - 'in_progress' → 409 idempotency_key_in_use with Retry-After: 1 (never run the work beside it);
 *   - 'claimed'     → do the work; then completeIdempotencyKey(tx, org, key, claim.token, status, body)
 *                     in the transaction that stores the work (a single submission does it inside
 *                     its insert statement), or releaseIdempotencyKey(em, org, key, claim.token) when
 *                     the work was refused or failed, so that a retry decides afresh.
 *
 * A record older than 24 hours, or a claim whose lease lapsed (its request died), is taken over.
 */
export async function claimIdempotencyKey(em: Em, organizationId: string, key: string, requestHash: string): Promise<IdempotencyClaim> {
  const token = randomBytes(16).toString('hex');
  const [row] = await em.execute(
    `with claimed as (
       insert into idempotency_keys as k (organization_id, key, request_hash, claim_token, lease_expires_at, created_at)
       values (?, ?, ?, ?, now() + interval '${IDEMPOTENCY_LEASE_SECONDS} seconds', now())
       on conflict (organization_id, key) do update
          set request_hash = excluded.request_hash, claim_token = excluded.claim_token,
              lease_expires_at = excluded.lease_expires_at, created_at = excluded.created_at,
              response_status = null, response_body = null
        where k.created_at < now() - interval '${IDEMPOTENCY_TTL_HOURS} hours'
           or (k.response_status is null and k.lease_expires_at < now())
       returning 1
     )
     select (select count(*) from claimed)::int as claimed, k.request_hash, k.response_status, k.response_body
       from (select 1) one left join idempotency_keys k on k.organization_id = ? and k.key = ?`,
    [organizationId, key, requestHash, token, organizationId, key],
  );
  if (row.claimed) return { kind: 'claimed', token };
  // Not claimed and no answer visible: a request holds it, or claimed it since this statement began.
  if (row.response_status === null || row.response_status === undefined) return { kind: 'in_progress' };
  return { kind: 'completed', stored: { requestHash: row.request_hash, status: row.response_status, body: row.response_body } };
}

/** Stores the answer of the request holding the claim; false when the claim was lost (lease lapsed, taken over). */
export async function completeIdempotencyKey(
  em: Em, organizationId: string, key: string, token: string, status: number, body: unknown,
): Promise<boolean> {
  const result = await em.execute(
    `update idempotency_keys set response_status = ?, response_body = ?::jsonb, claim_token = null, lease_expires_at = null
      where organization_id = ? and key = ? and claim_token = ? and response_status is null`,
    [status, JSON.stringify(body), organizationId, key, token], 'run',
  );
  return (result as any).affectedRows > 0;
}

/** Frees a key whose request ended without an answer worth replaying. */
export async function releaseIdempotencyKey(em: Em, organizationId: string, key: string, token: string): Promise<void> {
  await em.execute(
    'delete from idempotency_keys where organization_id = ? and key = ? and claim_token = ? and response_status is null',
    [organizationId, key, token],
  );
}

export const SUBMISSION_CREATED_TOPIC = 'submission.created';
export const SUBMISSION_DELETED_TOPIC = 'submission.deleted';

/** What the deletion event needs, captured while the submission and its form are still there. */
export interface SubmissionDeletedFacts {
  organizationId: string;
  submissionId: string;
  formId: string;
  formTitle: string;
  /** ISO date-time once stored. */
  deletedAt: Date | string;
}

/** The outbox row of a deletion, written inside the deleting transaction; returns its id. */
export async function recordSubmissionDeleted(tx: Em, facts: SubmissionDeletedFacts): Promise<string> {
  const [row] = await tx.execute(
    'insert into outbox (topic, payload) values (?, ?::jsonb) returning id::text as id',
    [SUBMISSION_DELETED_TOPIC, JSON.stringify({ ...facts, deletedAt: new Date(facts.deletedAt).toISOString() })],
  );
  return row.id;
}
