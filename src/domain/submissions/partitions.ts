import type { Em } from '../../db/orm';
import { markFilesOfSubmissionsBefore } from '../files/store';
import { timeWindowOfId } from '../../lib/ids';
import { deleteDayCountsBefore, lockDayCountRepairs } from './day-counts';
import { deleteDayMarksBefore } from './day-marks';

/**
 * A submission's `created_at` window from the time inside its id (timeWindowOfId in ids.ts), as the
 * two timestamptz parameters of `created_at >= ? and created_at < ?`: a statement by id that names
 * them is planned on the id's month alone, where one without them plans and probes every month.
 * Open for a text that is no time-ordered id.
 */
export function idWindowParams(submissionId: string): [string, string] {
  const window = timeWindowOfId(submissionId);
  return window ? [window.from.toISOString(), window.until.toISOString()] : OPEN_WINDOW;
}

/**
 * The window that bounds nothing: for reading again, over every month, a row the id's window
 * missed. Rows stored before ids were time-ordered (Migration20261123000500_partitions moved them
 * with their random ids) have no time in their id; only a miss pays for them.
 */
export const OPEN_WINDOW: [string, string] = ['-infinity', 'infinity'];

/** Whether `window` is OPEN_WINDOW (a miss in it is final). */
export function isOpenWindow(window: [string, string]): boolean {
  return window[0] === OPEN_WINDOW[0] && window[1] === OPEN_WINDOW[1];
}

/** Months of submission partitions kept ready beyond the current one. */
export const PARTITION_MONTHS_AHEAD = 3;

/** Creates the partitions of this month and the next PARTITION_MONTHS_AHEAD that do not exist yet; names them. */
export async function ensureSubmissionPartitions(em: Em, now = new Date()): Promise<string[]> {
  return createSubmissionPartitions(em, now, PARTITION_MONTHS_AHEAD);
}

/**
 * The first instant that `retentionMonths` keeps: the start of the month `retentionMonths` before
 * the current one. The current month and the `retentionMonths` before it stay whole.
 */
export function retentionCutoff(retentionMonths: number, now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - retentionMonths, 1));
}

/**
 * Drops every month of submissions that ended before the retention cutoff, partition by partition;
 * names them. Their files go `deleting` first, in the same transaction, for the sweep to delete,
 * and their days leave the day counts and the day marks with them, after the DETACH: it waits for every writer still
 * in those months, so their counts are committed (or rolled back) when they are deleted, none is
 * left behind, and no writer waits on a count row this transaction holds while it waits on them.
 * A repair of the counts (repairFormDays) takes turns with it.
 */
export async function dropExpiredSubmissionPartitions(em: Em, retentionMonths: number, now = new Date()): Promise<string[]> {
  const cutoff = retentionCutoff(retentionMonths, now);
  return dropSubmissionPartitionsBefore(em, cutoff, async (tx) => {
    await lockDayCountRepairs(tx);
    await markFilesOfSubmissionsBefore(tx, cutoff);
  }, async (tx) => {
    await deleteDayCountsBefore(tx, cutoff);
    await deleteDayMarksBefore(tx, cutoff);
  });
}

/**
 * Partition DDL waits at most this long for its lock: an export streaming for minutes must not
 * hold new submissions back behind a waiting ALTER. The next maintenance run tries again, long
 * before the months ahead run out.
 */
const DDL_LOCK_TIMEOUT = '2s';

async function withDdlLock<T>(em: Em, run: (tx: Em) => Promise<T>): Promise<T> {
  return em.transactional(async (tx) => {
    await tx.execute(`set local lock_timeout = '${DDL_LOCK_TIMEOUT}'`);
    return run(tx);
  });
}

/** Creates the monthly partitions from `now`'s month to `monthsAhead` months later that do not exist yet; names them. */
export async function createSubmissionPartitions(em: Em, now: Date, monthsAhead: number): Promise<string[]> {
  return withDdlLock(em, async (tx) => {
    const rows = await tx.execute(
      `select ensure_submission_partitions(?::timestamptz, ?::timestamptz + make_interval(months => ?)) as name`,
      [now.toISOString(), now.toISOString(), monthsAhead],
    );
    return rows.map((r: any) => r.name as string);
  });
}

/** Drops every monthly partition that ended before `cutoff`, between `beforeDrop` and `afterDrop` in the same transaction; names them. */
export async function dropSubmissionPartitionsBefore(em: Em, cutoff: Date, beforeDrop?: (tx: Em) => Promise<unknown>,
  afterDrop?: (tx: Em) => Promise<unknown>): Promise<string[]> {
  return withDdlLock(em, async (tx) => {
    await beforeDrop?.(tx);
    const rows = await tx.execute('select drop_submission_partitions_before(?::timestamptz) as name',
      [cutoff.toISOString()]);
    await afterDrop?.(tx);
    return rows.map((r: any) => r.name as string);
  });
}
