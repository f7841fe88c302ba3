import { expect } from 'chai';
import { Client } from 'pg';
import { startPgProxy, type PgProxy } from '../support/pg-proxy';
import { call, createPublishedForm, createTenant, startTestApp, type TestApp, type TestTenant } from '../support/harness';

describe('database outage', function () {
  this.timeout(30_000);
  let proxy: PgProxy;
  let t: TestApp;
  let tenant: TestTenant;
  let form: any;

  before(async () => {
    proxy = await startPgProxy();
    const url = new URL(process.env.DATABASE_URL!);
    url.host = `127.0.0.1:${proxy.port}`;
    t = await startTestApp({ DATABASE_URL: url.toString() });
    tenant = await createTenant(t.app);
    form = await createPublishedForm(t.url, tenant.key, [
      { id: 'fld_a', type: 'text', label: 'A', required: false, config: {}, validationRules: {}, order: 0 },
    ]);
  });
  after(async () => t.close().catch(() => undefined));

  it('answers 503 service_unavailable within 5 seconds while PostgreSQL is unreachable, then recovers', async () => {
    const submit = () => call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data: { fld_a: 'x' } } });
    expect((await submit()).status).to.equal(201);
    const port = proxy.port;
    await proxy.close();

    for (const request of [submit, () => call(t.url, 'GET', '/v1/forms', { key: tenant.key })]) {
      const started = Date.now();
      const res = await request();
      expect(Date.now() - started).to.be.lessThan(5_000);
      expect(res.status).to.equal(503);
      expect(res.body.error).to.equal('service_unavailable');
      expect(Number(res.headers.get('retry-after'))).to.be.greaterThan(0);
    }
    expect((await call(t.url, 'GET', '/readyz')).status).to.equal(503);

    proxy = await startPgProxy(port);
    expect((await submit()).status).to.equal(201);
    expect((await call(t.url, 'GET', '/readyz')).status).to.equal(200);
  });

  it('answers 503 within 5 seconds while a lock it needs is held elsewhere (lock timeout)', async () => {
    const direct = new Client({ connectionString: process.env.DATABASE_URL });
    await direct.connect();
    try {
      // Another session holds every slot of this month's usage counter of the organization, one of which every submission updates.
      await call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data: { fld_a: 'x' } } });
      await direct.query('begin');
      await direct.query('select 1 from usage_counter_slots where organization_id = $1 for update', [tenant.organizationId]);
      const started = Date.now();
      const res = await call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data: { fld_a: 'x' } } });
      expect(Date.now() - started).to.be.lessThan(5_000);
      expect(res.status).to.equal(503);
      expect(res.body.error).to.equal('service_unavailable');
    } finally {
      await direct.query('rollback').catch(() => undefined);
      await direct.end();
    }
    expect((await call(t.url, 'GET', '/v1/forms', { key: tenant.key })).status).to.equal(200);
  });

  it('answers 503 within 5 seconds while the database is black-holed, then recovers', async () => {
    const submit = () => call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data: { fld_a: 'x' } } });
    expect((await submit()).status).to.equal(201);
    proxy.hold(true);
    try {
      const answers = await Promise.all([submit(), submit(), call(t.url, 'GET', '/v1/forms', { key: tenant.key })].map(async (pending) => {
        const started = Date.now();
        const res = await pending;
        return { status: res.status, ms: Date.now() - started };
      }));
      for (const answer of answers) {
        expect(answer.ms).to.be.lessThan(5_000);
        expect(answer.status).to.equal(503);
      }
    } finally {
      await proxy.close();
    }
    proxy = await startPgProxy(proxy.port);
    expect((await submit()).status).to.equal(201);
  });
});
