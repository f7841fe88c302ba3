import { randomBytes } from 'node:crypto';
import { PLAN_LIMITS, PLANS } from '../../../config/plans';
import type { Em, Orm } from '../../db/orm';
import { preparedQuery } from '../../db/prepared';
import { FORM_SUBMISSION_CREATED, SUBMISSION_CREATED, webhookListensSql } from '../webhooks/event-types';
import { splitAllowances } from '../quotas/quota';
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
  /**
   * The record its answer is kept under. With `claimToken` (a key this request claimed, see
   * claimIdempotencyKey) the insert completes the claim, and stores nothing if the claim was lost;
   * without it, the record is inserted and a taken key undoes the insert (idempotency_conflict).
   */
  idempotency: { key: string; requestHash: string; responseBody: unknown; claimToken?: string | null } | null;
  /** What the storing statement writes for the listeners of the submission (absent: it expects none). */
  fanout?: SubmissionFanout;
}

/**
 * The fan-out of a created submission, decided in its storing statement: one pending delivery per
 * enabled webhook of the organization subscribed to `submission.created` for the form or all forms
 * (read by the statement itself), one pending sync per active CRM integration of the form (the
 * statement's form check proves the cached settings they come from current). The event payload is
 * built only when webhooks are expected: a statement that finds more matching webhooks than
 * `deliveryIds` (or any without an event) stores nothing and answers `listeners_unknown`.
 */
export interface SubmissionFanout {
  event: { id: string; payload: string } | null;
  /** At least one per matching webhook, assigned in webhook id order; extra ones go unused. */
  deliveryIds: string[];
  syncs: Array<{ id: string; index: number; integrationId: string; provider: string }>;
}

/** The pending work a stored submission's statement created, for its jobs after commit. */
export interface CreatedFanout {
  deliveryIds: string[];
  syncIds: string[];
  /** How many webhooks matched: the hint for the form's next submission. */
  webhooks: number;
}

export type InsertOutcome =
  | ({ kind: 'created' } & CreatedFanout)
  | { kind: 'form_changed' }
  /** Webhooks match that the row brought no delivery (or event) for: nothing was stored; retry with them. */
  | { kind: 'listeners_unknown'; webhooks: number }
  | { kind: 'quota_exceeded' }
  | { kind: 'payment_used' }
  | { kind: 'idempotency_conflict' }
  /** The claimed idempotency key's lease lapsed and another request holds it now: nothing was stored. */
  | { kind: 'idempotency_lost' };


/**
 * Each plan's monthly submissions (config/plans.ts), passed to the storing statements as an
 * argument rather than written into their text or the storing function's migration: the quotas stay
 * this process's configuration, and a release changing PLAN_LIMITS needs no migration.
 */
export const PLAN_QUOTAS_JSON = JSON.stringify(Object.fromEntries(PLANS.map((p) => [p, PLAN_LIMITS[p].monthlySubmissions])));

/** SQL: the monthly quota of organization `o`, with `planQuotas` the jsonb expression of PLAN_QUOTAS_JSON. */
export function organizationQuotaSql(planQuotas: string): string {
  return `coalesce(o.monthly_quota, (${planQuotas} ->> o.plan)::int)`;
}

/**
 * A CTE named `name` writing one pending delivery of a created submission's event per row of
 * `source`, a select yielding `id, webhook_id, organization_id, event_id, payload, seq, n` (n: the
 * webhook's place among the submission's), in (seq, n) order; it returns the delivery ids.
 */
export function newDeliveriesSql(name: string, source: string): string {
  return `${name} as (
  insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, next_attempt_at)
  select d.id, d.webhook_id, d.organization_id, d.event_id, '${FORM_SUBMISSION_CREATED}', d.payload, 'pending', now()
    from (${source}) d
   order by d.seq, d.n
  returning id
)`;
}

/**
 * A CTE named `name` writing one pending CRM sync per row of `source`, a select yielding `sync` (a
 * sync of SubmissionFanout, as jsonb), `organization_id, form_id, submission_id, seq`, in seq order;
 * it returns the sync ids.
 */
export function newSyncsSql(name: string, source: string): string {
  return `${name} as (
  insert into crm_syncs (id, organization_id, form_id, submission_id, integration_index, integration_id, provider, status, next_attempt_at)
  select c.sync->>'id', c.organization_id, c.form_id, c.submission_id, (c.sync->>'index')::int, c.sync->>'integrationId',
         c.sync->>'provider', 'pending', now()
    from (${source}) c
   order by c.seq
  returning id
)`;
}

/**
 * Why slots: one counter row per organization and month would be locked by every submission of
 * the organization from its update until its commit (a WAL flush), so one organization could
 * never store more than one submission per commit time, whatever the number of API processes.
 * The month's quota is split instead into QUOTA_SLOTS rows, each with its share of it
 * (`allowance`, split by splitAllowances, adding up to the quota exactly): a submission counts
 * itself in one slot with room, under that slot's row lock alone, so submissions on different
 * connections seldom wait on each other, and the month's total never passes the quota because no
 * slot passes its allowance (a check constraint besides). Each connection starts from its own slot
 * (by backend pid) and takes the first slot with room that nobody holds (SKIP LOCKED, so it never
 * waits there); when that finds none although the month has room, a second statement waits its
 * turn on the slots in ascending order (`decisive`), so a submission is refused only when every
 * slot is really full. Slots are locked in ascending order whenever a statement waits on them
 * (batches, the decisive path, splitQuotaSlots), which keeps them free of deadlocks.
 *
 * `split_quota` is the quota the allowances were split for: a statement uses a slot only while it
 * equals the organization's quota as the statement sees it (a split rewrites all of a month's slots
 * in one statement, so a snapshot sees them all split for the same quota). A month without slots, or a quota
 * changed since the split (a plan change, an admin's --monthly-quota), makes the caller split the
 * month afresh (splitQuotaSlots) and try again: a lowered quota never lets a statement that saw it
 * count beyond it.
 */
export const QUOTA_SLOTS = 16;

/** Where this connection starts looking for a slot with room. */
export const OWN_SLOT_ORDER = `(s.slot - pg_backend_pid() % ${QUOTA_SLOTS} + ${QUOTA_SLOTS}) % ${QUOTA_SLOTS}`;

/**
 * The organization's quota, whether the form is still the published one that was validated
 * against, and the month's slots as this statement's snapshot has them: `ready` when they are
 * split for that quota, `room` left in them.
 */
const QUOTA_AND_FORM_SQL = `org as (
  select ${organizationQuotaSql('p.plan_quotas')} as quota from organizations o, p where o.id = p.org
), form_ok as (
  select 1 from forms f, p
   where f.id = p.form and f.organization_id = p.org and f.status = 'published'
     and f.deleted_at is null and f.updated_at = p.form_updated
), slots as (
  select s.slot, s.used, s.allowance, s.split_quota is not distinct from org.quota as split_ok
    from usage_counter_slots s, p, org
   where s.organization_id = p.org and s.month = p.month
), slots_state as (
  select count(*) > 0 and coalesce(bool_and(split_ok), false) as ready,
         coalesce(sum(allowance - used) filter (where split_ok), 0)::int as room
    from slots
)`;

/** The enabled webhooks of the organization subscribed to the created event of the form (or all forms), numbered. */
const MATCHING_WEBHOOKS_SQL = `hooks as (
  select w.id, row_number() over (order by w.id)::int as n from webhooks w, p
   where ${webhookListensSql('w', 'p.org', 'p.form', `'${JSON.stringify([SUBMISSION_CREATED])}'::jsonb`)}
)`;


/**
 * One statement, so one implicit transaction and one round trip: the form is still what was
 * validated against, the monthly counter is incremented only while under quota (a conditional
 * update decided by PostgreSQL under the row lock), the payment claim and idempotency record are
 * unique-keyed (a claimed key must still be held by this request), and the fan-out is decided here:
 * a delivery row per matching webhook and a sync row per CRM integration, pending, whose ids come
 * back for their jobs (the owed-work sweep queues them if those are lost). No outbox row: nothing
 * is queued when nothing listens. Any failure undoes all of it. The work is done by the PL/pgSQL
 * function store_submission (Migration20261123004000_store_submission_function), which runs only
 * the statements a submission needs, with plans cached per connection.
 */
export const INSERT_SUBMISSION_SQL = `select * from store_submission($1::text, $2::text, $3::timestamptz, $4::text, $5::text,
  $6::jsonb, $7::text, $8::text, $9::text, $10::timestamptz, $11::text, $12::text, $13::text, $14::jsonb,
  $15::text, $16::text, $17::text, $18::text[], $19::jsonb, $20::boolean, $21::jsonb)`;

function violatedConstraint(err: any): string | null {
  return err?.code === '23505' ? String(err.constraint ?? '') : null;
}

/**
 * The values of INSERT_SUBMISSION_SQL for one row. `decisive`: wait for the month's slots in turn
 * instead of taking the first free one (see QUOTA_SLOTS).
 */
export function insertSubmissionValues(row: SubmissionRow, decisive = false): unknown[] {
  return [
    row.organizationId, row.formId, row.formUpdatedAt.toISOString(), row.month, row.id,
    JSON.stringify(row.data), row.submitterEmail, row.submitterName, row.source, row.createdAt.toISOString(),
    row.paymentIntentId, row.idempotency?.key ?? null, row.idempotency?.requestHash ?? null,
    row.idempotency ? JSON.stringify(row.idempotency.responseBody) : null, row.idempotency?.claimToken ?? null,
    row.fanout?.event?.id ?? null, row.fanout?.event?.payload ?? null, row.fanout?.deliveryIds ?? null,
    row.fanout?.syncs.length ? JSON.stringify(row.fanout.syncs) : null,
    decisive, PLAN_QUOTAS_JSON,
  ];
}

/** A statement finding the month's slots unsplit more often than this in a row gives up (the quota keeps changing). */
const MAX_SPLITS = 3;

/**
 * What to do after a storing statement that counted nothing, from the slots as it saw them:
 * split them for the current quota, wait for them in turn, or refuse (the month is at quota).
 */
export function afterUncounted(r: { slots_ready: boolean; slots_room: number }, wanted: number, decisive: boolean, splits: number)
  : 'split' | 'decisive' | 'refuse' {
  if (!r.slots_ready) {
    if (splits >= MAX_SPLITS) throw new Error('the quota slots of the month could not be split for a settled quota');
    return 'split';
  }
  return !decisive && r.slots_room >= wanted ? 'decisive' : 'refuse';
}

/**
 * What a single submission's storing statement answers before the quota, in the order clients see
 * it: a changed form, a lost idempotency claim, webhooks it brought no delivery for; null when
 * only the quota is left to decide. The group statement answers each of its rows the same way.
 */
export function refusedBeforeQuota(r: { form_ok: number; idem_held: number; listeners_ok: number; webhooks: number }): InsertOutcome | null {
  if (!r.form_ok) return { kind: 'form_changed' };
  if (!r.idem_held) return { kind: 'idempotency_lost' };
  if (!r.listeners_ok) return { kind: 'listeners_unknown', webhooks: r.webhooks };
  return null;
}

/** A storing statement that counted nothing, with the month's slots as it saw them (afterUncounted decides). */
interface Uncounted {
  kind: 'uncounted';
  slots_ready: boolean;
  slots_room: number;
}

/**
 * Runs a storing statement until it answers: when it counted nothing although the month may have
 * room, the month's slots are split or the statement runs again waiting for them in turn
 * (`decisive`); `refused` when the month is at quota.
 */
async function untilDecided<T extends { kind: string }>(
  orm: Orm, organizationId: string, month: string, wanted: number,
  run: (decisive: boolean) => Promise<T | Uncounted>, refused: T,
): Promise<T> {
  for (let decisive = false, splits = 0; ;) {
    const result = await run(decisive);
    if (result.kind !== 'uncounted') return result as T;
    const next = afterUncounted(result as Uncounted, wanted, decisive, splits);
    if (next === 'refuse') return refused;
    if (next === 'split') {
      await splitQuotaSlots(orm.em.fork(), organizationId, month);
      splits++;
    }
    decisive = next === 'decisive';
  }
}

export async function insertSubmission(orm: Orm, row: SubmissionRow): Promise<InsertOutcome> {
  return untilDecided<InsertOutcome>(orm, row.organizationId, row.month, 1, async (decisive) => {
    let result: any[];
    try {
      result = await preparedQuery(orm.em, decisive ? 'insert_submission_decisive' : 'insert_submission',
        INSERT_SUBMISSION_SQL, insertSubmissionValues(row, decisive));
    } catch (err) {
      const constraint = violatedConstraint(err);
      if (constraint === 'payment_claims_pkey') return { kind: 'payment_used' };
      if (constraint === 'idempotency_keys_pkey') return { kind: 'idempotency_conflict' };
      throw err;
    }
    const [r] = result;
    const refused = refusedBeforeQuota(r);
    if (refused) return refused;
    if (r.quota_ok) return { kind: 'created', deliveryIds: r.delivery_ids ?? [], syncIds: r.sync_ids ?? [], webhooks: r.webhooks };
    return { kind: 'uncounted', slots_ready: r.slots_ready, slots_room: r.slots_room };
  }, { kind: 'quota_exceeded' });
}

/**
 * Splits the organization's month into QUOTA_SLOTS slots for its current quota (splitAllowances),
 * creating the ones missing; does nothing when they are split for it already. The slots are locked
 * in ascending order and the quota read once they are held, so what a slot has used cannot change
 * under the split, and a quota changed meanwhile is seen by the next statement, which splits again.
 */
export async function splitQuotaSlots(em: Em, organizationId: string, month: string): Promise<void> {
  await em.transactional(async (tx) => {
    await tx.execute(
      `insert into usage_counter_slots (organization_id, month, slot, used, allowance, split_quota)
       select ?, ?, g, 0, 0, null from generate_series(0, ${QUOTA_SLOTS - 1}) g
       on conflict do nothing`,
      [organizationId, month],
    );
    const slots: Array<{ slot: number; used: number; split_quota: number | null }> = await tx.execute(
      'select slot, used, split_quota from usage_counter_slots where organization_id = ? and month = ? order by slot for update',
      [organizationId, month],
    );
    const [org] = await tx.execute(
      `select ${organizationQuotaSql('?::jsonb')} as quota from organizations o where o.id = ?`, [PLAN_QUOTAS_JSON, organizationId],
    );
    if (!org) return;
    if (slots.every((s) => s.split_quota === org.quota)) return;
    const allowances = splitAllowances(org.quota, slots.map((s) => s.used));
    await tx.execute(
      `update usage_counter_slots u set allowance = x.allowance, split_quota = ?
         from jsonb_to_recordset(?::jsonb) as x(slot int, allowance int)
        where u.organization_id = ? and u.month = ? and u.slot = x.slot`,
      [org.quota, JSON.stringify(slots.map((s, i) => ({ slot: s.slot, allowance: allowances[i] }))), organizationId, month],
    );
  });
}

export interface StoredIdempotency {
  requestHash: string;
  status: number;
  body: unknown;
}

export const IDEMPOTENCY_TTL_HOURS = 24;
/** How long a claim holds its key without an answer: a request that died frees it after this. */
export const IDEMPOTENCY_LEASE_SECONDS = 30;

export type IdempotencyClaimResult =
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
 *   - 'claimed'     → do the work; then completeIdempotencyKey(em, org, key, claim.token, status, body)
 *                     (a single submission does it inside its insert statement: claimToken on its
 *                     row), or releaseIdempotencyKey(em, org, key, claim.token) when the work was
 *                     refused or failed, so that a retry decides afresh.
 *
 * A record older than 24 hours, or a claim whose lease lapsed (its request died), is taken over.
 */
export async function claimIdempotencyKey(em: Em, organizationId: string, key: string, requestHash: string): Promise<IdempotencyClaimResult> {
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

/** An answered record (not a claim in progress); one older than 24 hours is forgotten (and removed). */
export async function findIdempotencyRecord(orm: Orm, organizationId: string, key: string): Promise<StoredIdempotency | null> {
  const conn = orm.em.getConnection();
  const [row] = await conn.execute(
    `select request_hash, response_status, response_body, created_at < now() - interval '${IDEMPOTENCY_TTL_HOURS} hours' as expired
       from idempotency_keys where organization_id = ? and key = ? and response_status is not null`,
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
  | ({ kind: 'created' } & CreatedFanout)
  | { kind: 'form_changed' }
  /** Webhooks match that some row brought no delivery (or event) for: none was stored; retry with them. */
  | { kind: 'listeners_unknown'; webhooks: number }
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
  select $1::text as org, $2::text as form, $3::timestamptz as form_updated, $4::text as month, $5::text as source,
         $7::boolean as decisive, $8::jsonb as plan_quotas
), items as (
  select x.* from jsonb_to_recordset($6::jsonb) as x(seq int, id text, data jsonb, email text, name text,
         created timestamptz, intent text, idem_key text, idem_hash text, idem_body jsonb,
         event_id text, event text, dlv_ids text[], syncs jsonb)
), ${MATCHING_WEBHOOKS_SQL}, listeners_ok as (
  select 1 where not exists (
    select 1 from items i, hooks h where h.n > case when i.event is null then 0 else coalesce(cardinality(i.dlv_ids), 0) end)
), ${QUOTA_AND_FORM_SQL}, wanted as (
  select count(*)::int as n from items
), planned as (
  select x.slot from (
    select s.slot, s.allowance - s.used as room, sum(s.allowance - s.used) over (order by ${OWN_SLOT_ORDER}) as upto
      from slots s where s.split_ok and s.used < s.allowance
  ) x, wanted
   where x.upto - x.room < wanted.n
), locked as materialized (
  select s.slot, s.allowance - s.used as room
    from usage_counter_slots s, p, org, form_ok, listeners_ok, wanted, slots_state
   where s.organization_id = p.org and s.month = p.month and s.used < s.allowance and s.split_quota = org.quota
     and slots_state.ready and slots_state.room >= wanted.n
     and (p.decisive or s.slot = any(array(select slot from planned)))
   order by s.slot
   for update of s
), take as (
  select x.slot, least(x.room, wanted.n - (x.upto - x.room)) as n
    from (select slot, room, sum(room) over (order by slot) as upto from locked) x, wanted
   where x.upto - x.room < wanted.n and (select sum(room) from locked) >= wanted.n
), quota as (
  update usage_counter_slots u set used = u.used + take.n
    from p, take
   where u.organization_id = p.org and u.month = p.month and u.slot = take.slot and u.used + take.n <= u.allowance
  returning take.n
), stored as (
  select i.* from items i where (select coalesce(sum(n), 0) from quota) = (select n from wanted)
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
), ${newDeliveriesSql('delivery',
  'select s.dlv_ids[h.n] as id, h.id as webhook_id, p.org as organization_id, s.event_id, s.event as payload, s.seq, h.n from p, stored s, hooks h')
}, ${newSyncsSql('sync', `select x as sync, p.org as organization_id, p.form as form_id, s.id as submission_id, s.seq
  from p, stored s, jsonb_array_elements(coalesce(s.syncs, '[]')) x`)
}, ${recordChangesSql('created_change', 'submission.created',
  'select p.org as organization_id, p.form as form_id, s.id as submission_id, s.created as occurred_at, s.seq from p, stored s')}
select (select count(*) from form_ok)::int as form_ok,
       (select count(*) from stored)::int as quota_ok,
       (select count(*) from listeners_ok)::int as listeners_ok,
       (select count(*) from hooks)::int as webhooks,
       (select ready from slots_state) as slots_ready,
       (select room from slots_state) as slots_room,
       (select count(*) from sub)::int as stored,
       (select array_agg(id) from delivery) as delivery_ids,
       (select array_agg(id) from sync) as sync_ids`;

/**
 * A row as an item of the statements storing many (jsonb_to_recordset reads the columns it names):
 * what one submission brings, apart from what the statement takes once for all of them.
 */
export function submissionItem(row: SubmissionRow, seq: number) {
  return {
    seq, id: row.id, data: row.data, email: row.submitterEmail, name: row.submitterName, created: row.createdAt.toISOString(),
    intent: row.paymentIntentId, idem_key: row.idempotency?.key ?? null, idem_hash: row.idempotency?.requestHash ?? null,
    idem_body: row.idempotency?.responseBody ?? null,
    event_id: row.fanout?.event?.id ?? null, event: row.fanout?.event?.payload ?? null, dlv_ids: row.fanout?.deliveryIds ?? null,
    syncs: row.fanout?.syncs.length ? row.fanout.syncs : null,
  };
}

/** Rows of one organization, form and month. */
export async function insertSubmissionBatch(orm: Orm, rows: SubmissionRow[]): Promise<BatchInsertOutcome> {
  const [first] = rows;
  const items = rows.map(submissionItem);
  return untilDecided<BatchInsertOutcome>(orm, first.organizationId, first.month, rows.length, async (decisive) => {
    let result: any[];
    try {
      result = await preparedQuery(orm.em, decisive ? 'insert_submission_batch_decisive' : 'insert_submission_batch',
        INSERT_SUBMISSION_BATCH_SQL, [
          first.organizationId, first.formId, first.formUpdatedAt.toISOString(), first.month, first.source, JSON.stringify(items),
          decisive, PLAN_QUOTAS_JSON,
        ]);
    } catch (err) {
      const constraint = violatedConstraint(err);
      if (constraint === 'payment_claims_pkey' || constraint === 'idempotency_keys_pkey') return { kind: 'conflict' };
      throw err;
    }
    const [r] = result;
    if (!r.form_ok) return { kind: 'form_changed' };
    if (!r.listeners_ok) return { kind: 'listeners_unknown', webhooks: r.webhooks };
    if (r.quota_ok) return { kind: 'created', deliveryIds: r.delivery_ids ?? [], syncIds: r.sync_ids ?? [], webhooks: r.webhooks };
    return { kind: 'uncounted', slots_ready: r.slots_ready, slots_room: r.slots_room };
  }, { kind: 'quota_short' });
}

/** The stored records among `keys` (expired ones count as absent). */
export async function findIdempotencyRecords(orm: Orm, organizationId: string, keys: string[]): Promise<Map<string, StoredIdempotency>> {
  if (keys.length === 0) return new Map();
  const rows = await orm.em.getConnection().execute(
    `select key, request_hash, response_status, response_body from idempotency_keys
      where organization_id = ? and key in (select jsonb_array_elements_text(?::jsonb)) and response_status is not null
        and created_at >= now() - interval '${IDEMPOTENCY_TTL_HOURS} hours'`,
    [organizationId, JSON.stringify(keys)],
  );
  return new Map(rows.map((row: any) => [row.key, { requestHash: row.request_hash, status: row.response_status, body: row.response_body }]));
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
