import type { Em } from '../../db/orm';
import type { FeedPosition } from './changes';
import type { ListFilter } from './list-filter';

// The statements that read stored submissions: the list and its count, one submission with its
// form's title, the change feed and the export's cursor. Statements that write them are in
// storing-statement.ts, deletion.ts, fanout-store.ts, partitions.ts and change-records.ts.

/** A submission's columns as reads return them. */
export interface SubmissionReadRow {
  id: string;
  form_id: string;
  data: Record<string, unknown>;
  submitter_email: string | null;
  submitter_name: string | null;
  created_at: Date | string;
}

/** A page of the form's submissions, newest first, and how many there are in all. */
export async function listSubmissionRows(em: Em, organizationId: string, formId: string, filter: ListFilter)
  : Promise<{ rows: SubmissionReadRow[]; total: number }> {
  const where = ['organization_id = ?', 'form_id = ?'];
  const params: unknown[] = [organizationId, formId];
  if (filter.from) { where.push('created_at >= ?'); params.push(filter.from.toISOString()); }
  if (filter.until) { where.push('created_at < ?'); params.push(filter.until.toISOString()); }
  const conn = em.getConnection();
  const [rows, [count]] = await Promise.all([
    conn.execute<SubmissionReadRow[]>(
      `select id, form_id, data, submitter_email, submitter_name, created_at from submissions
        where ${where.join(' and ')} order by created_at desc, id desc limit ? offset ?`,
      [...params, filter.limit, filter.offset],
    ),
    conn.execute(`select count(*)::int as total from submissions where ${where.join(' and ')}`, params),
  ]);
  return { rows, total: count.total };
}

/** One submission of the organization, with its form's title. */
export async function findSubmissionRow(em: Em, organizationId: string, submissionId: string)
  : Promise<(SubmissionReadRow & { form_title: string }) | undefined> {
  const [row] = await em.getConnection().execute<Array<SubmissionReadRow & { form_title: string }>>(
    `select s.id, s.form_id, s.data, s.submitter_email, s.submitter_name, s.created_at, f.title as form_title
       from submissions s join forms f on f.id = s.form_id
      where s.id = ? and s.organization_id = ?`,
    [submissionId, organizationId],
  );
  return row;
}

/** The organization's changes after `after` with their live submissions (readChanges in change-feed.ts says why by xid). */
export async function readChangeRows(em: Em, organizationId: string, opts: { after: FeedPosition; formId: string | null; limit: number })
  : Promise<any[]> {
  return em.getConnection().execute(
    `select c.xid::text as xid, c.position::text as position, c.type, c.submission_id, c.form_id, c.occurred_at,
            s.id as live_id, s.submitter_email, s.submitter_name, s.created_at, s.data
       from submission_changes c
       left join submissions s
         on c.type = 'submission.created' and s.id = c.submission_id and s.organization_id = c.organization_id
      where c.organization_id = ? ${opts.formId ? 'and c.form_id = ?' : ''}
        and (c.xid, c.position) > (?::xid8, ?::bigint) and c.xid < pg_snapshot_xmin(pg_current_snapshot())
      order by c.xid, c.position
      limit ?`,
    [organizationId, ...(opts.formId ? [opts.formId] : []), opts.after.xid, opts.after.position, opts.limit + 1],
  );
}

/** Opens the export's read-only transaction on its own connection, with its statement limit. */
export function beginExportSql(statementTimeoutMs: number): string {
  return `begin read only; set local statement_timeout = ${statementTimeoutMs}`;
}

/** The export's cursor: the form's submissions in the bounds, oldest first (positional parameters). */
export function exportRowsQuery(organizationId: string, formId: string, bounds: { from: Date | null; until: Date | null })
  : { text: string; values: unknown[] } {
  const where = ['organization_id = $1', 'form_id = $2'];
  const values: unknown[] = [organizationId, formId];
  if (bounds.from) { values.push(bounds.from.toISOString()); where.push(`created_at >= $${values.length}`); }
  if (bounds.until) { values.push(bounds.until.toISOString()); where.push(`created_at < $${values.length}`); }
  return {
    text: `select id, data, submitter_email, submitter_name, created_at from submissions
        where ${where.join(' and ')} order by created_at, id`,
    values,
  };
}
