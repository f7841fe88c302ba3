import { Migration } from '@mikro-orm/migrations';

/**
 * The storing statement's inserts no longer check their organization and form by foreign key
 * (src/README.md, "Submissions without foreign keys"): each check locked the parent row FOR KEY SHARE,
 * a WAL record per organization and form of every statement, up to a sixth of the statement with 16
 * organizations (test/bench/README.md). The service never deletes a form or an organization (a form is
 * marked deleted; the storing statement checks it is published and not deleted); only an operator's
 * SQL does, and for that the cascade stays: a statement-level trigger on the parent deletes, in the
 * deleting statement, the rows the foreign key's `on delete cascade` deleted, and a statement-level
 * `AFTER TRUNCATE` trigger truncates them as `truncate … cascade` did (it followed the keys). So:
 * - forms: `submissions_form_id_fkey1` (on `submissions` and, inherited, on each month's partition)
 *   gives way to `forms_delete_submissions` and `forms_truncate_submissions`;
 * - organizations: `submissions_organization_id_fkey1` and `submission_changes_organization_id_fkey`
 *   give way to `organizations_delete_submissions` and `organizations_truncate_submissions`.
 * The previous release never deletes either parent and maps no foreign-key error (a submission racing
 * a hand delete failed with 23503, or, run again alone, found its form gone): an expand it runs on,
 * and after a rollback, with the same cascade for its operator.
 *
 * Locks: dropping a foreign key takes ACCESS EXCLUSIVE on the referencing table (each partition
 * too) and on the referenced one, both catalog-only and brief, and a statement takes them child
 * first. The storing statement locks the parents before `submissions` and `submission_changes` (its
 * reads of forms and organizations come first), so a drop that waited for `submissions` while a
 * storing statement held `forms` and waited behind it deadlocked, and PostgreSQL cancelled the
 * statement that waited first: a client's (test/integration/storing-without-fks.test.ts). Each step
 * therefore locks its parent first, and the two parents go in two transactions, never one held while
 * waiting for the other (the order a statement locks them in is its plan's): not transactional as a
 * whole, each string is one transaction (create or replace, drop if exists: run again, it changes nothing).
 */
export class Migration20261129000300_storing_without_foreign_keys extends Migration {
  override isTransactional(): boolean {
    return false;
  }

  override async up(): Promise<void> {
    this.addSql(`lock table forms in access exclusive mode;
create or replace function delete_submissions_of_deleted_forms() returns trigger language plpgsql as $$
begin
  delete from submissions s using deleted_forms d where s.form_id = d.id;
  return null;
end $$;
create or replace trigger forms_delete_submissions after delete on forms
  referencing old table as deleted_forms for each statement execute function delete_submissions_of_deleted_forms();
create or replace function truncate_submissions_of_truncated_forms() returns trigger language plpgsql as $$
begin
  truncate submissions;
  return null;
end $$;
create or replace trigger forms_truncate_submissions after truncate on forms
  for each statement execute function truncate_submissions_of_truncated_forms();
alter table submissions drop constraint if exists submissions_form_id_fkey1;`);
    this.addSql(`lock table organizations in access exclusive mode;
create or replace function delete_submissions_of_deleted_organizations() returns trigger language plpgsql as $$
begin
  delete from submissions s using deleted_organizations d where s.organization_id = d.id;
  delete from submission_changes c using deleted_organizations d where c.organization_id = d.id;
  return null;
end $$;
create or replace trigger organizations_delete_submissions after delete on organizations
  referencing old table as deleted_organizations for each statement execute function delete_submissions_of_deleted_organizations();
create or replace function truncate_submissions_of_truncated_organizations() returns trigger language plpgsql as $$
begin
  truncate submissions, submission_changes;
  return null;
end $$;
create or replace trigger organizations_truncate_submissions after truncate on organizations
  for each statement execute function truncate_submissions_of_truncated_organizations();
alter table submissions drop constraint if exists submissions_organization_id_fkey1;
alter table submission_changes drop constraint if exists submission_changes_organization_id_fkey;`);
  }

  /**
   * The foreign keys again (each validated: a scan of its table), after the rows a race left without
   * their parent. One transaction holding `forms` and `organizations` ACCESS EXCLUSIVE (the triggers'
   * drop) and `submissions` against writes through the scans: PostgreSQL 15 adds no `not valid` foreign
   * key to a partitioned table. Not for a serving database: a rollback runs the previous release on
   * this schema, whose hand deletes the triggers cascade (deploy/README.md).
   */
  override async down(): Promise<void> {
    this.addSql(`drop trigger if exists forms_delete_submissions on forms;
drop function if exists delete_submissions_of_deleted_forms();
drop trigger if exists organizations_delete_submissions on organizations;
drop function if exists delete_submissions_of_deleted_organizations();
drop trigger if exists forms_truncate_submissions on forms;
drop function if exists truncate_submissions_of_truncated_forms();
drop trigger if exists organizations_truncate_submissions on organizations;
drop function if exists truncate_submissions_of_truncated_organizations();
delete from submissions s where not exists (select from forms f where f.id = s.form_id)
   or not exists (select from organizations o where o.id = s.organization_id);
delete from submission_changes c where not exists (select from organizations o where o.id = c.organization_id);
alter table submissions add constraint submissions_organization_id_fkey1 foreign key (organization_id) references organizations(id) on delete cascade;
alter table submissions add constraint submissions_form_id_fkey1 foreign key (form_id) references forms(id) on delete cascade;
alter table submission_changes add constraint submission_changes_organization_id_fkey
  foreign key (organization_id) references organizations(id) on delete cascade;`);
  }
}
