import { Migration } from '@mikro-orm/migrations';

/**
 * Submissions per form and UTC day (src/domain/submissions/day-counts.ts), so a list's total, its
 * offset, analytics and the usage roll-up read days rather than rows. A form's day is split into
 * slots (DAY_SLOTS) like the quota's months: each storing statement adds to its connection's slot,
 * so statements on different connections seldom wait on one row. A slot may go below zero (a
 * deletion counts in the deleting connection's slot); only the sum of a day's slots means anything.
 * The fill factor leaves room on each page for the updates to stay HOT.
 *
 * The backfill counts what is stored when the migration runs, in slot 0; an API of the previous
 * release still storing meanwhile (a rolling deploy) stores rows it does not count.
 */
export class Migration20261126000000_submission_day_counts extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
create table if not exists submission_day_counts (
  organization_id text not null,
  form_id text not null,
  day date not null,
  slot smallint not null,
  count bigint not null,
  primary key (form_id, day, slot)
) with (fillfactor = 70);
create index if not exists submission_day_counts_day_idx on submission_day_counts (day);
insert into submission_day_counts (organization_id, form_id, day, slot, count)
select organization_id, form_id, (created_at at time zone 'UTC')::date, 0, count(*)
  from submissions group by organization_id, form_id, (created_at at time zone 'UTC')::date
on conflict do nothing;
`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists submission_day_counts;');
  }
}
