import { Migration } from '@mikro-orm/migrations';

/**
 * The monthly counter of an organization split into slots (see QUOTA_SLOTS in
 * src/domain/submissions/store.ts): one row per (organization, month, slot), each with its share
 * of the month's allowance, so concurrent submissions of one organization lock different rows.
 * `split_quota` is the quota the allowances were split for; null (the rows carried over from the
 * single counter, each one full) makes the next submission split the month afresh.
 * `usage_counters` stays as the month's total, summed over the slots, for every reader.
 */
export class Migration20261123001000_counter_slots extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
alter table usage_counters rename to usage_counter_slots;
alter table usage_counter_slots drop constraint usage_counters_pkey;
alter table usage_counter_slots
  add column slot smallint not null default 0,
  add column allowance integer not null default 0,
  add column split_quota integer;
update usage_counter_slots set allowance = used;
alter table usage_counter_slots alter column slot drop default;
alter table usage_counter_slots add primary key (organization_id, month, slot);
alter table usage_counter_slots add constraint usage_counter_slots_within_allowance check (used <= allowance);
create view usage_counters as
  select organization_id, month, sum(used)::int as used from usage_counter_slots group by organization_id, month;
`);
  }

  override async down(): Promise<void> {
    this.addSql(`
drop view usage_counters;
with merged as (
  delete from usage_counter_slots where slot <> 0 returning organization_id, month, used
)
update usage_counter_slots s set used = s.used + m.used
  from (select organization_id, month, sum(used)::int as used from merged group by organization_id, month) m
 where s.organization_id = m.organization_id and s.month = m.month and s.slot = 0;
alter table usage_counter_slots drop constraint usage_counter_slots_within_allowance;
alter table usage_counter_slots drop constraint usage_counter_slots_pkey;
alter table usage_counter_slots drop column slot, drop column allowance, drop column split_quota;
alter table usage_counter_slots rename to usage_counters;
alter table usage_counters add constraint usage_counters_pkey primary key (organization_id, month);
`);
  }
}
