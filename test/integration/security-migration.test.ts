import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { ensureDatabase, initOrm, type Orm } from '../../src/db/orm';
import { seal } from '../../src/lib/crypto';
import { dropDatabase, sideDatabaseUrl } from '../support/databases';

/** Rows written before integrations had ids and sealed answers had their own shape keep working. */
describe('migration Migration20261123000100_security', () => {
  const databaseUrl = sideDatabaseUrl('secmig');
  let orm: Orm;
  const key = randomBytes(32);
  const legacySealed = seal(JSON.stringify({ format: 'full', fullName: 'Grace Hopper' }), key);

  before(async () => {
    await ensureDatabase(databaseUrl);
    orm = await initOrm(databaseUrl, 1);
    await orm.getMigrator().up({ to: 'Migration20261122000000_initial' });
    const conn = orm.em.getConnection();
    await conn.execute(`insert into organizations (id, name, plan) values ('org_m', 'm', 'free')`);
    const settings = {
      integrations: [
        { type: 'hubspot', accessToken: seal('pat-a', key), fieldMap: { fld_email: 'email' } },
        { type: 'hubspot', accessToken: seal('pat-b', key), fieldMap: { fld_email: 'email' } },
      ],
    };
    await conn.execute(`insert into forms (id, organization_id, title, status, settings) values ('form_m', 'org_m', 'M', 'published', ?::jsonb)`,
      [JSON.stringify(settings)]);
    await conn.execute(`insert into form_fields (form_id, field_id, type, label, config, position) values
      ('form_m', 'fld_patient', 'name', 'Patient', '{"sensitive": true}', 0),
      ('form_m', 'fld_text', 'text', 'Text', '{}', 1)`);
    await conn.execute(`insert into submissions (id, organization_id, form_id, data, source) values ('sub_m', 'org_m', 'form_m', ?::jsonb, 'api')`,
      [JSON.stringify({ fld_patient: legacySealed, fld_text: 'enc:v1:AAAA' })]);
    await conn.execute(`insert into crm_syncs (id, organization_id, form_id, submission_id, integration_index, provider, status)
      values ('crm_m', 'org_m', 'form_m', 'sub_m', 1, 'hubspot', 'pending')`);
    await orm.getMigrator().up();
  });
  after(async () => {
    await orm?.close();
    await dropDatabase(databaseUrl);
  });

  it('gives stored integrations distinct ids and points existing syncs at the integration they were made for', async () => {
    const conn = orm.em.getConnection();
    const [form] = await conn.execute(`select settings from forms where id = 'form_m'`);
    const ids = form.settings.integrations.map((i: any) => i.id);
    expect(ids[0]).to.match(/^int_[A-Za-z0-9]+$/);
    expect(ids[1]).to.match(/^int_[A-Za-z0-9]+$/);
    expect(ids[0]).to.not.equal(ids[1]);
    const [sync] = await conn.execute(`select integration_id from crm_syncs where id = 'crm_m'`);
    expect(sync.integration_id).to.equal(ids[1]);
  });

  it('moves sealed answers of sensitive fields into the sealed shape and leaves text that only looks sealed alone', async () => {
    const [row] = await orm.em.getConnection().execute(`select data from submissions where id = 'sub_m'`);
    expect(row.data).to.deep.equal({ fld_patient: { $sealed: legacySealed }, fld_text: 'enc:v1:AAAA' });
  });
});
