/** A statement runner of a test (`?` placeholders): `stack.api.query`, `(sql, params) => em.execute(sql, params)`. */
type Query = (sql: string, params?: unknown[]) => Promise<unknown>;

/**
 * Deliveries a test writes or changes by hand, in SQL, get the rows the service's statements keep
 * beside them (src/README.md, "Webhook deliveries and HOT updates"), as they are now: an owed row
 * due when the delivery is for each pending one, a failed row for each failed one, neither for the
 * others. `where` selects the deliveries in `webhook_deliveries` (with its `?` parameters).
 */
export async function keepSideRows(query: Query, where: string, params: unknown[] = []): Promise<void> {
  await query(`with d as materialized (
      select id, organization_id, webhook_id, status, coalesce(next_attempt_at, created_at) as due, created_at from webhook_deliveries where ${where}
    ), owed as (
      insert into webhook_delivery_owed (delivery_id, organization_id, webhook_id, next_attempt_at)
      select id, organization_id, webhook_id, due from d where status = 'pending'
      on conflict (delivery_id) do update set next_attempt_at = excluded.next_attempt_at
    ), unowed as (
      delete from webhook_delivery_owed o using d where o.delivery_id = d.id and d.status <> 'pending'
    ), failed as (
      insert into webhook_delivery_failed (delivery_id, organization_id, webhook_id, created_at)
      select id, organization_id, webhook_id, created_at from d where status = 'failed'
      on conflict (delivery_id) do update set created_at = excluded.created_at
    ), unfailed as (
      delete from webhook_delivery_failed f using d where f.delivery_id = d.id and d.status <> 'failed'
    )
    select count(*) from d`, params);
}
