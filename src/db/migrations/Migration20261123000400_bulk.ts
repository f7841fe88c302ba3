import { Migration } from '@mikro-orm/migrations';

/**
 * The change feed's log. Positions come from a sequence without a per-backend cache, so they rise
 * in the order nextval is called; writers take their organization's feed lock before drawing one
 * and hold it to commit, which makes position order the commit order within an organization.
 */
export class Migration20261123000400_bulk extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
create sequence submission_changes_position_seq cache 1;
create table submission_changes (
  position bigint not null default nextval('submission_changes_position_seq'),
  organization_id text not null references organizations(id) on delete cascade,
  form_id text not null,
  submission_id text not null,
  type text not null check (type in ('submission.created','submission.deleted')),
  occurred_at timestamptz not null default now(),
  primary key (organization_id, position)
);
alter sequence submission_changes_position_seq owned by submission_changes.position;
create index submission_changes_org_form_position_idx on submission_changes (organization_id, form_id, position);
-- Rows arrive in time order, so a block-range index serves the retention purge at little write cost.
create index submission_changes_occurred_idx on submission_changes using brin (occurred_at);
`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists submission_changes cascade;');
  }
}
