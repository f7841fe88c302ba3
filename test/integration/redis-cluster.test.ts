import { expect } from 'chai';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { verifySignature } from '../../src/domain/webhooks/signing';
import { throttleKeys } from '../../src/lib/throttle';
import { startReceiver, type Receiver } from '../support/fakes/receiver';
import { call, createPublishedForm, createTenant, fieldInput as field, startTestApp, type TestApp } from '../support/harness';
import { DIST_ROOT, spawnApi, type ServiceProcess } from '../support/processes';
import { startRedisCluster, type RunningRedisCluster } from '../support/redis-cluster';
import { FAST_RETRIES, spawnWorker, waitUntil, type WorkerChild } from '../support/worker-stack';

const run = promisify(execFile);

/**
 * Everything that uses Redis, on a real three-master Redis Cluster: queues (one hash tag), the
 * shared rate limit of two API processes, and cache invalidation (a revoked key is refused at once).
 */
describe('on a Redis Cluster (REDIS_CLUSTER_NODES)', function () {
  this.timeout(90_000);
  let cluster: RunningRedisCluster;
  let env: Record<string, string>;
  let t: TestApp;
  let apis: Array<ServiceProcess & { url: string }> = [];
  let workers: WorkerChild | null = null;
  let receiver: Receiver;

  before(async () => {
    cluster = await startRedisCluster();
    env = {
      REDIS_CLUSTER_NODES: cluster.nodes, REDIS_URL: 'redis://127.0.0.1:1', QUEUE_PREFIX: 'fscluster',
      WEBHOOK_RETRY_DELAYS_MS: FAST_RETRIES,
    };
    receiver = await startReceiver({ respond: (attempt) => ({ status: attempt === 1 ? 503 : 200 }) });
    t = await startTestApp(env);
    apis = await Promise.all([spawnApi(env), spawnApi(env)]);
    workers = spawnWorker('all', env);
  });
  after(async () => {
    await workers?.stop();
    await Promise.all(apis.map((a) => a.stop()));
    await t?.close();
    await receiver?.close();
    await cluster?.stop();
  });

  it('queues under one hash tag and delivers every submission to its webhook, a retry included', async () => {
    expect(t.app.config.queuePrefix).to.equal('{fscluster}');
    const tenant = await createTenant(t.app);
    const form = await createPublishedForm(apis[0].url, tenant.key, [field('fld_name', 'text', 'Name')]);
    const hook = await call(apis[0].url, 'POST', '/v1/webhooks', {
      key: tenant.key, body: { name: 'cluster', url: receiver.url, events: ['submission.created'], formId: form.id },
    });
    expect(hook.status).to.equal(201);
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await call(apis[i % 2].url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data: { fld_name: `c${i}` } } });
      expect(res.status).to.equal(201);
      ids.push(res.body.submission.id);
    }
    // one 503 (the first request) and then one 2xx per submission
    await receiver.waitFor(7, 30_000).catch((err) => { throw new Error(`${err.message}\n${workers?.output()}`); });
    const delivered = receiver.deliveries.map((d) => JSON.parse(d.rawBody).data.submission.id as string);
    expect(new Set(delivered)).to.deep.equal(new Set(ids));
    for (const d of receiver.deliveries) {
      expect(verifySignature({ secret: hook.body.webhook.secret, signature: d.headers['x-service-signature'], timestamp: d.headers['x-service-timestamp'], rawBody: d.rawBody })).to.equal(true);
    }
    await waitUntil('every delivery recorded as succeeded', async () => {
      const [row] = await t.app.orm.em.fork().getConnection().execute(
        `select count(*)::int as n from webhook_deliveries where webhook_id = ? and status = 'succeeded'`, [hook.body.webhook.id]);
      return row.n === 6;
    }, 20_000);
    // the jobs lived on the cluster, every key of the queues on the one master that owns the tag's slot
    const client = cluster.client();
    await waitUntil('cluster client ready', async () => client.status === 'ready', 5_000);
    const perMaster = await Promise.all(client.nodes('master').map((node) => node.keys('{fscluster}:*')));
    const holding = perMaster.filter((keys) => keys.length > 0);
    expect(holding).to.have.length(1);
    expect(holding[0].some((k) => k.startsWith('{fscluster}:webhooks:'))).to.equal(true);
    expect(holding[0].some((k) => k.startsWith('{fscluster}:submissions:'))).to.equal(true);
  });

  it('holds a webhook\'s throttleRate on the Cluster, its keys in the webhook\'s own hash slot', async () => {
    const slow = await startReceiver();
    try {
      const tenant = await createTenant(t.app);
      const form = await createPublishedForm(apis[0].url, tenant.key, [field('fld_name', 'text', 'Name')]);
      const hook = await call(apis[0].url, 'POST', '/v1/webhooks', {
        key: tenant.key, body: { name: 'slow', url: slow.url, events: ['submission.created'], formId: form.id, throttleRate: 2 },
      });
      expect(hook.status, hook.text).to.equal(201);
      await Promise.all([0, 1, 2, 3].map((i) => call(apis[i % 2].url, 'POST', `/v1/forms/${form.id}/submissions`, {
        key: tenant.key, body: { data: { fld_name: `s${i}` } },
      })));
      await slow.waitFor(4, 30_000).catch((err) => { throw new Error(`${err.message}\n${workers?.output()}`); });
      const times = slow.deliveries.map((d) => d.receivedAt).sort((a, b) => a - b);
      // 2 a second: one every 500 ms.
      expect(times[3] - times[0]).to.be.at.least(1_400);
      const client = cluster.client();
      await waitUntil('cluster client ready', async () => client.status === 'ready', 5_000);
      // The keys the code builds (throttleKeys, as the script gets them), not hand-written ones: the
      // ones it wrote are there, and all of them hash to one slot, so the script runs on one node.
      const keys = throttleKeys(t.app.config.queuePrefix, hook.body.webhook.id);
      const slots = await Promise.all([keys.line, keys.held, keys.log].map((key) => client.cluster('KEYSLOT', key)));
      expect(new Set(slots).size, JSON.stringify(keys)).to.equal(1);
      expect(await client.exists(keys.line)).to.equal(1);
      expect(await client.exists(keys.log)).to.equal(1);
    } finally {
      await slow.close();
    }
  });

  it('shares one rate-limit budget between two API processes', async () => {
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 50_000) await new Promise((r) => setTimeout(r, 60_500 - intoMinute));
    const tenant = await createTenant(t.app, { plan: 'free' });
    const answers = await Promise.all(Array.from({ length: 24 }, (_, i) => call(apis[i % 2].url, 'GET', '/v1/forms', { key: tenant.key })));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 200)).to.have.length(10);
    expect(statuses.filter((s) => s === 429)).to.have.length(14);
  });

  it('drops a revoked key from every API process at once (invalidation over the Cluster)', async () => {
    const tenant = await createTenant(t.app);
    for (const api of apis) expect((await call(api.url, 'GET', '/v1/forms', { key: tenant.key })).status).to.equal(200);
    const [row] = await t.app.orm.em.fork().getConnection().execute('select id from api_keys where organization_id = ?', [tenant.organizationId]);
    await run(process.execPath, [path.join(DIST_ROOT, 'src/cli/index.js'), 'keys', 'revoke', row.id], { env: { ...process.env, ...env } });
    await waitUntil('both processes refuse the key', async () => {
      const statuses = await Promise.all(apis.map((api) => call(api.url, 'GET', '/v1/forms', { key: tenant.key }).then((r) => r.status)));
      return statuses.every((s) => s === 401);
    }, 3_000);
  });
});
