import { expect } from 'chai';
import IORedis from 'ioredis';
import { randomBytes } from 'node:crypto';
import { createApiKey, createOrganization } from '../../src/domain/auth/admin';
import { initOrm, type Orm } from '../../src/db/orm';
import { deleteQueueKeys } from '../support/databases';
import { keepSideRows } from '../support/deliveries';
import { startReceiver, type Delivery, type Receiver } from '../support/fakes/receiver';
import { call, fieldInput } from '../support/harness';
import { spawnApi, type ServiceProcess } from '../support/processes';
import { startPgProxy } from '../support/pg-proxy';
import { ownRedis, type OwnRedis } from '../support/redis-server';
import { spawnWorker, waitUntil, type WorkerChild } from '../support/worker-stack';

/**
 * Faults played with real processes (API and workers as child processes, a redis-server of the
 * test's own, a TCP proxy in front of PostgreSQL). Each checks, and prints, that every acknowledged
 * submission is stored once, every delivery owed for it arrives, nothing arrives twice under two
 * delivery ids, and no request took longer than 5 s.
 */

const REQUEST_BOUND_MS = 5_000;
const FIELDS = [fieldInput('fld_marker', 'text', 'Marker', { required: true })];

type Api = ServiceProcess & { url: string };

interface Tenant { organizationId: string; key: string }

/** Submissions sent, what they were answered, and how long the slowest answer took. */
class Ledger {
  /** marker → submission id, for every 201. */
  readonly acknowledged = new Map<string, string>();
  readonly statuses: number[] = [];
  slowestMs = 0;

  async submit(api: Api, tenant: Tenant, formId: string): Promise<number> {
    const marker = `m_${randomBytes(6).toString('hex')}`;
    const started = Date.now();
    const res = await call(api.url, 'POST', `/v1/forms/${formId}/submissions`, { key: tenant.key, body: { data: { fld_marker: marker } } })
      .catch(() => ({ status: 0, body: null as any }));
    this.time(started);
    this.statuses.push(res.status);
    if (res.status === 201) this.acknowledged.set(marker, res.body.submission.id);
    return res.status;
  }

  time(started: number): void {
    this.slowestMs = Math.max(this.slowestMs, Date.now() - started);
  }
}

function eventOf(delivery: Delivery): string {
  return JSON.parse(delivery.rawBody).id;
}

/** A receiver that answers 503 until `healthy`, and records which event each 2xx answer was for. */
async function flakyReceiver(opts: { healthy: boolean; delayMs?: (attempt: number) => number }) {
  const state = { healthy: opts.healthy, accepted: [] as Delivery[] };
  const receiver = await startReceiver({
    respond: (attempt, req) => {
      if (!state.healthy) return { status: 503 };
      state.accepted.push(req);
      return { status: 200, delayMs: opts.delayMs?.(attempt) };
    },
  });
  return { receiver, state };
}

interface Tally {
  acknowledged: number;
  stored: number;
  owed: number;
  delivered: number;
  duplicates: number;
  slowestMs: number;
}

/**
 * Every acknowledged marker is stored in exactly one row; every acknowledged submission's event was
 * accepted by the receiver; an event received more than once always carried one delivery id.
 */
async function tally(orm: Orm, ledger: Ledger, receiver: Receiver, accepted: Delivery[]): Promise<Tally> {
  const markers = [...ledger.acknowledged.keys()];
  const rows = await orm.em.fork().execute(
    `select data->>'fld_marker' as marker, id from submissions where data->>'fld_marker' = any(string_to_array(?, ','))`,
    [markers.join(',')],
  );
  const rowsByMarker = new Map<string, string[]>();
  for (const row of rows) rowsByMarker.set(row.marker, [...(rowsByMarker.get(row.marker) ?? []), row.id]);
  for (const [marker, id] of ledger.acknowledged) expect(rowsByMarker.get(marker), `marker ${marker}`).to.deep.equal([id]);

  const owedEvents = new Set([...ledger.acknowledged.values()].map((id) => `evt_${id.slice(4)}`));
  const deliveryIdsByEvent = new Map<string, Set<string>>();
  for (const d of receiver.deliveries) {
    const event = eventOf(d);
    deliveryIdsByEvent.set(event, (deliveryIdsByEvent.get(event) ?? new Set()).add(d.headers['x-service-delivery']));
  }
  for (const [event, ids] of deliveryIdsByEvent) expect(ids.size, `delivery ids of ${event}`).to.equal(1);
  const acceptedOwed = accepted.filter((d) => owedEvents.has(eventOf(d)));
  const delivered = new Set(acceptedOwed.map(eventOf));
  return {
    acknowledged: ledger.acknowledged.size,
    stored: [...ledger.acknowledged.keys()].filter((m) => rowsByMarker.get(m)?.length === 1).length,
    owed: owedEvents.size,
    delivered: [...owedEvents].filter((e) => delivered.has(e)).length,
    duplicates: acceptedOwed.length - delivered.size,
    slowestMs: ledger.slowestMs,
  };
}

function report(fault: string, t: Tally): void {
  process.stdout.write(`      [fault] ${fault}: submissions acknowledged ${t.acknowledged}, stored ${t.stored}, `
    + `deliveries owed ${t.owed}, delivered ${t.delivered}, duplicates ${t.duplicates}, slowest answer ${t.slowestMs} ms\n`);
}

function expectWhole(t: Tally): void {
  expect(t.stored).to.equal(t.acknowledged);
  expect(t.owed).to.equal(t.acknowledged);
  expect(t.delivered).to.equal(t.owed);
  expect(t.slowestMs).to.be.below(REQUEST_BOUND_MS);
}

/** Every owed event reached the receiver, and its delivery row says so (a sender that died before recording it does not count). */
async function waitForDelivered(orm: Orm, ledger: Ledger, accepted: Delivery[], timeoutMs: number): Promise<void> {
  const owed = new Set([...ledger.acknowledged.values()].map((id) => `evt_${id.slice(4)}`));
  await waitUntil(`${owed.size} deliveries`, async () => {
    const got = new Set(accepted.map(eventOf).filter((e) => owed.has(e)));
    if (got.size !== owed.size) return false;
    const [row] = await orm.em.fork().execute(
      `select count(*)::int as n from webhook_deliveries where status = 'succeeded' and event_id = any(string_to_array(?, ','))`,
      [[...owed].join(',')],
    );
    return row.n === owed.size;
  }, timeoutMs, 100).catch(async (err) => {
    const rows = await orm.em.fork().execute(`select status, attempts, next_attempt_at from webhook_deliveries order by created_at desc limit 5`);
    throw new Error(`${err.message}; latest deliveries: ${JSON.stringify(rows)}`);
  });
}

describe('durability faults (real processes)', function () {
  this.timeout(90_000);
  let orm: Orm;
  const children: Array<ServiceProcess | WorkerChild> = [];
  const redises: OwnRedis[] = [];
  const prefixes: string[] = [];

  const freshPrefix = () => {
    const prefix = `${process.env.QUEUE_PREFIX}f${randomBytes(3).toString('hex')}`;
    prefixes.push(prefix);
    return prefix;
  };
  async function api(env: Record<string, string>): Promise<Api> {
    const proc = await spawnApi(env);
    children.push(proc);
    return proc;
  }
  async function worker(env: Record<string, string>): Promise<WorkerChild> {
    const proc = spawnWorker('all', { LOG_LEVEL: 'info', ...env });
    children.push(proc);
    await waitUntil('the worker to start', async () => proc.output().includes('workers started'), 30_000);
    return proc;
  }
  async function tenantWithForm(apiUrl: string, receiverUrl: string): Promise<{ tenant: Tenant; formId: string }> {
    const em = orm.em.fork();
    const org = await createOrganization(em, { name: 'fault org', plan: 'enterprise' });
    const { key } = await createApiKey(em, { organizationId: org.id, scopes: ['*'] });
    const tenant = { organizationId: org.id, key };
    const form = await call(apiUrl, 'POST', '/v1/forms', { key, body: { title: 'Faults', status: 'published', pages: [], fields: FIELDS } });
    expect(form.status).to.equal(201);
    const hook = await call(apiUrl, 'POST', '/v1/webhooks', { key, body: { name: 'hook', url: receiverUrl, events: ['submission.created'] } });
    expect(hook.status).to.equal(201);
    return { tenant, formId: form.body.form.id };
  }

  before(async () => {
    orm = await initOrm(process.env.DATABASE_URL!, 2);
  });
  afterEach(async () => {
    for (const proc of children.splice(0)) await proc.stop('SIGKILL');
    for (const redis of redises.splice(0)) await redis.kill();
  });
  after(async () => {
    await orm.close();
    for (const prefix of prefixes) await deleteQueueKeys(prefix);
  });

  it('Redis restarted empty while deliveries wait for a retry: the sweep delivers every one, with its delivery id', async () => {
    const redis = await ownRedis();
    redises.push(redis);
    await redis.start();
    const env = {
      REDIS_URL: redis.url, QUEUE_PREFIX: freshPrefix(), WEBHOOK_RETRY_DELAYS_MS: '4000,4000,4000', OWED_SWEEP_INTERVAL_MS: '1000',
    };
    const { receiver, state } = await flakyReceiver({ healthy: false });
    try {
      const service = await api(env);
      await worker(env);
      const { tenant, formId } = await tenantWithForm(service.url, receiver.url);
      const ledger = new Ledger();
      await Promise.all(Array.from({ length: 10 }, () => ledger.submit(service, tenant, formId)));
      // Every delivery failed its first attempt (503) and waits in Redis for its retry.
      await waitUntil('first attempts', async () => {
        const [row] = await orm.em.fork().execute(
          `select count(*)::int as n from webhook_deliveries where organization_id = ? and status = 'pending' and attempts = 1`, [tenant.organizationId]);
        return row.n === 10;
      }, 20_000);

      await redis.kill();
      // Submissions while Redis is away are still acknowledged, in time.
      for (let i = 0; i < 3; i++) expect(await ledger.submit(service, tenant, formId)).to.equal(201);
      await redis.start();
      state.healthy = true;

      await waitForDelivered(orm, ledger, state.accepted, 40_000);
      const result = await tally(orm, ledger, receiver, state.accepted);
      report('Redis restarted empty while deliveries wait for a retry', result);
      expectWhole(result);
      expect(result.acknowledged).to.equal(13);
    } finally {
      await receiver.close();
    }
  });

  /**
   * Redis loses its data while every connection stays up: three deliveries wait for their retry
   * (the receiver answered 503), then `lose` empties Redis in its own way. No process restarts;
   * within two sweep intervals the schedules are back, and the sweep delivers each one once.
   */
  async function dataLostWhileConnected(fault: string, lose: (redisUrl: string, prefix: string) => Promise<void>) {
    const redis = await ownRedis();
    redises.push(redis);
    await redis.start();
    const prefix = freshPrefix();
    const env = { REDIS_URL: redis.url, QUEUE_PREFIX: prefix, WEBHOOK_RETRY_DELAYS_MS: '5000,5000,5000', OWED_SWEEP_INTERVAL_MS: '1000' };
    const { receiver, state } = await flakyReceiver({ healthy: false });
    try {
      const service = await api(env);
      const workers = await worker(env);
      const { tenant, formId } = await tenantWithForm(service.url, receiver.url);
      const ledger = new Ledger();
      for (let i = 0; i < 3; i++) expect(await ledger.submit(service, tenant, formId)).to.equal(201);
      await waitUntil('first attempts', async () => {
        const [row] = await orm.em.fork().execute(
          `select count(*)::int as n from webhook_deliveries where organization_id = ? and status = 'pending' and attempts = 1`, [tenant.organizationId]);
        return row.n === 3;
      }, 20_000);

      await lose(redis.url, prefix);
      state.healthy = true;
      // Their retry jobs are gone with the data: only the restored sweep can queue them again.
      await waitForDelivered(orm, ledger, state.accepted, 20_000);
      const result = await tally(orm, ledger, receiver, state.accepted);
      report(fault, result);
      expectWhole(result);
      expect(result.delivered).to.equal(3);
      expect(result.duplicates).to.equal(0);
      expect(workers.child.exitCode, 'the worker process kept running').to.equal(null);
      const scheduled = new IORedis(redis.url);
      try {
        const names = await scheduled.zrange(`${prefix}:usage:repeat`, '0', '-1');
        expect(names).to.include.members(['relay-outbox', 'sweep-owed', 'maintenance', 'rollup-usage']);
      } finally {
        scheduled.disconnect();
      }
    } finally {
      await receiver.close();
    }
  }

  it('Redis emptied by FLUSHALL while connected: the schedules come back and every owed delivery goes out once', async () => {
    await dataLostWhileConnected('FLUSHALL while connected', async (url) => {
      const client = new IORedis(url);
      try {
        expect(await client.flushall()).to.equal('OK');
      } finally {
        client.disconnect();
      }
    });
  });

  it('the usage schedules and the webhook queue evicted with DEL: restored without a reconnect, every owed delivery goes out once', async () => {
    await dataLostWhileConnected('scheduler and webhook queue keys deleted', async (url, prefix) => {
      const client = new IORedis(url);
      try {
        const schedules = await client.keys(`${prefix}:usage:repeat*`);
        const retries = await client.keys(`${prefix}:webhooks:*`);
        expect(schedules).to.include(`${prefix}:usage:repeat`);
        expect(retries).to.include(`${prefix}:webhooks:delayed`);
        await client.del(...schedules, ...retries);
        expect(await client.exists(`${prefix}:usage:repeat`, `${prefix}:webhooks:delayed`)).to.equal(0);
      } finally {
        client.disconnect();
      }
    });
  });

  it('Redis down before the API starts: requests answer within 5 s, and everything goes out once Redis is up', async () => {
    const redis = await ownRedis();
    redises.push(redis);
    const env = { REDIS_URL: redis.url, QUEUE_PREFIX: freshPrefix(), WEBHOOK_RETRY_DELAYS_MS: '500,500,500', OWED_SWEEP_INTERVAL_MS: '1000' };
    const { receiver, state } = await flakyReceiver({ healthy: true });
    try {
      const adminToken = randomBytes(16).toString('hex');
      const service = await api({ ...env, ADMIN_TOKEN: adminToken });
      const { tenant, formId } = await tenantWithForm(service.url, receiver.url);
      const ledger = new Ledger();
      await Promise.all(Array.from({ length: 10 }, () => ledger.submit(service, tenant, formId)));
      expect(ledger.statuses).to.deep.equal(Array(10).fill(201));
      const healthStarted = Date.now();
      const health = await call(service.url, 'GET', '/admin/queues/health', { headers: { Authorization: `Bearer ${adminToken}` } });
      ledger.time(healthStarted);
      expect(health.status).to.equal(503);

      const timed = async (method: string, path: string) => {
        const started = Date.now();
        const res = await call(service.url, method, path, { key: tenant.key });
        ledger.time(started);
        return res;
      };
      expect((await timed('GET', '/readyz')).status).to.equal(503);
      expect((await timed('GET', '/readyz/api')).status).to.equal(200);
      const [{ id: webhookId }] = (await timed('GET', '/v1/webhooks')).body.webhooks;
      // A delivery to retry by hand: its queue is unreachable, so the retry is refused, at once.
      await orm.em.fork().execute(
        `insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, attempts)
         values ('dlv_faultRetry', ?, ?, 'evt_faultRetry', 'form.submission.created', '{}', 'failed', 10)`,
        [webhookId, tenant.organizationId],
      );
      await keepSideRows((sql, params) => orm.em.fork().execute(sql, params), `id = 'dlv_faultRetry'`);
      const retry = await timed('POST', `/v1/webhooks/${webhookId}/deliveries/dlv_faultRetry/retry`);
      expect(retry.status).to.equal(503);
      expect(retry.body.error).to.equal('service_unavailable');
      expect((await timed('POST', `/v1/webhooks/${webhookId}/test`)).status).to.be.oneOf([200, 503]);

      await redis.start();
      await worker(env);
      await waitForDelivered(orm, ledger, state.accepted, 40_000);
      await waitUntil('/readyz to pass', async () => (await call(service.url, 'GET', '/readyz')).status === 200, 10_000);
      const result = await tally(orm, ledger, receiver, state.accepted);
      report('Redis down before the API starts', result);
      expectWhole(result);
    } finally {
      await receiver.close();
    }
  });

  it('a worker killed with SIGKILL mid-delivery: a new worker delivers everything, retries keeping their delivery id', async () => {
    const env = { QUEUE_PREFIX: freshPrefix(), WEBHOOK_RETRY_DELAYS_MS: '500,500,500', OWED_SWEEP_INTERVAL_MS: '1000', WORKER_LOCK_MS: '1500' };
    // The first answers come slowly, so the worker dies with deliveries in flight.
    const { receiver, state } = await flakyReceiver({ healthy: true, delayMs: (attempt) => (attempt <= 10 ? 5_000 : 0) });
    try {
      const service = await api(env);
      const first = await worker(env);
      const { tenant, formId } = await tenantWithForm(service.url, receiver.url);
      const ledger = new Ledger();
      await Promise.all(Array.from({ length: 20 }, () => ledger.submit(service, tenant, formId)));
      await receiver.waitFor(5, 15_000);
      first.child.kill('SIGKILL');
      expect(await first.exited).to.equal('SIGKILL');
      const inFlight = await orm.em.fork().execute(
        `select count(*)::int as n from webhook_deliveries where organization_id = ? and status = 'pending'`, [tenant.organizationId]);
      expect(inFlight[0].n, 'deliveries not yet settled when the worker died').to.be.at.least(1);

      await worker(env);
      await waitForDelivered(orm, ledger, state.accepted, 40_000);
      const result = await tally(orm, ledger, receiver, state.accepted);
      report('a worker killed with SIGKILL mid-delivery', result);
      expectWhole(result);
    } finally {
      await receiver.close();
    }
  });

  it('PostgreSQL connections cut under load: acknowledged submissions are stored once and delivered, every answer within 5 s', async () => {
    const proxy = await startPgProxy();
    const env = { QUEUE_PREFIX: freshPrefix(), WEBHOOK_RETRY_DELAYS_MS: '500,500,500', OWED_SWEEP_INTERVAL_MS: '1000' };
    const { receiver, state } = await flakyReceiver({ healthy: true });
    try {
      const viaProxy = new URL(process.env.DATABASE_URL!);
      viaProxy.host = `127.0.0.1:${proxy.port}`;
      const service = await api({ ...env, DATABASE_URL: viaProxy.toString() });
      await worker(env);
      const { tenant, formId } = await tenantWithForm(service.url, receiver.url);
      const ledger = new Ledger();
      let running = true;
      // One key per loop: a fast service answers more than one key's 2,000 requests a minute here.
      const tenants = [tenant, ...await Promise.all(Array.from({ length: 5 }, async () => ({
        organizationId: tenant.organizationId,
        key: (await createApiKey(orm.em.fork(), { organizationId: tenant.organizationId, scopes: ['*'] })).key,
      })))];
      const load = tenants.map(async (loopTenant) => {
        while (running) await ledger.submit(service, loopTenant, formId);
      });
      // Cut every connection a few times; then hold all traffic (a black-holed network) for 3 s.
      for (let i = 0; i < 4; i++) {
        await new Promise((r) => setTimeout(r, 700));
        proxy.cutAll();
      }
      proxy.hold(true);
      await new Promise((r) => setTimeout(r, 3_000));
      proxy.hold(false);
      await new Promise((r) => setTimeout(r, 1_000));
      running = false;
      await Promise.all(load);
      expect(ledger.statuses.filter((s) => s !== 201 && s !== 503), 'every answer is 201 or 503').to.deep.equal([]);
      expect(ledger.statuses.filter((s) => s === 503).length).to.be.at.least(1);

      await waitForDelivered(orm, ledger, state.accepted, 40_000);
      const result = await tally(orm, ledger, receiver, state.accepted);
      report('PostgreSQL connections cut under load', result);
      process.stdout.write(`      [fault] (answers: ${ledger.statuses.filter((s) => s === 201).length} × 201, `
        + `${ledger.statuses.filter((s) => s === 503).length} × 503)\n`);
      expectWhole(result);
    } finally {
      await receiver.close();
      await proxy.close();
    }
  });
});
