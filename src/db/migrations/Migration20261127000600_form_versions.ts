import { Migration } from '@mikro-orm/migrations';

/**
 * The JSON of a version's pages and fields exactly as `loadStructure` (forms/form-service.ts) shows
 * them, so that a version written here compares equal to the structure it was taken from
 * (forms/versions.ts). Exported for the test that checks the two agree.
 */
export const BACKFILL_FORM_VERSIONS_SQL = `
insert into form_versions (form_id, version, organization_id, created_at, pages, fields)
select f.id, f.version, f.organization_id, f.updated_at,
       coalesce((select jsonb_agg(jsonb_build_object(
                   'id', p.page_id, 'title', p.title, 'description', p.description, 'order', p.position,
                   'conditionalLogic', p.conditional_logic) order by p.position, p.pk)
                  from form_pages p where p.form_id = f.id), '[]'::jsonb),
       coalesce((select jsonb_agg(jsonb_build_object(
                   'id', x.field_id, 'type', x.type, 'label', x.label, 'placeholder', x.placeholder,
                   'description', x.description, 'required', x.required, 'config', x.config,
                   'validationRules', x.validation_rules, 'order', x.position, 'pageId', x.page_id,
                   'conditionalLogic', x.conditional_logic, 'hidden', x.hidden)
                   || case when coalesce(x.prefill_param, '') <> '' then jsonb_build_object('prefillParam', x.prefill_param) else '{}'::jsonb end
                   order by x.position, x.pk)
                  from form_fields x where x.form_id = f.id), '[]'::jsonb)
  from forms f
 where f.deleted_at is null
on conflict do nothing;
`;

/**
 * Form versions (README "Form versions"): `forms.version` counts structure replacements (1 at
 * creation); `form_versions` keeps every version's pages and fields unchanged; a submission names
 * the version it was validated against in `submissions.form_version`.
 *
 * Expand only: the previous release keeps working on this schema. It inserts forms without a
 * version (the default, 1), replaces structures without writing a version, and stores submissions
 * without `form_version` (null: the version was not recorded). This release records a form's
 * current structure as a version whenever it finds it unrecorded (forms/versions.ts), so whatever
 * the previous release wrote during a rollout is picked up, not lost. Adding a column with a constant
 * default or none is a change of the catalogue only (no rewrite); the brief ACCESS EXCLUSIVE lock it
 * takes waits at most `lock_timeout`, so a busy table fails the migration (to be run again) rather
 * than stall traffic behind it. Existing forms become version 1 with their current structure.
 */
export class Migration20261127000600_form_versions extends Migration {
  override async up(): Promise<void> {
    this.addSql(`set local lock_timeout = '2s';`);
    this.addSql(`alter table forms add column if not exists version integer not null default 1;`);
    this.addSql(`alter table submissions add column if not exists form_version integer;`);
    this.addSql(`
create table if not exists form_versions (
  form_id text not null,
  version integer not null,
  organization_id text not null,
  created_at timestamptz not null default now(),
  pages jsonb not null,
  fields jsonb not null,
  primary key (form_id, version)
);`);
    this.addSql(BACKFILL_FORM_VERSIONS_SQL);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists form_versions;');
    this.addSql('alter table submissions drop column if exists form_version;');
    this.addSql('alter table forms drop column if exists version;');
  }
}
