import { expect } from 'chai';
import { loadConfig } from '../../config';
import { prepareDatabase } from '../../src/app';
import { walkDeliverySideRows, type SideRowsDrift } from '../../src/domain/maintenance/delivery-side-rows';
import { readDeliveriesWithSideRows, resetFailedDeliveries, type CreatedCursor } from '../../src/domain/webhooks/store';
import { expectSideRowsExact } from '../support/deliveries';
import { dropDatabase, sideDatabaseUrl } from '../support/databases';
import { call, createPublishedForm, createTenant, fieldInput, startTestApp, type TestApp } from '../support/harness';
import { freshQueuePrefix } from '../support/worker-stack';

/**
 * The walk of `deliveries check|repair` pages by (created_at, id) whatever the date style and time
 * zone of its connection (a server's or a role's settings): the cursor is read back exactly, so no
 * delivery is passed over. Under DateStyle 'SQL' a timestamptz's text names its zone by abbreviation,
 * and Asia/Kolkata's 'IST' reads back as Israel's: a cursor of that text lands 3.5 hours late.
 */
describe('deliveries check walk: its cursor, and side rows filed under another webhook', function () {
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

  it('finds side rows left under the webhook a delivery was moved from, and files them under its own', async () => {
    const tenant = await createTenant(api.app);
    const formId = (await createPublishedForm(api.url, tenant.key, [fieldInput('fld_email', 'email', 'Email')])).id;
    const createWebhook = async (name: string): Promise<string> => {
      const res = await call(api.url, 'POST', '/v1/webhooks', {
        key: tenant.key, body: { name, url: 'http://127.0.0.1:9/hook', formId, events: ['submission.created'] },
      });
      expect(res.status, res.text).to.equal(201);
      return res.body.webhook.id;
    };
    const oldHook = await createWebhook('old');
    for (let i = 0; i < 2; i++) {
      const res = await call(api.url, 'POST', `/v1/forms/${formId}/submissions`, { key: tenant.key, body: { data: { fld_email: 'a@example.com' } } });
      expect(res.status, res.text).to.equal(201);
    }
    const newHook = await createWebhook('new');
    const [pending, failed] = (await api.query('select id from webhook_deliveries where webhook_id = ? order by created_at, id', [oldHook]))
      .map((r: { id: string }) => r.id);
    await api.query(`with d as (update webhook_deliveries set status = 'failed', next_attempt_at = null where id = ? returning *),
      o as (delete from webhook_delivery_owed o using d where o.delivery_id = d.id)
      insert into webhook_delivery_failed (delivery_id, organization_id, webhook_id, created_at) select id, organization_id, webhook_id, created_at from d`, [failed]);
    await expectSideRowsExact(api.query, 'the failed delivery');
    // by hand, as an operator might: the old webhook's deliveries moved to the new one, their side rows left as they were
    await api.query('update webhook_deliveries set webhook_id = ? where id = any(?::text[])', [newHook, `{${pending},${failed}}`]);

    const seen: SideRowsDrift[] = [];
    const summary = await walkDeliverySideRows(api.app.orm.em.fork(), { repair: true, webhookId: newHook }, (d) => { seen.push(d); });
    expect(seen.map((d) => d.deliveryId).sort()).to.deep.equal([pending, failed].sort());
    expect(summary).to.deep.include({ drifted: 2, locked: 0 });
    await expectSideRowsExact(api.query, 'deliveries repair');
    // the old webhook's recovery no longer reaches the moved delivery; the new one's does
    const window = { since: new Date(Date.now() - 3_600_000), until: new Date(Date.now() + 60_000) };
    expect(await resetFailedDeliveries(api.app.orm.em.fork(), tenant.organizationId, oldHook, window, 10)).to.deep.equal([]);
    expect((await resetFailedDeliveries(api.app.orm.em.fork(), tenant.organizationId, newHook, window, 10)).map((r) => r.id)).to.deep.equal([failed]);
  });
});
