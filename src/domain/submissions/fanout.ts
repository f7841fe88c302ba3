import type { Em } from '../../db/orm';
import { newId } from '../../lib/ids';
import { activeIntegrations } from '../crm/hubspot';
import { markOutboxProcessed } from '../outbox/store';
import {
  buildSubmissionDeletedEvent, buildSubmissionEvent, eventIdForSubmission, type LabelledField, type SubmissionSnapshot,
} from '../webhooks/events';
import type { CachedForm } from '../forms/form-cache';
import type { SubmissionDeletedFacts } from './deletion';
import {
  findDeletionForFanout, findSubmissionForFanout, insertDeletionFanout, insertSubmissionFanout, markNothingToFanOut,
} from './fanout-store';
import type { SubmissionFanout, SubmissionRow } from './storing-statement';

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
    submitterEmail: row.submitterEmail, submitterName: row.submitterName, formVersion: row.formVersion ?? null,
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
  const row = await findSubmissionForFanout(tx, submissionId);
  if (!row) return null;
  return {
    submission: {
      id: row.id, formId: row.form_id, createdAt: new Date(row.created_at), data: row.data,
      submitterEmail: row.submitter_email, submitterName: row.submitter_name, formVersion: row.form_version ?? null,
    },
    organizationId: row.organization_id, title: row.title, settings: row.settings, fields: row.fields, webhookIds: row.webhook_ids,
  };
}

/**
 * The fan-out of a `submission.created` outbox row. New submissions get theirs in their storing
 * statement (createdFanout) and write no such row; these are rows written before that, still
 * relayed. One transaction: a delivery row per matching webhook and a sync row per CRM integration, keyed
 * by (event, webhook) and (submission, integration) so that a re-run creates nothing new, and the
 * outbox row marked processed. The caller enqueues the returned ids after commit.
 */
export async function fanOutSubmission(em: Em, job: { submissionId: string; outboxId: string }): Promise<FanoutResult> {
  if (await markNothingToFanOut(em, job.outboxId, job.submissionId, eventIdForSubmission(job.submissionId))) {
    return { submissionFound: true, deliveryIds: [], syncIds: [] };
  }
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
    const rows = await insertSubmissionFanout(tx, {
      organizationId, formId: submission.formId, submissionId: submission.id, outboxId: job.outboxId, event, deliveries, syncs,
    });
    const idsOf = (kind: string) => rows.filter((r) => r.kind === kind).map((r) => r.id);
    return { submissionFound: true, deliveryIds: idsOf('delivery'), syncIds: idsOf('sync') };
  });
}

/**
 * The deletion's fan-out: one delivery row per enabled webhook of the organization subscribed to
 * `submission.deleted` for that form or all forms, keyed by (event, webhook) like the created
 * event's, so a re-run creates nothing new. The event is rebuilt from what the outbox row captured
 * at deletion time, identically on every run.
 */
export async function fanOutDeletion(em: Em, job: { submissionId: string; outboxId: string }): Promise<{ deliveryIds: string[] }> {
  return em.transactional(async (tx) => {
    const row = await findDeletionForFanout(tx, job.outboxId);
    if (!row) return { deliveryIds: [] };
    const facts = row.payload as SubmissionDeletedFacts;
    const event = buildSubmissionDeletedEvent(
      { id: facts.formId, title: facts.formTitle }, { id: facts.submissionId, formId: facts.formId }, new Date(facts.deletedAt),
    );
    const deliveries = (row.webhook_ids as string[]).map((webhookId) => ({ id: newId('dlv'), webhookId }));
    return { deliveryIds: await insertDeletionFanout(tx, { organizationId: facts.organizationId, outboxId: job.outboxId, event, deliveries }) };
  });
}
