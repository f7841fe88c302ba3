import { expect } from 'chai';
import { Worker } from 'bullmq';
import { blockingRedis } from '../../config/redis';
import { QUEUE_NAMES } from '../../src/queues/catalogue';
import { call, startTestApp, type TestApp } from '../support/harness';

const ADMIN_TOKEN = 'adm_0123456789abcdef0123';
const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });
const basic = (password: string) => ({ Authorization: `Basic ${Buffer.from(`operator:${password}`).toString('base64')}` });

describe('operator endpoints: queue health and the queue dashboard', () => {
  describe('without ADMIN_TOKEN', () => {
    let t: TestApp;
    before(async () => { t = await startTestApp(); });
    after(async () => t.close());

    for (const path of ['/admin/queues/health', '/admin/queues/ui', '/admin/queues/ui/api/queues']) {
      it(`${path} answers 404 exactly like an unknown path, even with a token`, async () => {
        const unknown = await call(t.url, 'GET', '/no/such/path');
        const res = await call(t.url, 'GET', path, { headers: bearer(ADMIN_TOKEN) });
        expect(res.status).to.equal(404);
        expect(res.body).to.deep.equal(unknown.body);
      });
    }
  });

  describe('with ADMIN_TOKEN', () => {
    // A prefix of its own: workers of other test files never touch these queues.
    const prefix = `${process.env.QUEUE_PREFIX}adm`;
    let t: TestApp;
    let worker: Worker;
    before(async () => {
      t = await startTestApp({ ADMIN_TOKEN, QUEUE_PREFIX: prefix });
      const producer = t.app.producer;
      await producer.add('webhooks', 'deliver', { deliveryId: 'dlv_a' }, { jobId: 'deliver-dlv_a' });
      await producer.add('webhooks', 'deliver', { deliveryId: 'dlv_b' }, { jobId: 'deliver-dlv_b' });
      await producer.add('crm', 'sync', { syncId: 'crm_a' }, { jobId: 'crm-crm_a', delay: 60_000 });
      await producer.queue('usage').pause();
      // Connected but not fetching: it shows in the worker count without taking the jobs.
      worker = new Worker('crm', async () => undefined, { connection: blockingRedis(t.app.config), prefix, autorun: false });
      await worker.waitUntilReady();
    });
    after(async () => {
      await worker.close();
      for (const name of QUEUE_NAMES) await t.app.producer.queue(name).obliterate({ force: true });
      await t.close();
    });

    const cases: Array<[string, Record<string, string>]> = [
      ['no credentials', {}],
      ['a wrong bearer token', bearer(`${ADMIN_TOKEN}x`)],
      ['a prefix of the token', bearer(ADMIN_TOKEN.slice(0, -1))],
      ['an API-key style header', { 'X-Api-Key': ADMIN_TOKEN }],
      ['Basic with a wrong password', basic('wrong')],
    ];
    for (const [label, headers] of cases) {
      it(`refuses ${label} with 401 unauthorized`, async () => {
        const res = await call(t.url, 'GET', '/admin/queues/health', { headers });
        expect(res.status).to.equal(401);
        expect(res.body).to.deep.equal({ error: 'unauthorized', message: 'Invalid admin token' });
        const ui = await call(t.url, 'GET', '/admin/queues/ui', { headers });
        expect(ui.status).to.equal(401);
        expect(ui.headers.get('www-authenticate')).to.match(/^Basic realm=/);
      });
    }

    it('reports counts, pause state, oldest waiting age and workers per queue, and the outbox backlog', async () => {
      const res = await call(t.url, 'GET', '/admin/queues/health', { headers: bearer(ADMIN_TOKEN) });
      expect(res.status).to.equal(200);
      expect(res.body).to.have.keys('queues', 'outboxBacklog', 'throttledDeliveries');
      expect(res.body.throttledDeliveries).to.be.a('number').at.least(0);
      expect(res.body.outboxBacklog).to.be.a('number').at.least(0);
      const byName = Object.fromEntries(res.body.queues.map((q: any) => [q.name, q]));
      expect(Object.keys(byName)).to.have.members([...QUEUE_NAMES]);
      const { oldestWaitingAgeSeconds, ...webhooks } = byName.webhooks;
      expect(webhooks).to.deep.equal({ name: 'webhooks', waiting: 2, active: 0, delayed: 0, failed: 0, completed: 0, paused: false, workers: 0 });
      expect(oldestWaitingAgeSeconds).to.be.a('number').within(0, 30);
      expect(byName.crm).to.deep.include({ waiting: 0, delayed: 1, workers: 1, oldestWaitingAgeSeconds: null });
      expect(byName.usage).to.deep.include({ paused: true, waiting: 0 });
    });

    it('counts stored jobs not yet handed to a queue as the outbox backlog', async () => {
      const conn = t.app.orm.em.getConnection();
      const before = (await call(t.url, 'GET', '/admin/queues/health', { headers: bearer(ADMIN_TOKEN) })).body.outboxBacklog;
      const [row] = await conn.execute(`insert into outbox (topic, payload) values ('submission.created', '{}') returning id`);
      try {
        const after = (await call(t.url, 'GET', '/admin/queues/health', { headers: bearer(ADMIN_TOKEN) })).body.outboxBacklog;
        expect(after).to.equal(before + 1);
      } finally {
        await conn.execute('delete from outbox where id = ?', [row.id]);
      }
    });

    it('serves the Bull Board page and its API with the token (Bearer or Basic)', async () => {
      const page = await call(t.url, 'GET', '/admin/queues/ui', { headers: bearer(ADMIN_TOKEN) });
      expect(page.status).to.equal(200);
      expect(page.headers.get('content-type')).to.match(/^text\/html/);
      expect(page.text).to.include('<base href="/admin/queues/ui/"');
      const script = /src="(static\/js\/main\.[^"]+\.js)"/.exec(page.text)![1];
      const asset = await call(t.url, 'GET', `/admin/queues/ui/${script}`, { headers: basic(ADMIN_TOKEN) });
      expect(asset.status).to.equal(200);
      expect(asset.headers.get('content-type')).to.match(/javascript/);
      const api = await call(t.url, 'GET', '/admin/queues/ui/api/queues', { headers: basic(ADMIN_TOKEN) });
      expect(api.status).to.equal(200);
      expect(api.body.queues.map((q: any) => q.name)).to.have.members([...QUEUE_NAMES]);
    });

    it('passes the dashboard\'s actions and their JSON bodies through', async () => {
      const concurrency = await call(t.url, 'PUT', '/admin/queues/ui/api/queues/crm/concurrency', { headers: basic(ADMIN_TOKEN), body: { concurrency: 3 } });
      expect(concurrency.status).to.equal(200);
      expect(await t.app.producer.queue('crm').getGlobalConcurrency()).to.equal(3);
      const resume = await call(t.url, 'PUT', '/admin/queues/ui/api/queues/usage/resume', { headers: bearer(ADMIN_TOKEN) });
      expect(resume.status).to.equal(200);
      const health = await call(t.url, 'GET', '/admin/queues/health', { headers: bearer(ADMIN_TOKEN) });
      expect(health.body.queues.find((q: any) => q.name === 'usage').paused).to.equal(false);
    });
  });
});
