import type { Em } from '../../db/orm';
import { IDEMPOTENCY_TTL_HOURS } from '../submissions/idempotency-records';
import { endpointDisabledEventsSql, operationalDeliveriesCtes } from '../webhooks/store';

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
     ), ${operationalDeliveriesCtes('ins', 'e', { notTo: 'x' })}
     select (select count(*) from x)::int as disabled, (select count(*) from ins)::int as events`, [afterMs],
  );
  return row.disabled;
}

/** Outbox rows processed more than `retentionDays` ago. */
export async function deleteProcessedOutboxRows(em: Em, retentionDays: number): Promise<number> {
  return deleteInBatches(em, 'outbox', 'id', `processed_at < ${RETENTION_CUTOFF}`, [retentionDays]);
}

/** Where retention's walk through deliveries by creation time stopped in this process (the next run goes on from there). */
let deliveriesCursor: { at: string; id: string } | null = null;

/**
 * Ended deliveries (their attempts and failed rows go with them) last changed more than
 * `retentionDays` ago; pending ones stay. Found by `created_at`, which is never updated (an index
 * on `updated_at` or `status` would keep every attempt's update from being HOT: src/README.md,
 * "Webhook deliveries and HOT updates"): a delivery is changed after it is created, so every row the
 * rule deletes was created before the cutoff too, and the rule itself is checked on each row. Not
 * every row created before the cutoff has ended by it (a recovery or a retry starts a delivery's
 * attempts again, a throttled backlog waits its turn), so the walk pages by (created_at, id) past
 * the rows it keeps, RETENTION_MAX_BATCHES pages a run at most, and the next run goes on from where
 * it stopped (wrapping to the oldest once at the end): rows kept at the front never stand in front
 * of the rest. Answers how many went.
 */
export async function deleteEndedDeliveries(em: Em, retentionDays: number): Promise<number> {
  let after = deliveriesCursor;
  let mayWrap = after !== null;
  let total = 0;
  for (let i = 0; i < RETENTION_MAX_BATCHES; i++) {
    const [page] = await em.execute<Array<{ deleted: number; seen: number; at: string | null; id: string | null }>>(
      `with page as materialized (
         select id, created_at from webhook_deliveries
          where created_at < ${RETENTION_CUTOFF}
            ${after ? 'and (created_at, id) > (?::timestamptz, ?)' : ''}
          order by created_at, id limit ${RETENTION_BATCH}
       ), gone as (
         delete from webhook_deliveries d using page p
          where d.id = p.id and d.status <> 'pending' and d.updated_at < ${RETENTION_CUTOFF}
         returning d.id
       ), unfailed as (
         delete from webhook_delivery_failed f using gone g where f.delivery_id = g.id
       ), last as (
         select created_at::text as at, id from page order by created_at desc, id desc limit 1
       )
       select (select count(*) from gone)::int as deleted, (select count(*) from page)::int as seen,
              (select at from last) as at, (select id from last) as id`,
      after ? [retentionDays, after.at, after.id, retentionDays] : [retentionDays, retentionDays],
    );
    total += page.deleted;
    if (page.seen === RETENTION_BATCH) {
      after = { at: page.at!, id: page.id! };
      continue;
    }
    after = null;
    if (!mayWrap) break;
    mayWrap = false;
  }
  deliveriesCursor = after;
  return total;
}

/** Ended CRM syncs last changed more than `retentionDays` ago; pending ones stay. */
export async function deleteEndedSyncs(em: Em, retentionDays: number): Promise<number> {
  return deleteInBatches(em, 'crm_syncs', 'id', `status <> 'pending' and updated_at < ${RETENTION_CUTOFF}`, [retentionDays]);
}
