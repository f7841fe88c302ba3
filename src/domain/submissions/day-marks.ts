import type { Em } from '../../db/orm';
import { timeOfId } from '../../lib/ids';
import { DEFAULT_DAY_MARK_RULES, utcDay, type DayMark, type DayMarkRules } from './day-windows';

// The statements of the day marks (src/README.md, day counts): every `every`-th submission of a
// busy form's UTC day, ranked from the day's oldest row (the pure rules are in day-windows.ts).
// Built behind the clock by a small job (buildDayMarks), read by the list (findDayMark), and
// deleted, in the same transaction, by everything that removes or adds rows at a past position of
// a day: a submission's deletion those at and above its row (invalidateDayMarksFrom: the rows
// before it keep their ranks), what does not know the rows it changed the whole day's
// (invalidateDayMarks: the counts' repair of a drifted day; partition retention; a form's row takes
// its marks with it by foreign key).
//
// The builder and the deleters take turns on a (form, day) advisory lock, the builder reading its
// rows only once it holds it: a builder working from a snapshot taken before a deletion committed
// would otherwise write marks ranked with the deleted row after the deletion removed the old ones.
// Rows are only added at a past position by a storing transaction that committed later than the
// builder's margin after its `created_at`: the builder's next run finds them in the change feed
// (extendDayMarks) and drops the marks above them.

/** The first key of a (form, day)'s marks lock (the second: the hash of `formId/day`). */
const DAY_MARKS_LOCK = 726354042;

/** How the builder walks: the rules, how far behind the database's clock it stays, and its bounds. */
export interface DayMarkBuild extends DayMarkRules {
  /**
   * Rows younger than this are not marked yet. A submission's `created_at` is the API's clock when
   * its checks ended, and its row commits after the group commit's wait and statement (and their
   * retries): a row committed later with a `created_at` below a mark would change that mark's rank.
   * The default, 10 minutes, is what the counts' repair allows between the two (its overlap).
   */
  marginMs: number;
  /**
   * The most index entries one transaction walks: a deletion of the day waits on its lock that long
   * at most, well inside the API's lock timeout (DB_LOCK_TIMEOUT_MS) even from a cold cache.
   */
  perTransaction: number;
  /** The most index entries one run walks, over every day. */
  perRun: number;
}

export const DEFAULT_DAY_MARK_BUILD: DayMarkBuild = {
  ...DEFAULT_DAY_MARK_RULES, marginMs: 600_000, perTransaction: 10_000, perRun: 1_000_000,
};

/** Takes the marks lock of each (form, day) in `days` (YYYY-MM-DD), in day order, until the transaction ends. */
export async function lockDayMarks(tx: Em, formId: string, days: string[]): Promise<void> {
  for (const day of [...new Set(days)].sort()) {
    await tx.execute(`select pg_advisory_xact_lock(${DAY_MARKS_LOCK}, hashtext(? || '/' || ?))`, [formId, day]);
  }
}

/**
 * Deletes the marks of the form's `days`, inside the transaction that changed their rows, after
 * taking their locks: a builder that began before sees its marks deleted here, one that waits reads
 * the rows as this transaction leaves them. For a change that does not say where in the day its
 * rows were (the counts' repair of a drifted day).
 */
export async function invalidateDayMarks(tx: Em, organizationId: string, formId: string, days: string[]): Promise<void> {
  if (!days.length) return;
  await lockDayMarks(tx, formId, days);
  await tx.execute(
    `delete from submission_day_marks where organization_id = ? and form_id = ? and day = any(string_to_array(?, ',')::date[])`,
    [organizationId, formId, [...new Set(days)].join(',')],
  );
}

/** A row's place in its day's order (created_at, id): its created_at as exact text (exactTimeSql), and its id. */
export interface DayPosition {
  createdAt: string;
  id: string;
}

/**
 * Deletes the marks of a deleted row's day at and above its place, inside the transaction that
 * deleted it, after taking the day's lock: the rows after it moved a rank down, the rows before it
 * did not, so the marks below it stay exact. A builder that held the lock first ranked its marks
 * with the row (its deletion uncommitted) and committed them before this statement began, which
 * (read committed) sees them and deletes those above the row; one that waits reads the rows without it.
 */
export async function invalidateDayMarksFrom(tx: Em, organizationId: string, formId: string, row: DayPosition): Promise<void> {
  const day = row.createdAt.slice(0, 10);
  await lockDayMarks(tx, formId, [day]);
  await tx.execute(
    `delete from submission_day_marks where organization_id = ? and form_id = ? and day = ?::date
        and (created_at, id) >= (?::timestamptz, ?)`,
    [organizationId, formId, day, row.createdAt, row.id],
  );
}

/** A deletion the change feed recorded: its transaction and the deleted submission's id. */
export interface RecordedDeletion {
  xid: string;
  submissionId: string;
}

/**
 * The marks of the form's `day` at or above a row deleted by one of `deletions` and ranked from a
 * snapshot that did not see that deletion (deletions that did not delete them: the previous
 * release's, during a rolling deploy), and every mark above the lowest of them: a mark is ranked
 * from the one below it, so a mark built after the deletion on top of one built before is as wrong.
 * Its build time would not tell: the deletion's change carries its transaction's start, not its
 * commit. The change names the row by its id, whose time is the row's created_at to the millisecond
 * (create-submission.ts mints both from one Date; the id names its day the same way): the marks of
 * the rows created before that millisecond stay, as the deletion did not move them. This release's
 * deletions deleted the marks from their row up themselves: they leave none to drop but a mark of
 * their row's millisecond. Deleted under the lock; answers how many went.
 */
export async function invalidateDayMarksNotSeeing(tx: Em, organizationId: string, formId: string, day: string,
  deletions: RecordedDeletion[]): Promise<number> {
  if (!deletions.length) return 0;
  await lockDayMarks(tx, formId, [day]);
  const gone = await tx.execute(
    `delete from submission_day_marks where organization_id = ? and form_id = ? and day = ?::date
       and rank >= (select min(m.rank) from submission_day_marks m,
                      unnest(string_to_array(?, ',')::xid8[], string_to_array(?, ',')::timestamptz[]) as x(xid, created_from)
                     where m.organization_id = ? and m.form_id = ? and m.day = ?::date
                       and m.created_at >= x.created_from and not pg_visible_in_snapshot(x.xid, m.built_snapshot))`,
    [organizationId, formId, day, deletions.map((d) => d.xid).join(','),
      deletions.map((d) => timeOfId(d.submissionId).toISOString()).join(','), organizationId, formId, day], 'run',
  );
  return (gone as unknown as { affectedRows: number }).affectedRows;
}

/** A timestamp column as the text the statements take it back in, to the microsecond (DayMark, DayPosition). */
export function exactTimeSql(column: string): string {
  return `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
}

const EXACT_CREATED_AT = exactTimeSql('created_at');

/**
 * Partition retention: the marks of the days before `cutoff`, whose rows it has just detached in
 * the same transaction. A builder still reading those rows holds the partition, so the DETACH
 * waited for it to commit; one that starts later finds the rows gone.
 */
export async function deleteDayMarksBefore(tx: Em, cutoff: Date): Promise<void> {
  for (const table of ['submission_day_marks', 'submission_day_mark_checks']) {
    await tx.execute(`delete from ${table} where day < (?::timestamptz at time zone 'UTC')::date`, [cutoff.toISOString()]);
  }
}

/** The form's mark on `day` of the largest rank at or below `rank` (one probe of the primary key); null when there is none. */
export async function findDayMark(em: Em, organizationId: string, formId: string, day: string, rank: number): Promise<DayMark | null> {
  const [row] = await em.getConnection().execute<Array<{ rank: string; created_at: string; id: string }>>(
    `select rank, ${EXACT_CREATED_AT} as created_at, id from submission_day_marks
      where form_id = ? and day = ?::date and rank <= ? and organization_id = ?
      order by rank desc limit 1`,
    [formId, day, rank, organizationId],
  );
  return row ? { rank: Number(row.rank), createdAt: row.created_at, id: row.id } : null;
}

/** A form's UTC day that carries marks. */
export interface BusyDay {
  organizationId: string;
  formId: string;
  day: string;
}

/**
 * The (form, day)s from `since` (YYYY-MM-DD) on whose counts sum to `minRows` or more, the one the
 * builder visited longest ago first (never visited, then by its `checked_snapshot`): a run that stops
 * at its bound goes on, next time, with the days it did not reach. The days whose last build failed
 * come after all the others (the one that failed longest ago first), so a day that fails run after
 * run holds back no other. One look through the counts' day index (only `formId`'s days when given).
 */
export async function listBusyDays(em: Em, since: string, minRows: number, formId?: string): Promise<BusyDay[]> {
  const rows = await em.getConnection().execute<Array<{ organization_id: string; form_id: string; day: string }>>(
    `select b.organization_id, b.form_id, to_char(b.day, 'YYYY-MM-DD') as day from (
       select organization_id, form_id, day from submission_day_counts
        where day >= ?::date ${formId ? 'and form_id = ?' : ''}
        group by organization_id, form_id, day having sum(count) >= ?) b
       left join submission_day_mark_checks k on k.form_id = b.form_id and k.day = b.day and k.organization_id = b.organization_id
      order by k.failed_at nulls first, pg_snapshot_xmin(k.checked_snapshot) nulls first, b.day, b.form_id`,
    formId ? [since, formId, minRows] : [since, minRows],
  );
  return rows.map((r) => ({ organizationId: r.organization_id, formId: r.form_id, day: r.day }));
}

/**
 * Extends the marks of one (form, day) by at most `limit` index entries, in a transaction of its
 * own, under the day's lock:
 * - first, the rows committed late: a row whose `created_at` lies below a mark but which committed
 *   after the previous run's snapshot (a storing transaction that outlived the margin) moved every
 *   mark above it a rank up. Every row committed since has a change-feed record whose transaction
 *   that snapshot (`checked_snapshot`) does not see: the marks at or above the oldest such row
 *   of the day go; so do those a deletion since then may have left wrong (invalidateDayMarksNotSeeing:
 *   the previous release's deletions do not delete them);
 * - then the newest mark is read, the rows after it older than the margin walked (index-only,
 *   oldest first), each numbered from the mark's rank, and every `every`-th rank becomes a mark;
 * - `checked_snapshot` becomes this transaction's first snapshot (the whole of it: its xmin alone
 *   is the cluster's, held down by any transaction of any database, and every row committed since
 *   it would look late), and a failure of an earlier build is forgotten.
 * Answers the entries walked, the marks added and the marks dropped for late rows.
 */
export async function extendDayMarks(em: Em, busy: BusyDay, opts: { every: number; marginMs: number; limit: number })
  : Promise<{ walked: number; added: number; dropped: number }> {
  const dayStart = new Date(`${busy.day}T00:00:00.000Z`);
  const dayEnd = new Date(dayStart.getTime() + 86_400_000);
  const { organizationId, formId, day } = busy;
  return em.transactional(async (tx) => {
    await lockDayMarks(tx, formId, [day]);
    const [state] = await tx.execute<Array<{ snapshot: string; checked: string | null }>>(
      `select pg_current_snapshot()::text as snapshot,
              (select checked_snapshot::text from submission_day_mark_checks
                where form_id = ? and day = ?::date and organization_id = ?) as checked`,
      [formId, day, organizationId],
    );
    let dropped = 0;
    if (state.checked !== null) {
      const gone = await tx.execute(
        `with late as (
           select min(c.occurred_at) as at from submission_changes c
            where c.organization_id = ? and c.form_id = ? and c.xid >= pg_snapshot_xmin(?::pg_snapshot)
              and not pg_visible_in_snapshot(c.xid, ?::pg_snapshot) and c.type = 'submission.created'
              and c.occurred_at >= ?::timestamptz and c.occurred_at < ?::timestamptz
         )
         delete from submission_day_marks m using late
          where m.form_id = ? and m.day = ?::date and m.organization_id = ? and m.created_at >= late.at`,
        [organizationId, formId, state.checked, state.checked, dayStart.toISOString(), dayEnd.toISOString(), formId, day, organizationId], 'run',
      );
      dropped = (gone as unknown as { affectedRows: number }).affectedRows;
      // A deletion of the day's rows since then by the previous release (a rolling deploy), which
      // leaves the marks in place: as the hourly repair does, without waiting an hour.
      const deleted = await tx.execute<Array<{ submission_id: string; xid: string }>>(
        `select submission_id, xid::text as xid from submission_changes
          where organization_id = ? and form_id = ? and xid >= pg_snapshot_xmin(?::pg_snapshot)
            and not pg_visible_in_snapshot(xid, ?::pg_snapshot) and type = 'submission.deleted'`,
        [organizationId, formId, state.checked, state.checked],
      );
      const deletions = deleted.filter((d) => utcDay(timeOfId(d.submission_id)) === day)
        .map((d) => ({ xid: d.xid, submissionId: d.submission_id }));
      dropped += await invalidateDayMarksNotSeeing(tx, organizationId, formId, day, deletions);
    }
    const [newest] = await tx.execute<Array<{ rank: string; created_at: string; id: string }>>(
      `select rank, ${EXACT_CREATED_AT} as created_at, id from submission_day_marks
        where form_id = ? and day = ?::date and organization_id = ? order by rank desc limit 1`,
      [formId, day, organizationId],
    );
    const after = newest ? 'and (created_at, id) > (?::timestamptz, ?)' : '';
    const afterParams = newest ? [newest.created_at, newest.id] : [];
    // The walk names the form without its organization (which the form's index lacks), as the list's
    // own walk does (read-store.ts): the form is the organization's, found with it in its counts.
    const [row] = await tx.execute<Array<{ walked: number; added: number }>>(
      `with walked as materialized (
         select created_at, id, ?::bigint + row_number() over (order by created_at, id) as rank from (
           select created_at, id from submissions
            where form_id = ? and created_at >= ?::timestamptz
              and created_at < least(?::timestamptz, now() - ? * interval '1 millisecond') ${after}
            order by created_at, id limit ?) w
       ), added as (
         insert into submission_day_marks (organization_id, form_id, day, rank, created_at, id, built_snapshot)
         select ?, ?, ?::date, rank, created_at, id, pg_current_snapshot() from walked where rank > 0 and rank % ? = 0
         returning 1
       )
       select (select count(*) from walked)::int as walked, (select count(*) from added)::int as added`,
      [newest ? Number(newest.rank) : -1, formId, dayStart.toISOString(), dayEnd.toISOString(), opts.marginMs, ...afterParams,
        opts.limit, organizationId, formId, day, opts.every],
    );
    await tx.execute(
      `insert into submission_day_mark_checks (organization_id, form_id, day, checked_snapshot) values (?, ?, ?::date, ?::pg_snapshot)
       on conflict (form_id, day) do update set checked_snapshot = excluded.checked_snapshot, failed_at = null`,
      [organizationId, formId, day, state.snapshot],
    );
    return { ...row, dropped };
  });
}

/** A busy (form, day) whose marks a run could not extend: why, without the rows' data (the builder reads only created_at and id). */
export interface DayMarksFailure {
  formId: string;
  day: string;
  /** PostgreSQL's SQLSTATE (57014: statement timeout, 55P03: lock timeout), when it gave one. */
  code?: string;
  message: string;
}

/** What a run of the builder did. */
export interface DayMarksRun {
  /** The busy (form, day)s it went through. */
  days: number;
  walked: number;
  added: number;
  /** Marks dropped because a row committed late below them (a storing transaction that outlived the margin). */
  dropped: number;
  /** The days whose build failed: the run went on with the others; they take their turn after them next run. */
  failed: DayMarksFailure[];
  /** False when it stopped at its bound with rows left to walk: the next run goes on. */
  caughtUp: boolean;
}

/** PostgreSQL's foreign_key_violation: the form was deleted while its marks were being written. */
const FOREIGN_KEY_VIOLATION = '23503';

/** PostgreSQL's error code (SQLSTATE), when it is one of its errors. */
function sqlState(err: unknown): string | undefined {
  return (err as { code?: string } | null)?.code;
}

/**
 * Notes that the build of `busy` failed with `err` (listBusyDays gives the day its turn after the
 * other days) and answers the failure; null when the form was deleted meanwhile (nothing failed).
 * Leaves the day's `checked_snapshot` as it was: the next build still looks for the rows committed
 * late since the last one that succeeded (none when none did: the day has no marks).
 */
async function noteDayMarksFailure(em: Em, busy: BusyDay, err: unknown): Promise<DayMarksFailure | null> {
  if (sqlState(err) === FOREIGN_KEY_VIOLATION) return null;
  try {
    await em.getConnection().execute(
      `insert into submission_day_mark_checks (organization_id, form_id, day, checked_snapshot, failed_at)
       values (?, ?, ?::date, null, now())
       on conflict (form_id, day) do update set failed_at = excluded.failed_at`,
      [busy.organizationId, busy.formId, busy.day],
    );
  } catch (noting) {
    if (sqlState(noting) === FOREIGN_KEY_VIOLATION) return null;
    throw noting;
  }
  const code = sqlState(err);
  return { formId: busy.formId, day: busy.day, ...(code ? { code } : {}), message: (err as Error).message };
}

/**
 * Extends the marks of every busy (form, day) from `since` (YYYY-MM-DD; default: yesterday by `now`,
 * the builder's every-30-seconds job) on, a transaction of at most `perTransaction` entries at a
 * time and `perRun` in all. The days take turns, a transaction each (listBusyDays' order, the one
 * visited longest ago first), so one form's backlog of millions neither holds back another's marks
 * nor its look for rows committed late below them. A day whose transaction fails (a statement or
 * lock timeout, a row that breaks it) costs that day only: the run goes on with the others and
 * answers it in `failed`, and it takes its turn after them next run; a failure to note that is the
 * database's, not the day's, and ends the run. Cheap when nothing is to do: one look at the counts
 * of those days, and for each busy day the newest mark and the rows after it (fewer than `every`,
 * once caught up).
 */
export async function buildDayMarks(em: Em, opts: Partial<DayMarkBuild> & { since?: string; formId?: string; now?: Date } = {})
  : Promise<DayMarksRun> {
  const o = { ...DEFAULT_DAY_MARK_BUILD, ...opts };
  const since = opts.since ?? utcDay(new Date((opts.now ?? new Date()).getTime() - 86_400_000));
  const busy = await listBusyDays(em, since, o.minRows, opts.formId);
  let walked = 0;
  let added = 0;
  let dropped = 0;
  const failed: DayMarksFailure[] = [];
  for (let pending = busy; pending.length;) {
    const more: BusyDay[] = [];
    for (const day of pending) {
      const limit = Math.min(o.perTransaction, o.perRun - walked);
      if (limit <= 0) return { days: busy.length, walked, added, dropped, failed, caughtUp: false };
      let step: { walked: number; added: number; dropped: number };
      try {
        step = await extendDayMarks(em, day, { every: o.every, marginMs: o.marginMs, limit });
      } catch (err) {
        const failure = await noteDayMarksFailure(em, day, err);
        if (failure) failed.push(failure);
        continue;
      }
      walked += step.walked;
      added += step.added;
      dropped += step.dropped;
      if (step.walked >= limit) more.push(day);
    }
    pending = more;
  }
  return { days: busy.length, walked, added, dropped, failed, caughtUp: true };
}
