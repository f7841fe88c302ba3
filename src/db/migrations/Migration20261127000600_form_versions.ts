import { Migration } from '@mikro-orm/migrations';
import { BACKFILL_FORM_VERSION_COLUMNS_SQL, CREATE_FORM_VERSION_COLUMNS_SQL } from './Migration20261127000601_form_version_columns';

/**
 * Every live form's current structure as its version 1 (a form has no other before this
 * migration). The JSON of pages and fields is exactly what `loadStructure` (forms/form-service.ts)
 * reads, so that a version written here compares equal to the structure it was taken from
 * (forms/versions.ts). Exported for the test that checks the two agree.
 */
export const BACKFILL_FORM_VERSIONS_SQL = `
insert into form_versions (form_id, version, organization_id, created_at, pages, fields)
select f.id, 1, f.organization_id, f.updated_at,
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
 * default or none is a change of the catalogue only (no rewrite); the ACCESS EXCLUSIVE locks they
 * take are asked for last and wait at most `lock_timeout` (1 s) per try, so traffic never queues
 * behind them for longer. Existing forms become version 1 with their current structure.
 */
export class Migration20261127000600_form_versions extends Migration {
  override async up(): Promise<void> {
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
    // Before any strong lock: the backfill reads forms as traffic does (ACCESS SHARE).
    this.addSql(BACKFILL_FORM_VERSIONS_SQL);
    // The export's columns across versions (Migration20261127000601_form_version_columns), filled
    // here, before the locks below, which later migrations of the same upgrade run under.
    this.addSql(CREATE_FORM_VERSION_COLUMNS_SQL);
    this.addSql(BACKFILL_FORM_VERSION_COLUMNS_SQL);
    // Last, as the lock each takes is held until the migration commits: both columns in one try,
    // so a try that waits past lock_timeout gives both locks back, waits and tries again.
    this.addSql(`set local lock_timeout = '1s';`);
    this.addSql(`
do $$
declare tries int := 0;
begin
  loop
    begin
      alter table forms add column if not exists version integer not null default 1;
      alter table submissions add column if not exists form_version integer;
      exit;
    exception when lock_not_available then
      tries := tries + 1;
      if tries >= 20 then raise; end if;
      perform pg_sleep(0.2 * tries);
    end;
  end loop;
end $$;`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists form_versions;');
    this.addSql('alter table submissions drop column if exists form_version;');
    this.addSql('alter table forms drop column if exists version;');
  }
}
