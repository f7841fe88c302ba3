import { Migration } from '@mikro-orm/migrations';

/**
 * What the sweeps and recovery look for in `webhook_deliveries` moves out of its indexes, so that
 * recording an attempt changes no indexed column and PostgreSQL can update the row in place (a HOT
 * update; src/README.md, "Webhook deliveries and HOT updates"):
 * - `webhook_delivery_owed`: one narrow row per pending delivery with the time it is due (inserted
 *   with the delivery, moved by holds and retries, deleted when it ends), indexed by that time (the
 *   sweeps of owed work) and by webhook (releasing held deliveries);
 * - `webhook_delivery_failed`: one row per failed delivery with its creation time, indexed by
 *   webhook and that time (recovery's window).
 * Their foreign keys to `webhooks` delete them with their webhook (and so with its form or
 * organization). This release writes both in the statements that write the deliveries
 * (webhooks/store.ts and the inserts); `webhook_deliveries`' fill factor leaves room on each page for
 * an update to stay on it (70: a storing group's deliveries share pages and end within moments of
 * each other, and an update stays HOT only while its page has room for the new version). Setting it
 * takes a SHARE UPDATE EXCLUSIVE lock (reads and writes go on) and applies only to pages filled
 * from now on.
 *
 * The previous release writes deliveries without these rows while both run (deploy/README.md,
 * "Upgrading") and after a rollback: the triggers `webhook_deliveries_side_rows_*` keep both tables
 * exact whoever writes (for this release's statements they find the work done). They are the bridge
 * of the rolling deploy only: the next release's contract step drops them with the partial indexes
 * the previous release's sweeps read (`webhook_deliveries_owed_idx`, `…_ended_idx`, `…_failed_idx`),
 * whose `status` predicate is what keeps every status change from being HOT. The rows that exist
 * before the triggers are copied by Migration20261128000201_delivery_owed_backfill.
 */
export class Migration20261128000200_delivery_owed extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
create table if not exists webhook_delivery_owed (
  delivery_id text primary key,
  organization_id text not null,
  webhook_id text not null references webhooks(id) on delete cascade,
  next_attempt_at timestamptz not null
);
create index if not exists webhook_delivery_owed_due_idx on webhook_delivery_owed (next_attempt_at, delivery_id);
create index if not exists webhook_delivery_owed_webhook_idx on webhook_delivery_owed (webhook_id, next_attempt_at, delivery_id);

create table if not exists webhook_delivery_failed (
  delivery_id text primary key,
  organization_id text not null,
  webhook_id text not null references webhooks(id) on delete cascade,
  created_at timestamptz not null
);
create index if not exists webhook_delivery_failed_webhook_idx on webhook_delivery_failed (webhook_id, created_at, delivery_id);

create or replace function webhook_deliveries_side_rows() returns trigger language plpgsql as $$
begin
  if tg_op <> 'INSERT' then
    if old.status = 'pending' and (tg_op = 'DELETE' or new.status <> 'pending') then
      delete from webhook_delivery_owed where delivery_id = old.id;
    end if;
    if old.status = 'failed' and (tg_op = 'DELETE' or new.status <> 'failed') then
      delete from webhook_delivery_failed where delivery_id = old.id;
    end if;
  end if;
  if tg_op <> 'DELETE' then
    if new.status = 'pending' then
      insert into webhook_delivery_owed (delivery_id, organization_id, webhook_id, next_attempt_at)
      values (new.id, new.organization_id, new.webhook_id, coalesce(new.next_attempt_at, new.created_at))
      on conflict (delivery_id) do update set next_attempt_at = excluded.next_attempt_at
        where webhook_delivery_owed.next_attempt_at is distinct from excluded.next_attempt_at;
    elsif new.status = 'failed' and (tg_op = 'INSERT' or old.status <> 'failed') then
      insert into webhook_delivery_failed (delivery_id, organization_id, webhook_id, created_at)
      values (new.id, new.organization_id, new.webhook_id, new.created_at)
      on conflict (delivery_id) do nothing;
    end if;
  end if;
  return null;
end $$;

create or replace trigger webhook_deliveries_side_rows_insert after insert on webhook_deliveries
  for each row when (new.status <> 'succeeded') execute function webhook_deliveries_side_rows();
create or replace trigger webhook_deliveries_side_rows_update after update of status, next_attempt_at on webhook_deliveries
  for each row when (old.status is distinct from new.status or old.next_attempt_at is distinct from new.next_attempt_at)
  execute function webhook_deliveries_side_rows();
create or replace trigger webhook_deliveries_side_rows_delete after delete on webhook_deliveries
  for each row when (old.status <> 'succeeded') execute function webhook_deliveries_side_rows();

alter table webhook_deliveries set (fillfactor = 70);
`);
  }

  override async down(): Promise<void> {
    this.addSql(`
alter table webhook_deliveries reset (fillfactor);
drop trigger if exists webhook_deliveries_side_rows_delete on webhook_deliveries;
drop trigger if exists webhook_deliveries_side_rows_update on webhook_deliveries;
drop trigger if exists webhook_deliveries_side_rows_insert on webhook_deliveries;
drop function if exists webhook_deliveries_side_rows();
drop table if exists webhook_delivery_failed, webhook_delivery_owed;
`);
  }
}
