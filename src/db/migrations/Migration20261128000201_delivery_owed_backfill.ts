import { Migration } from '@mikro-orm/migrations';

/**
 * The owed and failed rows (Migration20261128000200_delivery_owed) of the deliveries that were
 * pending or failed before its triggers: every change since is theirs. Walks the previous release's
 * partial indexes (pending by due time, failed by webhook and creation) in pages of 5,000, each
 * committed on its own, so that a delivery whose trigger waits on a copied row waits for one page,
 * never for the whole copy (this migration runs outside a transaction: src/README.md, "Writing a
 * migration"). A row that changes while it is copied has moved past the page's snapshot: its trigger
 * wrote what it is now, and the copy of what it was adds nothing (`on conflict do nothing`) or a
 * row the sweep or recovery finds out of date and removes (webhooks/store.ts, repairOwed and
 * resetFailedDeliveries). Run again, it copies nothing twice.
 */
export class Migration20261128000201_delivery_owed_backfill extends Migration {
  override isTransactional(): boolean {
    return false;
  }

  override async up(): Promise<void> {
    this.addSql(`
do $$
declare
  at timestamptz := '-infinity';
  wh text := '';
  id_after text := '';
  seen int;
begin
  loop
    with page as materialized (
      select d.id, d.organization_id, d.webhook_id, d.next_attempt_at, d.created_at from webhook_deliveries d
       where d.status = 'pending' and d.next_attempt_at >= at and (d.next_attempt_at, d.id) > (at, id_after)
       order by d.next_attempt_at, d.id limit 5000
    ), copied as (
      insert into webhook_delivery_owed (delivery_id, organization_id, webhook_id, next_attempt_at)
      select p.id, p.organization_id, p.webhook_id, p.next_attempt_at from page p
      on conflict (delivery_id) do nothing
    )
    select count(*), (array_agg(p.next_attempt_at order by p.next_attempt_at desc, p.id desc))[1],
           (array_agg(p.id order by p.next_attempt_at desc, p.id desc))[1]
      into seen, at, id_after from page p;
    commit;
    exit when seen < 5000;
  end loop;
  insert into webhook_delivery_owed (delivery_id, organization_id, webhook_id, next_attempt_at)
  select d.id, d.organization_id, d.webhook_id, d.created_at from webhook_deliveries d
   where d.status = 'pending' and d.next_attempt_at is null
  on conflict (delivery_id) do nothing;
  commit;
  at := '-infinity';
  id_after := '';
  loop
    with page as materialized (
      select d.id, d.organization_id, d.webhook_id, d.created_at from webhook_deliveries d
       where d.status = 'failed' and d.webhook_id >= wh and (d.webhook_id, d.created_at, d.id) > (wh, at, id_after)
       order by d.webhook_id, d.created_at, d.id limit 5000
    ), copied as (
      insert into webhook_delivery_failed (delivery_id, organization_id, webhook_id, created_at)
      select p.id, p.organization_id, p.webhook_id, p.created_at from page p
      on conflict (delivery_id) do nothing
    )
    select count(*), (array_agg(p.webhook_id order by p.webhook_id desc, p.created_at desc, p.id desc))[1],
           (array_agg(p.created_at order by p.webhook_id desc, p.created_at desc, p.id desc))[1],
           (array_agg(p.id order by p.webhook_id desc, p.created_at desc, p.id desc))[1]
      into seen, wh, at, id_after from page p;
    commit;
    exit when seen < 5000;
  end loop;
end $$;
`);
  }

  override async down(): Promise<void> {
    // The tables go with Migration20261128000200_delivery_owed's down.
  }
}
