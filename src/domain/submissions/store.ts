import { randomBytes } from 'node:crypto';
import { PLAN_LIMITS, PLANS } from '../../../config/plans';
import type { Em, Orm } from '../../db/orm';
import { preparedQuery } from '../../db/prepared';
import { newId } from '../../lib/ids';
import type { Logger } from '../../lib/logger';
import { metrics } from '../../lib/metrics';
import { GroupCommit } from '../../lib/tick-batch';
import {
  FORM_SUBMISSION_CREATED, FORM_SUBMISSION_DELETED, SUBMISSION_CREATED, SUBMISSION_DELETED, webhookListensSql,
} from '../webhooks/event-types';
import { FILES_OF_DELETED_SQL } from '../files/store';
import { splitAllowances } from '../quotas/quota';
import type { ChangeType } from './changes';
import { countDaysSql } from './day-counts';
import type { SubmissionSource } from './entities';

/**
 * Storing submissions: the one statement that stores 1..N submissions of any organizations and
 * forms (STORE_SUBMISSIONS_SQL), the row it takes (SubmissionRow), the loop that settles what one
 * run could not (storeSubmissions) and the group commit of concurrent requests (SubmissionWriter).
 * A lone request is a group of one, the requests that reach storing while a group runs are the
 * next group, a batch is a group: each item is decided on its own, in the order clients see the checks (form unchanged →
 * idempotency claim held → listeners known → quota → claims), and no item can undo another.
 * After it, the other statements that write submissions or what they owe: idempotency records, the
 * deletion event's outbox row, the change feed's rows and purge, deleting a submission, the fan-out
 * of outbox rows, partitions. The statements that read them are in read-store.ts.
 */

/**
 * What a stored submission takes for itself, so that no other submission can: each kind is one
 * table of the same shape, `<idColumn> text primary key, organization_id, submission_id`, one row
 * per thing claimed. An item carries any number of claims (`SubmissionRow.claims`); it is stored
 * only if it gets every one of them, and its answer names the first kind (in this order) it lost.
 *
 * Adding a claim is one entry here with its table created by a migration, plus the caller putting
 * `{ kind, id }` in the row's claims and turning a `claim_taken` answer of that kind into its
 * refusal (create-submission.ts, CLAIM_TAKEN); file uploads are the second kind.
 */
export const CLAIM_KINDS = {
  payment: { table: 'payment_claims', idColumn: 'payment_intent_id' },
  upload: { table: 'upload_claims', idColumn: 'upload_id' },
} as const satisfies Record<string, { table: string; idColumn: string }>;

export type ClaimKind = keyof typeof CLAIM_KINDS;

export interface Claim {
  kind: ClaimKind;
  id: string;
}

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
  /** What it claims (CLAIM_KINDS): a payment intent, uploads; each at most once. */
  claims: Claim[];
  /**
   * The record its answer is kept under. With `claimToken` (a key this request claimed, see
   * claimIdempotencyKey) storing completes the claim, and stores nothing if the claim was lost;
   * without it (a batch's items), the record is inserted like a claim: a key taken meanwhile stores
   * nothing of the item (idempotency_conflict).
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
 * `deliveryIds` (or any without an event) stores nothing of it and answers `listeners_unknown`.
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
  /** The storing group its deliveries were written with (their `job_group`), to share one job; null: each its own. */
  jobGroup: string | null;
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
  /** Something it claims backs another submission: nothing was stored. */
  | { kind: 'claim_taken'; claim: ClaimKind }
  /** Its idempotency record (a batch item's) exists already: nothing was stored. */
  | { kind: 'idempotency_conflict' }
  /** The claimed idempotency key's lease lapsed and another request holds it now: nothing was stored. */
  | { kind: 'idempotency_lost' };

/**
 * Each plan's monthly submissions (config/plans.ts), passed to the storing statement as an
 * argument rather than written into its text: the quotas stay this process's configuration, and a
 * release changing PLAN_LIMITS needs no migration.
 */
export const PLAN_QUOTAS_JSON = JSON.stringify(Object.fromEntries(PLANS.map((p) => [p, PLAN_LIMITS[p].monthlySubmissions])));

/** SQL: the monthly quota of organization `o`, with `planQuotas` the jsonb expression of PLAN_QUOTAS_JSON. */
export function organizationQuotaSql(planQuotas: string): string {
  return `coalesce(o.monthly_quota, (${planQuotas} ->> o.plan)::int)`;
}

/**
 * Why slots: one counter row per organization and month would be locked by every submission of
 * the organization from its update until its commit (a WAL flush), so one organization could
 * never store more than one submission per commit time, whatever the number of API processes.
 * The month's quota is split instead into QUOTA_SLOTS rows, each with its share of it
 * (`allowance`, split by splitAllowances, adding up to the quota exactly): a submission counts
 * itself in one slot with room, under that slot's row lock alone, so submissions on different
 * connections seldom wait on each other, and the month's total never passes the quota because no
 * slot passes its allowance (a check constraint besides). The storing statement takes, for each
 * organization and month of its items, the first slot with room nobody holds, starting from the
 * connection's own (by backend pid; SKIP LOCKED, so it never waits there), and counts in it as many
 * items as it has room for. When that leaves items uncounted although the month has room, a second
 * statement waits its turn on the slots in ascending order (`decisive`), as many as it has items,
 * so an item is refused only when every slot is really full. Slots are locked in ascending order
 * whenever a statement waits on them (the decisive statement, splitQuotaSlots), which keeps them
 * free of deadlocks; a decisive statement holds the items of one organization and month only.
 *
 * `split_quota` is the quota the allowances were split for: a statement uses a slot only while it
 * equals the organization's quota as the statement sees it (a split rewrites all of a month's slots
 * in one statement, so a snapshot sees them all split for the same quota). A month without slots,
 * or a quota changed since the split (a plan change, an admin's --monthly-quota), makes the caller
 * split the month afresh (splitQuotaSlots) and try again: a lowered quota never lets a statement
 * that saw it count beyond it.
 */
export const QUOTA_SLOTS = 16;

/** Where this connection starts looking for a slot with room. */
export const OWN_SLOT_ORDER = `(s.slot - pg_backend_pid() % ${QUOTA_SLOTS} + ${QUOTA_SLOTS}) % ${QUOTA_SLOTS}`;

/** The kinds of claim in the order a lost one is answered; an unclaimed idempotency record comes last. */
const CLAIM_ORDER = [...Object.keys(CLAIM_KINDS), 'idempotency'];
const CLAIM_ORDER_SQL = `array[${CLAIM_ORDER.map((k) => `'${k}'`).join(', ')}]`;
const claimRankSql = (kind: string) => `array_position(${CLAIM_ORDER_SQL}, ${kind})`;

/** What the claims of the items got, by kind: each kind's claims inserted `on conflict do nothing`, in id order. */
function claimInsertsSql(): string {
  return Object.entries(CLAIM_KINDS).map(([kind, { table, idColumn }]) => `claimed_${kind} as (
  insert into ${table} (${idColumn}, organization_id, submission_id)
  select c.id, i.org, i.id from item_claims c join items i using (seq) join tried t using (seq)
   where c.kind = '${kind}'
   order by c.id
  on conflict do nothing
  returning submission_id
)`).join(', ');
}

/** Whether a claim of `c` (item_claims) is visibly taken already. */
function claimTakenSql(): string {
  return [
    ...Object.entries(CLAIM_KINDS).map(([kind, { table, idColumn }]) =>
      `(c.kind = '${kind}' and exists (select from ${table} t where t.${idColumn} = c.id))`),
    `(c.kind = 'idempotency' and exists (select from idempotency_keys k where k.organization_id = c.scope and k.key = c.id))`,
  ].join('\n      or ');
}

/** Text of the error the statement raises rather than leave a claim of an item it did not store. */
const CLAIMS_SPLIT = 'claims split';

/**
 * The storing statement. $1: the items (storingItem), $2: PLAN_QUOTAS_JSON, $3: decisive (wait for
 * the slots in turn; the items of one organization and month only), $4: their claims (storingClaims). One implicit transaction and
 * one round trip for all items; its set-up is paid once for the lot: one read per (organization,
 * form, month) of the quota, the form and its webhooks.
 *
 * 1. Each item's checks before the quota: its form still the published one it was validated
 *    against, its claimed idempotency row still its own (locked), a delivery brought per matching
 *    webhook. An item failing one is answered so and nothing of it is written.
 * 2. Items claiming what an earlier item of the statement claims wait for the next statement
 *    (`deferred`), when the earlier one's claims are decided.
 * 3. The quota: per organization and month, one slot (see QUOTA_SLOTS) locked and counted for as
 *    many of its eligible items as it has room for, in item order (`fitting`); the others are
 *    answered uncounted, with the slots as the statement saw them, for the caller to split them or
 *    wait for them in turn. Those are read (`slots_seen`) only for a month with an item uncounted,
 *    and the counted slots updated by their keys (`takes`): with an organization per item, reading
 *    every month's slots and joining them by month made the statement a sixth slower.
 * 4. The claims of fitting items (payment intents, …, and batch items' idempotency records) are
 *    inserted `on conflict do nothing`, except for items with one visibly taken already; only an
 *    item that got all of them is stored and counted. An item that got some but not all (a claim
 *    taken by a transaction that committed during the statement) would leave a claim behind: the
 *    statement fails instead (CLAIMS_SPLIT), undoing all of it, and the caller runs it again, when
 *    the taken claim is visible and the item is refused before anything of it is written.
 * 5. Stored items: the counted slots, the submission rows, the completed idempotency records, their
 *    deliveries, syncs, their forms' day counts (day-counts.ts) and changes (in item order).
 *
 * One answer per item, in item order.
 *
 * `claims: false` builds the same statement without steps 2 and 4 (and without $4), for runs whose
 * rows claim nothing (claimsNothing): most submissions, and a fifth cheaper to execute. Its answers
 * have the same columns, the claim ones constant (nothing deferred, taken or claimed).
 */
export function storeSubmissionsSql({ claims }: { claims: boolean }): string {
  return `
with items as (
  select x.* from jsonb_to_recordset($1::jsonb) as x(seq int, org text, form text, form_updated timestamptz, month text,
         id text, data jsonb, email text, name text, source text, created timestamptz,
         idem_key text, idem_hash text, idem_body jsonb, idem_token text, event_id text, event text, dlv_ids text[], syncs jsonb,
         job_group text)
)${claims ? `, item_claims as (
  select c.seq, c.kind, c.id, ''::text as scope from jsonb_to_recordset($4::jsonb) as c(seq int, kind text, id text)
  union all
  select i.seq, 'idempotency', i.idem_key, i.org from items i where i.idem_key is not null and i.idem_token is null
)` : ''}, groups as materialized (
  select g.org, g.form, g.form_updated, g.month,
         ${organizationQuotaSql('$2::jsonb')} as quota,
         exists (select from forms f
                  where f.id = g.form and f.organization_id = g.org and f.status = 'published'
                    and f.deleted_at is null and f.updated_at = g.form_updated) as form_ok,
         coalesce((select array_agg(w.id order by w.id) from webhooks w
                    where ${webhookListensSql('w', 'g.org', 'g.form', `'${JSON.stringify([SUBMISSION_CREATED])}'::jsonb`)}), '{}') as hooks
    from (select distinct org, form, form_updated, month from items) g
    left join organizations o on o.id = g.org
), held as (
  select i.seq from items i join idempotency_keys k
      on k.organization_id = i.org and k.key = i.idem_key and k.claim_token = i.idem_token and k.response_status is null
   where i.idem_token is not null
   order by k.organization_id, k.key
     for update of k
), decided as (
  select x.*, x.form_ok and x.idem_held and x.listeners_ok as eligible from (
    select i.seq, i.org, i.month, g.quota, g.hooks, g.form_ok,
           (i.idem_token is null or exists (select from held h where h.seq = i.seq)) as idem_held,
           cardinality(g.hooks) <= case when i.event is null then 0 else coalesce(cardinality(i.dlv_ids), 0) end as listeners_ok
      from items i join groups g using (org, form, form_updated, month)) x
)${claims ? `, deferred as (
  select distinct b.seq from item_claims a
    join item_claims b on b.kind = a.kind and b.scope = a.scope and b.id = a.id and b.seq > a.seq
    join decided d on d.seq = a.seq and d.eligible
)` : ''}, ranked as (
  select r.*, row_number() over (partition by r.org, r.month, r.candidate order by r.seq) as k from (
    ${claims ? `select d.*, x.deferred, d.eligible and not x.deferred as candidate from decided d,
           lateral (select exists (select from deferred x where x.seq = d.seq) as deferred) x` : `select d.*, false as deferred, d.eligible as candidate from decided d`}) r
), wanted as (
  select org, month, quota, count(*)::int as n from ranked where candidate group by org, month, quota
), locked as materialized (
  select w.org, w.month, s.slot, s.room, s.ord
    from wanted w cross join lateral (
      select s.slot, s.allowance - s.used as room, ${OWN_SLOT_ORDER} as ord from usage_counter_slots s
       where not $3::boolean and s.organization_id = w.org and s.month = w.month and s.used < s.allowance and s.split_quota = w.quota
       order by ${OWN_SLOT_ORDER}
       limit 1
         for update of s skip locked) s
  union all
  select w.org, w.month, s.slot, s.room, s.slot
    from wanted w cross join lateral (
      select s.slot, s.allowance - s.used as room from usage_counter_slots s
       where $3::boolean and s.organization_id = w.org and s.month = w.month and s.used < s.allowance and s.split_quota = w.quota
       order by s.slot
       limit w.n
         for update of s) s
), fitting as (
  select r.*, r.candidate and r.k <= (select coalesce(sum(l.room), 0) from locked l where l.org = r.org and l.month = r.month) as fits
    from ranked r
), slots_seen as materialized (
  select w.org, w.month, count(s.slot) > 0 and coalesce(bool_and(s.split_quota is not distinct from w.quota), false) as ready,
         coalesce(sum(s.allowance - s.used) filter (where s.split_quota is not distinct from w.quota), 0)::int as room
    from wanted w left join usage_counter_slots s on s.organization_id = w.org and s.month = w.month
   where exists (select from fitting f where f.org = w.org and f.month = w.month and f.candidate and not f.fits)
   group by w.org, w.month
${claims ? `), taken as (
  select c.seq, min(${claimRankSql('c.kind')}) as rank from item_claims c join fitting f using (seq)
   where f.fits and (${claimTakenSql()})
   group by c.seq
), tried as (
  select f.seq from fitting f where f.fits and not exists (select from taken t where t.seq = f.seq)
), ${claimInsertsSql()}, claimed_idempotency as (
  insert into idempotency_keys (organization_id, key, request_hash, response_status, response_body)
  select i.org, i.idem_key, i.idem_hash, 201, i.idem_body from items i join tried t using (seq)
   where i.idem_key is not null and i.idem_token is null
   order by i.org, i.idem_key
  on conflict do nothing
  returning organization_id, key
), got as (
  select x.seq, count(*)::int as n from (
    ${Object.keys(CLAIM_KINDS).map((kind) => `select i.seq from claimed_${kind} c join items i on i.id = c.submission_id`).join('\n    union all ')}
    union all select i.seq from claimed_idempotency c join items i
      on i.org = c.organization_id and i.idem_key = c.key and i.idem_token is null
  ) x group by x.seq
), needed as (
  select c.seq, count(*)::int as n from item_claims c group by c.seq
` : ''}), outcome as (
  ${claims ? `select o.*, o.tried and o.got = o.need as stored from (
    select f.*, t.rank as taken_rank, f.fits and t.seq is null as tried,
           case when f.fits and t.seq is null then coalesce(g.n, 0) else 0 end as got, coalesce(nd.n, 0) as need
      from fitting f left join taken t using (seq) left join got g using (seq) left join needed nd using (seq)) o` : 'select f.*, f.fits as stored from fitting f'}
), stored as (
  select o.seq, o.org, o.month, o.hooks from outcome o where o.stored
), takes as materialized (
  select l.org, l.month, l.slot, least(l.room, m.n - (l.upto - l.room)) as take
    from (select l.*, sum(l.room) over (partition by l.org, l.month order by l.ord) as upto from locked l) l
    join (select org, month, count(*)::int as n from stored group by org, month) m using (org, month)
   where l.upto - l.room < m.n
), counted as (
  update usage_counter_slots u set used = u.used + x.take from takes x
   where u.organization_id = x.org and u.month = x.month and u.slot = x.slot
  returning x.org, x.month, x.take
), sub as (
  insert into submissions (id, organization_id, form_id, data, submitter_email, submitter_name, source, created_at)
  select i.id, i.org, i.form, i.data, i.email, i.name, i.source, i.created from items i join stored s using (seq)
   order by i.seq
  returning 1
), idem as (
  update idempotency_keys k set response_status = 201, response_body = i.idem_body, claim_token = null, lease_expires_at = null
    from items i join stored s using (seq)
   where i.idem_token is not null and k.organization_id = i.org and k.key = i.idem_key
  returning 1
), delivery as (
  insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, next_attempt_at, job_group)
  select i.dlv_ids[h.n], h.id, i.org, i.event_id, '${FORM_SUBMISSION_CREATED}', i.event, 'pending', now(), i.job_group
    from items i join stored s using (seq), unnest(s.hooks) with ordinality as h(id, n)
   order by i.seq, h.n
  returning 1
), sync as (
  insert into crm_syncs (id, organization_id, form_id, submission_id, integration_index, integration_id, provider, status, next_attempt_at)
  select c->>'id', i.org, i.form, i.id, (c->>'index')::int, c->>'integrationId', c->>'provider', 'pending', now()
    from items i join stored s using (seq), jsonb_array_elements(coalesce(i.syncs, '[]')) c
   order by i.seq
  returning 1
), ${countDaysSql('day_counted',
  'select i.org as organization_id, i.form as form_id, i.created as created_at, 1 as delta from items i join stored s using (seq)')
}, ${recordChangesSql('created_change', 'submission.created',
  'select i.org as organization_id, i.form as form_id, i.id as submission_id, i.created as occurred_at, i.seq from items i join stored s using (seq)')
}, settled as (
  select case when ${claims ? `exists (select from outcome o where o.tried and o.got > 0 and o.got < o.need)
                or ` : ''}(select coalesce(sum(take), 0) from counted) <> (select count(*) from stored)
                or (select count(*) from sub) <> (select count(*) from stored)
              then ('${CLAIMS_SPLIT}: ' || ${claims ? '(select count(*) from outcome o where o.tried and o.got > 0 and o.got < o.need)'
                /* not a constant, which the planner would fold, failing every execution */ : '(select count(*) from stored)'})::int
              else 0 end as failed
)
select o.seq, o.form_ok::int as form_ok, o.idem_held::int as idem_held, o.listeners_ok::int as listeners_ok,
       cardinality(o.hooks) as webhooks, o.deferred::int as deferred, o.fits::int as quota_ok,
       ${claims ? `coalesce((${CLAIM_ORDER_SQL})[o.taken_rank],
                case when o.tried and o.got < o.need then
                  (select c.kind from item_claims c where c.seq = o.seq order by ${claimRankSql('c.kind')} limit 1) end)` : 'null::text'} as taken,
       o.stored::int as stored, ${claims ? 'o.got' : '0'} as claimed,
       ${claims ? `(exists (select from claimed_idempotency c join items i on i.org = c.organization_id and i.idem_key = c.key
                 where i.seq = o.seq and i.idem_token is null))::int` : '0'} as idem,
       v.ready as slots_ready,
       v.room - coalesce((select sum(c.take) from counted c where c.org = o.org and c.month = o.month), 0)::int as slots_room
  from outcome o left join slots_seen v using (org, month), settled
 where settled.failed = 0
 order by o.seq`;
}

/** The storing statement for any rows. */
export const STORE_SUBMISSIONS_SQL = storeSubmissionsSql({ claims: true });

/** The storing statement for rows that claim nothing (claimsNothing). */
export const STORE_PLAIN_SUBMISSIONS_SQL = storeSubmissionsSql({ claims: false });

/**
 * Whether no row claims anything (CLAIM_KINDS) nor inserts an idempotency record of its own (a
 * batch item's, without a claim token): then STORE_PLAIN_SUBMISSIONS_SQL stores them as
 * STORE_SUBMISSIONS_SQL would.
 */
export function claimsNothing(rows: SubmissionRow[]): boolean {
  return rows.every((row) => row.claims.length === 0 && !(row.idempotency && !row.idempotency.claimToken));
}

/** How one run of the storing statement stores its rows. */
export interface StoringOptions {
  /** Wait for the month's slots in turn: the rows are all of one organization and month. */
  decisive?: boolean;
  /** The job the deliveries the rows create share (CreatedFanout.jobGroup); null: each its own. */
  jobGroup?: string | null;
}

/** The statement that stores `rows`: its prepared statement's name, its text and its values. */
export function storingStatement(rows: SubmissionRow[], options: StoringOptions = {})
  : { name: string; text: string; values: unknown[] } {
  const claims = !claimsNothing(rows);
  const values = storeSubmissionsValues(rows, { ...options, claims });
  return claims
    ? { name: 'store_submissions', text: STORE_SUBMISSIONS_SQL, values }
    : { name: 'store_submissions_plain', text: STORE_PLAIN_SUBMISSIONS_SQL, values };
}

/**
 * A row as an item of the storing statement (jsonb_to_recordset reads the columns it names);
 * `jobGroup`: the job its deliveries share (CreatedFanout.jobGroup).
 */
export function storingItem(row: SubmissionRow, seq: number, jobGroup: string | null = null) {
  return {
    seq, org: row.organizationId, form: row.formId, form_updated: row.formUpdatedAt.toISOString(), month: row.month,
    id: row.id, data: row.data, email: row.submitterEmail, name: row.submitterName, source: row.source,
    created: row.createdAt.toISOString(),
    idem_key: row.idempotency?.key ?? null, idem_hash: row.idempotency?.requestHash ?? null,
    idem_body: row.idempotency?.responseBody ?? null, idem_token: row.idempotency?.claimToken ?? null,
    event_id: row.fanout?.event?.id ?? null, event: row.fanout?.event?.payload ?? null, dlv_ids: row.fanout?.deliveryIds ?? null,
    syncs: row.fanout?.syncs.length ? row.fanout.syncs : null,
    job_group: row.fanout?.deliveryIds.length ? jobGroup : null,
  };
}

/**
 * The values of STORE_SUBMISSIONS_SQL for `rows`; with `claims` false, those of
 * STORE_PLAIN_SUBMISSIONS_SQL (no $4).
 */
export function storeSubmissionsValues(rows: SubmissionRow[], { decisive = false, jobGroup = null, claims = true }: StoringOptions & { claims?: boolean } = {})
  : unknown[] {
  const values = [JSON.stringify(rows.map((row, seq) => storingItem(row, seq, jobGroup))), PLAN_QUOTAS_JSON, decisive];
  return claims ? [...values, JSON.stringify(storingClaims(rows))] : values;
}

/**
 * The items' claims as one list beside the items rather than a list inside each: the planner takes
 * a set-returning function of a parameter for 100 rows, and 100 claims per item made the statement's
 * cost estimate pass jit_above_cost (JIT compiling then cost 100+ ms per execution).
 */
export function storingClaims(rows: SubmissionRow[]): Array<{ seq: number; kind: ClaimKind; id: string }> {
  return rows.flatMap((row, seq) => row.claims.map(({ kind, id }) => ({ seq, kind, id })));
}

/** What the storing statement answers for one item. */
export interface ItemAnswer {
  seq: number;
  form_ok: number;
  idem_held: number;
  listeners_ok: number;
  webhooks: number;
  /** It claims what an earlier item of the statement claims: decided by the next statement. */
  deferred: number;
  /** The quota had room for it. */
  quota_ok: number;
  /** The first kind of claim (CLAIM_KINDS, then 'idempotency') it found taken. */
  taken: string | null;
  stored: number;
  /** How many of its claims it took. */
  claimed: number;
  /** Whether it inserted its (unclaimed) idempotency record. */
  idem: number;
  /** The month's slots as the statement saw them: split for the current quota, and the room left in them. */
  slots_ready: boolean | null;
  slots_room: number | null;
}

/** An item the quota counted not: afterUncounted decides what comes next. */
export interface Uncounted {
  kind: 'uncounted';
  slots_ready: boolean;
  slots_room: number;
}

/** An item deferred to the next statement (it claims what an earlier item of its statement claims). */
export const AGAIN = { kind: 'again' } as const;

/**
 * What the statement decided for a row, in the order clients see the checks: a changed form, a
 * lost idempotency claim, webhooks it brought no delivery for, the quota, a claim taken.
 */
export function itemOutcome(row: SubmissionRow, answer: ItemAnswer, jobGroup: string | null = null): InsertOutcome | Uncounted | typeof AGAIN {
  if (!answer.form_ok) return { kind: 'form_changed' };
  if (!answer.idem_held) return { kind: 'idempotency_lost' };
  if (!answer.listeners_ok) return { kind: 'listeners_unknown', webhooks: answer.webhooks };
  if (answer.deferred) return AGAIN;
  if (!answer.quota_ok) return { kind: 'uncounted', slots_ready: !!answer.slots_ready, slots_room: answer.slots_room ?? 0 };
  if (answer.taken === 'idempotency') return { kind: 'idempotency_conflict' };
  if (answer.taken) return { kind: 'claim_taken', claim: answer.taken as ClaimKind };
  if (!answer.stored) throw new Error(`the storing statement neither stored nor refused submission ${row.id}`);
  return {
    kind: 'created',
    deliveryIds: (row.fanout?.deliveryIds ?? []).slice(0, answer.webhooks),
    jobGroup: answer.webhooks > 0 ? jobGroup : null,
    syncIds: (row.fanout?.syncs ?? []).map((sync) => sync.id),
    webhooks: answer.webhooks,
  };
}

/** Splitting a month's slots more often than this in a row gives up (the quota keeps changing). */
const MAX_SPLITS = 3;

/**
 * What to do with items the quota counted not, from the slots as their statement saw them: split
 * them for the current quota, wait for them in turn (`decisive`) while they have room, or refuse
 * (the month is at quota; a decisive statement saw every slot with room).
 */
export function afterUncounted(r: { slots_ready: boolean; slots_room: number }, decisive: boolean, splits: number)
  : 'split' | 'decisive' | 'refuse' {
  if (!r.slots_ready) {
    if (splits >= MAX_SPLITS) throw new Error('the quota slots of the month could not be split for a settled quota');
    return 'split';
  }
  return !decisive && r.slots_room > 0 ? 'decisive' : 'refuse';
}

/**
 * Whether an error of a statement storing several items may come from one of them (a unique or
 * other integrity violation, a value PostgreSQL refuses), so that the others could be stored without it.
 */
export function causedByAnItem(err: unknown): boolean {
  const code = String((err as { code?: unknown })?.code ?? '');
  return code.startsWith('23') || code.startsWith('22');
}

/** How an item came out: its outcome, or the error its statement failed with. */
export type Settled = { outcome: InsertOutcome } | { error: unknown };

/** How many times a statement that found an item's claims split (CLAIMS_SPLIT) is run again. */
const MAX_CLAIM_RERUNS = 3;

/**
 * One run of the statement. When it fails for what an item may hold, each item runs alone, so that
 * one cannot fail its neighbours; an item whose own statement fails gets that error.
 */
async function runStatement(run: StoringRun, rows: SubmissionRow[], decisive: boolean)
  : Promise<Array<ItemAnswer | { error: unknown }>> {
  const { orm, logger } = run;
  for (let reruns = 0; ; reruns++) {
    try {
      const { name, text, values } = storingStatement(rows, { decisive, jobGroup: run.jobGroup });
      return await preparedQuery<ItemAnswer>(orm.em, name, text, values);
    } catch (err) {
      if (String((err as Error)?.message).includes(CLAIMS_SPLIT) && reruns < MAX_CLAIM_RERUNS) continue;
      // The database down, slow or out of connections fails them all alike: running each alone
      // would only make every request wait that long again.
      if (rows.length === 1 || !causedByAnItem(err)) return rows.map(() => ({ error: err }));
      logger?.warn({ err: (err as Error).message, submissions: rows.length }, 'storing submissions together failed: storing each alone');
      return Promise.all(rows.map(async (row) => (await runStatement(run, [row], decisive))[0]));
    }
  }
}

/** What every statement of one storeSubmissions call shares. */
interface StoringRun {
  orm: Orm;
  logger: Logger | null;
  /** Written on the deliveries its statements create (CreatedFanout.jobGroup). */
  jobGroup: string | null;
}

/**
 * Stores `rows` (any organizations, forms and months) and answers each as if it had been stored
 * alone: the statement runs once for all of them; the items it left uncounted run again, once their
 * month's slots are split or waiting for them in turn, and deferred items once more. The deliveries
 * they create are written with `jobGroup`, the one job that will hold them (null: each its own).
 */
export async function storeSubmissions(
  orm: Orm, rows: SubmissionRow[], logger: Logger | null = null, jobGroup: string | null = null,
): Promise<Settled[]> {
  return settle({ orm, logger, jobGroup }, rows, false, 0, 0);
}

async function settle(run: StoringRun, rows: SubmissionRow[], decisive: boolean, splits: number, round: number)
  : Promise<Settled[]> {
  if (round > 2 * MAX_SPLITS + 4) throw new Error('the submissions could not be settled: their slots or claims kept changing');
  const answers = await runStatement(run, rows, decisive);
  const settled: Settled[] = new Array(rows.length);
  const again: number[] = [];
  const uncounted = new Map<string, { indexes: number[]; seen: Uncounted }>();
  answers.forEach((answer, i) => {
    if ('error' in answer) {
      settled[i] = answer;
      return;
    }
    const outcome = itemOutcome(rows[i], answer, run.jobGroup);
    if (outcome.kind === 'again') again.push(i);
    else if (outcome.kind === 'uncounted') {
      const month = `${rows[i].organizationId}\n${rows[i].month}`;
      const group = uncounted.get(month) ?? { indexes: [], seen: outcome };
      group.indexes.push(i);
      uncounted.set(month, group);
    } else settled[i] = { outcome };
  });

  const rerun = async (indexes: number[], asDecisive: boolean, splitsNow: number) => {
    const results = await settle(run, indexes.map((i) => rows[i]), asDecisive, splitsNow, round + 1);
    results.forEach((result, k) => { settled[indexes[k]] = result; });
  };
  const next: Array<Promise<void>> = [];
  if (again.length) next.push(rerun(again, decisive, splits));
  for (const { indexes, seen } of uncounted.values()) {
    const step = afterUncounted(seen, decisive, splits);
    if (step === 'refuse') {
      for (const i of indexes) settled[i] = { outcome: { kind: 'quota_exceeded' } };
    } else if (step === 'decisive') {
      next.push(rerun(indexes, true, splits));
    } else {
      const { organizationId, month } = rows[indexes[0]];
      next.push(splitQuotaSlots(run.orm.em.fork(), organizationId, month).then(() => rerun(indexes, false, splits + 1)));
    }
  }
  await Promise.all(next);
  return settled;
}

/** The most submissions one statement of the group commit stores; more go in further statements beside it. */
export const MAX_GROUP = 64;

/**
 * How long one group's statements may run before the next group goes beside them: longer than a
 * statement takes under load (1 to 5 ms), short enough that one waiting on a lock (or a database
 * that stalled) holds the other requests back by little.
 */
export const GROUP_STALL_MS = 25;

/**
 * The submissions of concurrent requests, stored together (group commit): those that reach storing
 * while a group's statement runs wait for it and share the next statement, so one round trip, one
 * transaction and one WAL flush, with each submission still decided on its own and answered only
 * once its statement committed. A lone request goes on the next turn of the event loop. Under load
 * the groups grow with the statement's time rather than the statements multiplying (one org at
 * 5,000/s: 16 submissions per statement instead of 10, a third less PostgreSQL CPU each); a group
 * running past GROUP_STALL_MS stops holding back the next. A batch is stored as one group of its
 * own, in item order. The deliveries a group creates share one job group (CreatedFanout.jobGroup):
 * the webhooks worker gets them as one job rather than one job each.
 */
export class SubmissionWriter {
  private readonly turn = new GroupCommit<SubmissionRow, Settled>((rows) => this.storeTogether(rows), GROUP_STALL_MS);

  constructor(private readonly orm: Orm, private readonly logger: Logger) {}

  /** One submission, in the next group. */
  async store(row: SubmissionRow): Promise<InsertOutcome> {
    const settled = await this.turn.call(row);
    if ('error' in settled) throw settled.error;
    return settled.outcome;
  }

  /** Submissions posted alone, each in the next group. */
  storeEach(rows: SubmissionRow[]): Promise<Settled[]> {
    return Promise.all(rows.map((row) => this.turn.call(row)));
  }

  /** The items of a batch, as one group. */
  storeGroup(rows: SubmissionRow[]): Promise<Settled[]> {
    return storeSubmissions(this.orm, rows, this.logger, newId('grp'));
  }

  /** Statements of at most MAX_GROUP rows each, run side by side. */
  private async storeTogether(rows: SubmissionRow[]): Promise<Settled[]> {
    const jobGroup = newId('grp');
    const groups: Array<Promise<Settled[]>> = [];
    for (let start = 0; start < rows.length; start += MAX_GROUP) {
      const group = rows.slice(start, start + MAX_GROUP);
      metrics.submissionGroupSize.observe(group.length);
      groups.push(storeSubmissions(this.orm, group, this.logger, jobGroup).catch((error: unknown) => group.map(() => ({ error }))));
    }
    return (await Promise.all(groups)).flat();
  }
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
 *                     (a single submission does it inside its storing statement: claimToken on its
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

// The change feed

/**
 * A CTE named `name` recording one change per row of `source`, a select yielding
 * `organization_id, form_id, submission_id, occurred_at, seq`, inside the writer's own statement;
 * the positions of one statement follow `seq`. Each row also keeps the writer's transaction id
 * (the column's default, pg_current_xact_id()), by which readers order the feed and know which
 * changes are final (readChanges in change-feed.ts): writers take no lock for the feed, so those of
 * one organization commit side by side.
 */
export function recordChangesSql(name: string, type: ChangeType, source: string): string {
  return `${name} as (
  insert into submission_changes (organization_id, form_id, submission_id, type, occurred_at)
  select s.organization_id, s.form_id, s.submission_id, '${type}', s.occurred_at
    from (${source}) s
   order by s.seq
  returning position
)`;
}

/** Deletes at most `limit` changes older than `retentionDays`; answers how many. */
export async function deleteChangesOlderThan(em: Em, retentionDays: number, limit: number): Promise<number> {
  const result = await em.getConnection().execute(
    `delete from submission_changes where ctid = any(array(
       select ctid from submission_changes where occurred_at < now() - (? * interval '1 day') limit ${limit}))`,
    [retentionDays], 'run',
  );
  return (result as any).affectedRows as number;
}

// Deleting a submission

/** The change feed's record of a deletion, written in the deleting statement itself. */
const DELETED_CHANGE_SQL = recordChangesSql('deleted_change', 'submission.deleted',
  'select g.organization_id, g.form_id, g.id as submission_id, now() as occurred_at, 0 as seq from gone g');

/**
 * Deletes one submission of an organization; answers its id, form and form title (no row: nothing
 * deleted). Its day's count goes down and its files go `deleting` in the same statement; the
 * deletion job deletes their bytes.
 */
export const DELETE_SUBMISSION_SQL = `
with gone as (
  delete from submissions where id = ? and organization_id = ? returning id, organization_id, form_id, created_at
), ${DELETED_CHANGE_SQL}, ${countDaysSql('day_uncounted', 'select g.organization_id, g.form_id, g.created_at, -1 as delta from gone g')
}, ${FILES_OF_DELETED_SQL}
select gone.id, gone.form_id, f.title as form_title from gone join forms f on f.id = gone.form_id`;

/** Deletes the row of DELETE_SUBMISSION_SQL; undefined when the organization has no such submission. */
export async function deleteSubmissionRow(tx: Em, organizationId: string, submissionId: string)
  : Promise<{ id: string; form_id: string; form_title: string } | undefined> {
  const [gone] = await tx.execute<Array<{ id: string; form_id: string; form_title: string }>>(DELETE_SUBMISSION_SQL, [submissionId, organizationId]);
  return gone;
}

/**
 * The submission's values leave the stored payloads of its deliveries that have ended (succeeded
 * or failed); pending ones keep theirs, as they are still owed to the receiver.
 */
export async function scrubEndedDeliveries(tx: Em, organizationId: string, eventId: string): Promise<void> {
  await tx.execute(
    `update webhook_deliveries
        set payload = jsonb_set(jsonb_set(jsonb_set(jsonb_set(payload::jsonb,
              '{data,submission,data}', '{}'), '{data,submission,rawData}', '{}'),
              '{data,submission,submitterEmail}', 'null'), '{data,submission,submitterName}', 'null')::text,
            updated_at = updated_at
      where organization_id = ? and event_id = ? and status <> 'pending'
        and payload::jsonb #> '{data,submission,data}' is not null`,
    [organizationId, eventId],
  );
}

// Partitions

/**
 * Partition DDL waits at most this long for its lock: an export streaming for minutes must not
 * hold new submissions back behind a waiting ALTER. The next maintenance run tries again, long
 * before the months ahead run out.
 */
const DDL_LOCK_TIMEOUT = '2s';

async function withDdlLock<T>(em: Em, run: (tx: Em) => Promise<T>): Promise<T> {
  return em.transactional(async (tx) => {
    await tx.execute(`set local lock_timeout = '${DDL_LOCK_TIMEOUT}'`);
    return run(tx);
  });
}

/** Creates the monthly partitions from `now`'s month to `monthsAhead` months later that do not exist yet; names them. */
export async function createSubmissionPartitions(em: Em, now: Date, monthsAhead: number): Promise<string[]> {
  return withDdlLock(em, async (tx) => {
    const rows = await tx.execute(
      `select ensure_submission_partitions(?::timestamptz, ?::timestamptz + make_interval(months => ?)) as name`,
      [now.toISOString(), now.toISOString(), monthsAhead],
    );
    return rows.map((r: any) => r.name as string);
  });
}

/** Drops every monthly partition that ended before `cutoff`, after `beforeDrop` in the same transaction; names them. */
export async function dropSubmissionPartitionsBefore(em: Em, cutoff: Date, beforeDrop?: (tx: Em) => Promise<unknown>): Promise<string[]> {
  return withDdlLock(em, async (tx) => {
    await beforeDrop?.(tx);
    const rows = await tx.execute('select drop_submission_partitions_before(?::timestamptz) as name',
      [cutoff.toISOString()]);
    return rows.map((r: any) => r.name as string);
  });
}

// The fan-out of outbox rows (fanout.ts): new submissions get theirs in STORE_SUBMISSIONS_SQL

/** A submission with what its fan-out needs (findSubmissionForFanout). */
export interface FanoutSourceRow {
  id: string;
  organization_id: string;
  form_id: string;
  data: Record<string, unknown>;
  submitter_email: string | null;
  submitter_name: string | null;
  created_at: Date | string;
  title: string;
  settings: Record<string, any>;
  fields: Array<{ id: string; label: string }>;
  webhook_ids: string[];
}

/** The submission, its form, the form's field labels and the matching enabled webhooks, in one round trip. */
export async function findSubmissionForFanout(tx: Em, submissionId: string): Promise<FanoutSourceRow | undefined> {
  const [row] = await tx.execute<FanoutSourceRow[]>(
    `select s.id, s.organization_id, s.form_id, s.data, s.submitter_email, s.submitter_name, s.created_at, f.title, f.settings,
            coalesce((select json_agg(json_build_object('id', ff.field_id, 'label', ff.label) order by ff.position, ff.pk)
                        from form_fields ff where ff.form_id = s.form_id), '[]') as fields,
            coalesce((select json_agg(w.id order by w.id) from webhooks w
                       where ${webhookListensSql('w', 's.organization_id', 's.form_id', '?::jsonb')}), '[]') as webhook_ids
       from submissions s join forms f on f.id = s.form_id
      where s.id = ?`,
    [JSON.stringify([SUBMISSION_CREATED]), submissionId],
  );
  return row;
}

/**
 * One pending delivery row per webhook of an event (parameters: organization, event id, event type,
 * payload, `[{id, webhookId}]`); the (event, webhook) key makes a re-run insert nothing.
 */
const NEW_DELIVERIES = `new_deliveries as (
  insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, next_attempt_at)
  select x->>'id', x->>'webhookId', ?, ?, ?, ?, 'pending', now() from jsonb_array_elements(?::jsonb) x
  on conflict (event_id, webhook_id) do nothing
  returning id
)`;

/**
 * Inserts what is missing (the unique keys make a re-run insert nothing), marks the outbox row and
 * answers every pending delivery and sync: new ones through RETURNING, earlier ones from the tables
 * (a statement does not see its own inserts, so nothing is listed twice).
 */
const FANOUT_SQL = `
with ${NEW_DELIVERIES}, new_syncs as (
  insert into crm_syncs (id, organization_id, form_id, submission_id, integration_index, integration_id, provider, status, next_attempt_at)
  select x->>'id', ?, ?, ?, (x->>'index')::int, x->>'integrationId', x->>'provider', 'pending', now() from jsonb_array_elements(?::jsonb) x
  on conflict (submission_id, integration_id) do nothing
  returning id
), processed as (
  update outbox set processed_at = now() where id = ? and processed_at is null returning id
)
select 'delivery' as kind, id from new_deliveries
union all select 'delivery', id from webhook_deliveries where event_id = ? and status = 'pending'
union all select 'sync', id from new_syncs
union all select 'sync', id from crm_syncs where submission_id = ? and status = 'pending'`;

/**
 * Most forms have no webhook and no CRM integration: one statement decides that and marks the
 * outbox row processed, without opening a transaction. Anything to do, or already pending from an
 * earlier run, leaves the row for the full fan-out.
 */
const NOTHING_TO_FAN_OUT_SQL = `
update outbox set processed_at = now()
 where id = $1 and processed_at is null
   and exists (select 1 from submissions where id = $2)
   and not exists (
     select 1 from submissions s join forms f on f.id = s.form_id
      where s.id = $2 and (
        case when jsonb_typeof(f.settings->'integrations') = 'array'
             then jsonb_array_length(f.settings->'integrations') > 0 else false end
        or exists (select 1 from webhooks w
                    where ${webhookListensSql('w', 's.organization_id', 's.form_id', '$3::jsonb')})
        or exists (select 1 from webhook_deliveries d where d.event_id = $4 and d.status = 'pending')
        or exists (select 1 from crm_syncs c where c.submission_id = s.id and c.status = 'pending')))
returning id`;

/** True when NOTHING_TO_FAN_OUT_SQL found nothing to do and marked the outbox row processed. */
export async function markNothingToFanOut(em: Em, outboxId: string, submissionId: string, eventId: string): Promise<boolean> {
  const done = await preparedQuery(em, 'fanout_nothing_to_do', NOTHING_TO_FAN_OUT_SQL, [
    outboxId, submissionId, JSON.stringify([SUBMISSION_CREATED]), eventId,
  ]);
  return done.length > 0;
}

/** A delivery row to create: its id and its webhook. */
export interface NewDelivery { id: string; webhookId: string }

/** FANOUT_SQL for one submission: every pending delivery and sync, by kind. */
export async function insertSubmissionFanout(tx: Em, f: {
  organizationId: string; formId: string; submissionId: string; outboxId: string;
  event: { id: string }; deliveries: NewDelivery[]; syncs: unknown[];
}): Promise<Array<{ kind: 'delivery' | 'sync'; id: string }>> {
  return tx.execute(FANOUT_SQL, [
    f.organizationId, f.event.id, FORM_SUBMISSION_CREATED, JSON.stringify(f.event), JSON.stringify(f.deliveries),
    f.organizationId, f.formId, f.submissionId, JSON.stringify(f.syncs),
    f.outboxId, f.event.id, f.submissionId,
  ]);
}

/** A deletion's outbox row with the webhooks listening to `submission.deleted` of its form. */
export async function findDeletionForFanout(tx: Em, outboxId: string): Promise<{ payload: unknown; webhook_ids: string[] } | undefined> {
  const [row] = await tx.execute<Array<{ payload: unknown; webhook_ids: string[] }>>(
    `select o.payload,
            coalesce((select json_agg(w.id order by w.id) from webhooks w
                       where ${webhookListensSql('w', "o.payload->>'organizationId'", "o.payload->>'formId'", '?::jsonb')}), '[]') as webhook_ids
       from outbox o where o.id = ? and o.topic = ?`,
    [JSON.stringify([SUBMISSION_DELETED]), outboxId, SUBMISSION_DELETED_TOPIC],
  );
  return row;
}

/** The deletion event's delivery rows (fanOutDeletion), the outbox row marked, every pending delivery of the event. */
const DELETION_FANOUT_SQL = `
with ${NEW_DELIVERIES}, processed as (
  update outbox set processed_at = now() where id = ? and processed_at is null returning id
)
select id from new_deliveries
union all select id from webhook_deliveries where event_id = ? and status = 'pending'`;

/** DELETION_FANOUT_SQL: the ids of every pending delivery of the deletion event. */
export async function insertDeletionFanout(tx: Em, f: {
  organizationId: string; outboxId: string; event: { id: string }; deliveries: NewDelivery[];
}): Promise<string[]> {
  const rows = await tx.execute(DELETION_FANOUT_SQL, [
    f.organizationId, f.event.id, FORM_SUBMISSION_DELETED, JSON.stringify(f.event), JSON.stringify(f.deliveries),
    f.outboxId, f.event.id,
  ]);
  return rows.map((r: any) => r.id as string);
}
