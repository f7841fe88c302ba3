import type { Em } from '../../db/orm';
import { SUBMISSION_CREATED_TOPIC, SUBMISSION_DELETED_TOPIC } from '../submissions/fanout-store';

// The statements of the outbox (rows committed with the submission that its fan-out must handle)
// and of the work still owed on deliveries and syncs.

const RELAY_BATCH = 500;
/** A row the relay handed over is looked at again after this, doubling each time up to the cap. */
const RELAY_BACKOFF_FIRST_SECONDS = 10;
const RELAY_BACKOFF_MAX_SECONDS = 1800;

export interface RelayRow {
  id: string;
  topic: typeof SUBMISSION_CREATED_TOPIC | typeof SUBMISSION_DELETED_TOPIC;
  submission_id: string;
  relay_attempts: number;
}

/** Due rows of both topics, oldest relay time first, locked for this relay (`skip locked`: relays run side by side). */
export async function claimRelayBatch(tx: Em): Promise<RelayRow[]> {
  return tx.execute(
    `select id::text as id, topic, payload->>'submissionId' as submission_id, relay_attempts from outbox
      where processed_at is null and topic in (?, ?) and next_relay_at <= now()
      order by next_relay_at limit ${RELAY_BATCH} for update skip locked`,
    [SUBMISSION_CREATED_TOPIC, SUBMISSION_DELETED_TOPIC],
  );
}

/** Each relay of a row pushes its next relay time back, doubling up to the cap. */
export async function postponeRelay(tx: Em, ids: string[]): Promise<void> {
  await tx.execute(
    `update outbox set relay_attempts = relay_attempts + 1,
            next_relay_at = now() + least(${RELAY_BACKOFF_FIRST_SECONDS} * power(2, least(relay_attempts, 20)), ${RELAY_BACKOFF_MAX_SECONDS}) * interval '1 second'
      where id = any(string_to_array(?, ',')::bigint[])`,
    [ids.join(',')],
  );
}

/** The fan-out is done with a row (or it had nothing to do). */
export async function markOutboxProcessed(em: Em, outboxId: string): Promise<void> {
  await em.execute('update outbox set processed_at = now() where id = ? and processed_at is null', [outboxId]);
}

/** Rows the fan-out has not handled yet. */
export async function countOutboxBacklog(em: Em): Promise<number> {
  const [row] = await em.getConnection().execute('select count(*)::int as n from outbox where processed_at is null');
  return row.n;
}

export const OWED_BATCH = 500;

/** Where a sweep's paging through overdue rows stands: the last row it looked at (its exact time, as text). */
export interface OwedCursor {
  at: string;
  id: string;
}

export interface OwedRow {
  id: string;
  job_group: string | null;
  /** next_attempt_at as PostgreSQL's text, exact to the microsecond (a Date would round it to the millisecond). */
  at: string;
  /**
   * Whether the row that says the work is owed agrees with the delivery's own (for a delivery: it is
   * still pending, due at that time); one that does not is repaired, not queued. Syncs: always.
   */
  agrees: boolean;
}

/**
 * Pending CRM syncs whose next attempt is overdue by more than `graceMs`, in (next_attempt_at, id)
 * order, at most OWED_BATCH, after `after` when given (keyset paging: a sweep pages past the rows it
 * could not queue, rather than reading the same oldest rows every run); with `neverAttempted`, only
 * those whose first attempt has not been made.
 */
export async function findOverdueSyncs(em: Em, graceMs: number, neverAttempted = false, after: OwedCursor | null = null): Promise<OwedRow[]> {
  return em.execute<OwedRow[]>(
    `select id, null as job_group, next_attempt_at::text as at, true as agrees from crm_syncs
      where status = 'pending' and next_attempt_at < now() - (? * interval '1 millisecond')
        ${neverAttempted ? 'and attempts = 0' : ''}
        ${after ? 'and (next_attempt_at, id) > (?::timestamptz, ?)' : ''}
      order by next_attempt_at, id limit ${OWED_BATCH}`,
    after ? [graceMs, after.at, after.id] : [graceMs],
  );
}

/**
 * Deliveries owed and overdue by more than `graceMs`, as findOverdueSyncs pages them, read from their
 * owed rows (`webhook_delivery_owed`, src/README.md "Webhook deliveries and HOT updates"), each with
 * its delivery's job_group (the group job that may still hold it). With `neverAttempted`, only those
 * whose first attempt has not been made, and any whose owed row disagrees with the delivery (for
 * repairSideRows).
 */
export async function findOverdueDeliveries(
  em: Em, graceMs: number, neverAttempted = false, after: OwedCursor | null = null,
): Promise<OwedRow[]> {
  return em.execute<OwedRow[]>(
    `select o.delivery_id as id, d.job_group, o.next_attempt_at::text as at, x.agrees
       from webhook_delivery_owed o
       left join webhook_deliveries d on d.id = o.delivery_id
       cross join lateral (select coalesce(d.status = 'pending' and coalesce(d.next_attempt_at, d.created_at) = o.next_attempt_at, false) as agrees) x
      where o.next_attempt_at < now() - (? * interval '1 millisecond')
        ${neverAttempted ? 'and (d.attempts = 0 or not x.agrees)' : ''}
        ${after ? 'and (o.next_attempt_at, o.delivery_id) > (?::timestamptz, ?)' : ''}
      order by o.next_attempt_at, o.delivery_id limit ${OWED_BATCH}`,
    after ? [graceMs, after.at, after.id] : [graceMs],
  );
}
