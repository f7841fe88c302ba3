import type { Em } from '../../db/orm';
import type { FeedPosition } from './changes';
import type { PageStart } from './day-windows';
import { idWindowParams, isOpenWindow, OPEN_WINDOW } from './partitions';

// The statements that read stored submissions: a page of the list (its counts are in
// day-counts.ts), one submission with its form's title, the change feed and the export's cursor.
// Statements that write them are in storing-statement.ts, deletion.ts, fanout-store.ts,
// partitions.ts, change-records.ts and day-counts.ts.

/** A submission's columns as reads return them. */
export interface SubmissionReadRow {
  id: string;
  form_id: string;
  data: Record<string, unknown>;
  submitter_email: string | null;
  submitter_name: string | null;
  language: string | null;
  created_at: Date | string;
  /** The form version it was validated against; null when not recorded (stored before versions). */
  form_version: number | null;
}

/**
 * A page of the form's submissions, newest first: `limit` rows from `start` (day-windows.ts) on,
 * none before `lower` (pageLowerBound: the start of the oldest day the page spans) nor after the
 * start's day: both statements name the months they touch. The start row is found first, by an
 * index-only walk over the window's index entries (without organization_id, which the form's index
 * lacks: the page's own scan filters by it), and the page read from it: the skipped rows cost an
 * index entry each, not a row. Walking from the newest, the walk may go on past the window's oldest
 * row down to `lower` (rows deleted since they were counted); from the oldest (or from a day mark,
 * `start.after`: the walk begins at the mark's row) it stays in the window, and finds no start then.
 */
export async function readSubmissionPage(em: Em, organizationId: string, formId: string,
  page: { lower: Date | null; start: PageStart; limit: number }): Promise<SubmissionReadRow[]> {
  const { start } = page;
  const lower = page.lower ? 'and created_at >= ?' : '';
  const lowerParam = page.lower ? [page.lower.toISOString()] : [];
  const after = start.fromOldest && start.after ? 'and (created_at, id) >= (?::timestamptz, ?)' : '';
  const afterParams = start.fromOldest && start.after ? [start.after.createdAt, start.after.id] : [];
  const startSql = start.fromOldest
    ? `select created_at, id from submissions where form_id = ? and created_at >= ? and created_at < ? ${after}
        order by created_at, id offset ? limit 1`
    : `select created_at, id from submissions where form_id = ? and created_at < ? ${lower}
        order by created_at desc, id desc offset ? limit 1`;
  const startParams = start.fromOldest
    ? [formId, start.from.toISOString(), start.until.toISOString(), ...afterParams, start.skip]
    : [formId, start.until.toISOString(), ...lowerParam, start.skip];
  return em.getConnection().execute<SubmissionReadRow[]>(
    `with start as materialized (${startSql})
     select id, form_id, data, submitter_email, submitter_name, language, created_at, form_version from submissions
      where organization_id = ? and form_id = ? and created_at < ? ${lower}
        and created_at <= (select created_at from start)
        and (created_at < (select created_at from start) or id <= (select id from start))
      order by created_at desc, id desc limit ?`,
    [...startParams, organizationId, formId, start.until.toISOString(), ...lowerParam, page.limit],
  );
}

/**
 * One submission of the organization, with its form's title. The statement names the id's month
 * (idWindowParams in partitions.ts); a miss there is read again over every month, for a row stored
 * before ids carried their time.
 */
export async function findSubmissionRow(em: Em, organizationId: string, submissionId: string)
  : Promise<(SubmissionReadRow & { form_title: string }) | undefined> {
  const window = idWindowParams(submissionId);
  return await findSubmissionRowIn(em, organizationId, submissionId, window)
    ?? (isOpenWindow(window) ? undefined : await findSubmissionRowIn(em, organizationId, submissionId, OPEN_WINDOW));
}

/**
 * A submission's values and submitter email (a CRM sync's attempt reads them), in the id's month
 * with the same fallback over every month on a miss as findSubmissionRow.
 */
export async function findSubmissionValues(em: Em, organizationId: string, submissionId: string)
  : Promise<{ data: Record<string, unknown>; submitter_email: string | null } | undefined> {
  const read = async (window: [string, string]) => (await em.getConnection().execute<Array<{ data: Record<string, unknown>; submitter_email: string | null }>>(
    `select data, submitter_email from submissions
      where id = ? and organization_id = ? and created_at >= ?::timestamptz and created_at < ?::timestamptz`,
    [submissionId, organizationId, ...window]))[0];
  const window = idWindowParams(submissionId);
  return await read(window) ?? (isOpenWindow(window) ? undefined : await read(OPEN_WINDOW));
}

/** FIND_SUBMISSION_SQL's parameters: id, organization, the window's from and until. */
export const FIND_SUBMISSION_SQL = `select s.id, s.form_id, s.data, s.submitter_email, s.submitter_name, s.language, s.created_at, s.form_version, f.title as form_title
       from submissions s join forms f on f.id = s.form_id
      where s.id = ? and s.organization_id = ? and s.created_at >= ?::timestamptz and s.created_at < ?::timestamptz`;

async function findSubmissionRowIn(em: Em, organizationId: string, submissionId: string, window: [string, string])
  : Promise<(SubmissionReadRow & { form_title: string }) | undefined> {
  const [row] = await em.getConnection().execute<Array<SubmissionReadRow & { form_title: string }>>(
    FIND_SUBMISSION_SQL, [submissionId, organizationId, ...window],
  );
  return row;
}

/** The organization's changes after `after` with their live submissions (readChanges in change-feed.ts says why by xid). */
export async function readChangeRows(em: Em, organizationId: string, opts: { after: FeedPosition; formId: string | null; limit: number })
  : Promise<any[]> {
  return em.getConnection().execute(
    `select c.xid::text as xid, c.position::text as position, c.type, c.submission_id, c.form_id, c.occurred_at,
            s.id as live_id, s.submitter_email, s.submitter_name, s.created_at, s.data, s.form_version
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
export function exportRowsQuery(organizationId: string, formId: string, bounds: { from: Date | null; until: Date | null; version?: number | null })
  : { text: string; values: unknown[] } {
  const where = ['organization_id = $1', 'form_id = $2'];
  const values: unknown[] = [organizationId, formId];
  if (bounds.version) { values.push(bounds.version); where.push(`form_version = $${values.length}`); }
  if (bounds.from) { values.push(bounds.from.toISOString()); where.push(`created_at >= $${values.length}`); }
  if (bounds.until) { values.push(bounds.until.toISOString()); where.push(`created_at < $${values.length}`); }
  return {
    text: `select id, data, submitter_email, submitter_name, created_at, form_version from submissions
        where ${where.join(' and ')} order by created_at, id`,
    values,
  };
}
