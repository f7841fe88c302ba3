import type { Em } from '../../db/orm';
import { preparedQuery } from '../../db/prepared';
import { TickBatch } from '../../lib/tick-batch';
import { nextAttemptAt, rowStatus } from '../outbound/attempt';
import {
  ENDPOINT_DISABLED, MESSAGE_ATTEMPT_EXHAUSTED, MESSAGE_ATTEMPT_FAILING, MESSAGE_ATTEMPT_RECOVERED, OPERATIONAL_EVENTS,
} from './event-types';
import { AUTO_DISABLE_AFTER_MS, FAILING_AT_ATTEMPT, pauseAfter, STREAK_QUIET_MS, SUCCESS_MARK_MS, type DeliveryDecision } from './policy';
import type { DeliveryStatus } from './entities';
import type { SendResult } from './sender';

// The raw statements of webhooks and their deliveries: reading a delivery for its attempt, recording
// the attempt, counting an organization's webhooks, putting failed deliveries back to pending.
//
// A delivery's row is updated in place (HOT) only when the update changes no indexed column, so
// what the sweeps and recovery look for lives beside it (src/README.md, "Webhook deliveries and HOT
// updates"): a pending delivery has a row in `webhook_delivery_owed` with the time it is due, a
// failed one a row in `webhook_delivery_failed`. Every statement here that changes a delivery's
// status or due time writes them in the same statement, after the delivery's row (its row lock
// first, so two statements on one delivery never wait on each other crosswise).

/**
 * The owed rows of deliveries a statement just inserted: `inserted` names a CTE returning (id,
 * organization_id, webhook_id, next_attempt_at) of the new pending rows (the storing statement,
 * the fan-out, operational events).
 */
export function owedOfNewDeliveriesSql(inserted: string): string {
  return `insert into webhook_delivery_owed (delivery_id, organization_id, webhook_id, next_attempt_at)
  select id, organization_id, webhook_id, next_attempt_at from ${inserted}`;
}

/**
 * The owed rows of pending deliveries a statement just gave a due time (holds, releases, retries,
 * recovery): `moved` names a CTE returning (id, organization_id, webhook_id, next_attempt_at).
 */
function owedAtSql(moved: string): string {
  return `insert into webhook_delivery_owed (delivery_id, organization_id, webhook_id, next_attempt_at)
  select id, organization_id, webhook_id, next_attempt_at from ${moved}
  on conflict (delivery_id) do update set next_attempt_at = excluded.next_attempt_at`;
}

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
  /** Deliveries a second at most; null: unlimited. */
  throttle_rate: number | null;
  /** While a receiver's 429 holds the webhook back: the ms left; null otherwise. */
  paused_for_ms: number | null;
  attempts: number;
  retry_base: number;
}

/**
 * Whether a success writes the webhook row `w`: to end its streak, or to record the success when
 * the recorded one is older than SUCCESS_MARK_MS (policy.ts). Other successes leave the row alone,
 * so deliveries to one busy webhook do not queue on its row lock.
 */
const SUCCESS_WRITES_SQL = (w: string) => `(${w}.failing_since is not null or ${w}.last_success_at is null
  or ${w}.last_success_at < now() - interval '${SUCCESS_MARK_MS} milliseconds')`;

/** Whether a failure starts the streak of webhook row `w`: none running, and no success recorded within STREAK_QUIET_MS. */
const FAILURE_STARTS_STREAK_SQL = (w: string) => `(${w}.failing_since is null and (${w}.last_success_at is null
  or ${w}.last_success_at < now() - interval '${STREAK_QUIET_MS} milliseconds'))`;

/**
 * Whether webhook row `w`'s streak is still older than AUTO_DISABLE_AFTER_MS (policy.ts) when the
 * attempt is recorded: the decision to disable it was taken on the streak read before the attempt,
 * and a success recorded meanwhile by another job (a receiver coming back) ended that streak.
 */
const STREAK_STILL_TOO_LONG_SQL = (w: string) => `(${w}.failing_since < now() - interval '${AUTO_DISABLE_AFTER_MS} milliseconds')`;

/**
 * A first attempt that succeeded: the delivery's summary, the attempt, and the webhook's success
 * recorded and streak ended when SUCCESS_WRITES_SQL says so. Prepared, as nearly every attempt runs
 * it or its batched form. The delivery's failed row goes too: another job of it may have failed it
 * while this one was sending (its webhook disabled meanwhile: failDelivery), and the row read
 * before the send cannot say so (one index probe of a table of failed deliveries).
 */
const RECORD_SUCCEEDED_SQL = `
  with d as (
    update webhook_deliveries
       set attempts = attempts + 1, status = $1, last_status_code = $2, last_error = $3, next_attempt_at = $4, updated_at = now()
     where id = $5 returning id, attempts
  ), a as (
    insert into delivery_attempts (delivery_id, attempt_no, status_code, error, duration_ms, response_excerpt)
    select id, attempts, $6::int, $7::text, $8::int, $9::text from d
  ), owed as (
    delete from webhook_delivery_owed o using d where o.delivery_id = d.id
  ), unfailed as (
    delete from webhook_delivery_failed f using d where f.delivery_id = d.id
  )
  update webhooks w set failing_since = null, last_success_at = now() where w.id = $10 and ${SUCCESS_WRITES_SQL('w')}`;

/** The ISO 8601 UTC text of a timestamptz expression, as the service writes dates (`US`: to the microsecond, as stored). */
const isoSql = (expr: string, fraction: 'MS' | 'US' = 'MS') => `to_char(${expr} at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.${fraction}"Z"')`;

/** A fresh delivery id (20 characters, as newId's) made in the statement that writes the row. */
const NEW_DELIVERY_ID_SQL = `'dlv_' || substr(replace(gen_random_uuid()::text, '-', ''), 1, 20)`;

/**
 * Operational events as pending delivery rows, one per organization-wide webhook of the event's
 * organization that is enabled and subscribes to its type, never the webhook the event is about,
 * and their owed rows: two CTEs, `name` (returning the new deliveries' `id`) and `name_owed`.
 * `events` names a CTE with columns (event_id, type, organization_id, about, payload); the rows are
 * due now with no job group, so they reach the queue from the worker that wrote them or, if that
 * enqueue is lost, from the sweep of deliveries never queued (sweepUnqueued). The unique
 * (event_id, webhook_id) makes a second write of the same event a no-op. `notTo` names a CTE of
 * webhook ids the same statement disables (its snapshot still shows them enabled).
 */
export function operationalDeliveriesCtes(name: string, events: string, { notTo }: { notTo?: string } = {}): string {
  return `${name} as (
  insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, next_attempt_at)
  select ${NEW_DELIVERY_ID_SQL}, s.id, e.organization_id, e.event_id, e.type, e.payload, 'pending', now()
    from ${events} e
    join webhooks s on s.organization_id = e.organization_id and s.enabled and s.form_id is null
                   and s.events @> jsonb_build_array(e.type) and s.id <> e.about${notTo ? ` and s.id not in (select id from ${notTo})` : ''}
  on conflict (event_id, webhook_id) do nothing
  returning id, organization_id, webhook_id, next_attempt_at
), ${name}_owed as (
  ${owedOfNewDeliveriesSql(name)}
)`;
}

/**
 * The `endpoint.disabled` events of the webhooks a statement just disabled: `disabled` names a CTE
 * with columns (id, organization_id, failing_since, reason), one row per webhook whose `enabled` that
 * statement turned from true to false, so each disabling is one event. The event names the webhook
 * (its id and form) and never carries its URL, which may hold a secret (README, "Operational events").
 * The form is read from the statement's snapshot, where the row is as before the disabling (its form
 * is unchanged by it).
 */
export function endpointDisabledEventsSql(disabled: string): string {
  return `
  select x.event_id, '${ENDPOINT_DISABLED}'::text as type, x.organization_id, x.id as about,
         json_build_object('id', x.event_id, 'type', '${ENDPOINT_DISABLED}', 'createdAt', ${isoSql('now()')},
           'data', json_build_object('webhookId', x.id, 'formId', (select f.form_id from webhooks f where f.id = x.id), 'reason', x.reason,
             'failingSince', ${isoSql('x.failing_since')}))::text as payload
    from (select y.*, 'evt_' || substr(y.id, 4) || '_disabled_' || floor(extract(epoch from now()) * 1000)::bigint as event_id from ${disabled} y) x`;
}

/** Event types whose deliveries raise no `message.attempt.*` events of their own (no chains of them). */
const OPERATIONAL_TYPES_SQL = `(${OPERATIONAL_EVENTS.map((e) => `'${e}'`).join(', ')})`;

/**
 * Any attempt but a first one that succeeded: the attempt, the delivery's summary, the webhook's
 * streak, pause and switch, and the operational events this attempt raises, in one statement. The
 * delivery's row is locked first (`o`), so the values it had before the attempt are the latest
 * committed ones whatever ran meanwhile; each event is then decided on them:
 * - `message.attempt.failing`: a failure that is the 4th attempt of the current schedule;
 * - `message.attempt.exhausted`: a failure that ends the schedule (the decision says so);
 * - `message.attempt.recovered`: a success after a failed attempt;
 * each only when the row was still pending (a second run of one job after it ended raises nothing),
 * and `endpoint.disabled` only when this statement turned the webhook off (for a streak too long: only
 * while the streak is still that old, STREAK_STILL_TOO_LONG_SQL). Event ids derive from
 * the delivery and its attempt count (or the webhook and the moment), the rows from the unique key.
 * $11: a 429's pause in ms or null; $12: 'succeeded' | 'failed' | 'disable'; $13: the disabling's
 * reason; $14: whether the schedule is used up.
 */
const RECORD_ATTEMPT_SQL = `
  with o as (
    select id, status as old_status, last_error as old_error from webhook_deliveries where id = $5 for update
  ), d as (
    update webhook_deliveries w
       set attempts = w.attempts + 1, status = $1, last_status_code = $2, last_error = $3, next_attempt_at = $4, updated_at = now()
      from o where w.id = o.id
    returning w.id, w.attempts, w.retry_base, w.organization_id, w.webhook_id, w.event_id, w.event_type, w.last_status_code, w.created_at,
              w.next_attempt_at, o.old_status, o.old_error
  ), a as (
    insert into delivery_attempts (delivery_id, attempt_no, status_code, error, duration_ms, response_excerpt)
    select id, attempts, $6::int, $7::text, $8::int, $9::text from d
  ), owed as (
    ${owedAtSql("(select * from d where $1::text = 'pending') p")}
  ), unowed as (
    delete from webhook_delivery_owed o using d where o.delivery_id = d.id and $1::text <> 'pending'
  ), failed as (
    insert into webhook_delivery_failed (delivery_id, organization_id, webhook_id, created_at)
    select id, organization_id, webhook_id, created_at from d where $1::text = 'failed'
    on conflict (delivery_id) do nothing
  ), unfailed as (
    delete from webhook_delivery_failed f using d where f.delivery_id = d.id and $1::text <> 'failed'
  ), wh as (
    update webhooks w
       set failing_since = case when $12::text = 'succeeded' then null
                                when $12::text = 'disable' then coalesce(w.failing_since, now())
                                when ${FAILURE_STARTS_STREAK_SQL('w')} then now()
                                else w.failing_since end,
           last_success_at = case when $12::text = 'succeeded' then now() else w.last_success_at end,
           paused_until = case when $11::int is null then paused_until
                               else greatest(coalesce(paused_until, now()), now() + $11::int * interval '1 millisecond') end,
           enabled = enabled and $12::text <> 'disable',
           updated_at = case when $12::text = 'disable' then now() else updated_at end
     where id = $10 and (
       ($12::text = 'succeeded' and ${SUCCESS_WRITES_SQL('w')})
       or ($12::text = 'failed' and (${FAILURE_STARTS_STREAK_SQL('w')} or $11::int is not null))
       or ($12::text = 'disable' and enabled and ($13::text = 'gone' or ${STREAK_STILL_TOO_LONG_SQL('w')})))
    returning id, organization_id, failing_since, $13::text as reason, $12::text = 'disable' as disabled
  ), k as (
    select '${MESSAGE_ATTEMPT_FAILING}' as type from d
     where $12::text <> 'succeeded' and d.old_status = 'pending' and d.attempts - d.retry_base = ${FAILING_AT_ATTEMPT}
    union all
    select '${MESSAGE_ATTEMPT_EXHAUSTED}' from d where $14::boolean and d.old_status = 'pending'
    union all
    select '${MESSAGE_ATTEMPT_RECOVERED}' from d where $12::text = 'succeeded' and d.old_status = 'pending' and d.old_error is not null
  ), e as (
    select m.event_id, m.type, m.organization_id, m.webhook_id as about,
           json_build_object('id', m.event_id, 'type', m.type, 'createdAt', ${isoSql('now()')},
             'data', json_build_object('webhookId', m.webhook_id, 'deliveryId', m.id, 'eventId', m.about_event_id, 'eventType', m.event_type,
               'attempts', m.attempts, 'lastStatusCode', m.last_status_code))::text as payload
      from (select d.id, d.attempts, d.organization_id, d.webhook_id, d.event_id as about_event_id, d.event_type, d.last_status_code, k.type, 'evt_' || substr(d.id, 5) || '_' || split_part(k.type, '.', 3) || '_' || d.attempts as event_id
              from d cross join k where d.event_type not in ${OPERATIONAL_TYPES_SQL}) m
    union all
    ${endpointDisabledEventsSql('(select * from wh where disabled)')}
  ), ${operationalDeliveriesCtes('ops', 'e')}
  select id from ops`;

/** What the webhook row does after one attempt (RECORD_ATTEMPT_SQL's $12). */
function webhookUpdate(decision: DeliveryDecision): 'succeeded' | 'failed' | 'disable' {
  return decision.kind === 'succeeded' || decision.kind === 'disable' ? decision.kind : 'failed';
}

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
  ), owed as (
    delete from webhook_delivery_owed o using d where o.delivery_id = d.id
  ), unfailed as (
    delete from webhook_delivery_failed f using d where f.delivery_id = d.id
  )
  update webhooks w set failing_since = null, last_success_at = now()
   where w.id in (select x.id from webhooks x where x.id in (select webhook_id from i) and ${SUCCESS_WRITES_SQL('x')} order by x.id for no key update)
     and ${SUCCESS_WRITES_SQL('w')}`;

interface AttemptRecord { em: Em; row: DeliveryRow; result: SendResult; decision: DeliveryDecision; now: Date }

/**
 * A first attempt that succeeded can raise no operational event (there was no failure before it):
 * the plain statement. Anything else may, and goes through RECORD_ATTEMPT_SQL. Answers the ids of
 * the operational events' deliveries it wrote.
 */
async function recordOne({ em, row, result, decision, now }: AttemptRecord): Promise<string[]> {
  const params = [
    rowStatus(decision), result.statusCode, result.error, nextAttemptAt(decision, now), row.id,
    result.statusCode, result.error, result.durationMs, result.responseExcerpt, row.webhook_id,
  ];
  if (decision.kind === 'succeeded' && row.attempts === 0) {
    await preparedQuery(em, 'record_delivery_attempt_succeeded', RECORD_SUCCEEDED_SQL, params);
    return [];
  }
  const rows = await preparedQuery<{ id: string }>(em, 'record_delivery_attempt', RECORD_ATTEMPT_SQL, [
    ...params, pauseAfter(result.statusCode, result.retryAfterMs), webhookUpdate(decision),
    decision.kind === 'disable' ? (decision.reason === 'gone' ? 'gone' : 'failing') : null, decision.kind === 'failed',
  ]);
  return rows.map((r) => r.id);
}

async function recordMany(records: AttemptRecord[]): Promise<string[][]> {
  const succeeded = records.filter((r) => r.decision.kind === 'succeeded' && r.row.attempts === 0);
  const others = records.filter((r) => !succeeded.includes(r));
  // Alone, or the same delivery twice (not expected: one job per delivery), a record runs by itself.
  if (succeeded.length === 1 || new Set(succeeded.map((r) => r.row.id)).size !== succeeded.length) others.push(...succeeded.splice(0));
  const [, ...events] = await Promise.all([
    succeeded.length ? preparedQuery(succeeded[0].em, 'record_delivery_attempts_succeeded', RECORD_SUCCEEDED_MANY_SQL, [
      succeeded.map((r) => r.row.id), succeeded.map((r) => r.result.statusCode), succeeded.map((r) => r.result.error),
      succeeded.map((r) => r.result.durationMs), succeeded.map((r) => r.result.responseExcerpt), succeeded.map((r) => r.row.webhook_id),
    ]) : null,
    ...others.map(recordOne),
  ]);
  const byRecord = new Map(others.map((r, i) => [r, events[i]]));
  return records.map((r) => byRecord.get(r) ?? []);
}

/** One batch of each kind per ORM connection (the forks of one ORM share it). */
const recordBatches = new WeakMap<object, TickBatch<AttemptRecord, string[]>>();
const findBatches = new WeakMap<object, TickBatch<{ em: Em; id: string }, DeliveryRow | undefined>>();

function batchOf<I, R>(map: WeakMap<object, TickBatch<I, R>>, em: Em, run: (items: I[]) => Promise<R[]>): TickBatch<I, R> {
  const key = em.getConnection();
  let batch = map.get(key);
  if (!batch) map.set(key, batch = new TickBatch(run));
  return batch;
}

/**
 * The attempt, the delivery's summary and the webhook's failure streak change together, in one
 * statement. The webhook row is written only when its streak starts or ends or its last success is
 * due to be recorded again (policy.ts), so deliveries to one busy webhook do not queue on its row lock. Successful attempts recorded in the same turn of the
 * event loop (concurrent jobs) share one statement: a statement's round trip to PostgreSQL was, at a
 * thousand deliveries a second, the largest part of a worker's CPU.
 */
export async function recordDeliveryAttempt(em: Em, row: DeliveryRow, result: SendResult, decision: DeliveryDecision, now: Date): Promise<string[]> {
  return batchOf(recordBatches, em, recordMany).call({ em, row, result, decision, now });
}

const FIND_DELIVERY_SQL = `
  select d.id, d.organization_id, d.payload, d.status, d.event_type, d.event_id, d.attempts, d.retry_base, w.id as webhook_id, w.url, w.enabled, w.secret_sealed,
         case when w.previous_secret_expires_at > now() then w.previous_secret_sealed end as previous_secret_sealed, w.failing_since,
         w.throttle_rate, case when w.paused_until > now() then ceil(extract(epoch from w.paused_until - now()) * 1000)::int end as paused_for_ms
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

const HOLD_DELIVERIES_SQL = `
  with held as (
    update webhook_deliveries w set next_attempt_at = now() + t.wait_ms * interval '1 millisecond'
      from unnest($1::text[], $2::int[], $3::bool[]) as t(id, wait_ms, paused)
     where w.id = t.id and w.status = 'pending'
       and (not t.paused or exists (select 1 from webhooks h where h.id = w.webhook_id and h.paused_until > now()))
    returning w.id, w.organization_id, w.webhook_id, w.next_attempt_at
  )
  ${owedAtSql('held')}`;

type Hold = { em: Em; id: string; waitMs: number; paused: boolean };

const holdBatches = new WeakMap<object, TickBatch<Hold, void>>();

async function holdMany(items: Hold[]): Promise<void[]> {
  await preparedQuery(items[0].em, 'hold_deliveries', HOLD_DELIVERIES_SQL, [
    items.map((i) => i.id), items.map((i) => Math.ceil(i.waitMs)), items.map((i) => i.paused),
  ]);
  return items.map(() => undefined);
}

/**
 * A delivery held back without an attempt (its webhook's throttleRate, a receiver's pause) carries
 * the time it will be tried as its next attempt time: the delivery log shows it (`nextAttemptAt`)
 * and the sweeps of owed work pass it by until then, so a held backlog never sits in front of
 * another organization's lost enqueue. Holds of one turn of the event loop share one statement.
 * A hold for a pause (`paused`) is written only while the pause still runs: one lifted meanwhile (a
 * new URL, a retry, between this attempt's read and now) leaves the row due, and the sweep of owed
 * work brings its job forward rather than letting it wait out a pause that is over.
 */
export async function holdDelivery(em: Em, deliveryId: string, waitMs: number, { paused = false } = {}): Promise<void> {
  return batchOf(holdBatches, em, holdMany).call({ em, id: deliveryId, waitMs, paused });
}

/** Ends a receiver's pause of the webhook (paused_until, set by a 429's Retry-After); whether one was still running. */
export async function liftWebhookPause(em: Em, organizationId: string, webhookId: string): Promise<boolean> {
  const rows = await em.execute<Array<{ running: boolean }>>(
    `update webhooks w set paused_until = null from (select id, paused_until > now() as running from webhooks where id = ? and organization_id = ? for update) o
      where w.id = o.id and w.paused_until is not null returning o.running`,
    [webhookId, organizationId],
  );
  return rows.some((r) => r.running);
}

/** Held rows one release makes due at most (bounded work per request: about a second of writing). */
export const RELEASE_ROWS = 20_000;

/**
 * The webhook's held deliveries (pending and due later: the ones a pause or the throttle holds, and
 * retries waiting their delay) made due now, up to RELEASE_ROWS of them (those due soonest) in one
 * statement, skipping rows another call holds; answers the `limit` due soonest for the caller to
 * queue. The others' rows are due now too, and the sweep of owed work brings their delayed jobs
 * forward (Producer.requeue's `promoteDelayed`), so none waits out the old hold; past RELEASE_ROWS,
 * the next release (or the hold's end) takes them. `awaitingFirstAttempt`: only those whose current
 * schedule has made no attempt yet (waiting retries keep their delay).
 */
export async function releaseHeld(
  em: Em, organizationId: string, webhookId: string, limit: number, { awaitingFirstAttempt = false } = {},
): Promise<Array<{ id: string; jobGroup: string | null }>> {
  const rows = await em.execute<Array<{ id: string; job_group: string | null }>>(
    `with held as (
       select d.id, o.next_attempt_at as was from webhook_delivery_owed o join webhook_deliveries d on d.id = o.delivery_id
        where o.webhook_id = ? and o.organization_id = ? and o.next_attempt_at > now() and d.status = 'pending'
          ${awaitingFirstAttempt ? 'and d.attempts = d.retry_base' : ''}
        order by o.next_attempt_at, o.delivery_id limit ${RELEASE_ROWS}
        for no key update of d skip locked
     ), released as (
       update webhook_deliveries w set next_attempt_at = now() from held h
        where w.id = h.id and w.status = 'pending'
        returning w.id, w.job_group, w.organization_id, w.webhook_id, w.next_attempt_at, h.was
     ), owed as (
       ${owedAtSql('released')}
     )
     select id, job_group from released order by was, id limit ${Number(limit)}`,
    [webhookId, organizationId],
  );
  return rows.map((row) => ({ id: row.id, jobGroup: row.job_group }));
}

/** Ends a pending delivery without an attempt. */
export async function failDelivery(em: Em, deliveryId: string, reason: string): Promise<void> {
  await em.execute(
    `with d as (
       update webhook_deliveries set status = 'failed', last_error = ?, next_attempt_at = null, updated_at = now() where id = ?
       returning id, organization_id, webhook_id, created_at
     ), owed as (
       delete from webhook_delivery_owed o using d where o.delivery_id = d.id
     )
     insert into webhook_delivery_failed (delivery_id, organization_id, webhook_id, created_at)
     select id, organization_id, webhook_id, created_at from d
     on conflict (delivery_id) do nothing`,
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
 * fresh retry schedule; at most `limit`, oldest first, skipping rows another call holds. Found
 * through their failed rows, whose delivery is checked (and locked) before it is changed.
 */
export async function resetFailedDeliveries(
  em: Em, organizationId: string, webhookId: string, window: { since: Date; until: Date }, limit: number,
): Promise<Array<{ id: string; jobGroup: string | null }>> {
  const rows = await em.execute<Array<{ id: string; job_group: string | null }>>(
    `with chosen as (
       select d.id from webhook_delivery_failed f join webhook_deliveries d on d.id = f.delivery_id
        where f.webhook_id = ? and f.organization_id = ? and f.created_at >= ? and f.created_at < ? and d.status = 'failed'
        order by f.created_at, f.delivery_id limit ${limit}
        for no key update of d skip locked
     ), recovered as (
       update webhook_deliveries w set status = 'pending', next_attempt_at = now(), retry_base = attempts, updated_at = now()
         from chosen c where w.id = c.id and w.status = 'failed'
       returning w.id, w.job_group, w.organization_id, w.webhook_id, w.next_attempt_at, w.created_at
     ), owed as (
       ${owedAtSql('recovered')}
     ), unfailed as (
       delete from webhook_delivery_failed f using recovered r where f.delivery_id = r.id
     )
     select id, job_group from recovered order by created_at, id`,
    [webhookId, organizationId, window.since.toISOString(), window.until.toISOString()],
  );
  return rows.map((row) => ({ id: row.id, jobGroup: row.job_group }));
}

/** A delivery's row as the delivery log shows it (retryDelivery). */
export interface DeliveryLogRow {
  id: string;
  webhook_id: string;
  organization_id: string;
  event_id: string;
  event_type: string;
  payload: string;
  status: DeliveryStatus;
  attempts: number;
  retry_base: number;
  last_status_code: number | null;
  last_error: string | null;
  next_attempt_at: Date | null;
  job_group: string | null;
  created_at: Date;
  updated_at: Date;
}

/**
 * The delivery back to pending, due now, with a fresh retry schedule (its attempts so far become
 * the schedule's base), whatever its status; its owed row due now and its failed row gone.
 */
export async function retryDelivery(
  em: Em, organizationId: string, webhookId: string, deliveryId: string,
): Promise<DeliveryLogRow | undefined> {
  const [row] = await em.execute<DeliveryLogRow[]>(
    `with r as (
       update webhook_deliveries set status = 'pending', next_attempt_at = now(), updated_at = now(), retry_base = attempts
        where id = ? and webhook_id = ? and organization_id = ?
       returning *
     ), owed as (
       ${owedAtSql('r')}
     ), unfailed as (
       delete from webhook_delivery_failed f using r where f.delivery_id = r.id
     )
     select * from r`,
    [deliveryId, webhookId, organizationId],
  );
  return row;
}

/** The columns of `webhook_deliveries` that sideRowsCtes reads, as a select list (`due`: when a pending delivery is owed). */
export const SIDE_ROWS_SOURCE_COLUMNS = 'id, organization_id, webhook_id, status, coalesce(next_attempt_at, created_at) as due, created_at';

/**
 * The owed and failed rows of the deliveries of CTE `d` (SIDE_ROWS_SOURCE_COLUMNS) made what each
 * delivery says: an owed row due when it is for a pending one, a failed row with its creation time
 * for a failed one, neither for the others; each under the delivery's organization and webhook
 * (the release and recovery of a webhook's deliveries find them by the side rows' ones). Four CTEs, to follow others in a `with`; `d` is meant to
 * be materialized (each of them reads it).
 */
export function sideRowsCtes(d: string): string {
  return `side_owed as (
  insert into webhook_delivery_owed (delivery_id, organization_id, webhook_id, next_attempt_at)
  select id, organization_id, webhook_id, due from ${d} where status = 'pending'
  on conflict (delivery_id) do update
    set next_attempt_at = excluded.next_attempt_at, organization_id = excluded.organization_id, webhook_id = excluded.webhook_id
    where (webhook_delivery_owed.next_attempt_at, webhook_delivery_owed.organization_id, webhook_delivery_owed.webhook_id)
      is distinct from (excluded.next_attempt_at, excluded.organization_id, excluded.webhook_id)
), side_unowed as (
  delete from webhook_delivery_owed o using ${d} where o.delivery_id = ${d}.id and ${d}.status <> 'pending'
), side_failed as (
  insert into webhook_delivery_failed (delivery_id, organization_id, webhook_id, created_at)
  select id, organization_id, webhook_id, created_at from ${d} where status = 'failed'
  on conflict (delivery_id) do update
    set created_at = excluded.created_at, organization_id = excluded.organization_id, webhook_id = excluded.webhook_id
    where (webhook_delivery_failed.created_at, webhook_delivery_failed.organization_id, webhook_delivery_failed.webhook_id)
      is distinct from (excluded.created_at, excluded.organization_id, excluded.webhook_id)
), side_unfailed as (
  delete from webhook_delivery_failed f using ${d} where f.delivery_id = ${d}.id and ${d}.status <> 'failed'
)`;
}

/**
 * The owed and failed rows of these deliveries made what each delivery says now (webhook_deliveries
 * is the truth), and those of a delivery that no longer exists deleted: the sweep's repair of owed
 * rows it found out of step, and `deliveries repair`'s. Only a hand edit, or the previous release
 * before the triggers that bridged it existed (Migration20261128000201_delivery_owed_backfill),
 * leaves such rows. Each delivery's row is locked and read as it is now, and its side rows written
 * from that, so a statement that changed it since the caller looked (an attempt recorded, a retry)
 * is never undone; one that another statement holds is skipped, not waited for (no lock order to
 * keep with the service's statements, no deadlock). Answers the ids it settled: those it locked
 * and those with no delivery; the caller tries the others again.
 */
export async function repairSideRows(em: Em, deliveryIds: string[]): Promise<string[]> {
  const ids = JSON.stringify(deliveryIds);
  const rows = await em.execute<Array<{ id: string }>>(
    `with d as materialized (
       select ${SIDE_ROWS_SOURCE_COLUMNS} from webhook_deliveries
        where id in (select jsonb_array_elements_text(?::jsonb)) for no key update skip locked
     ), ${sideRowsCtes('d')}, gone as materialized (
       select i.id from jsonb_array_elements_text(?::jsonb) as i(id) where not exists (select from webhook_deliveries x where x.id = i.id)
     ), gone_owed as (
       delete from webhook_delivery_owed o using gone g where o.delivery_id = g.id
     ), gone_failed as (
       delete from webhook_delivery_failed f using gone g where f.delivery_id = g.id
     )
     select id from d union all select id from gone`,
    [ids, ids],
  );
  return rows.map((row) => row.id);
}

/**
 * A delivery and its owed and failed rows, as one snapshot shows them (`delivery` null: no delivery
 * of that id, its side rows outlived it). Times are ISO 8601 UTC text to the microsecond, as stored.
 */
export interface DeliveryWithSideRows {
  deliveryId: string;
  webhookId: string;
  delivery: { status: DeliveryStatus; due: string; createdAt: string } | null;
  /** The owed row's `next_attempt_at`; null: none. */
  owed: string | null;
  /** The failed row's `created_at`; null: none. */
  failed: string | null;
  /** Whether a side row is filed under another organization or webhook than its delivery's (a delivery moved by hand). */
  otherOwner?: boolean;
}

/** Where a walk through deliveries by (created_at, id) stopped: `at` is created_at as ISO 8601 UTC text to the microsecond (read back the same whatever the session's DateStyle and time zone). */
export interface CreatedCursor {
  at: string;
  id: string;
}

interface SideRowsRow {
  id: string;
  webhook_id: string;
  status: DeliveryStatus | null;
  due: string | null;
  created: string | null;
  owed: string | null;
  failed: string | null;
  other_owner?: boolean;
}

function withSideRows(row: SideRowsRow): DeliveryWithSideRows {
  return {
    deliveryId: row.id, webhookId: row.webhook_id, owed: row.owed, failed: row.failed, ...(row.other_owner ? { otherOwner: true } : {}),
    delivery: row.status === null ? null : { status: row.status, due: row.due!, createdAt: row.created! },
  };
}

/**
 * Up to `limit` deliveries (of `webhookId`, or all) after `after` in (created_at, id) order, each
 * with its owed and failed rows, in one snapshot; the walk's cursor is the last one's. Read through
 * `webhook_deliveries_created_idx` (or, for one webhook, the delivery log's index), never a status.
 */
export async function readDeliveriesWithSideRows(
  em: Em, { webhookId, after, limit }: { webhookId?: string; after: CreatedCursor | null; limit: number },
): Promise<{ rows: DeliveryWithSideRows[]; last: CreatedCursor | null }> {
  const params: unknown[] = [];
  const where: string[] = [];
  if (webhookId !== undefined) {
    where.push('webhook_id = ?');
    params.push(webhookId);
  }
  if (after) {
    where.push('created_at >= ?::timestamptz and (created_at, id) > (?::timestamptz, ?)');
    params.push(after.at, after.at, after.id);
  }
  const rows = await em.execute<SideRowsRow[]>(
    `with page as materialized (
       select id, organization_id, webhook_id, status, next_attempt_at, created_at from webhook_deliveries
        ${where.length ? `where ${where.join(' and ')}` : ''}
        order by created_at, id limit ${Number(limit)}
     )
     select p.id, p.webhook_id, p.status, ${isoSql('coalesce(p.next_attempt_at, p.created_at)', 'US')} as due,
            ${isoSql('p.created_at', 'US')} as created, ${isoSql('o.next_attempt_at', 'US')} as owed, ${isoSql('f.created_at', 'US')} as failed,
            (o.delivery_id is not null and (o.organization_id, o.webhook_id) is distinct from (p.organization_id, p.webhook_id))
              or (f.delivery_id is not null and (f.organization_id, f.webhook_id) is distinct from (p.organization_id, p.webhook_id)) as other_owner
       from page p
       left join webhook_delivery_owed o on o.delivery_id = p.id
       left join webhook_delivery_failed f on f.delivery_id = p.id
      order by p.created_at, p.id`,
    params,
  );
  const last = rows[rows.length - 1];
  return { rows: rows.map(withSideRows), last: last ? { at: last.created!, id: last.id } : null };
}

/**
 * Side rows whose delivery no longer exists (deleted by hand: no foreign key ties them to it), of
 * the table `side`, among up to `limit` of its rows (of `webhookId`, or all) after `after` in
 * delivery id order: `seen` of them read, the last one's id the walk's cursor. Each comes with the
 * other table's row of its delivery; the failed table's leave out those that have an owed row
 * (the walk of the owed table named them).
 */
export async function readSideRowsWithoutDelivery(
  em: Em, side: 'owed' | 'failed', { webhookId, after, limit }: { webhookId?: string; after: string; limit: number },
): Promise<{ rows: DeliveryWithSideRows[]; seen: number; last: string | null }> {
  const table = side === 'owed' ? 'webhook_delivery_owed' : 'webhook_delivery_failed';
  const [page] = await em.execute<Array<{ rows: SideRowsRow[]; seen: number; last: string | null }>>(
    `with page as materialized (
       select delivery_id, webhook_id from ${table}
        where delivery_id > ? ${webhookId !== undefined ? 'and webhook_id = ?' : ''}
        order by delivery_id limit ${Number(limit)}
     ), orphans as (
       select p.delivery_id as id, p.webhook_id, null as status, null as due, null as created,
              ${isoSql('o.next_attempt_at', 'US')} as owed, ${isoSql('f.created_at', 'US')} as failed
         from page p
         left join webhook_delivery_owed o on o.delivery_id = p.delivery_id
         left join webhook_delivery_failed f on f.delivery_id = p.delivery_id
        where not exists (select from webhook_deliveries d where d.id = p.delivery_id)
          ${side === 'failed' ? 'and o.delivery_id is null' : ''}
     )
     select coalesce((select json_agg(x order by x.id) from orphans x), '[]') as rows,
            (select count(*) from page)::int as seen, (select max(delivery_id) from page) as last`,
    webhookId !== undefined ? [after, webhookId] : [after],
  );
  return { rows: page.rows.map(withSideRows), seen: page.seen, last: page.last };
}
