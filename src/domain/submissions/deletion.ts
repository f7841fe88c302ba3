import type { Em } from '../../db/orm';
import { FILES_OF_DELETED_SQL } from '../files/store';
import { recordChangesSql } from './change-records';
import { countDaysSql } from './day-counts';
import { exactTimeSql } from './day-marks';
import { SUBMISSION_DELETED_TOPIC } from './fanout-store';
import { idWindowParams, isOpenWindow, OPEN_WINDOW } from './partitions';

/**
 * Deleting a submission: its row (with its change record, its day's count and its files), the
 * deletion's outbox row, the scrub of its ended deliveries; and the rows a storing statement left
 * behind a form or organization deleted by hand (deleteRowsOfDeletedParents).
 */

/** What the deletion event needs, captured while the submission and its form are still there. */
export interface SubmissionDeletedFacts {
  organizationId: string;
  submissionId: string;
  formId: string;
  formTitle: string;
  /** ISO date-time once stored. */
  deletedAt: Date | string;
}

/** The outbox row of a deletion, written inside the deleting transaction; returns its id. */
export async function recordSubmissionDeleted(tx: Em, facts: SubmissionDeletedFacts): Promise<string> {
  const [row] = await tx.execute(
    'insert into outbox (topic, payload) values (?, ?::jsonb) returning id::text as id',
    [SUBMISSION_DELETED_TOPIC, JSON.stringify({ ...facts, deletedAt: new Date(facts.deletedAt).toISOString() })],
  );
  return row.id;
}

/** The change feed's record of a deletion, written in the deleting statement itself. */
const DELETED_CHANGE_SQL = recordChangesSql('deleted_change', 'submission.deleted',
  'select g.organization_id, g.form_id, g.id as submission_id, now() as occurred_at, 0 as seq from gone g');

/**
 * Deletes one submission of an organization; answers its id, form and form title (no row: nothing
 * deleted). Its day's count goes down and its files go `deleting` in the same statement; the
 * deletion job deletes their bytes. Parameters: id, organization, and the `created_at` window the
 * row lies in (idWindowParams in partitions.ts), so the statement touches that month only.
 */
export const DELETE_SUBMISSION_IN_WINDOW_SQL = `
with gone as (
  delete from submissions where id = ? and organization_id = ? and created_at >= ?::timestamptz and created_at < ?::timestamptz
  returning id, organization_id, form_id, created_at
), ${DELETED_CHANGE_SQL}, ${countDaysSql('day_uncounted', 'select g.organization_id, g.form_id, g.created_at, -1 as delta from gone g')
}, ${FILES_OF_DELETED_SQL}
select gone.id, gone.form_id, gone.created_at, ${exactTimeSql('gone.created_at')} as exact_created_at, f.title as form_title
  from gone join forms f on f.id = gone.form_id`;

/** DELETE_SUBMISSION_IN_WINDOW_SQL over every month (parameters: id, organization). */
export const DELETE_SUBMISSION_SQL = DELETE_SUBMISSION_IN_WINDOW_SQL
  .replace('and created_at >= ?::timestamptz and created_at < ?::timestamptz', '');

/** The row DELETE_SUBMISSION_IN_WINDOW_SQL deleted; `exact_created_at` to the microsecond, its place in its day (DayPosition). */
export interface DeletedRow {
  id: string;
  form_id: string;
  form_title: string;
  created_at: Date | string;
  exact_created_at: string;
}

/**
 * Deletes the row of DELETE_SUBMISSION_IN_WINDOW_SQL in its id's month; undefined when the
 * organization has no such submission. A miss there looks again over every month, for a row stored
 * before ids carried their time (findSubmissionRow in read-store.ts does the same).
 */
export async function deleteSubmissionRow(tx: Em, organizationId: string, submissionId: string): Promise<DeletedRow | undefined> {
  const window = idWindowParams(submissionId);
  const run = async (w: [string, string]) => {
    const [gone] = await tx.execute<DeletedRow[]>(DELETE_SUBMISSION_IN_WINDOW_SQL, [submissionId, organizationId, ...w]);
    return gone;
  };
  return await run(window) ?? (isOpenWindow(window) ? undefined : await run(OPEN_WINDOW));
}

/**
 * The submission's values leave the stored payloads of its deliveries that have ended (succeeded
 * or failed); pending ones keep theirs, as they are still owed to the receiver.
 */
export async function scrubEndedDeliveries(tx: Em, organizationId: string, eventId: string): Promise<void> {
  await tx.execute(
    `update webhook_deliveries
        set payload = jsonb_set(jsonb_set(jsonb_set(jsonb_set(payload::jsonb,
              '{data,submission,data}', '{}'), '{data,submission,rawData}', '{}'),
              '{data,submission,submitterEmail}', 'null'), '{data,submission,submitterName}', 'null')::text,
            updated_at = updated_at
      where organization_id = ? and event_id = ? and status <> 'pending'
        and payload::jsonb #> '{data,submission,data}' is not null`,
    [organizationId, eventId],
  );
}

/**
 * Rows a storing statement committed for a form or organization an operator deleted by hand
 * meanwhile (src/README.md, "Submissions without foreign keys"): the parent's delete trigger deleted
 * what it could see, not a row committed after it. Of `formIds`, those no longer in `forms` lose
 * their submissions; of `organizationIds`, those no longer in `organizations` their change records
 * (an organization's forms go with it, and their submissions with them). The service never deletes
 * either parent, and ids are never used again, so an id missing from its table is one deleted by
 * hand. A probe of the parent per id, then the indexes by form and by organization for the few gone.
 * Answers the submissions deleted.
 */
export async function deleteRowsOfDeletedParents(em: Em, formIds: string[], organizationIds: string[]): Promise<number> {
  if (!formIds.length && !organizationIds.length) return 0;
  const [row] = await em.getConnection().execute(
    `with gone_forms as (
       select f.id from jsonb_array_elements_text(?::jsonb) f(id) where not exists (select from forms x where x.id = f.id)
     ), gone_organizations as (
       select o.id from jsonb_array_elements_text(?::jsonb) o(id) where not exists (select from organizations x where x.id = o.id)
     ), changes as (
       delete from submission_changes c using gone_organizations g where c.organization_id = g.id
     ), rows as (
       delete from submissions s using gone_forms g where s.form_id = g.id returning 1
     )
     select count(*)::int as n from rows`,
    [JSON.stringify(formIds), JSON.stringify(organizationIds)],
  );
  return row.n;
}
