import type { Em } from '../../db/orm';
import type { DayCount } from './day-windows';

// The statements of the day counts: submissions per form and UTC day, written by the statements
// that store and delete submissions (countDaysSql) and by partition retention
// (deleteDayCountsBefore), read by the list, analytics and the usage roll-up.

/**
 * Why slots: one row per form and day would be locked by every storing statement of a busy form
 * from its update until its commit (a WAL flush), so the form's submissions could never commit side
 * by side. Each statement adds to the slot of its connection (backend pid) instead, as the quota
 * counts in its slots; two connections share a slot only when their pids do modulo DAY_SLOTS. Rows
 * are upserted in (form, day) order, so statements that touch several never wait on each other in
 * a circle. A day's count is the sum of its slots (a deletion may leave one slot negative).
 */
export const DAY_SLOTS = 16;

/**
 * A CTE named `name` adding the rows of `source`, a select yielding `organization_id, form_id,
 * created_at, delta`, to their forms' day counts, inside the statement that stores or deletes them.
 */
export function countDaysSql(name: string, source: string): string {
  return `${name} as (
  insert into submission_day_counts as c (organization_id, form_id, day, slot, count)
  select s.organization_id, s.form_id, (s.created_at at time zone 'UTC')::date, pg_backend_pid() % ${DAY_SLOTS}, sum(s.delta)
    from (${source}) s
   group by 1, 2, 3
   order by 2, 3
  on conflict (form_id, day, slot) do update set count = c.count + excluded.count
  returning 1
)`;
}

/** The form's submissions per UTC day from `first` to `last` (inclusive; null: open), newest first, empty days left out. */
export async function readFormDays(em: Em, organizationId: string, formId: string, span: { first: string | null; last: string | null })
  : Promise<DayCount[]> {
  const where = ['organization_id = ?', 'form_id = ?'];
  const params: unknown[] = [organizationId, formId];
  if (span.first) { where.push('day >= ?::date'); params.push(span.first); }
  if (span.last) { where.push('day <= ?::date'); params.push(span.last); }
  const rows = await em.getConnection().execute<Array<{ day: string; count: string }>>(
    `select to_char(day, 'YYYY-MM-DD') as day, sum(count)::bigint as count from submission_day_counts
      where ${where.join(' and ')}
      group by day having sum(count) <> 0
      order by day desc`,
    params,
  );
  return rows.map((row) => ({ day: row.day, count: Number(row.count) }));
}

/** The form's stored submissions in all. */
export async function readFormTotal(em: Em, organizationId: string, formId: string): Promise<number> {
  const [row] = await em.getConnection().execute(
    'select coalesce(sum(count), 0)::bigint as total from submission_day_counts where organization_id = ? and form_id = ?',
    [organizationId, formId],
  );
  return Number(row.total);
}

/**
 * The form's submissions created in [from, until), counted from the rows: a day the bounds cover in
 * part. The form is the organization's (its caller found it there): without organization_id the
 * count is an index-only scan of the form's index.
 */
export async function countFormRowsBetween(em: Em, formId: string, from: Date, until: Date): Promise<number> {
  const [row] = await em.getConnection().execute(
    'select count(*)::bigint as count from submissions where form_id = ? and created_at >= ? and created_at < ?',
    [formId, from.toISOString(), until.toISOString()],
  );
  return Number(row.count);
}

/** Days this far back have their slots folded into one (foldDayCounts): past them, no submission is stored with their date. */
export const FOLD_AFTER_DAYS = 2;

/**
 * Folds the slots of days older than FOLD_AFTER_DAYS into slot 0, at most `limit` form-days a run
 * (the hourly maintenance): a day counts in up to DAY_SLOTS rows while it is written, and a read of
 * a form's total then costs a row per day rather than a row per slot. One statement, its sum taken
 * from the rows it locks, in (form, day, slot) order as the storing statements take them; a deletion
 * of an old submission adds a slot again, for the next run to fold. Answers the form-days folded.
 */
export async function foldDayCounts(em: Em, limit = 10_000): Promise<number> {
  const [row] = await em.getConnection().execute(
    `with picked as (
       select form_id, day from submission_day_counts
        where day < (now() at time zone 'UTC')::date - ${FOLD_AFTER_DAYS} and slot <> 0
        group by form_id, day order by form_id, day limit ?
     ), locked as materialized (
       select c.organization_id, c.form_id, c.day, c.slot, c.count from submission_day_counts c join picked using (form_id, day)
        order by c.form_id, c.day, c.slot
          for update of c
     ), gone as (
       delete from submission_day_counts c using locked l
        where c.form_id = l.form_id and c.day = l.day and c.slot = l.slot and l.slot <> 0
     ), folded as (
       insert into submission_day_counts as c (organization_id, form_id, day, slot, count)
       select organization_id, form_id, day, 0, sum(count) from locked group by organization_id, form_id, day
       on conflict (form_id, day, slot) do update set count = excluded.count
       returning 1
     )
     select count(*)::int as folded from folded`,
    [limit],
  );
  return row.folded;
}

/** Partition retention: the counts of the days before `cutoff` (a month's start), whose rows it drops. */
export async function deleteDayCountsBefore(tx: Em, cutoff: Date): Promise<void> {
  await tx.execute('delete from submission_day_counts where day < (?::timestamptz at time zone \'UTC\')::date', [cutoff.toISOString()]);
}
