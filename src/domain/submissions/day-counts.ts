import type { Em } from '../../db/orm';
import { invalidateDayMarks } from './day-marks';
import type { DayCount } from './day-windows';

// The statements of the day counts: submissions per form and UTC day, written by the statements
// that store and delete submissions (countDaysSql), folded (foldDayCounts), dropped by partition
// retention (deleteDayCountsBefore), checked and repaired against the rows (checkFormDays,
// repairFormDays), read by the list, analytics and the usage roll-up.

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
 * a form's total then costs a row per day rather than a row per slot. One statement: the unfolded
 * slots are picked through their partial index (submission_day_counts_unfolded_idx, which holds
 * only slots other than 0, so the pick never reads the folded archive), locked in (form, day, slot)
 * order as the storing statements take them, deleted, and their sum added to slot 0 in (form, day)
 * order. Adding, never overwriting: a deletion may have written slot 0 meanwhile. A deletion of an
 * old submission adds a slot again, for the next run to fold. Answers the form-days folded.
 */
export async function foldDayCounts(em: Em, limit = 10_000): Promise<number> {
  const [row] = await em.getConnection().execute(FOLD_DAY_COUNTS_SQL, [limit]);
  return row.folded;
}

/** The statement of foldDayCounts (`?`: the most form-days a run folds). */
export const FOLD_DAY_COUNTS_SQL = `with picked as (
       select day, form_id from submission_day_counts
        where day < (now() at time zone 'UTC')::date - ${FOLD_AFTER_DAYS} and slot <> 0
        group by day, form_id order by day, form_id limit ?
     ), locked as materialized (
       select c.organization_id, c.form_id, c.day, c.slot, c.count from submission_day_counts c join picked using (form_id, day)
        where c.slot <> 0
        order by c.form_id, c.day, c.slot
          for update of c
     ), gone as (
       delete from submission_day_counts c using locked l
        where c.form_id = l.form_id and c.day = l.day and c.slot = l.slot
     ), folded as (
       insert into submission_day_counts as c (organization_id, form_id, day, slot, count)
       select organization_id, form_id, day, 0, sum(count) from locked group by organization_id, form_id, day order by form_id, day
       on conflict (form_id, day, slot) do update set count = c.count + excluded.count
       returning 1
     )
     select count(*)::int as folded from folded`;

/**
 * Partition retention: the counts of the days before `cutoff` (a month's start), whose rows it has
 * just detached in the same transaction (after the DETACH, so no writer of those days can still add
 * to them; see dropExpiredSubmissionPartitions).
 */
export async function deleteDayCountsBefore(tx: Em, cutoff: Date): Promise<void> {
  await tx.execute('delete from submission_day_counts where day < (?::timestamptz at time zone \'UTC\')::date', [cutoff.toISOString()]);
}

// Check and repair: the counts against the rows (README "Day counts that heal"). A day's drift is
// read in one statement, so the rows and the counts come from one snapshot: a storing or deleting
// statement writes its rows and its counts in one transaction, so either both are in it or neither,
// and what differs is exactly what was written without counting (the previous release during a
// rolling deploy, a restore, a hand fix). The repair adds that difference to slot 0, as the storing
// statements add theirs: it takes no lock a writer waits on beyond slot 0's row for the moment of
// its upsert (in (form, day) order, as theirs), and a concurrent create or delete, counted or not,
// is never lost. Two repairs of one form take turns (an advisory lock), so they never add the same
// difference twice.

/**
 * The advisory lock of repairs and partition retention: repairs hold it shared (and their form's
 * own, below, so two repairs of one form take turns while repairs of different forms run side by
 * side), retention exclusively, so no repair's upsert lands in a month retention is dropping.
 */
const DAY_COUNTS_REPAIR_LOCK = 726354040;
/** The first key of a form's own repair lock (the second: the hash of its id). */
const FORM_REPAIR_LOCK = 726354041;

/** Retention's turn: no repair runs until the transaction ends. */
export async function lockDayCountRepairs(tx: Em): Promise<void> {
  await tx.execute(`select pg_advisory_xact_lock(${DAY_COUNTS_REPAIR_LOCK})`);
}

/** A repair's turn for one form, for the rest of the transaction. */
async function lockFormRepair(tx: Em, formId: string): Promise<void> {
  await tx.execute(`select pg_advisory_xact_lock_shared(${DAY_COUNTS_REPAIR_LOCK}), pg_advisory_xact_lock(${FORM_REPAIR_LOCK}, hashtext(?))`, [formId]);
}

/** A (form, UTC day) whose count differs from its rows: `counted` rows, `stored` in the counts. */
export interface DayDrift {
  day: string;
  counted: number;
  stored: number;
}

/** The drift of `days` of one form: each day an index-only count of its rows, beside the sum of its slots. */
const DRIFT_SQL = `days as (select unnest(string_to_array(?, ',')::date[]) as day
), counted as (
  select d.day, (select count(*) from submissions s
                  where s.form_id = ? and s.created_at >= d.day::timestamp at time zone 'UTC'
                    and s.created_at < (d.day + 1)::timestamp at time zone 'UTC')::bigint as n
    from days d
), stored as (
  select c.day, sum(c.count)::bigint as n from submission_day_counts c where c.form_id = ? and c.day = any(string_to_array(?, ',')::date[]) group by c.day
), drift as (
  select c.day, c.n as counted, coalesce(s.n, 0)::bigint as stored from counted c left join stored s using (day)
   where c.n <> coalesce(s.n, 0)
)`;

function toDrift(rows: Array<{ day: string; counted: string; stored: string }>): DayDrift[] {
  return rows.map((r) => ({ day: r.day, counted: Number(r.counted), stored: Number(r.stored) }));
}

/** The days of `days` (YYYY-MM-DD) whose counts differ from the form's rows. */
export async function checkFormDays(em: Em, formId: string, days: string[]): Promise<DayDrift[]> {
  if (!days.length) return [];
  return toDrift(await em.getConnection().execute(
    `with ${DRIFT_SQL} select to_char(day, 'YYYY-MM-DD') as day, counted, stored from drift order by day`,
    [days.join(','), formId, formId, days.join(',')],
  ));
}

/**
 * Rebuilds the counts of `days` of the form from its rows, in a transaction of its own: adds each
 * drifted day's difference to its slot 0 and deletes its day marks. Answers the days it changed, with their count before
 * (`stored`) and after (`counted`).
 */
export async function repairFormDays(em: Em, organizationId: string, formId: string, days: string[]): Promise<DayDrift[]> {
  if (!days.length) return [];
  return em.transactional(async (tx) => {
    await lockFormRepair(tx, formId);
    const drift = toDrift(await tx.execute(
      `with ${DRIFT_SQL}, fixed as (
         insert into submission_day_counts as c (organization_id, form_id, day, slot, count)
         select ?, ?, day, 0, counted - stored from drift order by day
         on conflict (form_id, day, slot) do update set count = c.count + excluded.count
         returning 1
       )
       select to_char(day, 'YYYY-MM-DD') as day, counted, stored from drift order by day`,
      [days.join(','), formId, formId, days.join(','), organizationId, formId],
    ));
    // A drifted day had rows written or removed without counting, anywhere in it: its marks' ranks
    // are not to be trusted, and go with the repair.
    await invalidateDayMarks(tx, organizationId, formId, drift.map((d) => d.day));
    return drift;
  });
}

/** Forms (with their organizations) by id after `afterId`, at most `limit`; one form when `formId` is given. */
export async function listCountedForms(em: Em, afterId: string, limit: number, formId?: string)
  : Promise<Array<{ id: string; organizationId: string }>> {
  const rows = await em.getConnection().execute<Array<{ id: string; organization_id: string }>>(
    `select id, organization_id from forms where id > ? ${formId ? 'and id = ?' : ''} order by id limit ?`,
    formId ? [afterId, formId, limit] : [afterId, limit],
  );
  return rows.map((r) => ({ id: r.id, organizationId: r.organization_id }));
}

/**
 * Forms gone from `forms` (deleted by hand, or with their organization) whose counts stayed behind
 * (the counts have no foreign key; their rows went with the form), by id after `afterId`, at most
 * `limit`; only `formId` when given. One pass over the counts' primary key for a whole walk.
 */
export async function listOrphanCountedForms(em: Em, afterId: string, limit: number, formId?: string)
  : Promise<Array<{ id: string; organizationId: string }>> {
  const rows = await em.getConnection().execute<Array<{ form_id: string; organization_id: string }>>(
    `select distinct on (c.form_id) c.form_id, c.organization_id from submission_day_counts c
      where c.form_id > ? ${formId ? 'and c.form_id = ?' : ''} and not exists (select from forms f where f.id = c.form_id)
      order by c.form_id limit ?`,
    formId ? [afterId, formId, limit] : [afterId, limit],
  );
  return rows.map((r) => ({ id: r.form_id, organizationId: r.organization_id }));
}

/** The first and last UTC day the form has rows or counts on (null: neither). */
export async function formDaySpan(em: Em, formId: string): Promise<{ first: string; last: string } | null> {
  const [row] = await em.getConnection().execute(
    `select to_char(least((select min(day) from submission_day_counts where form_id = ?),
                          (select (min(created_at) at time zone 'UTC')::date from submissions where form_id = ?)), 'YYYY-MM-DD') as first,
            to_char(greatest((select max(day) from submission_day_counts where form_id = ?),
                             (select (max(created_at) at time zone 'UTC')::date from submissions where form_id = ?)), 'YYYY-MM-DD') as last`,
    [formId, formId, formId, formId],
  );
  return row.first ? { first: row.first, last: row.last } : null;
}

/** The database's clock: where a run of the maintenance's repair stops reading. */
export async function databaseNow(em: Em): Promise<Date> {
  const [row] = await em.getConnection().execute('select now() as now');
  return new Date(row.now);
}

/**
 * The (form, UTC day)s written in [from, until) (until null: open), read from the rows, never from
 * the counts: the days of the submissions created then (the created_at index), and the forms and
 * ids of the submissions deleted then (the change feed; a time-ordered id names its day).
 */
export async function readDaysWrittenBetween(em: Em, from: Date, until: Date | null): Promise<{
  created: Array<{ formId: string; organizationId: string; day: string }>;
  deleted: Array<{ formId: string; organizationId: string; submissionId: string; xid: string }>;
}> {
  const conn = em.getConnection();
  const bounds = until ? [from.toISOString(), until.toISOString()] : [from.toISOString()];
  const created = await conn.execute<Array<{ form_id: string; organization_id: string; day: string }>>(
    `select form_id, organization_id, to_char(created_at at time zone 'UTC', 'YYYY-MM-DD') as day
       from submissions where created_at >= ? ${until ? 'and created_at < ?' : ''} group by 1, 2, 3`,
    bounds,
  );
  const deleted = await conn.execute<Array<{ form_id: string; organization_id: string; submission_id: string; xid: string }>>(
    `select distinct form_id, organization_id, submission_id, xid::text as xid from submission_changes
      where type = 'submission.deleted' and occurred_at >= ? ${until ? 'and occurred_at < ?' : ''}`,
    bounds,
  );
  return {
    created: created.map((r) => ({ formId: r.form_id, organizationId: r.organization_id, day: r.day })),
    deleted: deleted.map((r) => ({
      formId: r.form_id, organizationId: r.organization_id, submissionId: r.submission_id, xid: r.xid,
    })),
  };
}

const REPAIR_MARK_KEY = 'day_counts_repaired_from';

/** Where the maintenance's repair of recently written days starts next (its previous read); null before its first run. */
export async function readRepairMark(em: Em): Promise<Date | null> {
  const [row] = await em.getConnection().execute('select value from system_settings where key = ?', [REPAIR_MARK_KEY]);
  return row?.value ? new Date(row.value) : null;
}

/** Moves the mark forward (never back: two workers' runs may end in either order). */
export async function writeRepairMark(em: Em, at: Date): Promise<void> {
  await em.getConnection().execute(
    `insert into system_settings (key, value) values (?, ?) on conflict (key) do update
        set value = excluded.value where system_settings.value = '' or system_settings.value::timestamptz < excluded.value::timestamptz`,
    [REPAIR_MARK_KEY, at.toISOString()],
  );
}
