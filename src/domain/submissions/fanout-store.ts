import type { Em } from '../../db/orm';
import { preparedQuery } from '../../db/prepared';
import { idWindowParams, isOpenWindow, OPEN_WINDOW } from './partitions';
import { owedOfNewDeliveriesSql } from '../webhooks/store';
import {
  FORM_SUBMISSION_CREATED, FORM_SUBMISSION_DELETED, SUBMISSION_CREATED, SUBMISSION_DELETED, webhookListensSql,
} from '../webhooks/event-types';

/**
 * The outbox rows of submissions (their topics) and the statements of their fan-out (fanout.ts):
 * new submissions get theirs in STORE_SUBMISSIONS_SQL (storing-statement.ts).
 */

export const SUBMISSION_CREATED_TOPIC = 'submission.created';
export const SUBMISSION_DELETED_TOPIC = 'submission.deleted';

/** A submission with what its fan-out needs (findSubmissionForFanout). */
export interface FanoutSourceRow {
  id: string;
  organization_id: string;
  form_id: string;
  data: Record<string, unknown>;
  submitter_email: string | null;
  submitter_name: string | null;
  created_at: Date | string;
  form_version: number | null;
  title: string;
  settings: Record<string, any>;
  fields: Array<{ id: string; label: string }>;
  webhook_ids: string[];
}

/** The submission, its form, the form's field labels and the matching enabled webhooks, in one round trip. */
export async function findSubmissionForFanout(tx: Em, submissionId: string): Promise<FanoutSourceRow | undefined> {
  const window = idWindowParams(submissionId);
  return await findForFanoutIn(tx, submissionId, window)
    ?? (isOpenWindow(window) ? undefined : await findForFanoutIn(tx, submissionId, OPEN_WINDOW));
}

/** findSubmissionForFanout within a `created_at` window (idWindowParams in partitions.ts names the id's month). */
async function findForFanoutIn(tx: Em, submissionId: string, window: [string, string]): Promise<FanoutSourceRow | undefined> {
  const [row] = await tx.execute<FanoutSourceRow[]>(
    `select s.id, s.organization_id, s.form_id, s.data, s.submitter_email, s.submitter_name, s.created_at, s.form_version, f.title, f.settings,
            coalesce((select json_agg(json_build_object('id', ff.field_id, 'label', ff.label) order by ff.position, ff.pk)
                        from form_fields ff where ff.form_id = s.form_id), '[]') as fields,
            coalesce((select json_agg(w.id order by w.id) from webhooks w
                       where ${webhookListensSql('w', 's.organization_id', 's.form_id', '?::jsonb')}), '[]') as webhook_ids
       from submissions s join forms f on f.id = s.form_id
      where s.id = ? and s.created_at >= ?::timestamptz and s.created_at < ?::timestamptz`,
    [JSON.stringify([SUBMISSION_CREATED]), submissionId, ...window],
  );
  return row;
}

/**
 * One pending delivery row per webhook of an event (parameters: organization, event id, event type,
 * payload, `[{id, webhookId}]`), with its owed row; the (event, webhook) key makes a re-run insert nothing.
 */
const NEW_DELIVERIES = `new_deliveries as (
  insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, next_attempt_at)
  select x->>'id', x->>'webhookId', ?, ?, ?, ?, 'pending', now() from jsonb_array_elements(?::jsonb) x
  on conflict (event_id, webhook_id) do nothing
  returning id, organization_id, webhook_id, next_attempt_at
), new_owed as (
  ${owedOfNewDeliveriesSql('new_deliveries')}
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
 * earlier run, leaves the row for the full fan-out. $5 and $6 name the submission's month
 * (idWindowParams): a row the window misses (stored before ids carried their time) goes to the full
 * fan-out too, whose read looks over every month.
 */
const NOTHING_TO_FAN_OUT_SQL = `
update outbox set processed_at = now()
 where id = $1 and processed_at is null
   and exists (select 1 from submissions where id = $2 and created_at >= $5::timestamptz and created_at < $6::timestamptz)
   and not exists (
     select 1 from submissions s join forms f on f.id = s.form_id
      where s.id = $2 and s.created_at >= $5::timestamptz and s.created_at < $6::timestamptz and (
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
    outboxId, submissionId, JSON.stringify([SUBMISSION_CREATED]), eventId, ...idWindowParams(submissionId),
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
