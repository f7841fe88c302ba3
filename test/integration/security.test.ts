import { expect } from 'chai';
import net from 'node:net';
import { startOpsServer } from '../../workers/ops-server';
import { hashApiKey } from '../../src/domain/auth/api-keys';
import { KeyStore } from '../../src/domain/auth/key-store';
import { FormCache } from '../../src/domain/forms/form-cache';
import { call, createPublishedForm, createTenant, startTestApp, type TestApp, type TestTenant, fieldInput as field } from '../support/harness';

/** A JSON text nested `levels` deep, built as text so no recursive serializer is involved. */
function deepJson(levels: number, leaf = '1'): string {
  return `${'{"a":'.repeat(levels)}${leaf}${'}'.repeat(levels)}`;
}

describe('security: hostile input and hostile tenants', () => {
  let t: TestApp;
  let tenant: TestTenant;
  let form: any;

  before(async () => {
    t = await startTestApp();
    tenant = await createTenant(t.app);
    form = await createPublishedForm(t.url, tenant.key, [
      field('fld_code', 'text', 'Code', { order: 0, validationRules: { pattern: '^(a+)+$' } }),
      field('fld_email', 'email', 'Email', { order: 1 }),
    ]);
  });
  after(async () => t.close());

  const apiSubmit = (body: unknown, formId = form.id) =>
    call(t.url, 'POST', `/v1/forms/${formId}/submissions`, { key: tenant.key, body });
  const publicSubmit = (body: unknown, formId = form.id) => call(t.url, 'POST', `/public/forms/${formId}`, { body });

  describe('patterns run in linear time (item 1)', () => {
    it('answers a catastrophic-backtracking pattern on the public endpoint within a second', async () => {
      const started = Date.now();
      const res = await publicSubmit({ values: { fld_code: `${'a'.repeat(30)}!` } });
      expect(Date.now() - started).to.be.below(1000);
      expect(res.status).to.equal(422);
      expect(res.body.errors.fld_code).to.equal('Does not match the required format');
      expect((await publicSubmit({ values: { fld_code: 'aaaa' } })).status).to.equal(200);
    });

    it('refuses at form create and structure replace a pattern that cannot run in linear time', async () => {
      for (const pattern of ['^(a)\\1$', '^(?=.*\\d).{8,}$', '(?<!x)y']) {
        const created = await call(t.url, 'POST', '/v1/forms', {
          key: tenant.key, body: { title: 'F', fields: [field('f', 'text', 'F', { validationRules: { pattern } })] },
        });
        expect(created.status, pattern).to.equal(400);
        expect(created.body.error).to.equal('validation_error');
        expect(created.body.details.map((d: any) => d.field)).to.include('fields[0].validationRules.pattern');

        const replaced = await call(t.url, 'PUT', `/v1/forms/${form.id}/structure`, {
          key: tenant.key, body: { pages: [], fields: [field('f', 'text', 'F', { validationRules: { pattern } })] },
        });
        expect(replaced.status, pattern).to.equal(400);
        expect(replaced.body.error).to.equal('validation_error');
      }
    });
  });

  describe('bad strings and deep bodies are refused at parse time (item 3)', () => {
    const badBodies: [string, string][] = [
      ['a NUL in submitterName', '{"data":{},"values":{},"submitterName":"a\\u0000"}'],
      ['a NUL in a value', '{"data":{"fld_email":"a\\u0000@b.co"},"values":{"fld_email":"a\\u0000@b.co"}}'],
      ['a NUL in a key', '{"data":{"fld\\u0000":"x"},"values":{"fld\\u0000":"x"}}'],
      ['a lone surrogate in a value', '{"data":{"fld_code":"\\ud800"},"values":{"fld_code":"\\ud800"}}'],
      ['a lone surrogate in metadata', '{"data":{},"values":{},"submitterEmail":"\\udc00@b.co"}'],
      ['nesting 65 levels deep', `{"data":{"x":${deepJson(63)}},"values":{"x":${deepJson(63)}}}`],
      ['nesting 10,000 levels deep', `{"data":${deepJson(10_000)},"values":${deepJson(10_000)}}`],
    ];
    for (const [label, body] of badBodies) {
      it(`answers ${label} with 400 on both submission surfaces`, async () => {
        const api = await apiSubmit(body);
        expect(api.status, api.text).to.equal(400);
        expect(api.body.error).to.equal('invalid_json');
        const pub = await publicSubmit(body);
        expect(pub.status, pub.text).to.equal(400);
        expect(pub.body).to.deep.include({ success: false, error: 'invalid_json' });
      });
    }

    it('refuses a NUL in form definitions and webhook bodies too', async () => {
      const created = await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body: '{"title":"a\\u0000"}' });
      expect(created.status).to.equal(400);
      expect(created.body.error).to.equal('invalid_json');
      const hook = await call(t.url, 'POST', '/v1/webhooks', {
        key: tenant.key, body: '{"name":"\\ud83d","url":"https://example.com/h","events":["submission.created"]}',
      });
      expect(hook.status).to.equal(400);
      expect(hook.body.error).to.equal('invalid_json');
    });

    it('accepts 64 levels of nesting (the limit) as JSON', async () => {
      const res = await apiSubmit(`{"data":{"fld_code":"aa"},"x":${deepJson(62)}}`);
      expect(res.status, res.text).to.not.equal(500);
      expect(res.body.error).to.not.equal('invalid_json');
    });
  });

  describe('webhook targets: special ranges and no network oracle (item 8)', () => {
    let strict: TestApp;
    let strictKey: string;
    before(async () => {
      strict = await startTestApp({ WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' });
      strictKey = (await createTenant(strict.app)).key;
    });
    after(async () => strict.close());

    const targets = [
      'https://[64:ff9b::a9fe:a9fe]/h', 'https://[64:ff9b::10.0.0.1]/h', 'https://[2002:a00:1::1]/h',
      'https://198.18.0.1/h', 'https://192.0.0.170/h', 'https://203.0.113.5/h', 'https://[2001:db8::1]/h',
      'https://[100::1]/h', 'https://localhost/h', 'https://10.1.2.3/h', 'https://no-such-host.invalid/h',
    ];
    for (const url of targets) {
      it(`refuses ${url} with one generic message that names no address`, async () => {
        const res = await call(strict.url, 'POST', '/v1/webhooks', { key: strictKey, body: { name: 'x', url, events: ['submission.created'] } });
        expect(res.status).to.equal(400);
        expect(res.body.details).to.deep.equal([{ field: 'url', message: 'url must name a host that resolves to publicly reachable addresses only' }]);
        expect(res.text).to.not.match(/127\.0\.0\.1|10\.0\.0\.1|169\.254|::1|ECONN|ENOTFOUND/);
      });
    }

    it('reports a failed test send without the connect error or the address', async () => {
      const closed = net.createServer();
      await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
      const { port } = closed.address() as net.AddressInfo;
      await new Promise<void>((resolve) => closed.close(() => resolve()));
      const created = await call(t.url, 'POST', '/v1/webhooks', {
        key: tenant.key, body: { name: 'x', url: `http://127.0.0.1:${port}/h`, events: ['submission.created'] },
      });
      expect(created.status).to.equal(201);
      const res = await call(t.url, 'POST', `/v1/webhooks/${created.body.webhook.id}/test`, { key: tenant.key });
      expect(res.status).to.equal(200);
      expect(res.body.error).to.equal('connection failed');
      expect(res.text).to.not.match(/ECONNREFUSED|127\.0\.0\.1:/);
    });
  });

  describe('leaky edges (item 10)', () => {
    const METRICS_TOKEN = 'metrics-token-0123456789abcdef';
    let guarded: TestApp;
    before(async () => {
      guarded = await startTestApp({ METRICS_TOKEN });
    });
    after(async () => guarded.close());

    it('answers /metrics on the API port 401 without the metrics token', async () => {
      expect((await call(guarded.url, 'GET', '/metrics')).status).to.equal(401);
      expect((await call(guarded.url, 'GET', '/metrics', { headers: { Authorization: 'Bearer wrong-token-0123456789' } })).status).to.equal(401);
      const ok = await call(guarded.url, 'GET', '/metrics', { headers: { Authorization: `Bearer ${METRICS_TOKEN}` } });
      expect(ok.status).to.equal(200);
      expect(ok.text).to.include('# TYPE');
      expect((await call(t.url, 'GET', '/metrics')).status, 'no token configured: open').to.equal(200);
    });

    it('answers /metrics on a worker ops port 401 without the metrics token', async () => {
      const ops = await startOpsServer(guarded.app, 0, '127.0.0.1');
      try {
        const base = `http://127.0.0.1:${ops.port}`;
        expect((await call(base, 'GET', '/metrics')).status).to.equal(401);
        expect((await call(base, 'GET', '/metrics', { headers: { Authorization: `Bearer ${METRICS_TOKEN}` } })).status).to.equal(200);
        expect((await call(base, 'GET', '/healthz')).status).to.equal(200);
      } finally {
        await ops.close();
      }
    });

    it("keeps cached API keys when a form changes (a form invalidation is not the key store's)", async () => {
      const store = new KeyStore(t.app.orm);
      const owner = await createTenant(t.app);
      expect(await store.authenticate(owner.key)).to.not.equal(null);
      // Revoked behind the cache's back: only a dropped cache entry would notice.
      await t.app.orm.em.getConnection().execute('update api_keys set revoked_at = now() where key_hash = ?', [hashApiKey(owner.key)]);
      store.handleInvalidation(`form:${form.id}`);
      expect(await store.authenticate(owner.key), 'kept after a form change').to.not.equal(null);
      store.handleInvalidation('all');
      expect(await store.authenticate(owner.key), 'dropped on "all"').to.equal(null);
    });
  });

  describe('public abuse limits (item 7)', () => {
    const MISSES = 5;
    const PER_FORM = 4;
    let limited: TestApp;
    let published: any;
    before(async () => {
      limited = await startTestApp({
        PUBLIC_RATE_LIMIT_MISSES: String(MISSES), PUBLIC_RATE_LIMIT_GET: String(PER_FORM), TRUSTED_PROXIES: '127.0.0.1,::1',
      });
      const owner = await createTenant(limited.app);
      published = await createPublishedForm(limited.url, owner.key, [field('fld_a', 'text', 'A')]);
    });
    after(async () => limited.close());

    let n = 0;
    const randomId = () => `form_guess${Date.now().toString(36)}${n++}`;
    const from = (client: string) => ({ headers: { 'X-Forwarded-For': client } });

    it('limits a client naming missing forms across random ids, on every public path, and still serves it published forms', async () => {
      const client = '203.0.113.10';
      const paths = [
        () => call(limited.url, 'GET', `/public/forms/${randomId()}`, from(client)),
        () => call(limited.url, 'POST', `/public/forms/${randomId()}`, { body: { values: {} }, ...from(client) }),
        () => call(limited.url, 'POST', `/public/forms/${randomId()}/events`, { body: { token: 'x', type: 'view' }, ...from(client) }),
        () => call(limited.url, 'GET', `/f/${randomId()}`, from(client)),
        () => call(limited.url, 'GET', '/public/forms/not-a-form-id', from(client)),
      ];
      for (const request of paths) expect((await request()).status).to.equal(404);
      for (const request of paths) {
        const refused = await request();
        expect(refused.status).to.equal(429);
        expect(refused.headers.get('retry-after')).to.match(/^\d+$/);
        expect(refused.headers.get('x-ratelimit-remaining')).to.equal('0');
      }
      const served = await call(limited.url, 'GET', `/public/forms/${published.id}`, from(client));
      expect(served.status).to.equal(200);
      expect((await call(limited.url, 'GET', `/public/forms/${randomId()}`, from('203.0.113.11'))).status, 'another client').to.equal(404);
    });

    it('keys IPv6 clients by their /64', async () => {
      for (let i = 1; i <= MISSES; i++) {
        expect((await call(limited.url, 'GET', `/public/forms/${randomId()}`, from(`2001:db8:aa:bb::${i.toString(16)}`))).status).to.equal(404);
      }
      expect((await call(limited.url, 'GET', `/public/forms/${randomId()}`, from('2001:db8:aa:bb:ffff:1:2:3'))).status, 'same /64').to.equal(429);
      expect((await call(limited.url, 'GET', `/public/forms/${randomId()}`, from('2001:db8:aa:bc::1'))).status, 'next /64').to.equal(404);
    });

    it('limits the hosted page per client and form', async () => {
      const client = '198.51.100.20';
      for (let i = 0; i < PER_FORM; i++) expect((await call(limited.url, 'GET', `/f/${published.id}`, from(client))).status).to.equal(200);
      const refused = await call(limited.url, 'GET', `/f/${published.id}`, from(client));
      expect(refused.status).to.equal(429);
      expect(refused.headers.get('retry-after')).to.match(/^\d+$/);
      expect(refused.headers.get('content-type')).to.include('text/html');
    });

    it('keeps misses out of the form cache and unknown API keys out of the key cache', async () => {
      const forms = new FormCache(limited.app.orm);
      expect(await forms.get(published.id)).to.not.equal(null);
      const guessed = randomId();
      expect(await forms.get(guessed)).to.equal(null);
      const formEntries = (forms as any).cache.entries as Map<string, unknown>;
      expect([...formEntries.keys()]).to.deep.equal([published.id]);

      const keys = new KeyStore(limited.app.orm);
      const guessedKey = `fs_live_${'x'.repeat(40)}`;
      expect(await keys.authenticate(guessedKey)).to.equal(null);
      const keyEntries = (keys as any).byHash.entries as Map<string, unknown>;
      expect(keyEntries.has(hashApiKey(guessedKey))).to.equal(false);
    });
  });
});
