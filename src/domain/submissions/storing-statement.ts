import { FORM_SUBMISSION_CREATED, SUBMISSION_CREATED, webhookListensSql } from '../webhooks/event-types';
import { owedOfNewDeliveriesSql } from '../webhooks/store';
import { recordChangesSql } from './change-records';
import { countDaysSql } from './day-counts';
import type { SubmissionSource } from './entities';
import { OWN_SLOT_ORDER, organizationQuotaSql, PLAN_QUOTAS_JSON } from './quota-slots';

/**
 * The one statement that stores 1..N submissions of any organizations and forms
 * (STORE_SUBMISSIONS_SQL), the row it takes (SubmissionRow), the values it runs with and what it
 * answers for each item (itemOutcome). Each item is decided on its own, in the order clients see
 * the checks (form unchanged → idempotency claim held → listeners known → quota → claims), and no
 * item can undo another. The loop that settles what one run could not and the group commit of
 * concurrent requests are in submission-writer.ts; the quota's slots in quota-slots.ts.
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
  /**
   * The version of the form it was validated against (the cached form's, which the statement's
   * `updated_at` check proves current: a replacement changes both); absent or null: not recorded.
   */
  formVersion?: number | null;
  month: string;
  data: Record<string, unknown>;
  submitterEmail: string | null;
  submitterName: string | null;
  source: SubmissionSource;
  /** The hosted page's language (public submissions); null or absent for API submissions. */
  language?: string | null;
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
export const CLAIMS_SPLIT = 'claims split';

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
  select x.* from jsonb_to_recordset($1::jsonb) as x(seq int, org text, form text, form_updated timestamptz, form_version int, month text,
         id text, data jsonb, email text, name text, source text, language text, created timestamptz,
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
  insert into submissions (id, organization_id, form_id, form_version, data, submitter_email, submitter_name, source, language, created_at)
  select i.id, i.org, i.form, i.form_version, i.data, i.email, i.name, i.source, i.language, i.created from items i join stored s using (seq)
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
  returning id, organization_id, webhook_id, next_attempt_at
), delivery_owed as (
  ${owedOfNewDeliveriesSql('delivery')}
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
 * The ISO form of a form's `updated_at`, converted once per cached form rather than once per item:
 * every submission to a form carries the same Date (its cached form's), and Date#toISOString is
 * among the dearer steps of building an item. Such a Date is never changed in place.
 */
const formTimeIso = new WeakMap<Date, string>();
function isoOfFormTime(at: Date): string {
  let iso = formTimeIso.get(at);
  if (iso === undefined) formTimeIso.set(at, (iso = at.toISOString()));
  return iso;
}

/**
 * A row as an item of the storing statement (jsonb_to_recordset reads the columns it names);
 * `jobGroup`: the job its deliveries share (CreatedFanout.jobGroup). A column without a value is
 * left out (undefined, which JSON.stringify drops) rather than sent as null: jsonb_to_recordset
 * reads a missing key as null, and half of a plain submission's columns have none, which were half
 * of the item's text to write and for PostgreSQL to parse.
 */
export function storingItem(row: SubmissionRow, seq: number, jobGroup: string | null = null) {
  return {
    seq, org: row.organizationId, form: row.formId, form_updated: isoOfFormTime(row.formUpdatedAt), form_version: row.formVersion ?? undefined,
    month: row.month,
    id: row.id, data: row.data, email: row.submitterEmail ?? undefined, name: row.submitterName ?? undefined, source: row.source,
    language: row.language ?? undefined,
    created: row.createdAt.toISOString(),
    idem_key: row.idempotency?.key, idem_hash: row.idempotency?.requestHash,
    idem_body: row.idempotency?.responseBody ?? undefined, idem_token: row.idempotency?.claimToken ?? undefined,
    event_id: row.fanout?.event?.id, event: row.fanout?.event?.payload, dlv_ids: row.fanout?.deliveryIds,
    syncs: row.fanout?.syncs.length ? row.fanout.syncs : undefined,
    job_group: row.fanout?.deliveryIds.length ? jobGroup ?? undefined : undefined,
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
