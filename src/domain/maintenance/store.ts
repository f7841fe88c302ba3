import type { Em } from '../../db/orm';
import { IDEMPOTENCY_TTL_HOURS } from '../submissions/idempotency-records';
import { endpointDisabledEventsSql, operationalDeliveriesSql } from '../webhooks/store';

// The statements of the hourly maintenance: expired idempotency records, webhooks failing too long,
// and the retention of ended outbox rows, deliveries and CRM syncs. (Its other parts have their own
// stores: the usage roll-up, the change feed's purge and partitions, the payments sweep.)

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

const RETENTION_CUTOFF = `now() - (? * interval '1 day')`;

/** Idempotency records older than their TTL; answers how many went. */
export async function deleteExpiredIdempotencyKeys(em: Em): Promise<number> {
  const deleted = await em.execute(
    `delete from idempotency_keys where created_at < now() - interval '${IDEMPOTENCY_TTL_HOURS} hours'`, [], 'run',
  );
  return (deleted as any).affectedRows;
}

/**
 * Disables the webhooks failing for more than `afterMs`, and in the same statement writes the
 * `endpoint.disabled` event of each (reason `failing`) for the webhooks subscribed to it; the
 * conditional update (`where enabled`) makes each disabling one event whatever runs at once. The
 * event deliveries reach the queue through the sweep of deliveries never queued. Answers how many
 * webhooks were disabled.
 */
export async function disableWebhooksFailingSince(em: Em, afterMs: number): Promise<number> {
  const [row] = await em.execute<Array<{ disabled: number }>>(
    `with x as (
       update webhooks set enabled = false, updated_at = now()
        where enabled and failing_since < now() - (? * interval '1 millisecond')
       returning id, organization_id, url, failing_since, 'failing'::text as reason
     ), e as (${endpointDisabledEventsSql('x')}
     ), ins as (${operationalDeliveriesSql('e', { notTo: 'x' })}
     )
     select (select count(*) from x)::int as disabled, (select count(*) from ins)::int as events`, [afterMs],
  );
  return row.disabled;
}

/** Outbox rows processed more than `retentionDays` ago. */
export async function deleteProcessedOutboxRows(em: Em, retentionDays: number): Promise<number> {
  return deleteInBatches(em, 'outbox', 'id', `processed_at < ${RETENTION_CUTOFF}`, [retentionDays]);
}

/** Ended deliveries (their attempts go with them) last changed more than `retentionDays` ago; pending ones stay. */
export async function deleteEndedDeliveries(em: Em, retentionDays: number): Promise<number> {
  return deleteInBatches(em, 'webhook_deliveries', 'id', `status <> 'pending' and updated_at < ${RETENTION_CUTOFF}`, [retentionDays]);
}

/** Ended CRM syncs last changed more than `retentionDays` ago; pending ones stay. */
export async function deleteEndedSyncs(em: Em, retentionDays: number): Promise<number> {
  return deleteInBatches(em, 'crm_syncs', 'id', `status <> 'pending' and updated_at < ${RETENTION_CUTOFF}`, [retentionDays]);
}
