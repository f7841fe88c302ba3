import { expect } from 'chai';
import { verifySignature } from '../../src/domain/webhooks/signing';
import { startFakeHubspot, type FakeHubspot } from '../support/fakes/hubspot';
import { startReceiver, type Receiver } from '../support/fakes/receiver';
import { call, createPublishedForm, createTenant, startTestApp, type TestApp } from '../support/harness';
import { deleteQueueKeys } from '../support/databases';
import { keepSideRows } from '../support/deliveries';
import {
  FAST_RETRIES, freshQueuePrefix, spawnWorker, startInProcessWorkers, startStack, waitUntil,
  type InProcessWorkers, type Stack, type WorkerChild,
} from '../support/worker-stack';

const FIELDS = [
  { id: 'fld_email', type: 'email', label: 'Email', required: true, config: {}, validationRules: {}, order: 0 },
  { id: 'fld_topic', type: 'text', label: 'Topic', required: false, config: {}, validationRules: {}, order: 1 },
];
const DEAD_REDIS = 'redis://127.0.0.1:6390';

async function webhookFor(api: TestApp, key: string, url: string): Promise<{ id: string; secret: string }> {
  const res = await call(api.url, 'POST', '/v1/webhooks', { key, body: { name: 'hook', url, events: ['submission.created'] } });
  expect(res.status).to.equal(201);
  return res.body.webhook;
}

async function submitMany(api: TestApp, key: string, formId: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const res = await call(api.url, 'POST', `/v1/forms/${formId}/submissions`, { key, body: { data: { fld_email: `u${i}@example.com` } } });
    expect(res.status).to.equal(201);
    ids.push(res.body.submission.id);
  }
  return ids;
}

function eventIdsOf(receiver: Receiver): string[] {
  return receiver.deliveries.map((d) => JSON.parse(d.rawBody).id);
}

async function workerReady(worker: WorkerChild): Promise<void> {
  await waitUntil('the worker process to start', async () => worker.output().includes('workers started'), 15_000);
}

function metricsPortOf(worker: WorkerChild): number {
  const line = worker.output().split('\n').find((l) => l.includes('workers started'))!;
  return JSON.parse(line).metricsPort;
}

const quietly = (ms: number) => new Promise((r) => setTimeout(r, ms));
const childEnv = (prefix: string) => ({ QUEUE_PREFIX: prefix, WEBHOOK_RETRY_DELAYS_MS: FAST_RETRIES, LOG_LEVEL: 'info' });

describe('worker faults', function () {
  this.timeout(40_000);
  const children: WorkerChild[] = [];
  const spawnTracked = (prefix: string) => {
    // A short lock, so the job of a killed worker is taken over within seconds, as it would be after 30 s.
    const worker = spawnWorker('webhooks', { ...childEnv(prefix), WORKER_LOCK_MS: '1500' });
    children.push(worker);
    return worker;
  };
  afterEach(async () => {
    for (const { child, exited } of children.splice(0)) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    }
  });

  describe('a webhook worker killed mid-delivery', () => {
    let stack: Stack;
    let receiver: Receiver;
    before(async () => {
      stack = await startStack(['submissions']);
      receiver = await startReceiver({ respond: (attempt) => (attempt === 1 ? { status: 200, delayMs: 30_000 } : { status: 200 }) });
    });
    after(async () => {
      await receiver.close();
      await stack.close();
    });

    it('is delivered by the restarted worker, with the same delivery id, and a restarted worker shuts down cleanly', async () => {
      const tenant = await createTenant(stack.api.app);
      const form = await createPublishedForm(stack.api.url, tenant.key, FIELDS);
      const webhook = await webhookFor(stack.api, tenant.key, receiver.url);
      const first = spawnTracked(stack.prefix);
      await workerReady(first);
      await submitMany(stack.api, tenant.key, form.id, 1);
      await receiver.waitFor(1, 10_000);
      first.child.kill('SIGKILL');
      expect(await first.exited).to.equal('SIGKILL');

      const deliveryId = receiver.deliveries[0].headers['x-service-delivery'];
      const second = spawnTracked(stack.prefix);
      await receiver.waitFor(2, 15_000);
      const redelivered = receiver.deliveries[1];
      expect(redelivered.headers['x-service-delivery']).to.equal(deliveryId);
      expect(verifySignature({
        secret: webhook.secret, signature: redelivered.headers['x-service-signature'],
        timestamp: redelivered.headers['x-service-timestamp'], rawBody: redelivered.rawBody,
      })).to.equal(true);
      await waitUntil('the delivery to succeed', async () => {
        const [row] = await stack.api.app.orm.em.fork().execute('select status from webhook_deliveries where id = ?', [deliveryId]);
        return row.status === 'succeeded';
      });

      second.child.kill('SIGTERM');
      expect(await second.exited).to.equal(0);
    });
  });

  describe('Redis unreachable while submissions arrive', () => {
    let api: TestApp;
    let workers: InProcessWorkers;
    let receiver: Receiver;
    const prefix = freshQueuePrefix();
    before(async () => {
      api = await startTestApp({ QUEUE_PREFIX: prefix, REDIS_URL: DEAD_REDIS });
      receiver = await startReceiver();
    });
    after(async () => {
      await workers?.close();
      await receiver.close();
      await api.close();
      await deleteQueueKeys(prefix);
    });

    it('accepts every submission, then the sweep of unqueued deliveries delivers all of them once Redis is back', async () => {
      const tenant = await createTenant(api.app);
      const form = await createPublishedForm(api.url, tenant.key, FIELDS);
      const webhook = await webhookFor(api, tenant.key, receiver.url);
      const started = Date.now();
      const submissionIds = await submitMany(api, tenant.key, form.id, 5);
      expect(Date.now() - started).to.be.below(5_000);
      expect((await call(api.url, 'GET', '/readyz')).status).to.equal(503);

      // Their deliveries are pending rows with no job. Earlier test files leave pending deliveries and
      // outbox rows nobody consumed; keep this recovery to this test's rows.
      const em = api.app.orm.em.fork();
      await em.execute(`update outbox set processed_at = now() where processed_at is null`);
      await em.execute(`update webhook_deliveries set next_attempt_at = now() + interval '1 day' where status = 'pending' and webhook_id <> ?`, [webhook.id]);
      await keepSideRows((sql, params) => em.execute(sql, params), `status = 'pending' and webhook_id <> ?`, [webhook.id]);
      const [{ n }] = await em.execute(`select count(*)::int as n from webhook_deliveries where webhook_id = ? and status = 'pending'`, [webhook.id]);
      expect(n).to.equal(5);
      workers = await startInProcessWorkers(['submissions', 'webhooks', 'usage'], { QUEUE_PREFIX: prefix, WEBHOOK_RETRY_DELAYS_MS: FAST_RETRIES });
      await receiver.waitFor(5, 20_000);
      await quietly(300);
      expect(eventIdsOf(receiver).sort()).to.deep.equal(submissionIds.map((id) => `evt_${id.slice(4)}`).sort());
    });
  });

  describe('two webhook worker processes on one queue', () => {
    let stack: Stack;
    let receiver: Receiver;
    before(async () => {
      stack = await startStack(['submissions']);
      receiver = await startReceiver({ respond: () => ({ status: 200, delayMs: 20 }) });
    });
    after(async () => {
      await receiver.close();
      await stack.close();
    });

    it('never deliver one event twice to one endpoint', async () => {
      const tenant = await createTenant(stack.api.app);
      const form = await createPublishedForm(stack.api.url, tenant.key, FIELDS);
      await webhookFor(stack.api, tenant.key, receiver.url);
      const workers = [spawnTracked(stack.prefix), spawnTracked(stack.prefix)];
      await Promise.all(workers.map(workerReady));
      const ops = `http://127.0.0.1:${metricsPortOf(workers[0])}`;
      expect((await fetch(`${ops}/healthz`)).status).to.equal(200);
      expect((await fetch(`${ops}/readyz`)).status).to.equal(200);
      const metricsText = await waitUntil('sampled queue gauges', async () => {
        const text = await (await fetch(`${ops}/metrics`)).text();
        return text.includes('formservice_queue_jobs{queue="webhooks",state="waiting"}') && text;
      });
      expect(metricsText).to.match(/formservice_outbox_backlog \d+/);
      const count = 40;
      await submitMany(stack.api, tenant.key, form.id, count);
      await receiver.waitFor(count, 15_000);
      await quietly(500);
      const deliveryIds = receiver.deliveries.map((d) => d.headers['x-service-delivery']);
      expect(receiver.deliveries).to.have.length(count);
      expect(new Set(deliveryIds).size).to.equal(count);
      expect(new Set(eventIdsOf(receiver)).size).to.equal(count);
    });
  });

  describe('CRM sync', () => {
    let stack: Stack;
    let hubspot: FakeHubspot;
    before(async () => {
      hubspot = await startFakeHubspot();
      stack = await startStack(['submissions', 'crm'], { HUBSPOT_API_BASE: hubspot.url });
    });
    after(async () => {
      await stack.close();
      await hubspot.close();
    });

    async function formWithHubspot(token: string) {
      const tenant = await createTenant(stack.api.app);
      const form = await createPublishedForm(stack.api.url, tenant.key, FIELDS, {
        settings: { integrations: [{ type: 'hubspot', accessToken: token, fieldMap: { fld_email: 'email', fld_topic: 'firstname' } }] },
      });
      return { tenant, form };
    }

    async function syncOf(submissionId: string, status: string) {
      return waitUntil(`a ${status} CRM sync`, async () => {
        const [row] = await stack.api.app.orm.em.fork().execute('select * from crm_syncs where submission_id = ?', [submissionId]);
        return row?.status === status ? row : null;
      });
    }

    it('upserts the contact with mapped properties and survives a 429', async () => {
      const { tenant, form } = await formWithHubspot('pat-good-token');
      hubspot.rateLimitNext(1, 1);
      const res = await call(stack.api.url, 'POST', `/v1/forms/${form.id}/submissions`, {
        key: tenant.key, body: { data: { fld_email: 'Grace@Example.com', fld_topic: 'Grace' } },
      });
      expect(res.status).to.equal(201);
      const row = await syncOf(res.body.submission.id, 'succeeded');
      expect(row).to.include({ attempts: 2, last_status_code: 200, last_error: null, provider: 'hubspot', integration_index: 0 });
      expect(hubspot.contacts.get('grace@example.com')).to.deep.equal({ email: 'grace@example.com', firstname: 'Grace' });
      const calls = hubspot.requests.filter((r) => r.authorization === 'Bearer pat-good-token');
      expect(calls).to.have.length(2);
      expect(calls[1]).to.deep.include({ method: 'POST', path: '/crm/v3/objects/contacts/batch/upsert' });
      expect(calls[1].body).to.deep.equal({ inputs: [{ idProperty: 'email', id: 'Grace@Example.com', properties: { email: 'Grace@Example.com', firstname: 'Grace' } }] });
    });

    it('fails without retrying when HubSpot refuses the token (401)', async () => {
      const { tenant, form } = await formWithHubspot('pat-revoked');
      hubspot.rejectToken('pat-revoked');
      const res = await call(stack.api.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data: { fld_email: 'x@example.com' } } });
      const row = await syncOf(res.body.submission.id, 'failed');
      expect(row).to.include({ attempts: 1, last_status_code: 401, last_error: 'Unexpected status 401' });
      await quietly(500);
      expect(hubspot.requests.filter((r) => r.authorization === 'Bearer pat-revoked')).to.have.length(1);
    });
  });
});
