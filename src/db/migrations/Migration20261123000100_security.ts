import { Migration } from '@mikro-orm/migrations';

/**
 * CRM integrations get stable ids and their syncs refer to them by id, not by position; sensitive
 * answers sealed before this release move into the `{"$sealed": …}` shape no submitter can send.
 */
export class Migration20261123000100_security extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
alter table crm_syncs add column integration_id text;

update forms f
   set settings = jsonb_set(f.settings, '{integrations}', (
     select jsonb_agg(
              case when jsonb_typeof(i) = 'object' and i->>'id' is null
                   then i || jsonb_build_object('id', 'int_' || substr(md5(f.id || ':' || n::text || random()::text), 1, 20))
                   else i end
              order by n)
       from jsonb_array_elements(f.settings->'integrations') with ordinality as t(i, n)))
 where jsonb_typeof(f.settings->'integrations') = 'array' and jsonb_array_length(f.settings->'integrations') > 0;

update crm_syncs c
   set integration_id = f.settings->'integrations'->c.integration_index->>'id'
  from forms f
 where f.id = c.form_id and c.integration_id is null;

alter table crm_syncs drop constraint if exists crm_syncs_submission_id_integration_index_key;
create unique index crm_syncs_submission_integration_key on crm_syncs (submission_id, integration_id);

update submissions s
   set data = (
     select jsonb_object_agg(e.key,
              case when jsonb_typeof(e.value) = 'string' and (e.value #>> '{}') like 'enc:v1:%'
                        and exists (select 1 from form_fields ff
                                     where ff.form_id = s.form_id and ff.field_id = e.key and ff.config->>'sensitive' = 'true')
                   then jsonb_build_object('$sealed', e.value)
                   else e.value end)
       from jsonb_each(s.data) e)
 where s.data::text like '%"enc:v1:%';
`);
  }

  override async down(): Promise<void> {
    this.addSql(`
drop index if exists crm_syncs_submission_integration_key;
alter table crm_syncs drop column if exists integration_id;
alter table crm_syncs add constraint crm_syncs_submission_id_integration_index_key unique (submission_id, integration_index);
update submissions s
   set data = (select jsonb_object_agg(e.key, case when jsonb_typeof(e.value) = 'object' and e.value->'$sealed' is not null
                                                  then e.value->'$sealed' else e.value end)
                 from jsonb_each(s.data) e)
 where s.data::text like '%"$sealed"%';
`);
  }
}
