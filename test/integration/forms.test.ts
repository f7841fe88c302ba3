import { expect } from 'chai';
import { call, createKey, createTenant, startTestApp, type TestApp, type TestTenant } from '../support/harness';

const sampleStructure = {
  pages: [
    { id: 'p1', title: 'About you', order: 0 },
    { id: 'p2', title: 'Details', order: 1, conditionalLogic: { show: true, logic: 'all', rules: [{ fieldId: 'fld_more', operator: 'equals', value: true }] } },
  ],
  fields: [
    { id: 'fld_name', type: 'text', label: 'Name', required: true, config: {}, validationRules: {}, order: 0, pageId: 'p1' },
    { id: 'fld_more', type: 'checkbox', label: 'Tell more?', required: false, config: {}, validationRules: {}, order: 1, pageId: 'p1' },
    { type: 'select', label: 'Colour', required: false, config: { options: [{ label: 'Red', value: 'red' }] }, validationRules: {}, order: 0, pageId: 'p2' },
  ],
};

describe('forms API', () => {
  let t: TestApp;
  let tenant: TestTenant;

  before(async () => {
    t = await startTestApp();
    tenant = await createTenant(t.app);
  });
  after(async () => t.close());

  describe('authentication', () => {
    it('answers 401 unauthorized without a key, with a malformed key and with an unknown key', async () => {
      for (const headers of [{} as Record<string, string>, { Authorization: 'Bearer nope' }, { 'X-API-Key': 'fs_live_' + 'x'.repeat(40) }]) {
        const res = await call(t.url, 'GET', '/v1/forms', { headers });
        expect(res.status).to.equal(401);
        expect(res.body).to.include({ error: 'unauthorized' });
        expect(res.body.message).to.be.a('string');
      }
    });

    it('accepts the key as a bearer token and as X-API-Key', async () => {
      expect((await call(t.url, 'GET', '/v1/forms', { key: tenant.key })).status).to.equal(200);
      expect((await call(t.url, 'GET', '/v1/forms', { headers: { 'X-API-Key': tenant.key } })).status).to.equal(200);
    });

    it('refuses an expired key', async () => {
      const em = t.app.orm.em.fork();
      const { createApiKey } = await import('../../src/domain/auth/admin');
      const { key } = await createApiKey(em, { organizationId: tenant.organizationId, scopes: ['*'], expiresAt: new Date(Date.now() - 1000) });
      expect((await call(t.url, 'GET', '/v1/forms', { key })).status).to.equal(401);
    });

    it('refuses a revoked key at once, even when its record was cached', async () => {
      const key = await createKey(t.app, tenant.organizationId, ['*']);
      expect((await call(t.url, 'GET', '/v1/forms', { key })).status).to.equal(200);
      const { listApiKeys, revokeApiKey } = await import('../../src/domain/auth/admin');
      const { publishInvalidation } = await import('../../src/lib/cache-invalidation');
      const em = t.app.orm.em.fork();
      const record = (await listApiKeys(em, tenant.organizationId)).find((k) => key.endsWith(k.last4) && !k.revokedAt)!;
      await revokeApiKey(em, record.id);
      await publishInvalidation(t.app.redis, `key:${record.id}`);
      await new Promise((r) => setTimeout(r, 100));
      expect((await call(t.url, 'GET', '/v1/forms', { key })).status).to.equal(401);
    });
  });

  it('serves a warm key from its cache (no database lookup) until an invalidation is announced', async () => {
    const key = await createKey(t.app, tenant.organizationId, ['*']);
    expect((await call(t.url, 'GET', '/v1/forms', { key })).status).to.equal(200);
    const { hashApiKey } = await import('../../src/domain/auth/api-keys');
    const conn = t.app.orm.em.getConnection();
    // Revoked behind the service's back: only a database lookup would notice.
    const [row] = await conn.execute('update api_keys set revoked_at = now() where key_hash = ? returning id', [hashApiKey(key)]);
    expect((await call(t.url, 'GET', '/v1/forms', { key })).status).to.equal(200);
    const { publishInvalidation } = await import('../../src/lib/cache-invalidation');
    await publishInvalidation(t.app.redis, `key:${row.id}`);
    await new Promise((r) => setTimeout(r, 100));
    expect((await call(t.url, 'GET', '/v1/forms', { key })).status).to.equal(401);
  });

  it('lists at most 100 forms', async () => {
    const many = await createTenant(t.app);
    const conn = t.app.orm.em.getConnection();
    await conn.execute(
      `insert into forms (id, organization_id, title, status, settings, created_at, updated_at)
       select 'form_bulk' || g, ?, 'Bulk ' || g, 'draft', '{}', now(), now() - g * interval '1 second' from generate_series(1, 105) g`,
      [many.organizationId],
    );
    const list = await call(t.url, 'GET', '/v1/forms', { key: many.key });
    expect(list.body.forms).to.have.length(100);
    expect(list.body.forms[0].id).to.equal('form_bulk1');
    expect(list.body.forms[99].id).to.equal('form_bulk100');
  });

  describe('scopes', () => {
    const cases: Array<[string[], string, string, number]> = [
      [['forms:read'], 'GET', '/v1/forms', 200],
      [['forms:read'], 'POST', '/v1/forms', 403],
      [['forms:write'], 'GET', '/v1/forms', 403],
      [['forms:write'], 'POST', '/v1/forms', 201],
      [['forms:*'], 'GET', '/v1/forms', 200],
      [['forms:*'], 'POST', '/v1/forms', 201],
      [['submissions:*', 'webhooks:*'], 'GET', '/v1/forms', 403],
      [['*'], 'POST', '/v1/forms', 201],
    ];
    for (const [scopes, method, path, expected] of cases) {
      it(`${scopes.join(',')} → ${method} ${path} answers ${expected}`, async () => {
        const key = await createKey(t.app, tenant.organizationId, scopes);
        const res = await call(t.url, method, path, { key, body: method === 'POST' ? { title: 'Scoped' } : undefined });
        expect(res.status).to.equal(expected);
        if (expected === 403) {
          expect(res.body.error).to.equal('forbidden');
          expect(res.body.message).to.match(new RegExp(`${method === 'GET' ? 'forms:read' : 'forms:write'}$`));
        }
      });
    }
  });

  describe('CRUD', () => {
    it('creates a form with its structure, generating missing ids, and reads it back', async () => {
      const created = await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body: { title: 'Survey', slug: 'survey', ...sampleStructure } });
      expect(created.status).to.equal(201);
      const form = created.body.form;
      expect(form.id).to.match(/^form_[a-zA-Z0-9]+$/);
      expect(form.status).to.equal('draft');
      expect(form.pages.map((p: any) => p.id)).to.deep.equal(['p1', 'p2']);
      expect(form.fields).to.have.length(3);
      const colour = form.fields.find((f: any) => f.label === 'Colour');
      expect(colour.id).to.match(/^fld_[a-zA-Z0-9]+$/);
      expect(colour.pageId).to.equal('p2');
      const read = await call(t.url, 'GET', `/v1/forms/${form.id}`, { key: tenant.key });
      expect(read.status).to.equal(200);
      expect(read.body.form).to.deep.equal(form);
    });

    it('lists forms newest update first, without structure', async () => {
      const a = (await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body: { title: 'A' } })).body.form;
      const b = (await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body: { title: 'B' } })).body.form;
      await call(t.url, 'PUT', `/v1/forms/${a.id}`, { key: tenant.key, body: { title: 'A2' } });
      const list = await call(t.url, 'GET', '/v1/forms', { key: tenant.key });
      expect(list.status).to.equal(200);
      const ids = list.body.forms.map((f: any) => f.id);
      expect(ids.indexOf(a.id)).to.be.lessThan(ids.indexOf(b.id));
      expect(list.body.forms[0]).to.not.have.property('fields');
      expect(list.body.forms[0]).to.include.keys('id', 'title', 'status', 'createdAt', 'updatedAt');
    });

    it('updates metadata only, and refuses structural keys', async () => {
      const form = (await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body: { title: 'Meta' } })).body.form;
      const ok = await call(t.url, 'PUT', `/v1/forms/${form.id}`, { key: tenant.key, body: { status: 'published', description: 'd' } });
      expect(ok.status).to.equal(200);
      expect(ok.body.form).to.include({ status: 'published', description: 'd', title: 'Meta' });
      const bad = await call(t.url, 'PUT', `/v1/forms/${form.id}`, { key: tenant.key, body: { fields: [] } });
      expect(bad.status).to.equal(400);
      expect(bad.body.error).to.equal('validation_error');
      expect(bad.body.details[0].field).to.equal('fields');
    });

    it('replaces the structure atomically, and a rejected replacement changes nothing', async () => {
      const form = (await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body: { title: 'S', ...sampleStructure } })).body.form;
      const bad = await call(t.url, 'PUT', `/v1/forms/${form.id}/structure`, {
        key: tenant.key,
        body: { pages: [], fields: [{ id: 'a', type: 'text', label: 'A', required: false, config: {}, validationRules: {}, order: 0, pageId: 'missing' }] },
      });
      expect(bad.status).to.equal(400);
      expect(bad.body.error).to.equal('validation_error');
      expect(bad.body.details).to.be.an('array').that.is.not.empty;
      const unchanged = await call(t.url, 'GET', `/v1/forms/${form.id}`, { key: tenant.key });
      expect(unchanged.body.form.fields).to.deep.equal(form.fields);

      const replaced = await call(t.url, 'PUT', `/v1/forms/${form.id}/structure`, {
        key: tenant.key,
        body: { pages: [{ id: 'only', title: 'Only', order: 0 }], fields: [{ id: 'fld_x', type: 'email', label: 'Email', required: true, config: {}, validationRules: {}, order: 0, pageId: 'only' }], settings: { successMessage: 'Thanks' } },
      });
      expect(replaced.status).to.equal(200);
      expect(replaced.body.form.fields.map((f: any) => f.id)).to.deep.equal(['fld_x']);
      expect(replaced.body.form.pages.map((p: any) => p.id)).to.deep.equal(['only']);
      expect(replaced.body.form.settings).to.deep.equal({ successMessage: 'Thanks' });
    });

    it('rejects invalid bodies with validation_error details', async () => {
      const res = await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body: { title: '', status: 'live', fields: [{ type: 'nope', label: 'x' }] } });
      expect(res.status).to.equal(400);
      expect(res.body.error).to.equal('validation_error');
      const fields = res.body.details.map((d: any) => d.field);
      expect(fields).to.include.members(['title', 'status']);
    });

    it('keeps slugs unique per organization among live forms', async () => {
      const first = await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body: { title: 'One', slug: 'dup-slug' } });
      expect(first.status).to.equal(201);
      const dup = await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body: { title: 'Two', slug: 'dup-slug' } });
      expect(dup.status).to.equal(400);
      expect(dup.body.details[0].field).to.equal('slug');
      const other = await createTenant(t.app);
      expect((await call(t.url, 'POST', '/v1/forms', { key: other.key, body: { title: 'Mine', slug: 'dup-slug' } })).status).to.equal(201);
      expect((await call(t.url, 'DELETE', `/v1/forms/${first.body.form.id}`, { key: tenant.key })).status).to.equal(204);
      expect((await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body: { title: 'Three', slug: 'dup-slug' } })).status).to.equal(201);
    });

    it('soft-deletes: 204, then 404 on read, update, delete and absent from the list', async () => {
      const form = (await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body: { title: 'Gone' } })).body.form;
      const del = await call(t.url, 'DELETE', `/v1/forms/${form.id}`, { key: tenant.key });
      expect(del.status).to.equal(204);
      expect(del.text).to.equal('');
      for (const [method, path, body] of [['GET', `/v1/forms/${form.id}`], ['PUT', `/v1/forms/${form.id}`, { title: 'x' }], ['DELETE', `/v1/forms/${form.id}`]] as const) {
        const res = await call(t.url, method, path, { key: tenant.key, body });
        expect(res.status, `${method} ${path}`).to.equal(404);
        expect(res.body.error).to.equal('not_found');
      }
      const list = await call(t.url, 'GET', '/v1/forms', { key: tenant.key });
      expect(list.body.forms.map((f: any) => f.id)).to.not.include(form.id);
    });

    it('answers 404 for another organization\'s form on every route', async () => {
      const form = (await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body: { title: 'Private' } })).body.form;
      const other = await createTenant(t.app);
      for (const [method, path, body] of [
        ['GET', `/v1/forms/${form.id}`], ['PUT', `/v1/forms/${form.id}`, { title: 'x' }],
        ['PUT', `/v1/forms/${form.id}/structure`, { pages: [], fields: [] }], ['DELETE', `/v1/forms/${form.id}`],
        ['GET', `/v1/forms/${form.id}/submissions`],
      ] as const) {
        const res = await call(t.url, method, path, { key: other.key, body });
        expect(res.status, `${method} ${path}`).to.equal(404);
        expect(res.body).to.include({ error: 'not_found' });
      }
      expect((await call(t.url, 'GET', `/v1/forms/${form.id}`, { key: tenant.key })).status).to.equal(200);
    });

    it('masks CRM tokens on reads and keeps them when `***` is sent back', async () => {
      const settings = { integrations: [{ type: 'hubspot', accessToken: 'pat-secret', fieldMap: { fld_e: 'email' } }] };
      const form = (await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body: { title: 'CRM', settings } })).body.form;
      expect(form.settings.integrations[0].accessToken).to.equal('***');
      const [row] = await t.app.orm.em.getConnection().execute('select settings from forms where id = ?', [form.id]);
      expect(JSON.stringify(row.settings)).to.not.include('pat-secret');
      const again = await call(t.url, 'PUT', `/v1/forms/${form.id}/structure`, { key: tenant.key, body: { pages: [], fields: [], settings: form.settings } });
      expect(again.status).to.equal(200);
      const [after] = await t.app.orm.em.getConnection().execute('select settings from forms where id = ?', [form.id]);
      expect(after.settings.integrations[0].accessToken).to.equal(row.settings.integrations[0].accessToken);
    });
  });

  describe('errors', () => {
    it('answers invalid JSON with 400 invalid_json', async () => {
      const res = await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body: '{"title":' });
      expect(res.status).to.equal(400);
      expect(res.body.error).to.equal('invalid_json');
    });

    it('answers unknown paths 404 and wrong methods 405, in the error shape', async () => {
      const missing = await call(t.url, 'GET', '/v1/nothing-here', { key: tenant.key });
      expect(missing.status).to.equal(404);
      expect(missing.body).to.have.keys('error', 'message');
      expect(missing.body.error).to.equal('not_found');
      const wrong = await call(t.url, 'PATCH', '/v1/forms', { key: tenant.key, body: {} });
      expect(wrong.status).to.equal(405);
      expect(wrong.body).to.have.keys('error', 'message');
    });

    it('refuses compressed request bodies (415) and declared bodies over 1 MB (413)', async () => {
      const gz = await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body: '{}', headers: { 'Content-Encoding': 'gzip' } });
      expect(gz.status).to.equal(415);
      expect(gz.body.error).to.equal('unsupported_media_type');
      const big = await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body: JSON.stringify({ title: 'x'.repeat(1_100_000) }) });
      expect(big.status).to.equal(413);
      expect(big.body.error).to.equal('payload_too_large');
    });

    it('answers a malformed form id 404', async () => {
      const res = await call(t.url, 'GET', '/v1/forms/not-a-form-id', { key: tenant.key });
      expect(res.status).to.equal(404);
      expect(res.body.error).to.equal('not_found');
    });
  });
});
