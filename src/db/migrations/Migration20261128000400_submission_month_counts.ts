import { Migration } from '@mikro-orm/migrations';

/**
 * Month counts (src/domain/submissions/day-counts.ts): per form and UTC month, the sum of its days'
 * slot 0, each day taken at 0 or more (a day drifted below zero counts as none, as the reads have
 * always counted it). A form's total is then its month rows plus its unfolded slots, not a row per
 * day of its archive. This release keeps them in the statements that write slot 0 (the fold, the
 * repair, retention), each of which says so for its transaction (`form_service.month_counts` =
 * 'kept'); the storing and deleting statements never write slot 0.
 *
 * The previous release, still running during the rollout (and again after a rollback), writes slot
 * 0 without knowing the month rows: its fold, its repair, its retention, and its storing and
 * deleting statements on a connection whose pid is a multiple of 16. The trigger below follows
 * those writes (and a hand fix by SQL) into the month rows, in their own statement; it passes over
 * a transaction that keeps the month rows itself. It lives for the rollout only: the next release
 * drops it in a contract step (@contract-of this migration), once no release that writes slot 0
 * without the month rows can run. Expand only: a new table, a new function, triggers whose
 * condition is false for every write of the storing statements of this release.
 */
export class Migration20261128000400_submission_month_counts extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
create table if not exists submission_month_counts (
  organization_id text not null,
  form_id text not null,
  month date not null,
  count bigint not null,
  primary key (form_id, month)
);
create or replace function submission_month_counts_follow() returns trigger language plpgsql as $follow$
begin
  if tg_op <> 'INSERT' and old.slot = 0 and old.count > 0 then
    insert into submission_month_counts as m (organization_id, form_id, month, count)
    values (old.organization_id, old.form_id, date_trunc('month', old.day::timestamp)::date, -old.count)
    on conflict (form_id, month) do update set count = m.count + excluded.count;
  end if;
  if tg_op <> 'DELETE' and new.slot = 0 and new.count > 0 then
    insert into submission_month_counts as m (organization_id, form_id, month, count)
    values (new.organization_id, new.form_id, date_trunc('month', new.day::timestamp)::date, new.count)
    on conflict (form_id, month) do update set count = m.count + excluded.count;
  end if;
  return null;
end
$follow$;
create or replace trigger submission_month_counts_follow_insert after insert on submission_day_counts for each row
  when (new.slot = 0 and coalesce(current_setting('form_service.month_counts', true), '') <> 'kept')
  execute function submission_month_counts_follow();
create or replace trigger submission_month_counts_follow_update after update on submission_day_counts for each row
  when ((new.slot = 0 or old.slot = 0) and coalesce(current_setting('form_service.month_counts', true), '') <> 'kept')
  execute function submission_month_counts_follow();
create or replace trigger submission_month_counts_follow_delete after delete on submission_day_counts for each row
  when (old.slot = 0 and coalesce(current_setting('form_service.month_counts', true), '') <> 'kept')
  execute function submission_month_counts_follow();`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop trigger if exists submission_month_counts_follow_insert on submission_day_counts;
drop trigger if exists submission_month_counts_follow_update on submission_day_counts;
drop trigger if exists submission_month_counts_follow_delete on submission_day_counts;
drop function if exists submission_month_counts_follow();
drop table if exists submission_month_counts;`);
  }
}
