import { expect } from 'chai';
import IORedis from 'ioredis';
import { RateLimiter } from '../../src/domain/quotas/rate-limiter';
import { call, createKey, createTenant, startTestApp, type TestApp } from '../support/harness';
import { spawnApi, type ServiceProcess } from '../support/processes';

/** Fixed windows reset on the minute: start a counting test where a reset cannot fall inside it. */
async function awayFromWindowEdge(): Promise<void> {
  const intoMinute = Date.now() % 60_000;
  if (intoMinute > 55_000) await new Promise((r) => setTimeout(r, 60_500 - intoMinute));
}

describe('rate limits per key', () => {
  beforeEach(async function () {
    this.timeout(10_000);
    await awayFromWindowEdge();
  });

  let t: TestApp;
  before(async () => { t = await startTestApp(); });
  after(async () => t.close());

  it('puts X-RateLimit-* headers on every authenticated response, errors included', async () => {
    const tenant = await createTenant(t.app, { plan: 'pro' });
    const ok = await call(t.url, 'GET', '/v1/forms', { key: tenant.key });
    const notFound = await call(t.url, 'GET', '/v1/forms/form_missing', { key: tenant.key });
    for (const res of [ok, notFound]) {
      expect(res.headers.get('x-ratelimit-limit')).to.equal('100');
      expect(Number(res.headers.get('x-ratelimit-remaining'))).to.be.within(0, 99);
      const reset = Number(res.headers.get('x-ratelimit-reset'));
      expect(reset).to.be.within(Math.floor(Date.now() / 1000), Math.floor(Date.now() / 1000) + 61);
    }
    expect(Number(ok.headers.get('x-ratelimit-remaining')) - Number(notFound.headers.get('x-ratelimit-remaining'))).to.equal(1);
  });

  it('applies the plan\'s limit per minute and counts requests that fail scope checks (429 before 403)', async () => {
    const tenant = await createTenant(t.app, { plan: 'free' });
    const narrow = await createKey(t.app, tenant.organizationId, ['webhooks:read']);
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++) statuses.push((await call(t.url, 'GET', '/v1/forms', { key: narrow })).status);
    expect(statuses).to.deep.equal(Array(10).fill(403));
    const limited = await call(t.url, 'GET', '/v1/forms', { key: narrow });
    expect(limited.status).to.equal(429);
    expect(limited.body.error).to.equal('rate_limit_exceeded');
    expect(limited.body.retryAfter).to.be.a('number').within(1, 60);
    expect(limited.headers.get('retry-after')).to.equal(String(limited.body.retryAfter));
    expect(limited.headers.get('x-ratelimit-remaining')).to.equal('0');
    expect(limited.headers.get('x-ratelimit-limit')).to.equal('10');
    // another key of the same organization has its own budget
    expect((await call(t.url, 'GET', '/v1/forms', { key: tenant.key })).status).to.equal(200);
  });

  describe('across two API processes', () => {
    let a: ServiceProcess & { url: string };
    let b: ServiceProcess & { url: string };
    before(async function () {
      this.timeout(30_000);
      [a, b] = await Promise.all([spawnApi(), spawnApi()]);
    });
    after(async () => Promise.all([a?.stop(), b?.stop()]));

    it('shares one budget: 30 concurrent requests of a free key, 10 accepted', async () => {
      const tenant = await createTenant(t.app, { plan: 'free' });
      const results = await Promise.all(Array.from({ length: 30 }, (_, i) =>
        call(i % 2 ? a.url : b.url, 'GET', '/v1/forms', { key: tenant.key })));
      const statuses = results.map((r) => r.status);
      expect(statuses.filter((s) => s === 200)).to.have.length(10);
      expect(statuses.filter((s) => s === 429)).to.have.length(20);
      const remaining = results.filter((r) => r.status === 200).map((r) => Number(r.headers.get('x-ratelimit-remaining'))).sort((x, y) => x - y);
      expect(remaining).to.deep.equal([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    });
  });

  it('sends the hits of one event-loop turn to Redis as one command, each with its own exact count', async () => {
    const redis = new IORedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
    try {
      const limiter = new RateLimiter(redis);
      await limiter.hit(`batch-test-warm-${Date.now()}`, 1); // loads the script
      const sent: string[] = [];
      const sendCommand = redis.sendCommand.bind(redis);
      redis.sendCommand = ((command: any, ...rest: any[]) => {
        sent.push(command.name);
        return (sendCommand as any)(command, ...rest);
      }) as typeof redis.sendCommand;
      const bucket = `batch-test-${Date.now()}-${Math.random()}`;
      const other = `${bucket}-other`;
      const decisions = await Promise.all(Array.from({ length: 40 }, (_, i) => limiter.hit(i % 4 ? bucket : other, 20)));
      expect(sent).to.deep.equal(['evalsha']);
      const mine = decisions.filter((_, i) => i % 4);
      expect(mine.filter((d) => d.allowed)).to.have.length(20);
      expect(mine.map((d) => d.remaining)).to.deep.equal([...Array.from({ length: 20 }, (_, i) => 19 - i), ...Array(10).fill(0)]);
      expect(decisions.filter((_, i) => !(i % 4)).map((d) => d.remaining)).to.deep.equal([19, 18, 17, 16, 15, 14, 13, 12, 11, 10]);
    } finally {
      redis.disconnect();
    }
  });

  it('counts a whole batch in this process when Redis does not answer, each hit still its own count', async () => {
    // Nothing listens on port 1: the client refuses commands at once (no offline queue).
    const redis = new IORedis('redis://127.0.0.1:1', { enableOfflineQueue: false, maxRetriesPerRequest: 1, lazyConnect: true, retryStrategy: () => null });
    try {
      let fallbacks = 0;
      const limiter = new RateLimiter(redis, () => { fallbacks++; });
      const decisions = await Promise.all(Array.from({ length: 12 }, () => limiter.hit('down-batch', 10)));
      expect(decisions.map((d) => d.remaining)).to.deep.equal([9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0]);
      expect(decisions.filter((d) => !d.allowed)).to.have.length(2);
      expect(fallbacks).to.equal(12);
    } finally {
      redis.disconnect();
    }
  });

  describe('leases of a large budget', () => {
    let redis: IORedis;
    beforeEach(() => { redis = new IORedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'); });
    afterEach(() => redis.disconnect());

    /** Counts the commands a client sends from now on. */
    function commandsSent(client: IORedis): () => number {
      let sent = 0;
      const sendCommand = client.sendCommand.bind(client);
      client.sendCommand = ((command: any, ...rest: any[]) => {
        sent++;
        return (sendCommand as any)(command, ...rest);
      }) as typeof client.sendCommand;
      return () => sent;
    }

    it('one process gives out 2,000 of an enterprise budget exactly, each its own remaining count, in few round trips', async () => {
      const limiter = new RateLimiter(redis);
      const bucket = `lease-one-${Date.now()}-${Math.random()}`;
      await limiter.hit(`lease-warm-${Date.now()}`, 1); // loads the script
      const sent = commandsSent(redis);
      const decisions = [];
      for (let wave = 0; wave < 70; wave++) {
        decisions.push(...await Promise.all(Array.from({ length: 32 }, () => limiter.hit(bucket, 2000))));
      }
      const allowed = decisions.filter((d) => d.allowed);
      expect(allowed).to.have.length(2000);
      expect(allowed.map((d) => d.remaining).sort((a, b) => a - b)).to.deep.equal(Array.from({ length: 2000 }, (_, i) => i));
      expect(decisions.filter((d) => !d.allowed).every((d) => d.remaining === 0)).to.equal(true);
      // Every hit is counted in Redis (positions past the limit too), but most came from leases.
      const [count] = await redis.keys(`rl:${bucket}:*`).then((keys) => Promise.all(keys.map((k) => redis.get(k))));
      expect(Number(count)).to.be.at.least(2240);
      expect(sent()).to.be.below(decisions.length / 4);
    });

    it('processes sharing a budget never admit more than the limit, and strand little of it', async () => {
      const others = [new IORedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'), new IORedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')];
      try {
        const limiters = [new RateLimiter(redis), ...others.map((r) => new RateLimiter(r))];
        const bucket = `lease-shared-${Date.now()}-${Math.random()}`;
        const decisions = [];
        for (let wave = 0; wave < 40; wave++) {
          decisions.push(...await Promise.all(Array.from({ length: 60 }, (_, i) => limiters[i % 3].hit(bucket, 2000))));
        }
        const allowed = decisions.filter((d) => d.allowed).length;
        expect(allowed).to.be.at.most(2000);
        expect(allowed, 'positions held unused by the other processes').to.be.at.least(1980);
        const remaining = decisions.filter((d) => d.allowed).map((d) => d.remaining);
        expect(new Set(remaining).size, 'each admitted hit has its own position').to.equal(allowed);
      } finally {
        others.forEach((r) => r.disconnect());
      }
    });
  });
});

