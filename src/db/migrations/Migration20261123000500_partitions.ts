import { Migration } from '@mikro-orm/migrations';

/**
 * Submissions partitioned by month of `created_at`, so a month past retention is dropped whole
 * instead of deleted row by row, and time-bounded reads touch only their months.
 *
 * The existing table is moved inside this migration's transaction: every row is copied into the
 * partitioned table (partitions from its oldest month to three months ahead) before the old table
 * is dropped, so a failure leaves the old table as it was. The primary key must include the
 * partition key: (id, created_at); ids stay unique in practice (20 base62 characters, the last 12
 * random within a millisecond).
 *
 * `ensure_submission_partitions(from, to)` creates the missing months of a range as standalone
 * tables and attaches them: attaching takes a lock that lets inserts and reads go on, unlike
 * creating a partition in place. `drop_submission_partitions_before(cutoff)` detaches and drops
 * every month that ended at or before `cutoff`.
 */
export class Migration20261123000500_partitions extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
create or replace function ensure_submission_partitions(from_ts timestamptz, to_ts timestamptz) returns setof text
language plpgsql as $$
declare
  month_start timestamp := date_trunc('month', from_ts at time zone 'UTC');
  partition_name text;
begin
  while month_start <= date_trunc('month', to_ts at time zone 'UTC') loop
    partition_name := 'submissions_p' || to_char(month_start, 'YYYY_MM');
    if to_regclass(partition_name) is null then
      execute format('create table %I (like submissions including defaults including constraints)', partition_name);
      execute format('alter table submissions attach partition %I for values from (%L) to (%L)', partition_name,
                     month_start at time zone 'UTC', (month_start + interval '1 month') at time zone 'UTC');
      return next partition_name;
    end if;
    month_start := month_start + interval '1 month';
  end loop;
end $$;

create or replace function drop_submission_partitions_before(cutoff timestamptz) returns setof text
language plpgsql as $$
declare
  partition_name text;
begin
  for partition_name in
    select c.relname from pg_inherits i join pg_class c on c.oid = i.inhrelid
     where i.inhparent = 'submissions'::regclass and c.relname ~ '^submissions_p[0-9]{4}_[0-9]{2}$'
       and (to_date(substr(c.relname, 14), 'YYYY_MM')::timestamp + interval '1 month') at time zone 'UTC' <= cutoff
     order by c.relname
  loop
    execute format('alter table submissions detach partition %I', partition_name);
    execute format('drop table %I', partition_name);
    return next partition_name;
  end loop;
end $$;

alter table submissions rename to submissions_unpartitioned;
alter table submissions_unpartitioned rename constraint submissions_pkey to submissions_unpartitioned_pkey;
alter index if exists submissions_form_created_idx rename to submissions_unpartitioned_form_created_idx;
alter index if exists submissions_created_idx rename to submissions_unpartitioned_created_idx;

create table submissions (
  id text not null,
  organization_id text not null references organizations(id) on delete cascade,
  form_id text not null references forms(id) on delete cascade,
  data jsonb not null,
  submitter_email text,
  submitter_name text,
  source text not null check (source in ('api','public')),
  created_at timestamptz not null default now(),
  primary key (id, created_at)
) partition by range (created_at);
create index submissions_form_created_idx on submissions (form_id, created_at desc, id desc);
create index submissions_created_idx on submissions (created_at);

select ensure_submission_partitions(
  coalesce((select min(created_at) from submissions_unpartitioned), now()),
  greatest(coalesce((select max(created_at) from submissions_unpartitioned), now()), now() + interval '3 months'));

insert into submissions (id, organization_id, form_id, data, submitter_email, submitter_name, source, created_at)
select id, organization_id, form_id, data, submitter_email, submitter_name, source, created_at from submissions_unpartitioned;
drop table submissions_unpartitioned;
`);
  }

  override async down(): Promise<void> {
    this.addSql(`
create table submissions_unpartitioned (
  id text primary key,
  organization_id text not null references organizations(id) on delete cascade,
  form_id text not null references forms(id) on delete cascade,
  data jsonb not null,
  submitter_email text,
  submitter_name text,
  source text not null check (source in ('api','public')),
  created_at timestamptz not null default now()
);
insert into submissions_unpartitioned select id, organization_id, form_id, data, submitter_email, submitter_name, source, created_at from submissions;
drop table submissions cascade;
alter table submissions_unpartitioned rename to submissions;
alter table submissions rename constraint submissions_unpartitioned_pkey to submissions_pkey;
create index submissions_form_created_idx on submissions (form_id, created_at desc, id desc);
create index submissions_created_idx on submissions (created_at);
drop function if exists ensure_submission_partitions(timestamptz, timestamptz);
drop function if exists drop_submission_partitions_before(timestamptz);
`);
  }
}
