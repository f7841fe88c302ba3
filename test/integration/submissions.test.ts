import { expect } from 'chai';
import { eventIdForSubmission } from '../../src/domain/webhooks/events';
import { startFakeStripe, type FakeStripe } from '../support/fakes/stripe';
import { call, createPublishedForm, createTenant, startTestApp, type TestApp, type TestTenant, fieldInput as field } from '../support/harness';


describe('submissions API', () => {
  let t: TestApp;
  let stripe: FakeStripe;
  let tenant: TestTenant;
  let form: any;

  before(async () => {
    stripe = await startFakeStripe();
    t = await startTestApp({ STRIPE_API_BASE: stripe.url, STRIPE_SECRET_KEY: stripe.secretKey });
    tenant = await createTenant(t.app);
    form = await createPublishedForm(t.url, tenant.key, [
      field('fld_name', 'text', 'Full name', { required: true, order: 0 }),
      field('fld_email', 'email', 'Email', { required: true, order: 1 }),
      field('fld_more', 'checkbox', 'More?', { order: 2 }),
      field('fld_why', 'textarea', 'Why', {
        required: true, order: 3,
        conditionalLogic: { show: true, logic: 'all', rules: [{ fieldId: 'fld_more', operator: 'equals', value: true }] },
      }),
    ]);
  });
  after(async () => {
    await t.close();
    await stripe.close();
  });

  const submit = (formId: string, body: unknown, key = tenant.key, headers: Record<string, string> = {}) =>
    call(t.url, 'POST', `/v1/forms/${formId}/submissions`, { key, body, headers });

  it('creates a submission (201) that a read finds at once, keyed by label and by id', async () => {
    const res = await submit(form.id, { data: { fld_name: 'Ada', fld_email: 'ada@example.com' }, submitterEmail: 'ada@example.com', submitterName: 'Ada' });
    expect(res.status).to.equal(201);
    const created = res.body.submission;
    expect(created).to.have.keys('id', 'formId', 'formVersion', 'createdAt');
    expect(created.id).to.match(/^sub_[a-zA-Z0-9]+$/);
    expect(created.formId).to.equal(form.id);
    const read = await call(t.url, 'GET', `/v1/submissions/${created.id}`, { key: tenant.key });
    expect(read.status).to.equal(200);
    expect(read.body.submission).to.deep.include({
      id: created.id, formId: form.id, formTitle: 'Test form', submitterEmail: 'ada@example.com', submitterName: 'Ada',
      createdAt: created.createdAt,
      data: { 'Full name': 'Ada', Email: 'ada@example.com' },
      rawData: { fld_name: 'Ada', fld_email: 'ada@example.com' },
    });
  });

  it('checks in the contract\'s order: 404, form_not_published, invalid_data, missing_required_fields, validation_error', async () => {
    const draft = (await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body: { title: 'Draft' } })).body.form;
    const cases: Array<[string, unknown, number, string]> = [
      ['form_doesNotExist', { data: 'x' }, 404, 'not_found'],
      [draft.id, { data: 'x' }, 400, 'form_not_published'],
      [form.id, { data: 'x' }, 400, 'invalid_data'],
      [form.id, { nodata: true }, 400, 'invalid_data'],
      [form.id, { data: { fld_email: 'bad' } }, 400, 'missing_required_fields'],
      [form.id, { data: { fld_name: 'A', fld_email: 'not-an-email' } }, 400, 'validation_error'],
      [form.id, { data: { fld_name: 'A', fld_email: 'a@b.co', fld_nope: 1 } }, 400, 'validation_error'],
      [form.id, { data: { fld_name: 'A', fld_email: 'a@b.co' }, submitterEmail: 'nope' }, 400, 'validation_error'],
    ];
    for (const [formId, body, status, code] of cases) {
      const res = await submit(formId, body);
      expect(res.status, JSON.stringify(body)).to.equal(status);
      expect(res.body.error, JSON.stringify(body)).to.equal(code);
    }
    const invalidJson = await submit(form.id, '{nope');
    expect(invalidJson.status).to.equal(400);
    expect(invalidJson.body.error).to.equal('invalid_json');
  });

  it('lists the labels of missing fields and gives details per field id', async () => {
    const res = await submit(form.id, { data: {} });
    expect(res.body.message).to.include('Full name').and.to.include('Email');
    const invalid = await submit(form.id, { data: { fld_name: 'A', fld_email: 'x', fld_unknown: 1 } });
    expect(invalid.body.details.map((d: any) => d.field)).to.have.members(['fld_email', 'fld_unknown']);
  });

  it('does not require a field hidden by conditional logic, and drops its value', async () => {
    const res = await submit(form.id, { data: { fld_name: 'A', fld_email: 'a@b.co', fld_more: false, fld_why: 'ignored' } });
    expect(res.status).to.equal(201);
    const read = await call(t.url, 'GET', `/v1/submissions/${res.body.submission.id}`, { key: tenant.key });
    expect(read.body.submission.rawData).to.not.have.property('fld_why');
    const shown = await submit(form.id, { data: { fld_name: 'A', fld_email: 'a@b.co', fld_more: true } });
    expect(shown.status).to.equal(400);
    expect(shown.body.error).to.equal('missing_required_fields');
    expect(shown.body.message).to.include('Why');
  });

  it('lists newest first with limit, offset, total and whole-day date bounds', async () => {
    const list = await createPublishedForm(t.url, tenant.key, [field('fld_n', 'number', 'N')]);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await submit(list.id, { data: { fld_n: i } })).body.submission.id);
    const page = await call(t.url, 'GET', `/v1/forms/${list.id}/submissions?limit=2&offset=1`, { key: tenant.key });
    expect(page.status).to.equal(200);
    expect(page.body.pagination).to.deep.equal({ limit: 2, offset: 1, total: 5 });
    expect(page.body.submissions.map((s: any) => s.id)).to.deep.equal([ids[3], ids[2]]);
    expect(page.body.submissions[0]).to.include.keys('id', 'createdAt', 'data', 'submitterEmail', 'submitterName');
    expect(page.body.submissions[0].data).to.deep.equal({ fld_n: 3 });

    const today = new Date().toISOString().slice(0, 10);
    const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
    const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
    const total = async (q: string) => (await call(t.url, 'GET', `/v1/forms/${list.id}/submissions?${q}`, { key: tenant.key })).body.pagination.total;
    expect(await total(`startDate=${today}&endDate=${today}`)).to.equal(5);
    expect(await total(`endDate=${yesterday}`)).to.equal(0);
    expect(await total(`startDate=${tomorrow}`)).to.equal(0);
    expect(await total(`startDate=${new Date(Date.now() + 60_000).toISOString()}`)).to.equal(0);

    for (const q of ['limit=0', 'limit=101', 'offset=-1', 'startDate=yesterday', 'endDate=2026-13-45', 'limit=abc']) {
      const res = await call(t.url, 'GET', `/v1/forms/${list.id}/submissions?${q}`, { key: tenant.key });
      expect(res.status, q).to.equal(400);
      expect(res.body.error, q).to.equal('validation_error');
    }
  });

  it('deletes a submission (204, then 404) and never shows another organization\'s', async () => {
    const id = (await submit(form.id, { data: { fld_name: 'A', fld_email: 'a@b.co' } })).body.submission.id;
    const other = await createTenant(t.app);
    expect((await call(t.url, 'GET', `/v1/submissions/${id}`, { key: other.key })).status).to.equal(404);
    expect((await call(t.url, 'DELETE', `/v1/submissions/${id}`, { key: other.key })).status).to.equal(404);
    expect((await submit(form.id, { data: { fld_name: 'A', fld_email: 'a@b.co' } }, other.key)).status).to.equal(404);
    const del = await call(t.url, 'DELETE', `/v1/submissions/${id}`, { key: tenant.key });
    expect(del.status).to.equal(204);
    const again = await call(t.url, 'DELETE', `/v1/submissions/${id}`, { key: tenant.key });
    expect(again.status).to.equal(404);
    expect(again.body.error).to.equal('not_found');
    expect((await call(t.url, 'GET', `/v1/submissions/${id}`, { key: tenant.key })).body.message).to.equal('Submission not found');
  });

  it('stores sensitive name values encrypted and shows them as Redacted everywhere', async () => {
    const sensitive = await createPublishedForm(t.url, tenant.key, [field('fld_nm', 'name', 'Patient', { config: { sensitive: true } })]);
    const res = await submit(sensitive.id, { data: { fld_nm: { format: 'split', firstName: 'Grace', lastName: 'Hopper' } } });
    expect(res.status).to.equal(201);
    const id = res.body.submission.id;
    const [row] = await t.app.orm.em.getConnection().execute('select data from submissions where id = ?', [id]);
    expect(JSON.stringify(row.data)).to.not.include('Grace');
    const read = await call(t.url, 'GET', `/v1/submissions/${id}`, { key: tenant.key });
    expect(read.body.submission.data).to.deep.equal({ Patient: 'Redacted' });
    expect(read.body.submission.rawData).to.deep.equal({ fld_nm: 'Redacted' });
    const list = await call(t.url, 'GET', `/v1/forms/${sensitive.id}/submissions`, { key: tenant.key });
    expect(list.body.submissions[0].data).to.deep.equal({ fld_nm: 'Redacted' });
  });

  it('keys data by the field id when the field was deleted from the form', async () => {
    const f = await createPublishedForm(t.url, tenant.key, [field('fld_a', 'text', 'A'), field('fld_b', 'text', 'B', { order: 1 })]);
    const id = (await submit(f.id, { data: { fld_a: 'x', fld_b: 'y' } })).body.submission.id;
    await call(t.url, 'PUT', `/v1/forms/${f.id}/structure`, { key: tenant.key, body: { pages: [], fields: [field('fld_a', 'text', 'Renamed A')] } });
    const read = await call(t.url, 'GET', `/v1/submissions/${id}`, { key: tenant.key });
    expect(read.body.submission.data).to.deep.equal({ 'Renamed A': 'x', fld_b: 'y' });
  });

  describe('monthly quota', () => {
    it('refuses with 402 limit_exceeded once reached, and the CLI usage shows it', async () => {
      const small = await createTenant(t.app, { plan: 'free', monthlyQuota: 2 });
      const f = await createPublishedForm(t.url, small.key, [field('fld_a', 'text', 'A')]);
      expect((await submit(f.id, { data: { fld_a: '1' } }, small.key)).status).to.equal(201);
      expect((await submit(f.id, { data: { fld_a: '2' } }, small.key)).status).to.equal(201);
      const refused = await submit(f.id, { data: { fld_a: '3' } }, small.key);
      expect(refused.status).to.equal(402);
      expect(refused.body.error).to.equal('limit_exceeded');
      const { organizationUsage } = await import('../../src/domain/auth/admin');
      const usage = await organizationUsage(t.app.orm.em.fork(), small.organizationId);
      expect(usage).to.deep.equal({ month: new Date().toISOString().slice(0, 7), used: 2, quota: 2 });
    });

    it('never accepts more than the quota under 40 concurrent submissions', async () => {
      const org = await createTenant(t.app, { monthlyQuota: 25 });
      const f = await createPublishedForm(t.url, org.key, [field('fld_a', 'text', 'A')]);
      const results = await Promise.all(Array.from({ length: 40 }, (_, i) => submit(f.id, { data: { fld_a: String(i) } }, org.key)));
      const statuses = results.map((r) => r.status);
      expect(statuses.filter((s) => s === 201)).to.have.length(25);
      expect(statuses.filter((s) => s === 402)).to.have.length(15);
      const [count] = await t.app.orm.em.getConnection().execute('select count(*)::int as n from submissions where form_id = ?', [f.id]);
      expect(count.n).to.equal(25);
    });
  });

  describe('payments', () => {
    let payForm: any;
    before(async () => {
      payForm = await createPublishedForm(t.url, tenant.key, [
        field('fld_pay', 'payment', 'Payment', { required: true, config: { amount: 1500, currency: 'eur' } }),
        field('fld_note', 'text', 'Note', { order: 1 }),
      ]);
    });

    it('accepts a succeeded intent once; a replay gets 409 payment_already_used with a stable body', async () => {
      const intent = stripe.addIntent({ amount: 1500, currency: 'eur' });
      expect((await submit(payForm.id, { data: { fld_pay: intent } })).status).to.equal(201);
      const replay = await submit(payForm.id, { data: { fld_pay: intent, fld_note: 'different' } });
      expect(replay.status).to.equal(409);
      expect(replay.body).to.have.keys('error', 'message');
      expect(replay.body.error).to.equal('payment_already_used');
      expect(replay.text).to.not.include(intent);
    });

    it('lets exactly one of 10 concurrent submissions claim one intent', async () => {
      const intent = stripe.addIntent({ amount: 1500, currency: 'eur' });
      const results = await Promise.all(Array.from({ length: 10 }, () => submit(payForm.id, { data: { fld_pay: intent } })));
      const statuses = results.map((r) => r.status).sort();
      expect(statuses.filter((s) => s === 201)).to.have.length(1);
      expect(statuses.filter((s) => s === 409)).to.have.length(9);
      const [claims] = await t.app.orm.em.getConnection().execute('select count(*)::int as n from payment_claims where payment_intent_id = ?', [intent]);
      expect(claims.n).to.equal(1);
    });

    it('refuses intents that did not succeed, with another amount or currency, or unknown', async () => {
      for (const [intent, why] of [
        [stripe.addIntent({ amount: 1500, currency: 'eur', status: 'requires_payment_method' }), 'status'],
        [stripe.addIntent({ amount: 999, currency: 'eur' }), 'amount'],
        [stripe.addIntent({ amount: 1500, currency: 'usd' }), 'currency'],
        ['pi_doesnotexist', 'unknown'],
      ]) {
        const res = await submit(payForm.id, { data: { fld_pay: intent } });
        expect(res.status, why).to.equal(400);
        expect(res.body.error, why).to.equal('validation_error');
        expect(res.body.details[0].field, why).to.equal('fld_pay');
      }
    });

    it('answers 503 service_unavailable with Retry-After when Stripe is unreachable', async () => {
      const intent = stripe.addIntent({ amount: 1500, currency: 'eur' });
      stripe.setDown(true);
      try {
        const res = await submit(payForm.id, { data: { fld_pay: intent } });
        expect(res.status).to.equal(503);
        expect(res.body.error).to.equal('service_unavailable');
        expect(Number(res.headers.get('retry-after'))).to.be.greaterThan(0);
      } finally {
        stripe.setDown(false);
      }
      expect((await submit(payForm.id, { data: { fld_pay: intent } })).status).to.equal(201);
    });
  });

  describe('Idempotency-Key', () => {
    it('replays the first response for the same key and body, and creates nothing more', async () => {
      const body = { data: { fld_name: 'Idem', fld_email: 'i@example.com' } };
      const headers = { 'Idempotency-Key': `idem-${Date.now()}` };
      const first = await submit(form.id, body, tenant.key, headers);
      const second = await submit(form.id, { data: { fld_email: 'i@example.com', fld_name: 'Idem' } }, tenant.key, headers);
      expect(first.status).to.equal(201);
      expect(second.status).to.equal(201);
      expect(second.body).to.deep.equal(first.body);
      expect(first.headers.get('idempotent-replayed')).to.equal(null);
      expect(second.headers.get('idempotent-replayed')).to.equal('true');
      const [n] = await t.app.orm.em.getConnection().execute(
        `select count(*)::int as n from submissions where form_id = ? and data->>'fld_name' = 'Idem'`, [form.id]);
      expect(n.n).to.equal(1);
    });

    it('answers 422 idempotency_key_reused for the same key with another body', async () => {
      const headers = { 'Idempotency-Key': `reuse-${Date.now()}` };
      expect((await submit(form.id, { data: { fld_name: 'A', fld_email: 'a@b.co' } }, tenant.key, headers)).status).to.equal(201);
      const res = await submit(form.id, { data: { fld_name: 'B', fld_email: 'a@b.co' } }, tenant.key, headers);
      expect(res.status).to.equal(422);
      expect(res.body.error).to.equal('idempotency_key_reused');
    });

    // Concurrent retries of one request: the one that holds the key answers 201; a retry that comes
    // while it runs is told to wait (409 idempotency_key_in_use, Retry-After 1), one that comes after
    // it replays the 201.
    const inUseOr201 = (r: { status: number; body: any; headers: Headers }) => r.status === 201
      || (r.status === 409 && r.body.error === 'idempotency_key_in_use' && r.headers.get('retry-after') === '1');

    it('creates at most one submission for concurrent requests with one key', async () => {
      const key = `conc-${Date.now()}`;
      const body = { data: { fld_name: key, fld_email: 'c@example.com' } };
      const results = await Promise.all(Array.from({ length: 8 }, () => submit(form.id, body, tenant.key, { 'Idempotency-Key': key })));
      expect(results.every(inUseOr201), JSON.stringify(results.map((r) => [r.status, r.body?.error]))).to.equal(true);
      const created = results.filter((r) => r.status === 201);
      expect(created.length).to.be.at.least(1);
      expect(new Set(created.map((r) => r.body.submission.id)).size).to.equal(1);
      const retry = await submit(form.id, body, tenant.key, { 'Idempotency-Key': key });
      expect(retry.status).to.equal(201);
      expect(retry.body.submission.id).to.equal(created[0].body.submission.id);
      const [n] = await t.app.orm.em.getConnection().execute(
        `select count(*)::int as n from submissions where data->>'fld_name' = ?`, [key]);
      expect(n.n).to.equal(1);
    });

    it('never answers a retry with a 402 the first request did not get (the first took the last unit of quota)', async () => {
      const small = await createTenant(t.app, { monthlyQuota: 1 });
      const smallForm = await createPublishedForm(t.url, small.key, [field('fld_a', 'text', 'A')]);
      const key = `last-unit-${Date.now()}`;
      const body = { data: { fld_a: 'x' } };
      const results = await Promise.all(Array.from({ length: 8 }, () => submit(smallForm.id, body, small.key, { 'Idempotency-Key': key })));
      expect(results.every(inUseOr201), JSON.stringify(results.map((r) => [r.status, r.body?.error]))).to.equal(true);
      const retry = await submit(smallForm.id, body, small.key, { 'Idempotency-Key': key });
      expect(retry.status).to.equal(201);
      expect((await submit(smallForm.id, body, small.key)).status).to.equal(402);
    });

    it('answers 409 idempotency_key_in_use while the first request holds the key, and takes over a key whose request died', async () => {
      const key = `held-${Date.now()}`;
      const body = { data: { fld_name: 'Held', fld_email: 'h@example.com' } };
      // A first request in progress: its claim, not yet answered.
      await t.app.orm.em.fork().execute(
        `insert into idempotency_keys (organization_id, key, request_hash, claim_token, lease_expires_at)
         values (?, ?, 'first', 'token-of-the-first', now() + interval '30 seconds')`, [tenant.organizationId, key],
      );
      const waiting = await submit(form.id, body, tenant.key, { 'Idempotency-Key': key });
      expect(waiting.status).to.equal(409);
      expect(waiting.body.error).to.equal('idempotency_key_in_use');
      expect(waiting.headers.get('retry-after')).to.equal('1');
      // Its process died: once the lease lapses, the key is usable again.
      await t.app.orm.em.fork().execute(
        `update idempotency_keys set lease_expires_at = now() - interval '1 second' where organization_id = ? and key = ?`,
        [tenant.organizationId, key],
      );
      const res = await submit(form.id, body, tenant.key, { 'Idempotency-Key': key });
      expect(res.status).to.equal(201);
      expect((await submit(form.id, body, tenant.key, { 'Idempotency-Key': key })).body.submission.id).to.equal(res.body.submission.id);
    });

    it('frees the key when the first request ends without a 201', async () => {
      const key = `refused-${Date.now()}`;
      const refused = await submit(form.id, { data: { fld_name: 'A', fld_email: 'not-an-email' } }, tenant.key, { 'Idempotency-Key': key });
      expect(refused.status).to.equal(400);
      const res = await submit(form.id, { data: { fld_name: 'A', fld_email: 'a@example.com' } }, tenant.key, { 'Idempotency-Key': key });
      expect(res.status).to.equal(201);
    });

    it('refuses a key longer than 255 characters', async () => {
      const res = await submit(form.id, { data: { fld_name: 'A', fld_email: 'a@b.co' } }, tenant.key, { 'Idempotency-Key': 'k'.repeat(256) });
      expect(res.status).to.equal(400);
      expect(res.body.error).to.equal('validation_error');
    });
  });

  describe('durability without Redis', () => {
    it('still answers 201 and keeps the pending delivery in PostgreSQL when Redis is unreachable', async () => {
      const offline = await startTestApp({ REDIS_URL: 'redis://127.0.0.1:6391' });
      try {
        const hooked = await createPublishedForm(t.url, tenant.key, [field('fld_a', 'text', 'A')]);
        const hook = await call(t.url, 'POST', '/v1/webhooks', {
          key: tenant.key, body: { name: 'offline', url: 'http://127.0.0.1:9/hook', events: ['submission.created'], formId: hooked.id },
        });
        expect(hook.status).to.equal(201);
        const started = Date.now();
        const res = await call(offline.url, 'POST', `/v1/forms/${hooked.id}/submissions`, { key: tenant.key, body: { data: { fld_a: 'Offline' } } });
        expect(res.status).to.equal(201);
        expect(Date.now() - started).to.be.lessThan(5000);
        expect(res.headers.get('x-ratelimit-limit')).to.equal('2000');
        // The owed-work sweep queues it once Redis is back (workers-faults.test.ts follows one through).
        const [row] = await t.app.orm.em.getConnection().execute(
          `select status, webhook_id from webhook_deliveries where event_id = ?`, [eventIdForSubmission(res.body.submission.id)]);
        expect(row).to.deep.equal({ status: 'pending', webhook_id: hook.body.webhook.id });
        const readiness = await call(offline.url, 'GET', '/readyz');
        expect(readiness.status).to.equal(503);
      } finally {
        await offline.close();
      }
    });
  });
});
