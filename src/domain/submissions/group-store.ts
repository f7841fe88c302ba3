import type { Orm } from '../../db/orm';
import { preparedQuery } from '../../db/prepared';
import type { Logger } from '../../lib/logger';
import { metrics } from '../../lib/metrics';
import { TickBatch } from '../../lib/tick-batch';
import { SUBMISSION_CREATED, webhookListensSql } from '../webhooks/event-types';
import { recordChangesSql } from './changes';
import {
  insertSubmission, newDeliveriesSql, newSyncsSql, organizationQuotaSql, OWN_SLOT_ORDER, PLAN_QUOTAS_JSON, refusedBeforeQuota,
  submissionItem, type InsertOutcome, type SubmissionRow,
} from './store';

/** The most submissions one statement stores; more go in further statements beside it. */
export const MAX_GROUP = 64;

/**
 * The single submissions of concurrent requests, stored together (group commit): those that reach
 * storing in the same turn of the event loop share one statement (STORE_SUBMISSIONS_SQL), so one
 * round trip, one transaction and one WAL flush, with each submission still decided on its own and
 * answered only once the statement committed.
 * A submission the group could not settle goes on alone through insertSubmission: the
 * quota counted none for it (the free slots held fewer, the month is unsplit or full), or it might
 * fail a unique key (a payment intent, an idempotency key not claimed beforehand), which would undo
 * its neighbours. If the group's statement fails for what one of them holds, each is tried alone,
 * so one cannot fail another.
 */
export class SubmissionWriter {
  private readonly batch = new TickBatch<SubmissionRow, Settled>((rows) => this.storeTogether(rows));

  constructor(private readonly orm: Orm, private readonly logger: Logger) {}

  async store(row: SubmissionRow): Promise<InsertOutcome> {
    if (!groupable(row)) return insertSubmission(this.orm, row);
    const settled = await this.batch.call(row);
    if ('error' in settled) throw settled.error;
    return settled.outcome;
  }

  /** Statements of at most MAX_GROUP rows each, run side by side. */
  private async storeTogether(rows: SubmissionRow[]): Promise<Settled[]> {
    const groups: Array<Promise<Array<Promise<Settled>>>> = [];
    for (let start = 0; start < rows.length; start += MAX_GROUP) {
      const group = rows.slice(start, start + MAX_GROUP);
      metrics.submissionGroupSize.observe(group.length);
      groups.push(group.length === 1 ? Promise.resolve([this.storeAlone(group[0])]) : this.storeGroup(group));
    }
    return Promise.all((await Promise.all(groups)).flat());
  }

  private async storeGroup(rows: SubmissionRow[]): Promise<Array<Promise<Settled>>> {
    let answers: GroupAnswer[];
    try {
      answers = await preparedQuery<GroupAnswer>(this.orm.em, 'store_submissions', STORE_SUBMISSIONS_SQL,
        [JSON.stringify(rows.map(groupItem)), PLAN_QUOTAS_JSON]);
    } catch (err) {
      // The database down, slow or out of connections fails them all alike: trying each alone would
      // only make every request wait that long again.
      if (!causedByAnItem(err)) return rows.map(() => Promise.resolve({ error: err }));
      this.logger.warn({ err: (err as Error).message, submissions: rows.length }, 'storing submissions together failed: storing each alone');
      return rows.map((row) => this.storeAlone(row));
    }
    return rows.map((row, i) => {
      const outcome = groupOutcome(row, answers[i]);
      return outcome ? Promise.resolve({ outcome }) : this.storeAlone(row);
    });
  }

  private storeAlone(row: SubmissionRow): Promise<Settled> {
    return insertSubmission(this.orm, row).then((outcome) => ({ outcome }), (error: unknown) => ({ error }));
  }
}

type Settled = { outcome: InsertOutcome } | { error: unknown };

interface GroupAnswer {
  seq: number;
  form_ok: number;
  idem_held: number;
  listeners_ok: number;
  webhooks: number;
  quota_ok: number;
}

/**
 * The group's statement ($1: the items, groupItem; $2: PLAN_QUOTAS_JSON), set-based so that its
 * set-up is paid once for the lot: one read per (organization, form, month) of the organization's
 * quota, the form and its webhooks; the claimed idempotency rows locked; then, per organization and
 * month, one quota slot with room, taken as store_submission takes one (its own slot first, SKIP
 * LOCKED: never waited for, so this cannot deadlock with another statement) and counted for as many
 * of the eligible items as it holds, in item order. Only counted items are stored, with their
 * deliveries, syncs, completed idempotency records and changes (in item order). It answers each
 * item's checks as store_submission answers them; an item not counted (the slot held fewer, or the
 * month's slots are unsplit or full) is stored alone by its caller.
 */
const STORE_SUBMISSIONS_SQL = `
with items as (
  select x.* from jsonb_to_recordset($1::jsonb) as x(seq int, org text, form text, form_updated timestamptz, month text,
         id text, data jsonb, email text, name text, source text, created timestamptz, idem_key text, idem_body jsonb,
         idem_token text, event_id text, event text, dlv_ids text[], syncs jsonb)
), groups as (
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
  select i.seq, i.org, i.month, g.quota, g.hooks, g.form_ok,
         (i.idem_token is null or exists (select from held h where h.seq = i.seq)) as idem_held,
         cardinality(g.hooks) <= case when i.event is null then 0 else coalesce(cardinality(i.dlv_ids), 0) end as listeners_ok
    from items i join groups g using (org, form, form_updated, month)
), wanted as (
  select d.org, d.month, d.quota, count(*)::int as n from decided d
   where d.form_ok and d.idem_held and d.listeners_ok
   group by d.org, d.month, d.quota
), slot as materialized (
  select w.org, w.month, s.slot, least(w.n, s.room) as take
    from wanted w cross join lateral (
      select s.slot, s.allowance - s.used as room from usage_counter_slots s
       where s.organization_id = w.org and s.month = w.month and s.used < s.allowance and s.split_quota = w.quota
       order by ${OWN_SLOT_ORDER}
       limit 1
         for update of s skip locked) s
), counted as (
  update usage_counter_slots u set used = u.used + slot.take
    from slot
   where u.organization_id = slot.org and u.month = slot.month and u.slot = slot.slot
  returning slot.org, slot.month, slot.take
), stored as (
  select e.seq, e.hooks from (
    select d.*, row_number() over (partition by d.org, d.month order by d.seq) as k
      from decided d where d.form_ok and d.idem_held and d.listeners_ok) e
    join counted c on c.org = e.org and c.month = e.month
   where e.k <= c.take
), sub as (
  insert into submissions (id, organization_id, form_id, data, submitter_email, submitter_name, source, created_at)
  select i.id, i.org, i.form, i.data, i.email, i.name, i.source, i.created from items i join stored s using (seq)
  returning 1
), idem as (
  update idempotency_keys k set response_status = 201, response_body = i.idem_body, claim_token = null, lease_expires_at = null
    from items i join stored s using (seq)
   where i.idem_token is not null and k.organization_id = i.org and k.key = i.idem_key
  returning 1
), ${newDeliveriesSql('delivery', `select i.dlv_ids[h.n] as id, h.id as webhook_id, i.org as organization_id, i.event_id,
         i.event as payload, i.seq, h.n
    from items i join stored s using (seq), unnest(s.hooks) with ordinality as h(id, n)`)
}, ${newSyncsSql('sync', `select c as sync, i.org as organization_id, i.form as form_id, i.id as submission_id, i.seq
    from items i join stored s using (seq), jsonb_array_elements(coalesce(i.syncs, '[]')) c`)
}, ${recordChangesSql('created_change', 'submission.created',
  'select i.org as organization_id, i.form as form_id, i.id as submission_id, i.created as occurred_at, i.seq from items i join stored s using (seq)')}
select d.seq, d.form_ok::int as form_ok, d.idem_held::int as idem_held, d.listeners_ok::int as listeners_ok,
       cardinality(d.hooks) as webhooks, (exists (select from stored s where s.seq = d.seq))::int as quota_ok
  from decided d
 order by d.seq`;

/**
 * Whether an error of the group's statement may come from one of its rows (a unique or other
 * integrity violation, a value PostgreSQL refuses), so that the others could be stored without it.
 */
export function causedByAnItem(err: unknown): boolean {
  const code = String((err as { code?: unknown })?.code ?? '');
  return code.startsWith('23') || code.startsWith('22');
}

/** Whether a row can share a statement: nothing in it can fail a unique key and undo the others. */
export function groupable(row: SubmissionRow): boolean {
  return row.paymentIntentId === null && (row.idempotency === null || !!row.idempotency.claimToken);
}

/** submissionItem with what a group's rows do not share: their organization, form, month, source and claim. */
function groupItem(row: SubmissionRow, seq: number) {
  return {
    ...submissionItem(row, seq), org: row.organizationId, form: row.formId, form_updated: row.formUpdatedAt.toISOString(),
    month: row.month, source: row.source, idem_token: row.idempotency?.claimToken ?? null,
  };
}

/**
 * What the group decided for a row, as insertSubmission would answer it; null when the quota
 * counted it not: the row is then stored alone, which splits or waits for the slots before refusing.
 */
export function groupOutcome(row: SubmissionRow, answer: GroupAnswer): InsertOutcome | null {
  const refused = refusedBeforeQuota(answer);
  if (refused) return refused;
  if (!answer.quota_ok) return null;
  return {
    kind: 'created',
    deliveryIds: (row.fanout?.deliveryIds ?? []).slice(0, answer.webhooks),
    syncIds: (row.fanout?.syncs ?? []).map((sync) => sync.id),
    webhooks: answer.webhooks,
  };
}
