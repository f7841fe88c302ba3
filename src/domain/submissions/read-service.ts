import type { Em } from '../../db/orm';
import { eventIdForSubmission } from '../webhooks/events';
import type { ListFilter } from './list-filter';
import { findSubmissionRow, listSubmissionRows } from './read-store';
import { deleteSubmissionRow, recordSubmissionDeleted, scrubEndedDeliveries } from './deletion';

export interface SubmissionRecord {
  id: string;
  formId: string;
  data: Record<string, unknown>;
  submitterEmail: string | null;
  submitterName: string | null;
  createdAt: Date;
}

function toRecord(row: any): SubmissionRecord {
  return {
    id: row.id, formId: row.form_id, data: row.data, submitterEmail: row.submitter_email,
    submitterName: row.submitter_name, createdAt: new Date(row.created_at),
  };
}

export async function listSubmissions(em: Em, organizationId: string, formId: string, filter: ListFilter)
  : Promise<{ items: SubmissionRecord[]; total: number }> {
  const { rows, total } = await listSubmissionRows(em, organizationId, formId, filter);
  return { items: rows.map(toRecord), total };
}

export async function findSubmission(em: Em, organizationId: string, submissionId: string)
  : Promise<(SubmissionRecord & { formTitle: string }) | null> {
  const row = await findSubmissionRow(em, organizationId, submissionId);
  return row ? { ...toRecord(row), formTitle: row.form_title } : null;
}

export interface DeletedSubmission {
  id: string;
  formId: string;
  /** The outbox row of the `submission.deleted` event, for the fan-out after commit. */
  outboxId: string;
}

/** Null when the organization has no such submission. */
export async function deleteSubmission(em: Em, organizationId: string, submissionId: string): Promise<DeletedSubmission | null> {
  return em.transactional(async (tx) => {
    const gone = await deleteSubmissionRow(tx, organizationId, submissionId);
    if (!gone) return null;

    // The deletion event, in the same transaction: what it says must be read now, while the form row
    // and the submission's facts are at hand.
    const outboxId = await recordSubmissionDeleted(tx, {
      organizationId, submissionId: gone.id, formId: gone.form_id, formTitle: gone.form_title, deletedAt: new Date(),
    });
    await scrubEndedDeliveries(tx, organizationId, eventIdForSubmission(gone.id));
    return { id: gone.id, formId: gone.form_id, outboxId };
  });
}
