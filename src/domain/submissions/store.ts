import { PLAN_LIMITS, PLANS } from '../../../config/plans';
import type { Em, Orm } from '../../db/orm';
import { preparedQuery } from '../../db/prepared';
import { recordChangesSql } from './changes';
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
  idempotency: { key: string; requestHash: string; responseBody: unknown } | null;
}

export type InsertOutcome =
  | { kind: 'created'; outboxId: string }
  | { kind: 'form_changed' }
  | { kind: 'quota_exceeded' }
  | { kind: 'payment_used' }
  | { kind: 'idempotency_conflict' };

/** The change feed's record of each stored submission, written in the storing statement itself. */
const CREATED_CHANGE_SQL = recordChangesSql('created_change', 'submission.created',
  'select p.org as organization_id, p.form as form_id, sub.id as submission_id, p.created as occurred_at, 0 as seq from p, sub');

const PLAN_QUOTA_SQL = `case o.plan ${PLANS.map((p) => `when '${p}' then ${PLAN_LIMITS[p].monthlySubmissions}`).join(' ')} end`;

/** The organization's quota, and whether the form is still the published one that was validated against. */
const QUOTA_AND_FORM_SQL = `org as (
  select coalesce(o.monthly_quota, ${PLAN_QUOTA_SQL}) as quota from organizations o, p where o.id = p.org
), form_ok as (
  select 1 from forms f, p
   where f.id = p.form and f.organization_id = p.org and f.status = 'published'
     and f.deleted_at is null and f.updated_at = p.form_updated
)`;

/**
 * One statement, so one implicit transaction and one round trip: the form is still what was
 * validated against, the monthly counter is incremented only while under quota (a conditional
 * update decided by PostgreSQL under the row lock), the payment claim and idempotency record are
 * unique-keyed, and the outbox row is written beside the submission. Any failure undoes all of it.
 */
export const INSERT_SUBMISSION_SQL = `
with p as (
  select $1::text as org, $2::text as form, $3::timestamptz as form_updated, $4::text as month, $5::text as id,
         $6::jsonb as data, $7::text as email, $8::text as name, $9::text as source, $10::timestamptz as created,
         $11::text as intent, $12::text as idem_key, $13::text as idem_hash, $14::jsonb as idem_body
), ${QUOTA_AND_FORM_SQL}, quota as (
  insert into usage_counters as u (organization_id, month, used)
  select p.org, p.month, 1 from p, org, form_ok where org.quota > 0
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
  insert into idempotency_keys (organization_id, key, request_hash, response_status, response_body)
  select p.org, p.idem_key, p.idem_hash, 201, p.idem_body from p, sub where p.idem_key is not null
  returning 1
), outbox_row as (
  insert into outbox (topic, payload)
  select 'submission.created', jsonb_build_object('submissionId', sub.id) from sub
  returning id
), ${CREATED_CHANGE_SQL}
select (select count(*) from form_ok)::int as form_ok,
       (select count(*) from quota)::int as quota_ok,
       (select id from outbox_row)::text as outbox_id,
       (select count(*) from claim)::int as claimed,
       (select count(*) from idem)::int as idem`;

function violatedConstraint(err: any): string | null {
  return err?.code === '23505' ? String(err.constraint ?? '') : null;
}

/** The values of INSERT_SUBMISSION_SQL for one row. */
export function insertSubmissionValues(row: SubmissionRow): unknown[] {
  return [
    row.organizationId, row.formId, row.formUpdatedAt.toISOString(), row.month, row.id,
    JSON.stringify(row.data), row.submitterEmail, row.submitterName, row.source, row.createdAt.toISOString(),
    row.paymentIntentId, row.idempotency?.key ?? null, row.idempotency?.requestHash ?? null,
    row.idempotency ? JSON.stringify(row.idempotency.responseBody) : null,
  ];
}

export async function insertSubmission(orm: Orm, row: SubmissionRow): Promise<InsertOutcome> {
  let result: any[];
  try {
    result = await preparedQuery(orm.em, 'insert_submission', INSERT_SUBMISSION_SQL, insertSubmissionValues(row));
  } catch (err) {
    const constraint = violatedConstraint(err);
    if (constraint === 'payment_claims_pkey') return { kind: 'payment_used' };
    if (constraint === 'idempotency_keys_pkey') return { kind: 'idempotency_conflict' };
    throw err;
  }
  const [r] = result;
  if (!r.form_ok) return { kind: 'form_changed' };
  if (!r.quota_ok) return { kind: 'quota_exceeded' };
  return { kind: 'created', outboxId: r.outbox_id };
}

export interface StoredIdempotency {
  requestHash: string;
  status: number;
  body: unknown;
}

export const IDEMPOTENCY_TTL_HOURS = 24;

/** A record older than 24 hours is forgotten (and removed) so the key can be used again. */
export async function findIdempotencyRecord(orm: Orm, organizationId: string, key: string): Promise<StoredIdempotency | null> {
  const conn = orm.em.getConnection();
  const [row] = await conn.execute(
    `select request_hash, response_status, response_body, created_at < now() - interval '${IDEMPOTENCY_TTL_HOURS} hours' as expired
       from idempotency_keys where organization_id = ? and key = ?`,
    [organizationId, key],
  );
  if (!row) return null;
  if (row.expired) {
    await conn.execute(
      `delete from idempotency_keys where organization_id = ? and key = ? and created_at < now() - interval '${IDEMPOTENCY_TTL_HOURS} hours'`,
      [organizationId, key],
    );
    return null;
  }
  return { requestHash: row.request_hash, status: row.response_status, body: row.response_body };
}

export type BatchInsertOutcome =
  | { kind: 'created'; outboxIds: Map<string, string> }
  | { kind: 'form_changed' }
  /** The quota has room for fewer than all of them: none was stored. */
  | { kind: 'quota_short' }
  /** A payment intent or idempotency key was taken meanwhile: none was stored. */
  | { kind: 'conflict' };

/**
 * INSERT_SUBMISSION_SQL for many submissions of one form and month at once, all or nothing: the
 * counter grows by their number only if all fit under the quota, and any unique conflict undoes
 * the lot. The caller stores one by one whatever this cannot decide as a whole.
 */
const INSERT_SUBMISSION_BATCH_SQL = `
with p as (
  select $1::text as org, $2::text as form, $3::timestamptz as form_updated, $4::text as month, $5::text as source
), items as (
  select x.* from jsonb_to_recordset($6::jsonb) as x(seq int, id text, data jsonb, email text, name text,
         created timestamptz, intent text, idem_key text, idem_hash text, idem_body jsonb)
), ${QUOTA_AND_FORM_SQL}, wanted as (
  select count(*)::int as n from items
), quota as (
  insert into usage_counters as u (organization_id, month, used)
  select p.org, p.month, wanted.n from p, org, form_ok, wanted where wanted.n <= org.quota
  on conflict (organization_id, month) do update set used = u.used + excluded.used
   where u.used + excluded.used <= (select quota from org)
  returning used
), stored as (
  select i.* from items i, quota
), sub as (
  insert into submissions (id, organization_id, form_id, data, submitter_email, submitter_name, source, created_at)
  select s.id, p.org, p.form, s.data, s.email, s.name, p.source, s.created from p, stored s
  returning id
), claim as (
  insert into payment_claims (payment_intent_id, organization_id, submission_id)
  select s.intent, p.org, s.id from p, stored s where s.intent is not null
  returning 1
), idem as (
  insert into idempotency_keys (organization_id, key, request_hash, response_status, response_body)
  select p.org, s.idem_key, s.idem_hash, 201, s.idem_body from p, stored s where s.idem_key is not null
  returning 1
), outbox_row as (
  insert into outbox (topic, payload)
  select 'submission.created', jsonb_build_object('submissionId', s.id) from stored s order by s.seq
  returning id, payload->>'submissionId' as submission_id
), ${recordChangesSql('created_change', 'submission.created',
  'select p.org as organization_id, p.form as form_id, s.id as submission_id, s.created as occurred_at, s.seq from p, stored s')}
select (select count(*) from form_ok)::int as form_ok,
       (select count(*) from quota)::int as quota_ok,
       (select count(*) from sub)::int as stored,
       (select coalesce(json_agg(json_build_array(submission_id, id::text)), '[]') from outbox_row) as outbox`;

/** Rows of one organization, form and month. */
export async function insertSubmissionBatch(orm: Orm, rows: SubmissionRow[]): Promise<BatchInsertOutcome> {
  const [first] = rows;
  const items = rows.map((row, seq) => ({
    seq, id: row.id, data: row.data, email: row.submitterEmail, name: row.submitterName, created: row.createdAt.toISOString(),
    intent: row.paymentIntentId, idem_key: row.idempotency?.key ?? null, idem_hash: row.idempotency?.requestHash ?? null,
    idem_body: row.idempotency?.responseBody ?? null,
  }));
  let result: any[];
  try {
    result = await preparedQuery(orm.em, 'insert_submission_batch', INSERT_SUBMISSION_BATCH_SQL, [
      first.organizationId, first.formId, first.formUpdatedAt.toISOString(), first.month, first.source, JSON.stringify(items),
    ]);
  } catch (err) {
    const constraint = violatedConstraint(err);
    if (constraint === 'payment_claims_pkey' || constraint === 'idempotency_keys_pkey') return { kind: 'conflict' };
    throw err;
  }
  const [r] = result;
  if (!r.form_ok) return { kind: 'form_changed' };
  if (!r.quota_ok) return { kind: 'quota_short' };
  return { kind: 'created', outboxIds: new Map(r.outbox as Array<[string, string]>) };
}

/** The stored records among `keys` (expired ones count as absent). */
export async function findIdempotencyRecords(orm: Orm, organizationId: string, keys: string[]): Promise<Map<string, StoredIdempotency>> {
  if (keys.length === 0) return new Map();
  const rows = await orm.em.getConnection().execute(
    `select key, request_hash, response_status, response_body from idempotency_keys
      where organization_id = ? and key in (select jsonb_array_elements_text(?::jsonb)) and created_at >= now() - interval '${IDEMPOTENCY_TTL_HOURS} hours'`,
    [organizationId, JSON.stringify(keys)],
  );
  return new Map(rows.map((row: any) => [row.key, { requestHash: row.request_hash, status: row.response_status, body: row.response_body }]));
}

/** Keeps an answer under its key unless one is there already (a concurrent twin stored it first). */
export async function storeIdempotencyRecord(orm: Orm, organizationId: string, key: string, record: StoredIdempotency): Promise<void> {
  await orm.em.getConnection().execute(
    `insert into idempotency_keys (organization_id, key, request_hash, response_status, response_body)
     values (?, ?, ?, ?, ?::jsonb) on conflict (organization_id, key) do nothing`,
    [organizationId, key, record.requestHash, record.status, JSON.stringify(record.body)],
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
