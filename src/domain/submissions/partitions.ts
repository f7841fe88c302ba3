import type { Em } from '../../db/orm';
import { markFilesOfSubmissionsBefore } from '../files/store';
import { deleteDayCountsBefore } from './day-counts';
import { createSubmissionPartitions, dropSubmissionPartitionsBefore } from './store';

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
 * and their days leave the day counts with them.
 */
export async function dropExpiredSubmissionPartitions(em: Em, retentionMonths: number, now = new Date()): Promise<string[]> {
  const cutoff = retentionCutoff(retentionMonths, now);
  return dropSubmissionPartitionsBefore(em, cutoff, async (tx) => {
    await markFilesOfSubmissionsBefore(tx, cutoff);
    await deleteDayCountsBefore(tx, cutoff);
  });
}
