import { expect } from 'chai';
import net from 'node:net';
import { startOpsServer } from '../../workers/ops-server';
import { hashApiKey } from '../../src/domain/auth/api-keys';
import { KeyStore } from '../../src/domain/auth/key-store';
import { FormCache } from '../../src/domain/forms/form-cache';
import { attemptCrmSync } from '../../src/domain/crm/crm-sync';
import { reencryptSecrets } from '../../src/domain/secrets/reencrypt';
import { seal, unseal } from '../../src/lib/crypto';
import { startFakeHubspot, type FakeHubspot } from '../support/fakes/hubspot';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../config';
import { prepareDatabase } from '../../src/app';
import { dropDatabase, sideDatabaseUrl } from '../support/databases';
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
      const owner = await createTenant(limited.app);
      const draft = (await call(limited.url, 'POST', '/v1/forms', { key: owner.key, body: { title: 'Draft' } })).body.form;
      expect(await forms.get(published.id)).to.not.equal(null);
      expect(await forms.get(randomId())).to.equal(null);
      expect((await forms.get(draft.id))?.status).to.equal('draft');
      const liveEntries = (forms as any).published.entries as Map<string, unknown>;
      expect([...liveEntries.keys()]).to.deep.equal([published.id]);

      const keys = new KeyStore(limited.app.orm);
      const guessedKey = `fs_live_${'x'.repeat(40)}`;
      expect(await keys.authenticate(guessedKey)).to.equal(null);
      const keyEntries = (keys as any).byHash.entries as Map<string, unknown>;
      expect(keyEntries.has(hashApiKey(guessedKey))).to.equal(false);
    });
  });

  describe('sensitive names never leak through submitterName (item 4)', () => {
    let sensitiveForm: any;
    before(async () => {
      sensitiveForm = await createPublishedForm(t.url, tenant.key, [
        field('fld_patient', 'name', 'Patient', { order: 0, config: { sensitive: true, format: 'full' } }),
        field('fld_note', 'text', 'Note', { order: 1 }),
      ]);
    });
    const read = async (id: string) => (await call(t.url, 'GET', `/v1/submissions/${id}`, { key: tenant.key })).body.submission;

    it('tells the hosted page which name fields are sensitive', async () => {
      const res = await call(t.url, 'GET', `/public/forms/${sensitiveForm.id}`);
      expect(res.body.fields.find((f: any) => f.id === 'fld_patient').config).to.deep.include({ sensitive: true });
    });

    it('drops a submitterName repeating a sensitive name, on the public and the authenticated surface', async () => {
      const patient = { format: 'full', fullName: 'Grace Hopper' };
      const pub = await publicSubmit({ values: { fld_patient: patient }, submitterName: 'Grace Hopper' }, sensitiveForm.id);
      expect(pub.status).to.equal(200);
      const viaPublic = await read(pub.body.submissionId);
      expect(viaPublic.submitterName).to.equal(null);
      expect(viaPublic.rawData.fld_patient).to.equal('Redacted');

      const api = await apiSubmit({ data: { fld_patient: patient }, submitterName: 'grace hopper' }, sensitiveForm.id);
      expect(api.status).to.equal(201);
      expect((await read(api.body.submission.id)).submitterName).to.equal(null);

      const unrelated = await apiSubmit({ data: { fld_patient: patient }, submitterName: 'Front desk' }, sensitiveForm.id);
      expect((await read(unrelated.body.submission.id)).submitterName).to.equal('Front desk');
      const [row] = await t.app.orm.em.getConnection().execute('select submitter_name, data::text as data from submissions where id = ?', [api.body.submission.id]);
      expect(row.submitter_name).to.equal(null);
      expect(row.data).to.not.include('Grace');
    });
  });

  describe('sealed values cannot be spoofed (item 5)', () => {
    let sealedForm: any;
    before(async () => {
      sealedForm = await createPublishedForm(t.url, tenant.key, [
        field('fld_secret', 'name', 'Secret', { order: 0, config: { sensitive: true } }),
        field('fld_text', 'text', 'Text', { order: 1 }),
      ]);
    });

    it('reads back a text answer shaped like a sealed value as the text it is', async () => {
      const res = await publicSubmit({ values: { fld_text: 'enc:v1:AAAA' } }, sealedForm.id);
      expect(res.status).to.equal(200);
      const read = await call(t.url, 'GET', `/v1/submissions/${res.body.submissionId}`, { key: tenant.key });
      expect(read.body.submission.rawData.fld_text).to.equal('enc:v1:AAAA');
    });

    it('refuses a value shaped like the stored sealed form, whatever the field', async () => {
      const spoof = { $sealed: seal('"x"', randomBytes(32)) };
      for (const values of [{ fld_secret: spoof }, { fld_text: spoof }]) {
        const res = await publicSubmit({ values }, sealedForm.id);
        expect(res.status, JSON.stringify(values)).to.equal(422);
      }
    });

    describe('re-encryption', () => {
      // A database of its own: re-encryption rewrites every sealed value it holds.
      const databaseUrl = sideDatabaseUrl('secreseal');
      let own: TestApp;
      before(async () => {
        await prepareDatabase(loadConfig({ ...process.env, DATABASE_URL: databaseUrl }));
        own = await startTestApp({ DATABASE_URL: databaseUrl });
      });
      after(async () => {
        await own?.close();
        await dropDatabase(databaseUrl);
      });

      it('skips and reports what no key opens, and re-seals everything else', async () => {
        const ownTenant = await createTenant(own.app);
        const ownForm = await createPublishedForm(own.url, ownTenant.key, [
          field('fld_secret', 'name', 'Secret', { order: 0, config: { sensitive: true } }),
          field('fld_text', 'text', 'Text', { order: 1 }),
        ]);
        const submit = (data: unknown) => call(own.url, 'POST', `/v1/forms/${ownForm.id}/submissions`, { key: ownTenant.key, body: { data } });
        const good = await submit({ fld_secret: { format: 'full', fullName: 'Kept Secret' }, fld_text: 'enc:v1:AAAA' });
        expect(good.status).to.equal(201);
        const lost = await submit({ fld_text: 'plain' });
        const conn = own.app.orm.em.getConnection();
        await conn.execute(`update submissions set data = jsonb_set(data, '{fld_secret}', ?::jsonb) where id = ?`,
          [JSON.stringify({ $sealed: seal('"lost"', randomBytes(32)) }), lost.body.submission.id]);

        const newKey = randomBytes(32);
        const counts = await reencryptSecrets(own.app.orm.em.fork(), { current: newKey, all: [newKey, own.app.encryptionKey] });
        expect(counts.unopenable).to.deep.equal([{ table: 'submissions', id: lost.body.submission.id }]);
        expect(counts.submissions).to.equal(1);
        const [row] = await conn.execute('select data from submissions where id = ?', [good.body.submission.id]);
        expect(JSON.parse(unseal(row.data.fld_secret.$sealed, newKey))).to.deep.equal({ format: 'full', fullName: 'Kept Secret' });
        expect(row.data.fld_text).to.equal('enc:v1:AAAA');
      });
    });
  });

  describe('CRM tokens are matched by integration id (item 6)', () => {
    let hubspot: FakeHubspot;
    let crm: TestApp;
    let owner: TestTenant;
    before(async () => {
      hubspot = await startFakeHubspot();
      crm = await startTestApp({ HUBSPOT_API_BASE: hubspot.url });
      owner = await createTenant(crm.app);
    });
    after(async () => {
      await crm.close();
      await hubspot.close();
    });

    const integration = (token: string) => ({ type: 'hubspot', accessToken: token, fieldMap: { fld_email: 'email' } });
    const noPauses = { remainingMs: async () => 0, pause: async () => {} };

    it('keeps each token with its own integration when the first one is removed, and syncs by id', async () => {
      const crmForm = await createPublishedForm(crm.url, owner.key, [field('fld_email', 'email', 'Email')], {
        settings: { integrations: [integration('pat-portal-a'), integration('pat-portal-b')] },
      });
      const [first, second] = crmForm.settings.integrations;
      expect(first.id).to.match(/^int_[A-Za-z0-9]+$/);
      expect(second.id).to.match(/^int_[A-Za-z0-9]+$/);
      expect(first.id).to.not.equal(second.id);

      const submitted = await call(crm.url, 'POST', `/v1/forms/${crmForm.id}/submissions`, { key: owner.key, body: { data: { fld_email: 'a@example.com' } } });
      expect(submitted.status).to.equal(201);
      const conn = crm.app.orm.em.getConnection();
      // The storing statement wrote a sync per integration.
      const syncs = await conn.execute('select id, integration_id from crm_syncs where submission_id = ? order by integration_index', [submitted.body.submission.id]);
      expect(syncs.map((s: any) => s.integration_id)).to.deep.equal([first.id, second.id]);

      // The first integration is removed; the second is sent back as reads show it.
      const replaced = await call(crm.url, 'PUT', `/v1/forms/${crmForm.id}/structure`, {
        key: owner.key, body: { pages: [], fields: [field('fld_email', 'email', 'Email')], settings: { integrations: [second] } },
      });
      expect(replaced.status, replaced.text).to.equal(200);
      const [stored] = await conn.execute('select settings from forms where id = ?', [crmForm.id]);
      expect(stored.settings.integrations).to.have.length(1);
      expect(stored.settings.integrations[0].id).to.equal(second.id);
      expect(unseal(stored.settings.integrations[0].accessToken, crm.app.decryptionKeys)).to.equal('pat-portal-b');

      const removed = await attemptCrmSync(crm.app, syncs[0].id, noPauses);
      expect(removed).to.deep.equal({ kind: 'unsyncable', reason: 'Integration was removed or disabled' });
      const kept = await attemptCrmSync(crm.app, syncs[1].id, noPauses);
      expect(kept.kind).to.equal('attempted');
      expect(hubspot.requests.map((r) => r.authorization)).to.deep.equal(['Bearer pat-portal-b']);
    });

    it('refuses `***` for an integration whose id names no stored one', async () => {
      const crmForm = await createPublishedForm(crm.url, owner.key, [], { settings: { integrations: [integration('pat-portal-c')] } });
      for (const sent of [{ ...integration('***') }, { ...integration('***'), id: 'int_doesNotExist1' }]) {
        const res = await call(crm.url, 'PUT', `/v1/forms/${crmForm.id}/structure`, {
          key: owner.key, body: { pages: [], fields: [], settings: { integrations: [sent] } },
        });
        expect(res.status).to.equal(400);
        expect(res.body.error).to.equal('validation_error');
        expect(res.body.details[0].field).to.equal('settings.integrations[0].accessToken');
      }
    });
  });
});
