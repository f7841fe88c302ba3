import type { Em } from '../../db/orm';
import { IDEMPOTENCY_TTL_HOURS } from '../submissions/store';
import { rollupUsage } from '../usage/rollup';
import { AUTO_DISABLE_AFTER_MS } from '../webhooks/policy';

export interface MaintenanceReport {
  idempotencyKeysDeleted: number;
  webhooksDisabled: number;
  outboxRowsDeleted: number;
  deliveriesDeleted: number;
  crmSyncsDeleted: number;
}

const RETENTION_BATCH = 2_000;
/** Batches per table and run: a large backlog is worked off over several hourly runs. */
const RETENTION_MAX_BATCHES = 25;

/** Deletes in small batches (each well inside the statement timeout) until none is left or the cap is hit. */
async function deleteInBatches(em: Em, table: string, idColumn: string, where: string, params: unknown[]): Promise<number> {
  let total = 0;
  for (let i = 0; i < RETENTION_MAX_BATCHES; i++) {
    const result = await em.execute(
      `delete from ${table} where ${idColumn} in (select ${idColumn} from ${table} where ${where} limit ${RETENTION_BATCH})`, params, 'run',
    );
    const deleted = (result as any).affectedRows as number;
    total += deleted;
    if (deleted < RETENTION_BATCH) break;
  }
  return total;
}

/**
 * Expired idempotency records go; webhooks failing for more than 5 days are disabled; the usage
 * roll-up is recounted in full (deleted submissions leave it); past the
 * retention period, processed outbox rows, ended deliveries (their attempts go with them) and ended
 * CRM syncs are removed. Pending ones stay whatever their age: they are still owed.
 */
export async function runMaintenance(em: Em, opts: { retentionDays: number } = { retentionDays: 30 }): Promise<MaintenanceReport> {
  const deleted = await em.execute(
    `delete from idempotency_keys where created_at < now() - interval '${IDEMPOTENCY_TTL_HOURS} hours'`, [], 'run',
  );
  const disabled = await em.execute(
    `update webhooks set enabled = false, updated_at = now()
      where enabled and failing_since < now() - (? * interval '1 millisecond')`, [AUTO_DISABLE_AFTER_MS], 'run',
  );
  await rollupUsage(em, { full: true });
  const days = [opts.retentionDays];
  const cutoff = `now() - (? * interval '1 day')`;
  return {
    idempotencyKeysDeleted: (deleted as any).affectedRows,
    webhooksDisabled: (disabled as any).affectedRows,
    outboxRowsDeleted: await deleteInBatches(em, 'outbox', 'id', `processed_at < ${cutoff}`, days),
    deliveriesDeleted: await deleteInBatches(em, 'webhook_deliveries', 'id', `status <> 'pending' and updated_at < ${cutoff}`, days),
    crmSyncsDeleted: await deleteInBatches(em, 'crm_syncs', 'id', `status <> 'pending' and updated_at < ${cutoff}`, days),
  };
}
