import { Migration } from '@mikro-orm/migrations';

/**
 * Every field id any kept version of a form had, once, with the newest version that had it, its
 * label and type there, and its position in that version (the export's columns across versions,
 * forms/store.ts `fieldsOfAllVersions`), from the versions already kept. Exported for its test.
 */
export const BACKFILL_FORM_VERSION_COLUMNS_SQL = `
insert into form_version_columns (form_id, field_id, organization_id, label, type, version, position)
select distinct on (v.form_id, f.value->>'id') v.form_id, f.value->>'id', v.organization_id, f.value->>'label', f.value->>'type',
       v.version, f.ordinality::int
  from form_versions v, jsonb_array_elements(v.fields) with ordinality f
 where f.value->>'id' is not null
 order by v.form_id, f.value->>'id', v.version desc
on conflict do nothing;
`;

/**
 * The export's columns across versions, kept as versions are kept (forms/store.ts
 * `insertFormVersion`) rather than computed from every version's fields on each export, whose cost
 * grew with the number of versions. A new table only: nothing the previous release reads or writes,
 * no lock on a busy table.
 */
export class Migration20261127000601_form_version_columns extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
create table if not exists form_version_columns (
  form_id text not null,
  field_id text not null,
  organization_id text not null,
  label text not null,
  type text not null,
  version integer not null,
  position integer not null,
  primary key (form_id, field_id)
);`);
    this.addSql(BACKFILL_FORM_VERSION_COLUMNS_SQL);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists form_version_columns;');
  }
}
