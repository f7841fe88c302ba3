import { expect } from 'chai';
import { loadConfig } from '../../config';
import { prepareDatabase } from '../../src/app';
import { readDeliveriesWithSideRows, type CreatedCursor } from '../../src/domain/webhooks/store';
import { dropDatabase, sideDatabaseUrl } from '../support/databases';
import { call, createPublishedForm, createTenant, fieldInput, startTestApp, type TestApp } from '../support/harness';
import { freshQueuePrefix } from '../support/worker-stack';

/**
 * The walk of `deliveries check|repair` pages by (created_at, id) whatever the date style and time
 * zone of its connection (a server's or a role's settings): the cursor is read back exactly, so no
 * delivery is passed over. Under DateStyle 'SQL' a timestamptz's text names its zone by abbreviation,
 * and Asia/Kolkata's 'IST' reads back as Israel's: a cursor of that text lands 3.5 hours late.
 */
describe('deliveries check walk: its cursor under any date style and time zone', function () {
  this.timeout(120_000);
  const databaseUrl = sideDatabaseUrl('sidecursor');
  let api: TestApp;

  before(async () => {
    const env = { DATABASE_URL: databaseUrl, QUEUE_PREFIX: freshQueuePrefix() };
    await prepareDatabase(loadConfig({ ...process.env, ...env }));
    api = await startTestApp(env);
  });
  after(async () => {
    await api?.close();
    await dropDatabase(databaseUrl);
  });

  it('walks every delivery one a page under DateStyle SQL in Asia/Kolkata', async () => {
    const tenant = await createTenant(api.app);
    const formId = (await createPublishedForm(api.url, tenant.key, [fieldInput('fld_email', 'email', 'Email')])).id;
    const hook = await call(api.url, 'POST', '/v1/webhooks', {
      key: tenant.key, body: { name: 'hook', url: 'http://127.0.0.1:9/hook', formId, events: ['submission.created'] },
    });
    expect(hook.status, hook.text).to.equal(201);
    for (let i = 0; i < 3; i++) {
      const res = await call(api.url, 'POST', `/v1/forms/${formId}/submissions`, { key: tenant.key, body: { data: { fld_email: 'a@example.com' } } });
      expect(res.status, res.text).to.equal(201);
    }
    const all = (await api.query('select id from webhook_deliveries order by created_at, id')).map((r: { id: string }) => r.id);
    expect(all).to.have.length(3);

    const walked = await api.app.orm.em.fork().transactional(async (tx) => {
      await tx.execute(`set local datestyle = 'SQL, DMY'`);
      await tx.execute(`set local timezone = 'Asia/Kolkata'`);
      const ids: string[] = [];
      for (let after: CreatedCursor | null = null; ;) {
        const page = await readDeliveriesWithSideRows(tx, { after, limit: 1 });
        ids.push(...page.rows.map((r) => r.deliveryId));
        if (page.rows.length < 1) return ids;
        after = page.last;
      }
    });
    expect(walked).to.deep.equal(all);
  });
});
