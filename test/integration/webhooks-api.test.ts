import { expect } from 'chai';
import { verifySignature } from '../../src/domain/webhooks/signing';
import { startReceiver, type Receiver } from '../support/fakes/receiver';
import { call, createKey, createPublishedForm, createTenant, startTestApp, type TestApp, type TestTenant } from '../support/harness';

const SECRET_PATTERN = /^whsec_[a-zA-Z0-9]{32,}$/;
const WEBHOOK_KEYS = ['createdAt', 'enabled', 'events', 'formId', 'id', 'name', 'pausedUntil', 'throttleRate', 'updatedAt', 'url'];
const textField = { id: 'fld_a', type: 'text', label: 'A', required: false, config: {}, validationRules: {}, order: 0 };

describe('webhooks API', () => {
  let t: TestApp;
  let tenant: TestTenant;
  let other: TestTenant;
  let receiver: Receiver;

  before(async () => {
    t = await startTestApp();
    tenant = await createTenant(t.app);
    other = await createTenant(t.app);
    receiver = await startReceiver({ respond: () => ({ status: 200 }) });
  });
  after(async () => {
    await receiver.close();
    await t.close();
  });

  const create = (body: unknown, key = tenant.key) => call(t.url, 'POST', '/v1/webhooks', { key, body });

  describe('create, read, update, delete', () => {
    it('creates a webhook and shows its secret once', async () => {
      const res = await create({ name: 'Orders', url: receiver.url, events: ['form.submission.created'] });
      expect(res.status).to.equal(201);
      const { secret, ...webhook } = res.body.webhook;
      expect(secret).to.match(SECRET_PATTERN);
      expect(Object.keys(webhook).sort()).to.deep.equal(WEBHOOK_KEYS);
      expect(webhook).to.include({ name: 'Orders', url: receiver.url, formId: null, enabled: true });
      expect(webhook.id).to.match(/^wh_[a-zA-Z0-9]+$/);
      expect(webhook.events).to.deep.equal(['submission.created']);

      const read = await call(t.url, 'GET', `/v1/webhooks/${webhook.id}`, { key: tenant.key });
      expect(read.status).to.equal(200);
      expect(read.body).to.deep.equal({ webhook });
      const list = await call(t.url, 'GET', '/v1/webhooks', { key: tenant.key });
      expect(list.body.webhooks.map((w: any) => w.id)).to.include(webhook.id);
      expect(list.text).to.not.include(secret);
    });

    it('takes throttleRate (1..10000 a second, null for unlimited) on create and update, and shows it on read', async () => {
      const made = await create({ name: 'Slow', url: receiver.url, events: ['submission.created'], throttleRate: 5 });
      expect(made.status, made.text).to.equal(201);
      expect(made.body.webhook.throttleRate).to.equal(5);
      const path = `/v1/webhooks/${made.body.webhook.id}`;
      expect((await call(t.url, 'GET', path, { key: tenant.key })).body.webhook.throttleRate).to.equal(5);
      const raised = await call(t.url, 'PUT', path, { key: tenant.key, body: { throttleRate: 10000 } });
      expect(raised.status, raised.text).to.equal(200);
      expect(raised.body.webhook.throttleRate).to.equal(10000);
      const lifted = await call(t.url, 'PUT', path, { key: tenant.key, body: { throttleRate: null } });
      expect(lifted.body.webhook.throttleRate).to.equal(null);
      expect((await call(t.url, 'GET', path, { key: tenant.key })).body.webhook.throttleRate).to.equal(null);
      const plain = await create({ name: 'Plain', url: receiver.url, events: ['submission.created'] });
      expect(plain.body.webhook.throttleRate).to.equal(null);

      for (const throttleRate of [0, -1, 10001, 2.5, '5', true, {}]) {
        const refused = await create({ name: 'Bad', url: receiver.url, events: ['submission.created'], throttleRate });
        expect(refused.status, JSON.stringify(throttleRate)).to.equal(400);
        expect(refused.body.error).to.equal('validation_error');
        expect(refused.body.details.map((d: any) => d.field)).to.include('throttleRate');
        const refusedUpdate = await call(t.url, 'PUT', path, { key: tenant.key, body: { throttleRate } });
        expect(refusedUpdate.status, JSON.stringify(throttleRate)).to.equal(400);
        expect(refusedUpdate.body.error).to.equal('validation_error');
      }
    });

    it('takes the operational events on organization-wide webhooks only', async () => {
      const operational = ['endpoint.disabled', 'message.attempt.failing', 'message.attempt.exhausted', 'message.attempt.recovered'];
      const wide = await create({ name: 'Ops', url: receiver.url, events: operational });
      expect(wide.status, wide.text).to.equal(201);
      expect(wide.body.webhook.events).to.deep.equal(operational);

      const form = await createPublishedForm(t.url, tenant.key, [textField]);
      for (const event of operational) {
        const tied = await create({ name: 'Tied', url: receiver.url, events: ['submission.created', event], formId: form.id });
        expect(tied.status, event).to.equal(400);
        expect(tied.body.error).to.equal('validation_error');
        expect(tied.body.details[0].field).to.equal('events');
      }
      // Tying an operational webhook to a form, or giving a tied one operational events, is refused too.
      const tieLater = await call(t.url, 'PUT', `/v1/webhooks/${wide.body.webhook.id}`, { key: tenant.key, body: { formId: form.id } });
      expect(tieLater.status, tieLater.text).to.equal(400);
      expect(tieLater.body.error).to.equal('validation_error');
      const tied = await create({ name: 'Tied', url: receiver.url, events: ['submission.created'], formId: form.id });
      const addLater = await call(t.url, 'PUT', `/v1/webhooks/${tied.body.webhook.id}`, { key: tenant.key, body: { events: ['endpoint.disabled'] } });
      expect(addLater.status, addLater.text).to.equal(400);
      expect(addLater.body.error).to.equal('validation_error');
      const both = await call(t.url, 'PUT', `/v1/webhooks/${tied.body.webhook.id}`, { key: tenant.key, body: { events: ['endpoint.disabled'], formId: null } });
      expect(both.status, both.text).to.equal(200);
      expect(both.body.webhook).to.include({ formId: null });
    });

    it('gives every webhook its own secret', async () => {
      const body = { name: 'x', url: receiver.url, events: ['submission.created'] };
      const [a, b] = await Promise.all([create(body), create(body)]);
      expect(a.body.webhook.secret).to.not.equal(b.body.webhook.secret);
    });

    it('filters the list by form and ties a webhook to a form', async () => {
      const form = await createPublishedForm(t.url, tenant.key, [textField]);
      const tied = await create({ name: 'Tied', url: receiver.url, events: ['submission.created'], formId: form.id, enabled: false });
      expect(tied.status).to.equal(201);
      expect(tied.body.webhook).to.include({ formId: form.id, enabled: false });
      const list = await call(t.url, 'GET', `/v1/webhooks?formId=${form.id}`, { key: tenant.key });
      expect(list.body.webhooks.map((w: any) => w.id)).to.deep.equal([tied.body.webhook.id]);
      const bad = await call(t.url, 'GET', '/v1/webhooks?formId=nope', { key: tenant.key });
      expect(bad.status).to.equal(400);
      expect(bad.body.error).to.equal('validation_error');
    });

    it('updates any of name, url, events, formId and enabled, and deletes', async () => {
      const form = await createPublishedForm(t.url, tenant.key, [textField]);
      const { body: { webhook } } = await create({ name: 'Before', url: receiver.url, events: ['submission.created'], formId: form.id });
      const path = `/v1/webhooks/${webhook.id}`;
      const res = await call(t.url, 'PUT', path, { key: tenant.key, body: { name: 'After', formId: null, enabled: false } });
      expect(res.status).to.equal(200);
      expect(Object.keys(res.body.webhook).sort()).to.deep.equal(WEBHOOK_KEYS);
      expect(res.body.webhook).to.include({ name: 'After', formId: null, enabled: false, url: receiver.url });
      expect(Date.parse(res.body.webhook.updatedAt)).to.be.at.least(Date.parse(webhook.updatedAt));

      for (const body of [{}, { secret: 'x' }, { events: [] }, { events: ['order.created'] }, { name: '' }]) {
        const refused = await call(t.url, 'PUT', path, { key: tenant.key, body });
        expect(refused.status, JSON.stringify(body)).to.equal(400);
        expect(refused.body.error).to.equal('validation_error');
      }

      expect((await call(t.url, 'DELETE', path, { key: tenant.key })).status).to.equal(204);
      expect((await call(t.url, 'DELETE', path, { key: tenant.key })).status).to.equal(404);
      expect((await call(t.url, 'GET', path, { key: tenant.key })).status).to.equal(404);
    });

    it('refuses invalid create bodies with validation_error details', async () => {
      const cases: [unknown, string][] = [
        [{ url: receiver.url, events: ['submission.created'] }, 'name'],
        [{ name: 'x', events: ['submission.created'] }, 'url'],
        [{ name: 'x', url: receiver.url }, 'events'],
        [{ name: 'x', url: receiver.url, events: ['nope'] }, 'events[0]'],
        [{ name: 'x', url: receiver.url, events: ['submission.created'], formId: 'bad' }, 'formId'],
      ];
      for (const [body, field] of cases) {
        const res = await create(body);
        expect(res.status, JSON.stringify(body)).to.equal(400);
        expect(res.body.error).to.equal('validation_error');
        expect(res.body.details.map((d: any) => d.field)).to.include(field);
      }
    });

    it('answers 404 for a formId that is unknown or of another organization', async () => {
      const foreignForm = await createPublishedForm(t.url, other.key, [textField]);
      for (const formId of ['form_doesnotexist', foreignForm.id]) {
        const res = await create({ name: 'x', url: receiver.url, events: ['submission.created'], formId });
        expect(res.status).to.equal(404);
        expect(res.body.error).to.equal('not_found');
      }
      const { body: { webhook } } = await create({ name: 'x', url: receiver.url, events: ['submission.created'] });
      const res = await call(t.url, 'PUT', `/v1/webhooks/${webhook.id}`, { key: tenant.key, body: { formId: foreignForm.id } });
      expect(res.status).to.equal(404);
    });
  });

  describe('unsafe targets', () => {
    it('always refuses link-local and metadata addresses, and non-http(s) URLs', async () => {
      for (const url of ['http://169.254.169.254/latest/meta-data/', 'https://169.254.10.1/', 'http://[fe80::1]/hook', 'http://[fd00:ec2::254]/', 'ftp://example.com/', 'not a url']) {
        const res = await create({ name: 'x', url, events: ['submission.created'] });
        expect(res.status, url).to.equal(400);
        expect(res.body.error).to.equal('validation_error');
        expect(res.body.details[0].field).to.equal('url');
      }
    });

    it('refuses an unsafe url on update', async () => {
      const { body: { webhook } } = await create({ name: 'x', url: receiver.url, events: ['submission.created'] });
      const res = await call(t.url, 'PUT', `/v1/webhooks/${webhook.id}`, { key: tenant.key, body: { url: 'http://169.254.169.254/' } });
      expect(res.status).to.equal(400);
      expect(res.body.details[0].field).to.equal('url');
    });

    describe('when private targets are not allowed', () => {
      let strict: TestApp;
      let key: string;
      before(async () => {
        strict = await startTestApp({ WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' });
        key = (await createTenant(strict.app)).key;
      });
      after(async () => strict.close());

      it('refuses http://, loopback and private addresses', async () => {
        for (const url of [receiver.url, 'https://127.0.0.1/hook', 'https://10.1.2.3/hook', 'https://192.168.0.10/', 'https://[::1]/', 'https://localhost/hook']) {
          const res = await call(strict.url, 'POST', '/v1/webhooks', { key, body: { name: 'x', url, events: ['submission.created'] } });
          expect(res.status, url).to.equal(400);
          expect(res.body.details[0].field).to.equal('url');
        }
      });

      it('accepts https:// to a public address and refuses http:// to the same address (openapi.yaml)', async () => {
        const create = (url: string) => call(strict.url, 'POST', '/v1/webhooks', { key, body: { name: 'x', url, events: ['submission.created'] } });
        expect((await create('https://93.184.216.34/hook')).status).to.equal(201);
        const refused = await create('http://93.184.216.34/hook');
        expect(refused.status).to.equal(400);
        expect(refused.body.error).to.equal('validation_error');
        expect(refused.body.details[0].field).to.equal('url');
      });
    });
  });

  describe('tenancy and scopes', () => {
    let webhookId: string;
    before(async () => {
      webhookId = (await create({ name: 'Mine', url: receiver.url, events: ['submission.created'] })).body.webhook.id;
    });

    it("answers 404 to another organization on every webhook path", async () => {
      const requests: [string, string, unknown?][] = [
        ['GET', `/v1/webhooks/${webhookId}`],
        ['PUT', `/v1/webhooks/${webhookId}`, { name: 'stolen' }],
        ['DELETE', `/v1/webhooks/${webhookId}`],
        ['GET', `/v1/webhooks/${webhookId}/deliveries`],
        ['POST', `/v1/webhooks/${webhookId}/test`],
        ['POST', `/v1/webhooks/${webhookId}/deliveries/dlv_x/retry`],
      ];
      for (const [method, path, body] of requests) {
        const res = await call(t.url, method, path, { key: other.key, body });
        expect(res.status, `${method} ${path}`).to.equal(404);
        expect(res.body.error).to.equal('not_found');
      }
      const list = await call(t.url, 'GET', '/v1/webhooks', { key: other.key });
      expect(list.body.webhooks.map((w: any) => w.id)).to.not.include(webhookId);
      expect((await call(t.url, 'GET', `/v1/webhooks/${webhookId}`, { key: tenant.key })).body.webhook.name).to.equal('Mine');
    });

    it('needs webhooks:write to change and webhooks:read to read', async () => {
      const reader = await createKey(t.app, tenant.organizationId, ['webhooks:read']);
      const writer = await createKey(t.app, tenant.organizationId, ['forms:*']);
      expect((await call(t.url, 'GET', `/v1/webhooks/${webhookId}/deliveries`, { key: reader })).status).to.equal(200);
      for (const [method, path] of [['POST', '/v1/webhooks'], ['PUT', `/v1/webhooks/${webhookId}`], ['DELETE', `/v1/webhooks/${webhookId}`], ['POST', `/v1/webhooks/${webhookId}/test`]]) {
        const res = await call(t.url, method, path, { key: reader, body: { name: 'x' } });
        expect(res.status, `${method} ${path}`).to.equal(403);
        expect(res.body.message).to.match(/webhooks:write$/);
      }
      expect((await call(t.url, 'GET', '/v1/webhooks', { key: writer })).status).to.equal(403);
    });
  });

  describe('deliveries list', () => {
    it('pages with limit 1..100 (default 50) and offset >= 0', async () => {
      const { body: { webhook } } = await create({ name: 'x', url: receiver.url, events: ['submission.created'] });
      const path = `/v1/webhooks/${webhook.id}/deliveries`;
      const res = await call(t.url, 'GET', path, { key: tenant.key });
      expect(res.status).to.equal(200);
      expect(res.body).to.deep.equal({ deliveries: [], pagination: { limit: 50, offset: 0, total: 0 } });
      for (const query of ['limit=0', 'limit=101', 'offset=-1', 'limit=abc']) {
        const bad = await call(t.url, 'GET', `${path}?${query}`, { key: tenant.key });
        expect(bad.status, query).to.equal(400);
        expect(bad.body.error).to.equal('validation_error');
      }
      expect((await call(t.url, 'GET', `${path}?limit=100&offset=3`, { key: tenant.key })).body.pagination)
        .to.deep.equal({ limit: 100, offset: 3, total: 0 });
    });

    it('answers 404 for an unknown delivery on retry', async () => {
      const { body: { webhook } } = await create({ name: 'x', url: receiver.url, events: ['submission.created'] });
      const res = await call(t.url, 'POST', `/v1/webhooks/${webhook.id}/deliveries/dlv_unknown/retry`, { key: tenant.key });
      expect(res.status).to.equal(404);
    });
  });

  describe('test send', () => {
    it('sends a signed webhook.test event and reports delivery', async () => {
      const { body: { webhook } } = await create({ name: 'x', url: receiver.url, events: ['submission.created'] });
      const before = receiver.deliveries.length;
      const res = await call(t.url, 'POST', `/v1/webhooks/${webhook.id}/test`, { key: tenant.key });
      expect(res.status).to.equal(200);
      expect(res.body).to.include({ delivered: true, statusCode: 200, error: null });
      expect(res.body.durationMs).to.be.a('number').at.least(0);
      expect(receiver.deliveries.length).to.equal(before + 1);
      const got = receiver.deliveries[before];
      expect(verifySignature({
        secret: webhook.secret, signature: got.headers['x-service-signature'], timestamp: got.headers['x-service-timestamp'], rawBody: got.rawBody,
      })).to.equal(true);
      expect(got.headers).to.include({ 'x-service-event': 'webhook.test', 'user-agent': 'FormService-Webhooks/1', 'content-type': 'application/json' });
      expect(got.headers['x-service-delivery']).to.match(/^dlv_/);
      const body = JSON.parse(got.rawBody);
      expect(body).to.include({ type: 'webhook.test' });
      expect(body.data).to.deep.equal({ webhookId: webhook.id });
    });

    it('reports a refusal and an unreachable receiver as not delivered', async () => {
      const refusing = await startReceiver({ respond: () => ({ status: 401 }) });
      try {
        const { body: { webhook } } = await create({ name: 'x', url: refusing.url, events: ['submission.created'] });
        const res = await call(t.url, 'POST', `/v1/webhooks/${webhook.id}/test`, { key: tenant.key });
        expect(res.body).to.include({ delivered: false, statusCode: 401, error: 'Unexpected status 401' });
      } finally {
        await refusing.close();
      }
      const gone = await startReceiver();
      const url = gone.url;
      await gone.close();
      const { body: { webhook } } = await create({ name: 'x', url, events: ['submission.created'] });
      const res = await call(t.url, 'POST', `/v1/webhooks/${webhook.id}/test`, { key: tenant.key });
      expect(res.body).to.include({ delivered: false, statusCode: null });
      expect(res.body.error).to.be.a('string').and.not.empty;
    });
  });
});
