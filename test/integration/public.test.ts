import { expect } from 'chai';
import http from 'node:http';
import { startFakeTurnstile, type FakeTurnstile } from '../support/fakes/turnstile';
import { call, createKey, createPublishedForm, createTenant, startTestApp, type TestApp, type TestTenant, fieldInput as field } from '../support/harness';

const PASS_SECRET = '1x0000000000000000000000000000000AA';
const FAIL_SECRET = '2x0000000000000000000000000000000AA';
const SPENT_SECRET = '3x0000000000000000000000000000000AA';
const SITE_KEY = '1x00000000000000000000AA';
const TOKEN = 'XXXX.DUMMY.TOKEN.XXXX';
const RATE_GET = 30;
const RATE_POST = 12;


const contactFields = [
  field('fld_name', 'text', 'Full name', { required: true, order: 0 }),
  field('fld_email', 'email', 'Email', { required: true, order: 1 }),
  field('fld_more', 'checkbox', 'More?', { order: 2 }),
  field('fld_why', 'textarea', 'Why', {
    required: true, order: 3,
    conditionalLogic: { show: true, logic: 'all', rules: [{ fieldId: 'fld_more', operator: 'equals', value: true }] },
  }),
];
const validValues = { fld_name: 'Ada', fld_email: 'ada@example.com' };

/** Sends a raw request, so the body length can be declared or streamed as the test needs. */
function rawPost(url: string, body: Buffer, headers: Record<string, string>): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString() || 'null') }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('public runtime', () => {
  let t: TestApp;
  let turnstile: FakeTurnstile;
  let tenant: TestTenant;
  let form: any;

  before(async () => {
    turnstile = await startFakeTurnstile();
    t = await startTestApp({
      TURNSTILE_SITE_KEY: SITE_KEY, TURNSTILE_SECRET_KEY: PASS_SECRET, TURNSTILE_VERIFY_URL: turnstile.url,
      PUBLIC_RATE_LIMIT_GET: String(RATE_GET), PUBLIC_RATE_LIMIT_POST: String(RATE_POST),
    });
    tenant = await createTenant(t.app);
    form = await newForm();
  });
  after(async () => {
    await t.close();
    await turnstile.close();
  });

  const newForm = (fields: unknown[] = contactFields, extra: Record<string, unknown> = {}, key = tenant.key) =>
    createPublishedForm(t.url, key, fields, extra);
  const submit = (formId: string, body: unknown, base = t.url) => call(base, 'POST', `/public/forms/${formId}`, { body });

  describe('GET /public/forms/{formId}', () => {
    it('serves a published form, sanitized, with a short cache lifetime', async () => {
      const secretForm = await newForm(contactFields, {
        description: 'Tell us',
        settings: {
          submitButtonText: 'Send',
          integrations: [{ type: 'hubspot', accessToken: 'pat-na1-very-secret', fieldMap: { fld_email: 'email' } }],
          theme: { preset: 'dark', tokens: { primaryColor: '#112233' } },
        },
      });
      const res = await call(t.url, 'GET', `/public/forms/${secretForm.id}`);
      expect(res.status).to.equal(200);
      expect(res.headers.get('cache-control')).to.equal('public, max-age=30');
      expect(res.headers.get('x-content-type-options')).to.equal('nosniff');
      expect(res.body).to.include({ id: secretForm.id, title: 'Test form', description: 'Tell us', botProtection: null });
      expect(res.body.settings).to.deep.equal({ redirectUrl: null, submitButtonText: 'Send', successMessage: 'Thank you!' });
      expect(res.body.theme).to.deep.equal({ preset: 'dark', tokens: { primaryColor: '#112233' } });
      expect(res.body.telemetry.analyticsToken).to.be.a('string');
      expect(res.body.fields.map((f: any) => f.id)).to.deep.equal(['fld_name', 'fld_email', 'fld_more', 'fld_why']);
      for (const secret of ['organizationId', tenant.organizationId, 'integrations', 'accessToken', 'pat-na1', 'hubspot']) {
        expect(res.text, secret).not.to.include(secret);
      }
    });

    it('names the challenge when the form has bot protection on', async () => {
      const protectedForm = await newForm(contactFields, { settings: { botProtection: { enabled: true } } });
      const res = await call(t.url, 'GET', `/public/forms/${protectedForm.id}`);
      expect(res.body.botProtection).to.deep.equal({ provider: 'turnstile', siteKey: SITE_KEY, mode: 'invisible', offlineQueueEnabled: false });
    });

    it('answers 404 in the public shape for a draft, an archived, a deleted, an unknown and a malformed id', async () => {
      const draft = (await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body: { title: 'Draft' } })).body.form;
      const archived = await newForm();
      await call(t.url, 'PUT', `/v1/forms/${archived.id}`, { key: tenant.key, body: { status: 'archived' } });
      const deleted = await newForm();
      await call(t.url, 'DELETE', `/v1/forms/${deleted.id}`, { key: tenant.key });
      for (const id of [draft.id, archived.id, deleted.id, 'form_doesNotExist', 'not-a-form-id']) {
        const res = await call(t.url, 'GET', `/public/forms/${id}`);
        expect(res.status, id).to.equal(404);
        expect(res.body).to.deep.equal({ success: false, error: 'not_found', message: 'Form not found' });
      }
    });

    it('answers 429 with Retry-After and the rate-limit headers once the per-form budget is spent', async () => {
      const limited = await newForm();
      let res = await call(t.url, 'GET', `/public/forms/${limited.id}`);
      expect(res.headers.get('x-ratelimit-remaining')).to.equal(String(RATE_GET - 1));
      for (let i = 0; i < 2 * RATE_GET && res.status === 200; i++) res = await call(t.url, 'GET', `/public/forms/${limited.id}`);
      expect(res.status).to.equal(429);
      expect(res.body).to.deep.equal({ success: false, error: 'rate_limit_exceeded' });
      expect(res.headers.get('x-ratelimit-remaining')).to.equal('0');
      expect(Number(res.headers.get('retry-after'))).to.be.within(1, 60);
      expect(Number(res.headers.get('x-ratelimit-reset'))).to.be.greaterThan(Date.now() / 1000);
      // The budget is per form: another form is still served.
      expect((await call(t.url, 'GET', `/public/forms/${form.id}`)).status).to.equal(200);
    });

    it('can be called from any origin: CORS headers on answers and a preflight', async () => {
      const res = await call(t.url, 'GET', `/public/forms/${form.id}`, { headers: { Origin: 'https://partner.example' } });
      expect(res.headers.get('access-control-allow-origin')).to.equal('*');
      expect(res.headers.get('access-control-expose-headers')).to.include('X-RateLimit-Remaining');
      for (const path of [`/public/forms/${form.id}`, `/public/forms/${form.id}/events`]) {
        const preflight = await fetch(`${t.url}${path}`, {
          method: 'OPTIONS',
          headers: { Origin: 'https://partner.example', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'content-type' },
        });
        expect(preflight.status, path).to.equal(204);
        expect(preflight.headers.get('access-control-allow-origin')).to.equal('*');
        expect(preflight.headers.get('access-control-allow-methods')).to.include('POST');
        expect(preflight.headers.get('access-control-allow-headers')?.toLowerCase()).to.include('content-type');
      }
      const authenticatedApi = await call(t.url, 'GET', '/v1/forms', { key: tenant.key, headers: { Origin: 'https://partner.example' } });
      expect(authenticatedApi.headers.get('access-control-allow-origin')).to.equal(null);
    });

    it('ignores X-Forwarded-For unless the peer is a trusted proxy', async () => {
      const limited = await newForm();
      const get = (app: TestApp, forwardedFor: string) =>
        call(app.url, 'GET', `/public/forms/${limited.id}`, { headers: { 'X-Forwarded-For': forwardedFor } });
      // Untrusted peer: two "different clients" share the peer's budget.
      await get(t, '203.0.113.1');
      expect((await get(t, '203.0.113.2')).headers.get('x-ratelimit-remaining')).to.equal(String(RATE_GET - 2));

      const behindProxy = await startTestApp({ TRUSTED_PROXIES: '127.0.0.1', PUBLIC_RATE_LIMIT_GET: String(RATE_GET) });
      try {
        await get(behindProxy, '198.51.100.1');
        expect((await get(behindProxy, '198.51.100.1')).headers.get('x-ratelimit-remaining')).to.equal(String(RATE_GET - 2));
        expect((await get(behindProxy, '198.51.100.2')).headers.get('x-ratelimit-remaining')).to.equal(String(RATE_GET - 1));
      } finally {
        await behindProxy.close();
      }
    });
  });

  describe('POST /public/forms/{formId}', () => {
    it('stores a submission (200) with the rate-limit headers, readable through the API', async () => {
      const res = await submit(form.id, { values: validValues, submitterEmail: 'ada@example.com', submitterName: 'Ada' });
      expect(res.status).to.equal(200);
      expect(res.body).to.have.keys('success', 'submissionId');
      expect(res.body.success).to.equal(true);
      expect(res.body.submissionId).to.match(/^sub_[a-zA-Z0-9]+$/);
      expect(Number(res.headers.get('x-ratelimit-remaining'))).to.be.within(0, RATE_POST - 1);
      expect(Number(res.headers.get('x-ratelimit-reset'))).to.be.greaterThan(Date.now() / 1000);
      const stored = await call(t.url, 'GET', `/v1/submissions/${res.body.submissionId}`, { key: tenant.key });
      expect(stored.status).to.equal(200);
      expect(stored.body.submission).to.include({ formId: form.id, submitterEmail: 'ada@example.com', submitterName: 'Ada' });
      expect(stored.body.submission.rawData).to.deep.equal(validValues);
    });

    it('stores it as the API does (no outbox row: nothing listens), and counts toward the usage', async () => {
      const conn = t.app.orm.em.fork().getConnection();
      const usage = async () => (await conn.execute(
        'select coalesce(sum(used), 0)::int as used from usage_counters where organization_id = ?', [tenant.organizationId]))[0].used;
      const before = await usage();
      const res = await submit(form.id, { values: validValues });
      expect(res.status).to.equal(200);
      const rows = await conn.execute(`select topic from outbox where payload->>'submissionId' = ?`, [res.body.submissionId]);
      expect(rows).to.deep.equal([]);
      expect(await usage()).to.equal(before + 1);
      const [row] = await conn.execute('select source from submissions where id = ?', [res.body.submissionId]);
      expect(row.source).to.equal('public');
    });

    const badBodies: [string, string, string][] = [
      ['not JSON', '{"values": ', 'invalid_json'],
      ['empty', '', 'invalid_json'],
      ['an array', '[]', 'invalid_data'],
      ['without values', '{"submitterEmail":"a@b.co"}', 'invalid_data'],
      ['values not an object', '{"values":["a"]}', 'invalid_data'],
      ['an unknown top-level key', JSON.stringify({ values: validValues, data: {} }), 'invalid_data'],
    ];
    for (const [name, body, error] of badBodies) {
      it(`answers 400 ${error} to a body that is ${name}`, async () => {
        const res = await submit(form.id, body);
        expect(res.status).to.equal(400);
        expect(res.body).to.include({ success: false, error });
      });
    }

    it('answers 404 to a missing or unpublished form', async () => {
      const draft = (await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body: { title: 'Draft', fields: contactFields } })).body.form;
      for (const id of [draft.id, 'form_missing123']) {
        const res = await submit(id, { values: validValues });
        expect(res.status, id).to.equal(404);
        expect(res.body).to.deep.equal({ success: false, error: 'not_found', message: 'Form not found' });
      }
    });

    it('answers 413 in the public shape to a 1.1 MB body, whether its length is declared or streamed', async () => {
      const big = Buffer.from(JSON.stringify({ values: { fld_name: 'x'.repeat(1.1 * 1024 * 1024) } }));
      const declared = await rawPost(`${t.url}/public/forms/${form.id}`, big, { 'Content-Type': 'application/json', 'Content-Length': String(big.length) });
      expect(declared).to.deep.equal({ status: 413, body: { success: false, error: 'payload_too_large' } });
      const chunked = await rawPost(`${t.url}/public/forms/${form.id}`, big, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
      expect(chunked).to.deep.equal({ status: 413, body: { success: false, error: 'payload_too_large' } });
    });

    it('answers 413 from the declared Content-Length alone, before the body arrives', async () => {
      const status = await new Promise<number>((resolve, reject) => {
        const req = http.request(`${t.url}/public/forms/${form.id}`, {
          method: 'POST', headers: { 'Content-Type': 'application/json', 'Content-Length': String(2 * 1024 * 1024) },
        }, (res) => {
          resolve(res.statusCode ?? 0);
          req.destroy();
        });
        req.on('error', (err) => (req.destroyed ? undefined : reject(err)));
        req.write('{"values":');
        // Never finished: only an answer based on the header can arrive.
      });
      expect(status).to.equal(413);
    });

    it('answers 422 with an errors map for missing required fields, by field id and label', async () => {
      const res = await submit(form.id, { values: { fld_more: true } });
      expect(res.status).to.equal(422);
      expect(res.body).to.deep.equal({
        success: false,
        errors: { fld_name: 'Full name is required', fld_email: 'Email is required', fld_why: 'Why is required' },
      });
    });

    it('does not require a field hidden by conditional logic, and drops a value sent for it', async () => {
      const res = await submit(form.id, { values: { ...validValues, fld_more: false, fld_why: 'ignored' } });
      expect(res.status).to.equal(200);
      const stored = await call(t.url, 'GET', `/v1/submissions/${res.body.submissionId}`, { key: tenant.key });
      expect(stored.body.submission.rawData).to.not.have.property('fld_why');
    });

    it('answers 422 with an errors map for invalid values, unknown keys and a bad submitterEmail', async () => {
      const res = await submit(form.id, { values: { ...validValues, fld_email: 'nope', fld_bogus: 1 }, submitterEmail: 'not-an-email' });
      expect(res.status).to.equal(422);
      expect(res.body.success).to.equal(false);
      expect(res.body.errors).to.have.keys('fld_email', 'fld_bogus', 'submitterEmail');
      for (const message of Object.values(res.body.errors)) expect(message).to.be.a('string').that.is.not.empty;
    });

    it('answers 402 limit_exceeded once the organization quota is used up, authenticated or public', async () => {
      const small = await createTenant(t.app, { plan: 'free', monthlyQuota: 2 });
      const quotaForm = await newForm(contactFields, {}, small.key);
      const authed = await call(t.url, 'POST', `/v1/forms/${quotaForm.id}/submissions`, { key: small.key, body: { data: validValues } });
      expect(authed.status).to.equal(201);
      expect((await submit(quotaForm.id, { values: validValues })).status).to.equal(200);
      const refused = await submit(quotaForm.id, { values: validValues });
      expect(refused.status).to.equal(402);
      expect(refused.body).to.deep.equal({ success: false, error: 'limit_exceeded' });
    });

    it('answers 429 with Retry-After and the rate-limit headers once the per-form budget is spent', async () => {
      const limited = await newForm();
      let res = await submit(limited.id, { values: validValues });
      for (let i = 0; i < 2 * RATE_POST && res.status !== 429; i++) res = await submit(limited.id, { values: validValues });
      expect(res.status).to.equal(429);
      expect(res.body).to.deep.equal({ success: false, error: 'rate_limit_exceeded' });
      expect(res.headers.get('x-ratelimit-remaining')).to.equal('0');
      expect(Number(res.headers.get('retry-after'))).to.be.within(1, 60);
      expect(res.headers.get('x-ratelimit-reset')).to.match(/^\d+$/);
    });

    it('answers 405 in the public shape to a wrong method', async () => {
      const res = await call(t.url, 'PUT', `/public/forms/${form.id}`, { body: {} });
      expect(res.status).to.equal(405);
      expect(res.body).to.include({ success: false });
    });
  });

  describe('bot challenge', () => {
    let protectedForm: any;
    const apps: TestApp[] = [];
    const appWith = async (env: Record<string, string>) => {
      const app = await startTestApp({ TURNSTILE_SITE_KEY: SITE_KEY, TURNSTILE_VERIFY_URL: turnstile.url, ...env });
      apps.push(app);
      return app;
    };

    before(async () => {
      protectedForm = await newForm(contactFields, { settings: { botProtection: { enabled: true } } });
    });
    after(async () => {
      await Promise.all(apps.map((app) => app.close()));
    });

    const count = async () => (await call(t.url, 'GET', `/v1/forms/${protectedForm.id}/submissions`, { key: tenant.key })).body.pagination.total;

    it('stores the submission after the backend passes the token, sending secret, token and client address', async () => {
      turnstile.requests.length = 0;
      const res = await submit(protectedForm.id, { values: validValues, captchaToken: TOKEN });
      expect(res.status).to.equal(200);
      expect(turnstile.requests).to.have.length(1);
      expect(turnstile.requests[0]).to.include({ secret: PASS_SECRET, response: TOKEN, remoteip: '127.0.0.1' });
      expect(turnstile.requests[0].idempotency_key).to.match(/^[0-9a-f-]{36}$/);
    });

    const shapeCases: [string, Record<string, unknown>, string][] = [
      ['missing', {}, 'captcha_required'],
      ['too short', { captchaToken: 'short' }, 'captcha_invalid'],
      ['too long', { captchaToken: 'x'.repeat(4097) }, 'captcha_invalid'],
      ['not a string', { captchaToken: 12345678 }, 'captcha_invalid'],
    ];
    for (const [name, extra, error] of shapeCases) {
      it(`answers 422 ${error} to a ${name} token without asking the backend or storing anything`, async () => {
        turnstile.requests.length = 0;
        const before = await count();
        const res = await submit(protectedForm.id, { values: validValues, ...extra });
        expect(res.status).to.equal(422);
        expect(res.body).to.deep.equal({ success: false, error });
        expect(turnstile.requests).to.have.length(0);
        expect(await count()).to.equal(before);
      });
    }

    it('answers 422 captcha_failed to a refused or spent token, and stores nothing', async () => {
      for (const secret of [FAIL_SECRET, SPENT_SECRET]) {
        const app = await appWith({ TURNSTILE_SECRET_KEY: secret });
        const before = await count();
        const res = await submit(protectedForm.id, { values: validValues, captchaToken: TOKEN }, app.url);
        expect(res.status, secret).to.equal(422);
        expect(res.body).to.deep.equal({ success: false, error: 'captcha_failed' });
        expect(await count()).to.equal(before);
      }
    });

    it('retries once with the same idempotency key after an internal error', async () => {
      turnstile.requests.length = 0;
      turnstile.failNext(1, 'internal-error');
      const res = await submit(protectedForm.id, { values: validValues, captchaToken: TOKEN });
      expect(res.status).to.equal(200);
      expect(turnstile.requests).to.have.length(2);
      expect(turnstile.requests[1].idempotency_key).to.equal(turnstile.requests[0].idempotency_key);
    });

    it('answers 503 service_unavailable when the backend fails twice, answers 5xx or is down, and stores nothing', async () => {
      const before = await count();
      turnstile.failNext(2, 'internal-error');
      const twice = await submit(protectedForm.id, { values: validValues, captchaToken: TOKEN });
      turnstile.failNext(1, 'http500');
      const http500 = await submit(protectedForm.id, { values: validValues, captchaToken: TOKEN });
      turnstile.setDown(true);
      const down = await submit(protectedForm.id, { values: validValues, captchaToken: TOKEN }).finally(() => turnstile.setDown(false));
      for (const res of [twice, http500, down]) {
        expect(res.status).to.equal(503);
        expect(res.body).to.deep.include({ success: false, error: 'service_unavailable' });
      }
      expect(await count()).to.equal(before);
    });

    it('answers 503 when the form has protection on but no secret key is configured', async () => {
      const app = await appWith({});
      const res = await submit(protectedForm.id, { values: validValues, captchaToken: TOKEN }, app.url);
      expect(res.status).to.equal(503);
      expect(res.body).to.deep.include({ success: false, error: 'service_unavailable' });
    });

    it('asks for no token on a form without protection', async () => {
      turnstile.requests.length = 0;
      expect((await submit(form.id, { values: validValues })).status).to.equal(200);
      expect(turnstile.requests).to.have.length(0);
    });
  });

  describe('analytics', () => {
    let analyticsForm: any;
    let token: string;
    const event = (body: unknown, formId = analyticsForm.id) => call(t.url, 'POST', `/public/forms/${formId}/events`, { body });

    before(async () => {
      analyticsForm = await newForm();
      token = (await call(t.url, 'GET', `/public/forms/${analyticsForm.id}`)).body.telemetry.analyticsToken;
    });

    it('counts events (204) and reports them with the form\'s submissions', async () => {
      for (const type of ['view', 'view', 'view', 'start', 'start', 'complete']) {
        const res = await event({ token, type });
        expect(res.status, type).to.equal(204);
        expect(res.text).to.equal('');
      }
      await submit(analyticsForm.id, { values: validValues });
      const res = await call(t.url, 'GET', `/v1/forms/${analyticsForm.id}/analytics`, { key: tenant.key });
      expect(res.status).to.equal(200);
      expect(res.body).to.deep.equal({
        views: 3, starts: 2, completions: 1, submissions: 1, completionRate: 0.5, reached: {},
        days: [{ day: new Date().toISOString().slice(0, 10), views: 3, starts: 2, completions: 1, reached: {} }],
      });
    });

    it('reports a null completion rate before any start', async () => {
      const fresh = await newForm();
      const res = await call(t.url, 'GET', `/v1/forms/${fresh.id}/analytics`, { key: tenant.key });
      expect(res.body).to.deep.equal({ views: 0, starts: 0, completions: 0, submissions: 0, completionRate: null, reached: {}, days: [] });
    });

    it('refuses forged, foreign and missing tokens with 400 invalid_token, and unknown types with 400', async () => {
      const other = await newForm();
      const otherToken = (await call(t.url, 'GET', `/public/forms/${other.id}`)).body.telemetry.analyticsToken;
      const [payload, signature] = token.split('.');
      const forged = `${Buffer.from(JSON.stringify({ f: analyticsForm.id, e: 4102444800 })).toString('base64url')}.${signature}`;
      for (const bad of [otherToken, forged, `${payload}.AAAA`, undefined]) {
        const res = await event({ token: bad, type: 'view' });
        expect(res.status).to.equal(400);
        expect(res.body).to.deep.equal({ success: false, error: 'invalid_token' });
      }
      const wrongType = await event({ token, type: 'submit' });
      expect(wrongType.status).to.equal(400);
      expect(wrongType.body).to.include({ success: false, error: 'invalid_data' });
      const counts = (await call(t.url, 'GET', `/v1/forms/${analyticsForm.id}/analytics`, { key: tenant.key })).body;
      expect(counts.views).to.equal(3);
    });

    it('answers 404 for an unpublished form', async () => {
      const draft = (await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body: { title: 'Draft' } })).body.form;
      expect((await event({ token, type: 'view' }, draft.id)).status).to.equal(404);
    });

    it('keeps analytics to the organization and the forms:read scope', async () => {
      const stranger = await createTenant(t.app);
      expect((await call(t.url, 'GET', `/v1/forms/${analyticsForm.id}/analytics`, { key: stranger.key })).status).to.equal(404);
      const writeOnly = await createKey(t.app, tenant.organizationId, ['submissions:write']);
      expect((await call(t.url, 'GET', `/v1/forms/${analyticsForm.id}/analytics`, { key: writeOnly })).status).to.equal(403);
      expect((await call(t.url, 'GET', `/v1/forms/${analyticsForm.id}/analytics`)).status).to.equal(401);
    });
  });

  describe('hosted page and assets', () => {
    it('serves the hosted page with a fresh nonce and its CSP per response', async () => {
      const [first, second] = [await call(t.url, 'GET', `/f/${form.id}`), await call(t.url, 'GET', `/f/${form.id}`)];
      expect(first.status).to.equal(200);
      expect(first.headers.get('content-type')).to.equal('text/html; charset=utf-8');
      expect(first.headers.get('x-content-type-options')).to.equal('nosniff');
      expect(first.headers.get('referrer-policy')).to.equal('strict-origin-when-cross-origin');
      expect(first.headers.get('cache-control')).to.equal('no-store');
      const nonceOf = (csp: string | null) => /'nonce-([^']+)'/.exec(csp ?? '')?.[1];
      const nonce = nonceOf(first.headers.get('content-security-policy'));
      expect(nonce).to.be.a('string');
      expect(nonceOf(second.headers.get('content-security-policy'))).to.not.equal(nonce);
      expect(first.text).to.include(`nonce="${nonce}"`);
      expect(first.text).to.include(form.id);
      expect(first.text).to.not.include(tenant.organizationId);
    });

    it('answers 404 with the not-found page for a draft or unknown form', async () => {
      const draft = (await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body: { title: 'Draft' } })).body.form;
      for (const id of [draft.id, 'form_nope', 'bad-id']) {
        const res = await call(t.url, 'GET', `/f/${id}`);
        expect(res.status, id).to.equal(404);
        expect(res.headers.get('content-type')).to.equal('text/html; charset=utf-8');
        expect(res.text).to.include('<title>Form not found</title>');
      }
    });

    const assets: [string, RegExp][] = [
      ['/embed.js', /^text\/javascript/],
      ['/assets/form.js', /^text\/javascript/],
      ['/assets/form.css', /^text\/css/],
    ];
    for (const [path, type] of assets) {
      it(`serves ${path} with a short cache lifetime`, async () => {
        const res = await call(t.url, 'GET', path);
        expect(res.status).to.equal(200);
        expect(res.headers.get('content-type')).to.match(type);
        expect(res.headers.get('cache-control')).to.equal('public, max-age=300');
        expect(res.text.length).to.be.greaterThan(100);
      });
    }
  });
});
