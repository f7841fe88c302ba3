import type { Em } from '../../db/orm';
import { invalidateDayMarks } from './day-marks';
import type { DayCount, SpanCount } from './day-windows';

// The statements of the day counts: submissions per form and UTC day, written by the statements
// that store and delete submissions (countDaysSql), folded (foldDayCounts), dropped by partition
// retention (deleteDayCountsBefore), checked and repaired against the rows (checkFormDays,
// repairFormDays); and of the month counts beside them (a form's slot 0 summed per UTC month,
// kept by every statement that writes slot 0, checked and repaired against it: checkFormMonths,
// repairFormMonths). The list, analytics and the usage roll-up read both (monthCountsSql).

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
 * The slot a storing or deleting statement adds to, by its connection's backend pid: 1 to
 * DAY_SLOTS - 1, never 0. Slot 0 holds what the fold and the repair wrote, which the month counts
 * sum; keeping the writers out of it keeps them out of the month rows (no lock of theirs on a
 * form's month row, and no statement of theirs that must keep one).
 */
export function writerSlot(pid: number): number {
  return 1 + (pid % (DAY_SLOTS - 1));
}

/**
 * A CTE named `name` adding the rows of `source`, a select yielding `organization_id, form_id,
 * created_at, delta`, to their forms' day counts, inside the statement that stores or deletes them.
 */
export function countDaysSql(name: string, source: string): string {
  return `${name} as (
  insert into submission_day_counts as c (organization_id, form_id, day, slot, count)
  select s.organization_id, s.form_id, (s.created_at at time zone 'UTC')::date, 1 + pg_backend_pid() % ${DAY_SLOTS - 1}, sum(s.delta)
    from (${source}) s
   group by 1, 2, 3
   order by 2, 3
  on conflict (form_id, day, slot) do update set count = c.count + excluded.count
  returning 1
)`;
}

/** The form's submissions per UTC day within the `spans` (each `first` to `last`, inclusive), newest first, empty days left out. */
export async function readFormDays(em: Em, organizationId: string, formId: string, spans: Array<{ first: string; last: string }>)
  : Promise<DayCount[]> {
  if (!spans.length) return [];
  const rows = await em.getConnection().execute<Array<{ day: string; count: string }>>(
    `select to_char(day, 'YYYY-MM-DD') as day, sum(count)::bigint as count from submission_day_counts
      where organization_id = ? and form_id = ? and (${spans.map(() => 'day between ?::date and ?::date').join(' or ')})
      group by day having sum(count) <> 0
      order by day desc`,
    [organizationId, formId, ...spans.flatMap((s) => [s.first, s.last])],
  );
  return rows.map((row) => ({ day: row.day, count: Number(row.count) }));
}

/** The first day of a date column's UTC month (a date has no zone: through `timestamp`, never `timestamptz`). */
function monthOf(column: string): string {
  return `date_trunc('month', ${column}::timestamp)::date`;
}

/**
 * The one way a form's months are counted (the list's total and its pages, analytics, the usage
 * roll-up): a select of `organization_id, form_id, month, count`, the month's submissions as the
 * sum of its days, a day below zero counting as none. A month row holds the sum of its days' slot 0
 * (each at 0 or more); a day that also has unfolded slots (slot <> 0: the last days, and an old day
 * a deletion wrote since the last fold) counts as the sum of all its slots instead, read through
 * the unfolded slots' partial indexes. So it costs a row per month and per unfolded slot, not a row
 * per day. `months` is a condition on the month rows `m`, `unfolded` on the unfolded slots `u`;
 * their parameters in that order.
 */
export function monthCountsSql(where: { months: string; unfolded: string }): string {
  return `select organization_id, form_id, month, sum(n)::bigint as count from (
    select m.organization_id, m.form_id, m.month, m.count as n from submission_month_counts m where ${where.months}
    union all
    select c.organization_id, c.form_id, ${monthOf('c.day')},
           greatest(sum(c.count), 0) - greatest(coalesce(sum(c.count) filter (where c.slot = 0), 0), 0)
      from (select distinct u.form_id, u.day from submission_day_counts u where u.slot <> 0 and ${where.unfolded}) u
      join submission_day_counts c on c.form_id = u.form_id and c.day = u.day
     group by c.organization_id, c.form_id, c.day
  ) x group by organization_id, form_id, month`;
}

/** What a form's span is read as (spanParts in day-windows.ts): whole months (null: none), and days. */
export interface SpanReads {
  months: { first: string | null; last: string | null } | null;
  days: Array<{ first: string; last: string }>;
}

/**
 * The form's submissions over `reads`, newest first, in one statement (one snapshot: a fold moving
 * slots into slot 0 and the month rows commits either before it or after): a span per whole month
 * (monthCountsSql) and per day of the edge months; spans at zero left out.
 */
export async function readFormSpans(em: Em, organizationId: string, formId: string, reads: SpanReads): Promise<SpanCount[]> {
  const statement = formSpansSql(organizationId, formId, reads);
  if (!statement) return [];
  const rows = await em.getConnection().execute<Array<{ first: string; last: string; count: string }>>(statement.sql, statement.params);
  return rows.map((r) => ({ first: r.first, last: r.last, count: Number(r.count) }));
}

/** The statement of readFormSpans and its parameters; null when it reads nothing. */
export function formSpansSql(organizationId: string, formId: string, reads: SpanReads): { sql: string; params: unknown[] } | null {
  const parts: string[] = [];
  const params: unknown[] = [];
  if (reads.months) {
    const { first, last } = reads.months;
    const months = ['m.form_id = ?', 'm.organization_id = ?'];
    const unfolded = ['u.form_id = ?', 'u.organization_id = ?'];
    const monthParams: unknown[] = [formId, organizationId];
    const unfoldedParams: unknown[] = [formId, organizationId];
    if (first) {
      months.push('m.month >= ?::date'); monthParams.push(first);
      unfolded.push('u.day >= ?::date'); unfoldedParams.push(first);
    }
    if (last) {
      months.push('m.month <= ?::date'); monthParams.push(last);
      unfolded.push(`u.day < ?::date + interval '1 month'`); unfoldedParams.push(last);
    }
    parts.push(`select to_char(month, 'YYYY-MM-DD') as first, to_char(month + interval '1 month' - interval '1 day', 'YYYY-MM-DD') as last, count
        from (${monthCountsSql({ months: months.join(' and '), unfolded: unfolded.join(' and ') })}) mc where count <> 0`);
    params.push(...monthParams, ...unfoldedParams);
  }
  if (reads.days.length) {
    parts.push(`select to_char(day, 'YYYY-MM-DD') as first, to_char(day, 'YYYY-MM-DD') as last, sum(count)::bigint as count
        from submission_day_counts
       where organization_id = ? and form_id = ? and (${reads.days.map(() => 'day between ?::date and ?::date').join(' or ')})
       group by day having sum(count) <> 0`);
    params.push(organizationId, formId, ...reads.days.flatMap((d) => [d.first, d.last]));
  }
  return parts.length ? { sql: `${parts.join('\n union all\n')} order by first desc`, params } : null;
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
 * A CTE named `name` adding to the month rows what the slot-0 upsert `upserted` changed: it returns
 * `organization_id, form_id, day, count` (the slot's count after), `added` returns `form_id, day, n`
 * (what it added). A month row sums its days' slot 0 each at 0 or more, so a day adds
 * max(after, 0) - max(before, 0). Grouped by (form, month) before any month row is written (every
 * slot-0 upsert done first, as the storing statements take their rows: no two writers wait on each
 * other in a circle), in (form, month) order.
 */
function followMonthsSql(name: string, upserted: string, added: string): string {
  return `${name} as (
       insert into submission_month_counts as m (organization_id, form_id, month, count)
       select u.organization_id, u.form_id, ${monthOf('u.day')}, sum(greatest(u.count, 0) - greatest(u.count - a.n, 0))
         from ${upserted} u join ${added} a on a.form_id = u.form_id and a.day = u.day
        group by 1, 2, 3 having sum(greatest(u.count, 0) - greatest(u.count - a.n, 0)) <> 0
        order by 2, 3
       on conflict (form_id, month) do update set count = m.count + excluded.count
       returning 1
     )`;
}

/**
 * Folds the slots of days older than FOLD_AFTER_DAYS into slot 0, at most `limit` form-days a run
 * (the hourly maintenance): a day counts in up to DAY_SLOTS rows while it is written, and a read of
 * a form's total then costs a row per month rather than a row per slot. One statement: the unfolded
 * slots are picked through their partial index (submission_day_counts_unfolded_idx, which holds
 * only slots other than 0, so the pick never reads the folded archive), locked in (form, day, slot)
 * order as the storing statements take them, deleted, their sum added to slot 0 in (form, day)
 * order, and what slot 0 changed added to the month rows. Adding, never overwriting: a repair may
 * have written slot 0 meanwhile. A deletion of an old submission adds a slot again, for the next
 * run to fold. Answers the form-days folded.
 */
export async function foldDayCounts(em: Em, limit = 10_000): Promise<number> {
  return em.transactional(async (tx) => {
    const [row] = await tx.execute(FOLD_DAY_COUNTS_SQL, [limit]);
    return row.folded;
  });
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
     ), added as (
       select organization_id, form_id, day, sum(count) as n from locked group by organization_id, form_id, day
     ), folded as (
       insert into submission_day_counts as c (organization_id, form_id, day, slot, count)
       select organization_id, form_id, day, 0, n from added order by form_id, day
       on conflict (form_id, day, slot) do update set count = c.count + excluded.count
       returning c.organization_id, c.form_id, c.day, c.count
     ), ${followMonthsSql('months', 'folded', 'added')}
     select count(*)::int as folded from folded`;

/**
 * Partition retention: the counts of the days before `cutoff` (a month's start), whose rows it has
 * just detached in the same transaction (after the DETACH, so no writer of those days can still add
 * to them; see dropExpiredSubmissionPartitions).
 */
export async function deleteDayCountsBefore(tx: Em, cutoff: Date): Promise<void> {
  await tx.execute('delete from submission_day_counts where day < (?::timestamptz at time zone \'UTC\')::date', [cutoff.toISOString()]);
  await tx.execute('delete from submission_month_counts where month < (?::timestamptz at time zone \'UTC\')::date', [cutoff.toISOString()]);
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
 * drifted day's difference to its slot 0 (and what that changed to its month row) and deletes its
 * day marks. Answers the days it changed, with their count before (`stored`) and after (`counted`).
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
         returning c.organization_id, c.form_id, c.day, c.count
       ), added as (
         select ?::text as form_id, day, counted - stored as n from drift
       ), ${followMonthsSql('months', 'fixed', 'added')}
       select to_char(day, 'YYYY-MM-DD') as day, counted, stored from drift order by day`,
      [days.join(','), formId, formId, days.join(','), organizationId, formId, formId],
    ));
    // A drifted day had rows written or removed without counting, anywhere in it: its marks' ranks
    // are not to be trusted, and go with the repair.
    await invalidateDayMarks(tx, organizationId, formId, drift.map((d) => d.day));
    return drift;
  });
}

/** A form's UTC month (`YYYY-MM`) whose month row differs from its days: `counted` from the days' slot 0, `stored` in the row. */
export interface MonthDrift {
  month: string;
  counted: number;
  stored: number;
}

/**
 * The drift of `months` (YYYY-MM-01) of one form: the sum of each month's days' slot 0 (each at 0
 * or more), beside its month row, in one snapshot.
 */
const MONTH_DRIFT_SQL = `months as (select unnest(string_to_array(?, ',')::date[]) as month
), counted as (
  select mo.month,
         coalesce((select sum(greatest(c.count, 0)) from submission_day_counts c
                    where c.form_id = ? and c.day >= mo.month and c.day < mo.month + interval '1 month' and c.slot = 0), 0)::bigint as counted,
         coalesce((select s.count from submission_month_counts s where s.form_id = ? and s.month = mo.month), 0)::bigint as stored
    from months mo
), drift as (
  select month, counted, stored from counted where counted <> stored
)`;

function toMonthDrift(rows: Array<{ month: string; counted: string; stored: string }>): MonthDrift[] {
  return rows.map((r) => ({ month: r.month, counted: Number(r.counted), stored: Number(r.stored) }));
}

/** The months (of `days`, YYYY-MM-DD) whose month rows differ from their days' slot 0. */
export async function checkFormMonths(em: Em, formId: string, days: string[]): Promise<MonthDrift[]> {
  const months = monthsOf(days);
  if (!months.length) return [];
  return toMonthDrift(await em.getConnection().execute(
    `with ${MONTH_DRIFT_SQL} select to_char(month, 'YYYY-MM') as month, counted, stored from drift order by month`,
    [months.join(','), formId, formId],
  ));
}

/**
 * Rebuilds the month rows of the months of `days` (YYYY-MM-DD) from their days' slot 0, in a
 * transaction of its own, as repairFormDays does the days: adds each drifted month's difference,
 * read in one snapshot, to its row. A fold or a repair that commits after that snapshot wrote its
 * slot 0 and its month rows in one transaction, so neither is in the difference; one still open
 * holds its month row, which this upsert waits for and adds to. Two repairs of one form take turns.
 * Answers the months it changed, with their count before (`stored`) and after (`counted`).
 */
export async function repairFormMonths(em: Em, organizationId: string, formId: string, days: string[]): Promise<MonthDrift[]> {
  const months = monthsOf(days);
  if (!months.length) return [];
  return em.transactional(async (tx) => {
    await lockFormRepair(tx, formId);
    return toMonthDrift(await tx.execute(
      `with ${MONTH_DRIFT_SQL}, fixed as (
         insert into submission_month_counts as m (organization_id, form_id, month, count)
         select ?, ?, month, counted - stored from drift order by month
         on conflict (form_id, month) do update set count = m.count + excluded.count
         returning 1
       )
       select to_char(month, 'YYYY-MM') as month, counted, stored from drift order by month`,
      [months.join(','), formId, formId, organizationId, formId],
    ));
  });
}

/** The months (YYYY-MM-01) of `days` (YYYY-MM-DD), each once, in order. */
function monthsOf(days: string[]): string[] {
  return [...new Set(days.map((d) => `${d.slice(0, 7)}-01`))].sort();
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
 * (the day and month counts have no foreign key; their rows went with the form), by id after
 * `afterId`, at most `limit`; only `formId` when given. One pass over the counts' primary keys for a whole walk.
 */
export async function listOrphanCountedForms(em: Em, afterId: string, limit: number, formId?: string)
  : Promise<Array<{ id: string; organizationId: string }>> {
  const rows = await em.getConnection().execute<Array<{ form_id: string; organization_id: string }>>(
    `select distinct on (c.form_id) c.form_id, c.organization_id from (
         select form_id, organization_id from submission_day_counts where form_id > ? ${formId ? 'and form_id = ?' : ''}
         union all
         select form_id, organization_id from submission_month_counts where form_id > ? ${formId ? 'and form_id = ?' : ''}
       ) c
      where not exists (select from forms f where f.id = c.form_id)
      order by c.form_id limit ?`,
    formId ? [afterId, formId, afterId, formId, limit] : [afterId, afterId, limit],
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

/** The months (YYYY-MM-01) the form has month rows for, from the month of `since` (YYYY-MM-DD) on when given: a row a month, at most. */
export async function listFormMonths(em: Em, formId: string, since?: string): Promise<string[]> {
  const rows = await em.getConnection().execute<Array<{ month: string }>>(
    `select to_char(month, 'YYYY-MM-DD') as month from submission_month_counts
      where form_id = ? ${since ? `and month >= ${monthOf('?::date')}` : ''} order by month`,
    since ? [formId, since] : [formId],
  );
  return rows.map((r) => r.month);
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
