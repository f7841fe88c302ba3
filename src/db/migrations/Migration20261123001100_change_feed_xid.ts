import { Migration } from '@mikro-orm/migrations';

/**
 * Each change row keeps the id of the transaction that wrote it (see readChanges in
 * src/domain/submissions/change-feed.ts for why). Rows written before this migration get 0: they
 * come first, in position order, as they did, so a `c1:` cursor names the same place as before.
 * The keys follow the feed's order, (xid, position), within an organization and within a form.
 */
export class Migration20261123001100_change_feed_xid extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
alter table submission_changes add column xid xid8 not null default '0';
alter table submission_changes alter column xid set default pg_current_xact_id();
alter table submission_changes drop constraint submission_changes_pkey;
alter table submission_changes add primary key (organization_id, xid, position);
drop index submission_changes_org_form_position_idx;
create index submission_changes_org_form_xid_position_idx on submission_changes (organization_id, form_id, xid, position);
`);
  }

  override async down(): Promise<void> {
    this.addSql(`
drop index submission_changes_org_form_xid_position_idx;
alter table submission_changes drop constraint submission_changes_pkey;
alter table submission_changes add primary key (organization_id, position);
create index submission_changes_org_form_position_idx on submission_changes (organization_id, form_id, position);
alter table submission_changes drop column xid;
`);
  }
}
