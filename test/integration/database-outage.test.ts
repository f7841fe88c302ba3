import { expect } from 'chai';
import net from 'node:net';
import { Client } from 'pg';
import { call, createPublishedForm, createTenant, startTestApp, type TestApp, type TestTenant } from '../support/harness';

/**
 * A TCP proxy to PostgreSQL that the test can cut and restore, to play a database outage, or that
 * swallows all traffic while `blackHole` is on (a network that drops packets without an error).
 */
async function startProxy(port = 0): Promise<{ port: number; cut(): Promise<void>; blackHole: boolean }> {
  const sockets = new Set<net.Socket>();
  const state = { blackHole: false };
  const server = net.createServer((client) => {
    const upstream = net.connect(5432, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => s.destroy());
    }
    client.on('data', (chunk) => { if (!state.blackHole) upstream.write(chunk); });
    upstream.on('data', (chunk) => { if (!state.blackHole) client.write(chunk); });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', () => resolve()));
  return {
    get blackHole() { return state.blackHole; },
    set blackHole(on: boolean) { state.blackHole = on; },
    port: (server.address() as net.AddressInfo).port,
    async cut() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('database outage', function () {
  this.timeout(30_000);
  let proxy: Awaited<ReturnType<typeof startProxy>>;
  let t: TestApp;
  let tenant: TestTenant;
  let form: any;

  before(async () => {
    proxy = await startProxy();
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
    await proxy.cut();

    for (const request of [submit, () => call(t.url, 'GET', '/v1/forms', { key: tenant.key })]) {
      const started = Date.now();
      const res = await request();
      expect(Date.now() - started).to.be.lessThan(5_000);
      expect(res.status).to.equal(503);
      expect(res.body.error).to.equal('service_unavailable');
      expect(Number(res.headers.get('retry-after'))).to.be.greaterThan(0);
    }
    expect((await call(t.url, 'GET', '/readyz')).status).to.equal(503);

    proxy = await startProxy(port);
    expect((await submit()).status).to.equal(201);
    expect((await call(t.url, 'GET', '/readyz')).status).to.equal(200);
  });

  it('answers 503 within 5 seconds while a lock it needs is held elsewhere (lock timeout)', async () => {
    const direct = new Client({ connectionString: process.env.DATABASE_URL });
    await direct.connect();
    try {
      // Another session holds this month's usage counter of the organization, which every submission updates.
      await call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data: { fld_a: 'x' } } });
      await direct.query('begin');
      await direct.query('select 1 from usage_counters where organization_id = $1 for update', [tenant.organizationId]);
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
    proxy.blackHole = true;
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
      proxy.blackHole = false;
    }
    await proxy.cut();
    proxy = await startProxy(proxy.port);
    expect((await submit()).status).to.equal(201);
  });
});
