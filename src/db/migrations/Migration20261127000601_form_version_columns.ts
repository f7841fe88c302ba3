import { Migration } from '@mikro-orm/migrations';

/**
 * Every field id any kept version of a form had, once, with the newest version that had it, its
 * label and type there, and its position in that version (the export's columns across versions,
 * forms/store.ts `fieldsOfAllVersions`), from the versions already kept. Exported for its test.
 */
export const BACKFILL_FORM_VERSION_COLUMNS_SQL = backfillColumnsSql('');

/** The same, scanning nothing when the table holds anything (a one-time filter). */
const BACKFILL_EMPTY_FORM_VERSION_COLUMNS_SQL = backfillColumnsSql('and not exists (select from form_version_columns)');

function backfillColumnsSql(onlyIf: string): string {
  return `
insert into form_version_columns (form_id, field_id, organization_id, label, type, version, position)
select distinct on (v.form_id, f.value->>'id') v.form_id, f.value->>'id', v.organization_id, f.value->>'label', f.value->>'type',
       v.version, f.ordinality::int
  from form_versions v, jsonb_array_elements(v.fields) with ordinality f
 where f.value->>'id' is not null ${onlyIf}
 order by v.form_id, f.value->>'id', v.version desc
on conflict do nothing;
`;
}

export const CREATE_FORM_VERSION_COLUMNS_SQL = `
create table if not exists form_version_columns (
  form_id text not null,
  field_id text not null,
  organization_id text not null,
  label text not null,
  type text not null,
  version integer not null,
  position integer not null,
  primary key (form_id, field_id)
);`;

/**
 * The export's columns across versions, kept as versions are kept (forms/store.ts
 * `insertFormVersion`) rather than computed from every version's fields on each export, whose cost
 * grew with the number of versions. A new table only: nothing the previous release reads or writes.
 *
 * Where the form versions migration runs in the same upgrade (all pending migrations commit together,
 * `allOrNothing`), it made and filled this table itself before taking its locks on forms and
 * submissions, which are held until this one commits: the backfill here then finds the table filled
 * and scans nothing (a one-time filter). It only fills it for a database that took the form
 * versions migration before the table was part of it.
 */
export class Migration20261127000601_form_version_columns extends Migration {
  override async up(): Promise<void> {
    this.addSql(CREATE_FORM_VERSION_COLUMNS_SQL);
    this.addSql(BACKFILL_EMPTY_FORM_VERSION_COLUMNS_SQL);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists form_version_columns;');
  }
}
