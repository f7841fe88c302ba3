import type { Em } from '../../db/orm';
import type { ChangeType } from './changes';
import { redact } from './read-service';

export interface SubmissionSummary {
  id: string;
  submitterEmail: string | null;
  submitterName: string | null;
  createdAt: string;
  data: Record<string, unknown>;
}

export interface Change {
  position: string;
  type: ChangeType;
  submissionId: string;
  formId: string;
  occurredAt: string;
  /** Null for a deletion and for a creation whose submission has been deleted since. */
  submission: SubmissionSummary | null;
}

/** The organization's changes after `after`, in position (commit) order; `limit + 1` tells whether more follow. */
export async function readChanges(em: Em, organizationId: string, opts: { after: string; formId: string | null; limit: number })
  : Promise<{ changes: Change[]; hasMore: boolean }> {
  const rows = await em.getConnection().execute(
    `select c.position::text as position, c.type, c.submission_id, c.form_id, c.occurred_at,
            s.id as live_id, s.submitter_email, s.submitter_name, s.created_at, s.data
       from submission_changes c
       left join submissions s
         on c.type = 'submission.created' and s.id = c.submission_id and s.organization_id = c.organization_id
      where c.organization_id = ? and c.position > ?::bigint ${opts.formId ? 'and c.form_id = ?' : ''}
      order by c.position
      limit ?`,
    [organizationId, opts.after, ...(opts.formId ? [opts.formId] : []), opts.limit + 1],
  );
  const changes = rows.slice(0, opts.limit).map((row: any): Change => ({
    position: row.position,
    type: row.type,
    submissionId: row.submission_id,
    formId: row.form_id,
    occurredAt: new Date(row.occurred_at).toISOString(),
    submission: row.live_id
      ? {
        id: row.live_id, submitterEmail: row.submitter_email, submitterName: row.submitter_name,
        createdAt: new Date(row.created_at).toISOString(), data: redact(row.data),
      }
      : null,
  }));
  return { changes, hasMore: rows.length > opts.limit };
}
