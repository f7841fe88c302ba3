import type { Em } from '../../db/orm';
import { preparedQuery } from '../../db/prepared';
import { TickBatch } from '../../lib/tick-batch';
import { nextAttemptAt, rowStatus } from '../outbound/attempt';
import type { DeliveryDecision } from './policy';
import type { SendResult } from './sender';

// The raw statements of webhooks and their deliveries: reading a delivery for its attempt, recording
// the attempt, counting an organization's webhooks, putting failed deliveries back to pending.

export interface DeliveryRow {
  id: string;
  organization_id: string;
  payload: string;
  status: string;
  event_type: string;
  event_id: string;
  webhook_id: string;
  url: string;
  enabled: boolean;
  secret_sealed: string;
  /** Set only while the rotated-out secret is within its grace. */
  previous_secret_sealed: string | null;
  failing_since: Date | null;
  attempts: number;
  retry_base: number;
}

/** How the webhook's failure streak (and, on `disable`, its switch) follows one attempt. */
const WEBHOOK_UPDATE = {
  succeeded: 'update webhooks set failing_since = null where id = $10 and failing_since is not null',
  failed: 'update webhooks set failing_since = now() where id = $10 and failing_since is null',
  disable: 'update webhooks set enabled = false, failing_since = coalesce(failing_since, now()), updated_at = now() where id = $10',
};

function webhookUpdate(decision: DeliveryDecision): keyof typeof WEBHOOK_UPDATE {
  return decision.kind === 'succeeded' || decision.kind === 'disable' ? decision.kind : 'failed';
}

/** One statement per way the webhook's streak follows; prepared, as every attempt runs one. */
const RECORD_ATTEMPT_SQL = Object.fromEntries(Object.entries(WEBHOOK_UPDATE).map(([kind, webhookSql]) => [kind, `
  with d as (
    update webhook_deliveries
       set attempts = attempts + 1, status = $1, last_status_code = $2, last_error = $3, next_attempt_at = $4, updated_at = now()
     where id = $5 returning id, attempts
  ), a as (
    insert into delivery_attempts (delivery_id, attempt_no, status_code, error, duration_ms, response_excerpt)
    select id, attempts, $6::int, $7::text, $8::int, $9::text from d
  )
  ${webhookSql}`])) as Record<keyof typeof WEBHOOK_UPDATE, string>;

/**
 * Successful attempts recorded in one turn of the event loop, in one statement (the same effect as
 * one RECORD_ATTEMPT_SQL.succeeded each). The webhooks whose streak ends are locked in id order, so
 * two worker processes' batches never wait on each other crosswise.
 */
const RECORD_SUCCEEDED_MANY_SQL = `
  with i as (
    select * from unnest($1::text[], $2::int[], $3::text[], $4::int[], $5::text[], $6::text[])
      as t(id, status_code, error, duration_ms, response_excerpt, webhook_id)
  ), d as (
    update webhook_deliveries w
       set attempts = w.attempts + 1, status = 'succeeded', last_status_code = i.status_code, last_error = i.error, next_attempt_at = null, updated_at = now()
      from i where w.id = i.id returning w.id, w.attempts
  ), a as (
    insert into delivery_attempts (delivery_id, attempt_no, status_code, error, duration_ms, response_excerpt)
    select d.id, d.attempts, i.status_code, i.error, i.duration_ms, i.response_excerpt from d join i on i.id = d.id
  )
  update webhooks set failing_since = null
   where id in (select id from webhooks where id in (select webhook_id from i) and failing_since is not null order by id for no key update)
     and failing_since is not null`;

interface AttemptRecord { em: Em; row: DeliveryRow; result: SendResult; decision: DeliveryDecision; now: Date }

function recordOne({ em, row, result, decision, now }: AttemptRecord): Promise<unknown> {
  const kind = webhookUpdate(decision);
  return preparedQuery(em, `record_delivery_attempt_${kind}`, RECORD_ATTEMPT_SQL[kind], [
    rowStatus(decision), result.statusCode, result.error, nextAttemptAt(decision, now), row.id,
    result.statusCode, result.error, result.durationMs, result.responseExcerpt, row.webhook_id,
  ]);
}

async function recordMany(records: AttemptRecord[]): Promise<void[]> {
  const succeeded = records.filter((r) => r.decision.kind === 'succeeded');
  const others = records.filter((r) => r.decision.kind !== 'succeeded');
  // Alone, or the same delivery twice (not expected: one job per delivery), a record runs by itself.
  if (succeeded.length === 1 || new Set(succeeded.map((r) => r.row.id)).size !== succeeded.length) others.push(...succeeded.splice(0));
  await Promise.all([
    succeeded.length ? preparedQuery(succeeded[0].em, 'record_delivery_attempts_succeeded', RECORD_SUCCEEDED_MANY_SQL, [
      succeeded.map((r) => r.row.id), succeeded.map((r) => r.result.statusCode), succeeded.map((r) => r.result.error),
      succeeded.map((r) => r.result.durationMs), succeeded.map((r) => r.result.responseExcerpt), succeeded.map((r) => r.row.webhook_id),
    ]) : null,
    ...others.map(recordOne),
  ]);
  return records.map(() => undefined);
}

/** One batch of each kind per ORM connection (the forks of one ORM share it). */
const recordBatches = new WeakMap<object, TickBatch<AttemptRecord, void>>();
const findBatches = new WeakMap<object, TickBatch<{ em: Em; id: string }, DeliveryRow | undefined>>();

function batchOf<I, R>(map: WeakMap<object, TickBatch<I, R>>, em: Em, run: (items: I[]) => Promise<R[]>): TickBatch<I, R> {
  const key = em.getConnection();
  let batch = map.get(key);
  if (!batch) map.set(key, batch = new TickBatch(run));
  return batch;
}

/**
 * The attempt, the delivery's summary and the webhook's failure streak change together, in one
 * statement. The webhook row is written only when its streak starts or ends, so deliveries to one
 * busy webhook do not queue on its row lock. Successful attempts recorded in the same turn of the
 * event loop (concurrent jobs) share one statement: a statement's round trip to PostgreSQL was, at a
 * thousand deliveries a second, the largest part of a worker's CPU.
 */
export async function recordDeliveryAttempt(em: Em, row: DeliveryRow, result: SendResult, decision: DeliveryDecision, now: Date): Promise<void> {
  await batchOf(recordBatches, em, recordMany).call({ em, row, result, decision, now });
}

const FIND_DELIVERY_SQL = `
  select d.id, d.organization_id, d.payload, d.status, d.event_type, d.event_id, d.attempts, d.retry_base, w.id as webhook_id, w.url, w.enabled, w.secret_sealed,
         case when w.previous_secret_expires_at > now() then w.previous_secret_sealed end as previous_secret_sealed, w.failing_since
    from webhook_deliveries d join webhooks w on w.id = d.webhook_id`;

async function findMany(items: Array<{ em: Em; id: string }>): Promise<Array<DeliveryRow | undefined>> {
  const rows = items.length === 1
    ? await preparedQuery<DeliveryRow>(items[0].em, 'find_delivery_for_attempt', `${FIND_DELIVERY_SQL} where d.id = $1`, [items[0].id])
    : await preparedQuery<DeliveryRow>(items[0].em, 'find_deliveries_for_attempt', `${FIND_DELIVERY_SQL} where d.id = any($1::text[])`,
      [[...new Set(items.map((item) => item.id))]]);
  const byId = new Map(rows.map((row) => [row.id, row]));
  // Each caller gets its own copy: no row is shared by two jobs.
  return items.map((item) => { const row = byId.get(item.id); return row && { ...row }; });
}

/**
 * A delivery, with its webhook's URL, secrets and failure streak; the previous secret only within
 * its grace. Reads asked for in the same turn of the event loop (concurrent jobs) share one statement.
 */
export async function findDeliveryForAttempt(em: Em, deliveryId: string): Promise<DeliveryRow | undefined> {
  return batchOf(findBatches, em, findMany).call({ em, id: deliveryId });
}

/** Ends a pending delivery without an attempt. */
export async function failDelivery(em: Em, deliveryId: string, reason: string): Promise<void> {
  await em.execute(
    `update webhook_deliveries set status = 'failed', last_error = ?, next_attempt_at = null, updated_at = now() where id = ?`,
    [reason, deliveryId],
  );
}

/**
 * Locks the organization's row (so concurrent creates take turns) and counts its webhooks. Meant to
 * run inside the creating transaction.
 */
export async function lockOrganizationCountingWebhooks(tx: Em, organizationId: string): Promise<number> {
  await tx.execute('select 1 from organizations where id = ? for no key update', [organizationId]);
  const [{ count }] = await tx.execute('select count(*)::int as count from webhooks where organization_id = ?', [organizationId]);
  return count;
}

/**
 * Failed deliveries of the webhook created in [since, until) back to pending, due now, each with a
 * fresh retry schedule; at most `limit`, oldest first, skipping rows another call holds.
 */
export async function resetFailedDeliveries(
  em: Em, organizationId: string, webhookId: string, window: { since: Date; until: Date }, limit: number,
): Promise<Array<{ id: string; jobGroup: string | null }>> {
  const rows = await em.execute<Array<{ id: string; job_group: string | null }>>(
    `update webhook_deliveries set status = 'pending', next_attempt_at = now(), retry_base = attempts, updated_at = now()
      where id in (
        select id from webhook_deliveries
         where webhook_id = ? and organization_id = ? and status = 'failed' and created_at >= ? and created_at < ?
         order by created_at, id limit ${limit}
         for update skip locked)
        and status = 'failed'
      returning id, job_group`,
    [webhookId, organizationId, window.since.toISOString(), window.until.toISOString()],
  );
  return rows.map((row) => ({ id: row.id, jobGroup: row.job_group }));
}
