import type { Em } from '../../db/orm';
import type { FileLinks } from '../files/links';
import { isSealedValue } from './sealed-values';
import type { Field } from '../forms/types';
import { eventIdForSubmission } from '../webhooks/events';
import { recordChangesSql } from './changes';
import { recordSubmissionDeleted } from './store';
import { FILES_OF_DELETED_SQL } from '../files/store';

export const REDACTED = 'Redacted';

export interface SubmissionRecord {
  id: string;
  formId: string;
  data: Record<string, unknown>;
  submitterEmail: string | null;
  submitterName: string | null;
  createdAt: Date;
}

export interface ListFilter {
  limit: number;
  offset: number;
  from: Date | null;
  /** Exclusive. */
  until: Date | null;
}

/** Sealed (sensitive) values are never shown by ordinary reads. */
export function redact(data: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(data).map(([k, v]) => [k, isSealedValue(v) ? REDACTED : v]));
}

/** Values as every read shows them: sensitive ones `Redacted`, files as `{name, type, size, url}` with a fresh link. */
export function shownValues(data: Record<string, unknown>, links: FileLinks): Record<string, unknown> {
  return links.presentValues(redact(data));
}

/** Keys by the field's current label; a deleted field keeps its id; a repeated label gets its id appended. */
export function keyByLabel(data: Record<string, unknown>, fields: Field[]): Record<string, unknown> {
  const labels = new Map(fields.map((f) => [f.id, f.label]));
  const out: Record<string, unknown> = {};
  for (const [id, value] of Object.entries(data)) {
    const label = labels.get(id) || id;
    out[label in out ? `${label} (${id})` : label] = value;
  }
  return out;
}

function toRecord(row: any): SubmissionRecord {
  return {
    id: row.id, formId: row.form_id, data: row.data, submitterEmail: row.submitter_email,
    submitterName: row.submitter_name, createdAt: new Date(row.created_at),
  };
}

export async function listSubmissions(em: Em, organizationId: string, formId: string, filter: ListFilter)
  : Promise<{ items: SubmissionRecord[]; total: number }> {
  const where = ['organization_id = ?', 'form_id = ?'];
  const params: unknown[] = [organizationId, formId];
  if (filter.from) { where.push('created_at >= ?'); params.push(filter.from.toISOString()); }
  if (filter.until) { where.push('created_at < ?'); params.push(filter.until.toISOString()); }
  const conn = em.getConnection();
  const [rows, [count]] = await Promise.all([
    conn.execute(
      `select id, form_id, data, submitter_email, submitter_name, created_at from submissions
        where ${where.join(' and ')} order by created_at desc, id desc limit ? offset ?`,
      [...params, filter.limit, filter.offset],
    ),
    conn.execute(`select count(*)::int as total from submissions where ${where.join(' and ')}`, params),
  ]);
  return { items: rows.map(toRecord), total: count.total };
}

export async function findSubmission(em: Em, organizationId: string, submissionId: string)
  : Promise<(SubmissionRecord & { formTitle: string }) | null> {
  const [row] = await em.getConnection().execute(
    `select s.id, s.form_id, s.data, s.submitter_email, s.submitter_name, s.created_at, f.title as form_title
       from submissions s join forms f on f.id = s.form_id
      where s.id = ? and s.organization_id = ?`,
    [submissionId, organizationId],
  );
  return row ? { ...toRecord(row), formTitle: row.form_title } : null;
}

/** The change feed's record of a deletion, written in the deleting statement itself. */
const DELETED_CHANGE_SQL = recordChangesSql('deleted_change', 'submission.deleted',
  'select g.organization_id, g.form_id, g.id as submission_id, now() as occurred_at, 0 as seq from gone g');

/**
 * Deletes one submission of an organization; answers its id, form and form title (no row: nothing
 * deleted). Its files go `deleting` in the same statement; the deletion job deletes their bytes.
 */
export const DELETE_SUBMISSION_SQL = `
with gone as (
  delete from submissions where id = ? and organization_id = ? returning id, organization_id, form_id
), ${DELETED_CHANGE_SQL}, ${FILES_OF_DELETED_SQL}
select gone.id, gone.form_id, f.title as form_title from gone join forms f on f.id = gone.form_id`;

export interface DeletedSubmission {
  id: string;
  formId: string;
  /** The outbox row of the `submission.deleted` event, for the fan-out after commit. */
  outboxId: string;
}

/** Null when the organization has no such submission. */
export async function deleteSubmission(em: Em, organizationId: string, submissionId: string): Promise<DeletedSubmission | null> {
  return em.transactional(async (tx) => {
    const [gone] = await tx.execute(DELETE_SUBMISSION_SQL, [submissionId, organizationId]);
    if (!gone) return null;

    // The deletion event, in the same transaction: what it says must be read now, while the form row
    // and the submission's facts are at hand.
    const outboxId = await recordSubmissionDeleted(tx, {
      organizationId, submissionId: gone.id, formId: gone.form_id, formTitle: gone.form_title, deletedAt: new Date(),
    });
    await scrubEndedDeliveries(tx, organizationId, gone.id);
    return { id: gone.id, formId: gone.form_id, outboxId };
  });
}

/**
 * The submission's values leave the stored payloads of its deliveries that have ended (succeeded
 * or failed); pending ones keep theirs, as they are still owed to the receiver.
 */
async function scrubEndedDeliveries(tx: Em, organizationId: string, submissionId: string): Promise<void> {
  await tx.execute(
    `update webhook_deliveries
        set payload = jsonb_set(jsonb_set(jsonb_set(jsonb_set(payload::jsonb,
              '{data,submission,data}', '{}'), '{data,submission,rawData}', '{}'),
              '{data,submission,submitterEmail}', 'null'), '{data,submission,submitterName}', 'null')::text,
            updated_at = updated_at
      where organization_id = ? and event_id = ? and status <> 'pending'
        and payload::jsonb #> '{data,submission,data}' is not null`,
    [organizationId, eventIdForSubmission(submissionId)],
  );
}
