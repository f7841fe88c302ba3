import type { Em } from '../../db/orm';
import type { ChangeType } from './change-records';
import type { FeedPosition } from './changes';
import type { FileLinks } from '../files/links';
import { readChangeRows } from './read-store';
import { shownValues } from './shown-values';

export interface SubmissionSummary {
  id: string;
  submitterEmail: string | null;
  submitterName: string | null;
  createdAt: string;
  formVersion: number | null;
  data: Record<string, unknown>;
}

export interface Change {
  at: FeedPosition;
  type: ChangeType;
  submissionId: string;
  formId: string;
  occurredAt: string;
  /** Null for a deletion and for a creation whose submission has been deleted since. */
  submission: SubmissionSummary | null;
}

/**
 * The organization's changes after `after`, in (transaction id, position) order; `limit + 1` tells
 * whether more follow.
 *
 * Why transaction ids: a change may commit after one with a higher position, so a reader that
 * returned every committed change could move its cursor past a place where a change still appears.
 * Writers take no lock to commit in position order (that would serialize an organization's
 * submissions); instead each change keeps its writer's transaction id, and a reader returns only
 * the changes of transactions below its snapshot's xmin, the oldest transaction still running:
 * every transaction with a lower id has ended, so no change can ever appear at or below a returned
 * one. The feed is complete and exactly-once. Its order is commit order for transactions that do
 * not overlap (one commits before the other is given its id, at its first write); of two that do,
 * the one given its id first is listed first even when it commits later, and nothing of the later
 * one is listed before the earlier one ends. A long-open transaction that wrote anything (in any
 * database of the cluster: ids are cluster-wide) holds the feed back, not listing newer changes,
 * until it ends. On a hot standby the snapshot comes from the primary's WAL, so the same holds.
 */
export async function readChanges(
  em: Em, organizationId: string, opts: { after: FeedPosition; formId: string | null; limit: number }, links: FileLinks,
)
  : Promise<{ changes: Change[]; hasMore: boolean }> {
  const rows = await readChangeRows(em, organizationId, opts);
  const changes = rows.slice(0, opts.limit).map((row: any): Change => ({
    at: { xid: row.xid, position: row.position },
    type: row.type,
    submissionId: row.submission_id,
    formId: row.form_id,
    occurredAt: new Date(row.occurred_at).toISOString(),
    submission: row.live_id
      ? {
        id: row.live_id, submitterEmail: row.submitter_email, submitterName: row.submitter_name,
        createdAt: new Date(row.created_at).toISOString(), formVersion: row.form_version ?? null, data: shownValues(row.data, links),
      }
      : null,
  }));
  return { changes, hasMore: rows.length > opts.limit };
}
