import type { Em } from '../../db/orm';
import { foldDayCounts } from '../submissions/day-counts';
import { rollupUsage } from '../usage/rollup';
import { repairRecentDayCounts } from './day-count-repair';
import { AUTO_DISABLE_AFTER_MS } from '../webhooks/policy';
import {
  deleteEndedDeliveries, deleteEndedSyncs, deleteExpiredIdempotencyKeys, deleteProcessedOutboxRows, disableWebhooksFailingSince,
} from './store';

export interface MaintenanceReport {
  idempotencyKeysDeleted: number;
  webhooksDisabled: number;
  outboxRowsDeleted: number;
  deliveriesDeleted: number;
  crmSyncsDeleted: number;
  dayCountsRepaired: number;
  /** Why the repair of recently written days stopped (null: it did not); it starts again from its mark next run. */
  dayCountsRepairFailed: string | null;
  /** Forms whose days the repair passed over (a day's count ran past the statement timeout): for `counts repair --form`. */
  dayCountsRepairSkipped: Array<{ formId: string; days: string[] }>;
  /** Submissions stored while their form was deleted by hand, which the repair found and deleted. */
  orphanSubmissionsDeleted: number;
  dayCountsFolded: number;
}

/**
 * Expired idempotency records go; webhooks failing for more than 5 days are disabled; the day
 * counts of every (form, day) written since the previous run are rebuilt from the rows
 * (repairRecentDayCounts: what a previous release stored or deleted without counting during a
 * rolling deploy heals within the hour; a submission stored while its form was deleted by hand is
 * deleted), then the usage roll-up is recounted in full (deleted submissions leave it); past the
 * retention period, processed outbox rows, ended deliveries (their attempts go with them) and ended
 * CRM syncs are removed. Pending ones stay whatever their age: they are still owed. The slots of
 * the forms' past days are folded into one each (foldDayCounts).
 */
export async function runMaintenance(em: Em, opts: { retentionDays: number } = { retentionDays: 30 }): Promise<MaintenanceReport> {
  const idempotencyKeysDeleted = await deleteExpiredIdempotencyKeys(em);
  const webhooksDisabled = await disableWebhooksFailingSince(em, AUTO_DISABLE_AFTER_MS);
  // The repair reads the rows: a lock timeout behind retention's DETACH, or a statement timeout on a
  // heavy hour, stops it where its mark is, never the rest of the maintenance (nor, after it, the
  // partitions the usage worker creates ahead).
  let dayCountsRepaired = 0;
  let dayCountsRepairFailed: string | null = null;
  let dayCountsRepairSkipped: MaintenanceReport['dayCountsRepairSkipped'] = [];
  let orphanSubmissionsDeleted = 0;
  try {
    const { repaired, skipped, orphansDeleted } = await repairRecentDayCounts(em);
    dayCountsRepaired = repaired.length;
    dayCountsRepairSkipped = skipped;
    orphanSubmissionsDeleted = orphansDeleted;
  } catch (err) {
    dayCountsRepairFailed = (err as Error).message;
  }
  await rollupUsage(em, { full: true });
  return {
    idempotencyKeysDeleted,
    webhooksDisabled,
    dayCountsRepaired,
    dayCountsRepairFailed,
    dayCountsRepairSkipped,
    orphanSubmissionsDeleted,
    outboxRowsDeleted: await deleteProcessedOutboxRows(em, opts.retentionDays),
    deliveriesDeleted: await deleteEndedDeliveries(em, opts.retentionDays),
    crmSyncsDeleted: await deleteEndedSyncs(em, opts.retentionDays),
    dayCountsFolded: await foldDayCounts(em),
  };
}
