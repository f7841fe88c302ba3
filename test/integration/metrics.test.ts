import { expect } from 'chai';
import { QUEUE_NAMES } from '../../src/queues/catalogue';
import { startQueueSampler } from '../../src/ops/queue-sampler';
import { call, createPublishedForm, createTenant, startTestApp, type TestApp, fieldInput as field } from '../support/harness';
import { waitUntil } from '../support/processes';

/** The value of the sample `name` whose labels include `labels`, or undefined. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([k, v]) => found[k] === v)) return Number(match[3]);
  }
  return undefined;
}


describe('/metrics', () => {
  // A prefix of its own, so the queue gauges count only this file's jobs.
  const prefix = `${process.env.QUEUE_PREFIX}met`;
  let t: TestApp;
  before(async () => { t = await startTestApp({ QUEUE_PREFIX: prefix }); });
  after(async () => {
    for (const name of QUEUE_NAMES) await t.app.producer.queue(name).obliterate({ force: true });
    await t.close();
  });

  const scrape = async () => {
    const res = await call(t.url, 'GET', '/metrics');
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^text\/plain/);
    return res.text;
  };

  it('observes request durations by method, route pattern and status, never by raw URL', async () => {
    const tenant = await createTenant(t.app);
    expect((await call(t.url, 'GET', '/v1/forms', { key: tenant.key })).status).to.equal(200);
    expect((await call(t.url, 'GET', '/v1/forms/form_metricsMissing1', { key: tenant.key })).status).to.equal(404);
    expect((await call(t.url, 'GET', '/no/such/metrics-path-7')).status).to.equal(404);
    const text = await scrape();
    const histogram = 'formservice_http_request_duration_seconds_count';
    expect(sample(text, histogram, { method: 'GET', route: '/v1/forms', status: '200' })).to.be.at.least(1);
    expect(sample(text, histogram, { method: 'GET', route: '/v1/forms/:formId', status: '404' })).to.be.at.least(1);
    expect(sample(text, histogram, { method: 'GET', route: 'unmatched', status: '404' })).to.be.at.least(1);
    expect(sample(text, 'formservice_http_request_duration_seconds_bucket', { route: '/v1/forms', le: '+Inf' })).to.be.at.least(1);
    expect(text).to.not.include('form_metricsMissing1');
    expect(text).to.not.include('metrics-path-7');
  });

  it('exports the closed label sets of counters at 0 before anything happened', async () => {
    const text = await scrape();
    for (const reason of ['refused_submission', 'abandoned']) {
      expect(sample(text, 'formservice_payment_refunds_total', { reason })).to.be.a('number');
    }
    for (const result of ['succeeded', 'failed', 'retrying', 'disabled']) {
      expect(sample(text, 'formservice_webhook_deliveries_total', { result })).to.be.a('number');
    }
  });

  it('counts 429 rate-limit rejections', async function () {
    this.timeout(10_000);
    // Fixed windows reset on the minute: keep the 11 requests inside one window.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 55_000) await new Promise((r) => setTimeout(r, 60_500 - intoMinute));
    const before = sample(await scrape(), 'formservice_rate_limit_rejections_total', { scope: 'api' }) ?? 0;
    const tenant = await createTenant(t.app, { plan: 'free' });
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) statuses.push((await call(t.url, 'GET', '/v1/forms', { key: tenant.key })).status);
    expect(statuses.at(-1)).to.equal(429);
    expect(sample(await scrape(), 'formservice_rate_limit_rejections_total', { scope: 'api' })).to.equal(before + 1);
  });

  it('counts 402 quota rejections', async () => {
    const before = sample(await scrape(), 'formservice_quota_rejections_total') ?? 0;
    const tenant = await createTenant(t.app, { monthlyQuota: 1 });
    const form = await createPublishedForm(t.url, tenant.key, [field('fld_name', 'text', 'Name')]);
    const submit = () => call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data: { fld_name: 'x' } } });
    expect((await submit()).status).to.equal(201);
    expect((await submit()).status).to.equal(402);
    expect(sample(await scrape(), 'formservice_quota_rejections_total')).to.equal(before + 1);
  });

  it('exports how many submissions each storing statement held', async () => {
    const tenant = await createTenant(t.app);
    const form = await createPublishedForm(t.url, tenant.key, [field('fld_name', 'text', 'Name')]);
    const before = await scrape();
    const answers = await Promise.all(Array.from({ length: 6 }, () =>
      call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data: { fld_name: 'x' } } })));
    expect(answers.map((a) => a.status)).to.deep.equal(Array(6).fill(201));
    const after = await scrape();
    const delta = (name: string) => (sample(after, name) ?? 0) - (sample(before, name) ?? 0);
    expect(delta('formservice_submission_store_group_size_sum')).to.equal(6);
    expect(delta('formservice_submission_store_group_size_count')).to.be.within(1, 6);
  });

  it('exports queue gauges and the outbox backlog once the sampler has run', async () => {
    const { producer } = t.app;
    await producer.add('webhooks', 'deliver', { deliveryId: 'dlv_m1' }, { jobId: 'deliver-dlv_m1' });
    await producer.add('webhooks', 'deliver', { deliveryId: 'dlv_m2' }, { jobId: 'deliver-dlv_m2' });
    await producer.add('crm', 'sync', { syncId: 'crm_m1' }, { jobId: 'crm-crm_m1', delay: 60_000 });
    const stop = startQueueSampler(t.app, 50);
    try {
      let text = '';
      await waitUntil(async () => {
        text = await scrape();
        return sample(text, 'formservice_queue_jobs', { queue: 'webhooks', state: 'waiting' }) === 2;
      }, 5_000);
      expect(sample(text, 'formservice_queue_jobs', { queue: 'crm', state: 'delayed' })).to.equal(1);
      for (const state of ['active', 'failed', 'completed']) {
        expect(sample(text, 'formservice_queue_jobs', { queue: 'webhooks', state })).to.equal(0);
      }
      expect(sample(text, 'formservice_queue_oldest_waiting_age_seconds', { queue: 'webhooks' })).to.be.within(0, 30);
      expect(sample(text, 'formservice_queue_oldest_waiting_age_seconds', { queue: 'crm' })).to.equal(0);
      expect(sample(text, 'formservice_outbox_backlog')).to.be.at.least(0);
      // No worker consumes this file's prefix.
      for (const queue of QUEUE_NAMES) expect(sample(text, 'formservice_queue_workers', { queue })).to.equal(0);
    } finally {
      stop();
    }
  });
});
