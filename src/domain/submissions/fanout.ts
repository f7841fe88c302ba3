import type { Em } from '../../db/orm';
import { preparedQuery } from '../../db/prepared';
import { newId } from '../../lib/ids';
import { activeIntegrations } from '../crm/hubspot';
import { markOutboxProcessed } from '../outbox/store';
import {
  buildSubmissionDeletedEvent, buildSubmissionEvent, eventIdForSubmission, FORM_SUBMISSION_CREATED,
  FORM_SUBMISSION_DELETED, SUBMISSION_CREATED, SUBMISSION_DELETED, type LabelledField, type SubmissionSnapshot,
} from '../webhooks/events';
import { webhookListensSql } from '../webhooks/event-types';
import type { CachedForm } from '../forms/form-cache';
import { SUBMISSION_DELETED_TOPIC, type SubmissionDeletedFacts, type SubmissionFanout, type SubmissionRow } from './store';

/** A sync row (new id) per active CRM integration of a form's settings. */
function newSyncRows(settings: Record<string, any>) {
  return activeIntegrations(settings).map(({ index, integration }) => ({
    id: newId('crm'), index, integrationId: integration.id, provider: integration.type,
  }));
}

/**
 * What a new submission's storing statement writes for its listeners (INSERT_SUBMISSION_SQL): a
 * sync per active CRM integration of the form, and, when `webhooks` are expected, the event and a
 * delivery id for each. The statement proves `form` current, so its title, labels and settings are
 * the ones this fan-out would otherwise read; a row's sync ids are kept across retries.
 */
export function createdFanout(form: CachedForm, row: SubmissionRow, webhooks: number): SubmissionFanout {
  const syncs = row.fanout?.syncs ?? newSyncRows(form.settings);
  if (webhooks <= 0) return { event: null, deliveryIds: [], syncs };
  const event = buildSubmissionEvent({ id: form.id, title: form.title }, {
    id: row.id, formId: row.formId, createdAt: row.createdAt, data: row.data,
    submitterEmail: row.submitterEmail, submitterName: row.submitterName,
  }, form.structure.fields);
  return { event: { id: event.id, payload: JSON.stringify(event) }, deliveryIds: Array.from({ length: webhooks }, () => newId('dlv')), syncs };
}

export interface FanoutResult {
  submissionFound: boolean;
  /** Every delivery and sync of the submission still pending, including ones an earlier run created. */
  deliveryIds: string[];
  syncIds: string[];
}

interface Loaded {
  submission: SubmissionSnapshot;
  organizationId: string;
  title: string;
  settings: Record<string, any>;
  fields: LabelledField[];
  webhookIds: string[];
}

/** The submission, its form, the form's field labels and the matching enabled webhooks, in one round trip. */
async function load(tx: Em, submissionId: string): Promise<Loaded | null> {
  const [row] = await tx.execute(
    `select s.id, s.organization_id, s.form_id, s.data, s.submitter_email, s.submitter_name, s.created_at, f.title, f.settings,
            coalesce((select json_agg(json_build_object('id', ff.field_id, 'label', ff.label) order by ff.position, ff.pk)
                        from form_fields ff where ff.form_id = s.form_id), '[]') as fields,
            coalesce((select json_agg(w.id order by w.id) from webhooks w
                       where ${webhookListensSql('w', 's.organization_id', 's.form_id', '?::jsonb')}), '[]') as webhook_ids
       from submissions s join forms f on f.id = s.form_id
      where s.id = ?`,
    [JSON.stringify([SUBMISSION_CREATED]), submissionId],
  );
  if (!row) return null;
  return {
    submission: {
      id: row.id, formId: row.form_id, createdAt: new Date(row.created_at), data: row.data,
      submitterEmail: row.submitter_email, submitterName: row.submitter_name,
    },
    organizationId: row.organization_id, title: row.title, settings: row.settings, fields: row.fields, webhookIds: row.webhook_ids,
  };
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
const STORE_SQL = `
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
const NOTHING_TO_DO_SQL = `
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

/**
 * The fan-out of a `submission.created` outbox row. New submissions get theirs in their storing
 * statement (createdFanout) and write no such row; these are rows written before that, still
 * relayed. One transaction: a delivery row per matching webhook and a sync row per CRM integration, keyed
 * by (event, webhook) and (submission, integration) so that a re-run creates nothing new, and the
 * outbox row marked processed. The caller enqueues the returned ids after commit.
 */
export async function fanOutSubmission(em: Em, job: { submissionId: string; outboxId: string }): Promise<FanoutResult> {
  const done = await preparedQuery(em, 'fanout_nothing_to_do', NOTHING_TO_DO_SQL, [
    job.outboxId, job.submissionId, JSON.stringify([SUBMISSION_CREATED]), eventIdForSubmission(job.submissionId),
  ]);
  if (done.length) return { submissionFound: true, deliveryIds: [], syncIds: [] };
  return em.transactional(async (tx) => {
    const found = await load(tx, job.submissionId);
    if (!found) {
      await markOutboxProcessed(tx, job.outboxId);
      return { submissionFound: false, deliveryIds: [], syncIds: [] };
    }
    const { submission, organizationId } = found;
    const event = buildSubmissionEvent({ id: submission.formId, title: found.title }, submission, found.fields);
    const deliveries = found.webhookIds.map((webhookId) => ({ id: newId('dlv'), webhookId }));
    const syncs = newSyncRows(found.settings);
    const rows = await tx.execute(STORE_SQL, [
      organizationId, event.id, FORM_SUBMISSION_CREATED, JSON.stringify(event), JSON.stringify(deliveries),
      organizationId, submission.formId, submission.id, JSON.stringify(syncs),
      job.outboxId, event.id, submission.id,
    ]);
    const idsOf = (kind: string) => rows.filter((r: any) => r.kind === kind).map((r: any) => r.id as string);
    return { submissionFound: true, deliveryIds: idsOf('delivery'), syncIds: idsOf('sync') };
  });
}

/**
 * The deletion's fan-out: one delivery row per enabled webhook of the organization subscribed to
 * `submission.deleted` for that form or all forms, keyed by (event, webhook) like the created
 * event's, so a re-run creates nothing new. The event is rebuilt from what the outbox row captured
 * at deletion time, identically on every run.
 */
const DELETION_STORE_SQL = `
with ${NEW_DELIVERIES}, processed as (
  update outbox set processed_at = now() where id = ? and processed_at is null returning id
)
select id from new_deliveries
union all select id from webhook_deliveries where event_id = ? and status = 'pending'`;

export async function fanOutDeletion(em: Em, job: { submissionId: string; outboxId: string }): Promise<{ deliveryIds: string[] }> {
  return em.transactional(async (tx) => {
    const [row] = await tx.execute(
      `select o.payload,
              coalesce((select json_agg(w.id order by w.id) from webhooks w
                         where ${webhookListensSql('w', "o.payload->>'organizationId'", "o.payload->>'formId'", '?::jsonb')}), '[]') as webhook_ids
         from outbox o where o.id = ? and o.topic = ?`,
      [JSON.stringify([SUBMISSION_DELETED]), job.outboxId, SUBMISSION_DELETED_TOPIC],
    );
    if (!row) return { deliveryIds: [] };
    const facts = row.payload as SubmissionDeletedFacts;
    const event = buildSubmissionDeletedEvent(
      { id: facts.formId, title: facts.formTitle }, { id: facts.submissionId, formId: facts.formId }, new Date(facts.deletedAt),
    );
    const deliveries = (row.webhook_ids as string[]).map((webhookId) => ({ id: newId('dlv'), webhookId }));
    const rows = await tx.execute(DELETION_STORE_SQL, [
      facts.organizationId, event.id, FORM_SUBMISSION_DELETED, JSON.stringify(event), JSON.stringify(deliveries),
      job.outboxId, event.id,
    ]);
    return { deliveryIds: rows.map((r: any) => r.id as string) };
  });
}
