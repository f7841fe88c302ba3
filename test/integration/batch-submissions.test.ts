import { expect } from 'chai';
import { startReceiver, type Receiver } from '../support/fakes/receiver';
import { startFakeStripe, type FakeStripe } from '../support/fakes/stripe';
import { eventIdForSubmission } from '../../src/domain/webhooks/events';
import { jobIds } from '../../src/queues/catalogue';
import { deliveryJob, startStack, waitUntil, type Stack } from '../support/worker-stack';
import {
  call, createKey, createPublishedForm, createTenant, fieldInput as field, startTestApp, type TestApp, type TestTenant,
} from '../support/harness';

describe('batch submissions (POST /v1/forms/{formId}/submissions/batch)', () => {
  let t: TestApp;
  let stripe: FakeStripe;
  let tenant: TestTenant;
  let form: any;

  const fields = [
    field('fld_name', 'text', 'Name', { required: true, order: 0 }),
    field('fld_email', 'email', 'Email', { order: 1 }),
  ];

  before(async () => {
    stripe = await startFakeStripe();
    t = await startTestApp({ STRIPE_API_BASE: stripe.url, STRIPE_SECRET_KEY: stripe.secretKey });
    tenant = await createTenant(t.app);
    form = await createPublishedForm(t.url, tenant.key, fields);
  });
  after(async () => {
    await t.close();
    await stripe.close();
  });

  const batch = (formId: string, body: unknown, key = tenant.key, headers: Record<string, string> = {}) =>
    call(t.url, 'POST', `/v1/forms/${formId}/submissions/batch`, { key, body, headers });
  const single = (formId: string, body: unknown, key = tenant.key) =>
    call(t.url, 'POST', `/v1/forms/${formId}/submissions`, { key, body });
  const query = (sql: string, params: unknown[] = []) => t.query(sql, params);
  const count = async (formId: string) => (await query('select count(*)::int as n from submissions where form_id = ?', [formId]))[0].n;
  const item = (name: string) => ({ data: { fld_name: name } });

  it('checks each item as if posted alone and answers one result per item, in order, with that status', async () => {
    const items: any[] = [
      { data: { fld_name: 'Ada', fld_email: 'ada@example.com' }, submitterEmail: 'ada@example.com', submitterName: 'Ada' },
      { data: { fld_email: 'no-name@example.com' } },
      'not an object',
      { data: { fld_name: 'Bob', fld_email: 'not-an-email' } },
      { data: { fld_name: 'Cy' }, extra: true },
      item('Dee'),
    ];
    const res = await batch(form.id, { submissions: items });
    expect(res.status, res.text).to.equal(200);
    const { results } = res.body;
    expect(results.map((r: any) => [r.index, r.status])).to.deep.equal([[0, 201], [1, 400], [2, 400], [3, 400], [4, 400], [5, 201]]);
    // Each refused item carries exactly what a single post of it gets.
    for (const index of [1, 2, 3, 4]) {
      const alone = await single(form.id, JSON.stringify(items[index]));
      expect(results[index].error, `item ${index}`).to.deep.equal(alone.body);
      expect(results[index].status).to.equal(alone.status);
    }
    expect(results[0].submission).to.have.keys('id', 'formId', 'formVersion', 'createdAt');
    const read = await call(t.url, 'GET', `/v1/submissions/${results[0].submission.id}`, { key: tenant.key });
    expect(read.body.submission).to.deep.include({ submitterEmail: 'ada@example.com', submitterName: 'Ada', rawData: items[0].data });
    // Stored like single posts: no outbox row (their fan-out is decided in the statement) and a change each, in item order.
    const ids = [results[0].submission.id, results[5].submission.id];
    expect(await query(`select payload->>'submissionId' as id from outbox where payload->>'submissionId' in (?, ?)`, ids)).to.deep.equal([]);
    const changes = await query(`select submission_id from submission_changes where submission_id in (?, ?) order by position`, ids);
    expect(changes.map((r: any) => r.submission_id)).to.deep.equal(ids);
  });

  it('writes, in its one statement, a delivery per webhook and a sync per CRM integration for every item, and queues them', async () => {
    const hooked = await createPublishedForm(t.url, tenant.key, fields, {
      settings: { integrations: [{ type: 'hubspot', accessToken: 'pat-batch', fieldMap: { fld_email: 'email' } }] },
    });
    const stored = async (names: string[]) => {
      const res = await batch(hooked.id, { submissions: names.map(item) });
      expect(res.status).to.equal(200);
      expect(res.body.results.map((r: any) => r.status)).to.deep.equal(names.map(() => 201));
      return res.body.results.map((r: any) => r.submission.id as string);
    };
    const before = await stored(['A', 'B']);
    // Created after the form's listener hint said nobody listens.
    const hook = await call(t.url, 'POST', '/v1/webhooks', {
      key: tenant.key, body: { name: 'batch', url: 'http://127.0.0.1:9/batch', events: ['submission.created'], formId: hooked.id },
    });
    expect(hook.status).to.equal(201);
    const after = await stored(['C', 'D', 'E']);
    const deliveries = await query(
      `select id, event_id, webhook_id from webhook_deliveries where event_id = any(string_to_array(?, ','))`,
      [[...before, ...after].map(eventIdForSubmission).join(',')],
    );
    expect(deliveries.map((d: any) => d.event_id).sort()).to.deep.equal(after.map(eventIdForSubmission).sort());
    expect(new Set(deliveries.map((d: any) => d.webhook_id))).to.deep.equal(new Set([hook.body.webhook.id]));
    const syncs = await query(`select id, submission_id from crm_syncs where submission_id = any(string_to_array(?, ','))`, [[...before, ...after].join(',')]);
    expect(syncs.map((s: any) => s.submission_id).sort()).to.deep.equal([...before, ...after].sort());
    for (const d of deliveries) await waitUntil('its job', async () => deliveryJob(t.app, d.id));
    for (const s of syncs) await waitUntil('its job', async () => t.app.producer.queue('crm').getJob(jobIds.crmSync(s.id)));
  });

  it('answers envelope problems as a whole, in the usual order of checks', async () => {
    const draft = (await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body: { title: 'Draft', fields } })).body.form;
    const other = await createTenant(t.app);
    const cases: Array<[string, unknown, number, string, string?]> = [
      [form.id, '{"submissions": [', 400, 'invalid_json'],
      ['form_doesNotExist', { submissions: 'x' }, 404, 'not_found'],
      [form.id, { submissions: [item('x')] }, 404, 'not_found', other.key],
      [draft.id, { submissions: [] }, 400, 'form_not_published'],
      [form.id, { submissions: 'x' }, 400, 'validation_error'],
      [form.id, {}, 400, 'validation_error'],
      [form.id, [item('x')], 400, 'validation_error'],
      [form.id, { submissions: [] }, 400, 'validation_error'],
      [form.id, { submissions: Array.from({ length: 101 }, (_, i) => item(`n${i}`)) }, 400, 'validation_error'],
      [form.id, { submissions: [item('x')], extra: 1 }, 400, 'validation_error'],
    ];
    const before = await count(form.id);
    for (const [formId, body, status, code, key] of cases) {
      const res = await batch(formId, body, key);
      expect(res.status, `${code} ${JSON.stringify(body).slice(0, 60)}`).to.equal(status);
      expect(res.body.error).to.equal(code);
      expect(res.headers.get('x-ratelimit-remaining')).to.be.a('string');
    }
    expect(await count(form.id), 'nothing stored').to.equal(before);
    const readOnly = await createKey(t.app, tenant.organizationId, ['submissions:read']);
    expect((await batch(form.id, { submissions: [item('x')] }, readOnly)).status).to.equal(403);
    const full = await batch(form.id, { submissions: Array.from({ length: 100 }, (_, i) => item(`n${i}`)) });
    expect(full.body.results.filter((r: any) => r.status === 201)).to.have.length(100);
  });

  it('counts as one request against the rate limit', async () => {
    const own = await createTenant(t.app, { plan: 'free' });
    const ownForm = await createPublishedForm(t.url, own.key, fields);
    const res = await batch(ownForm.id, { submissions: Array.from({ length: 20 }, (_, i) => item(`n${i}`)) }, own.key);
    expect(res.status).to.equal(200);
    expect(res.headers.get('x-ratelimit-limit')).to.equal('10');
    expect(res.headers.get('x-ratelimit-remaining')).to.equal('8'); // the form create and this batch
  });

  it('counts each stored item against the monthly quota; once it is reached the remaining items get 402', async () => {
    const own = await createTenant(t.app, { monthlyQuota: 5 });
    const ownForm = await createPublishedForm(t.url, own.key, fields);
    expect((await single(ownForm.id, item('first'), own.key)).status).to.equal(201);
    const res = await batch(ownForm.id, { submissions: [item('a'), { data: {} }, item('b'), item('c'), item('d'), item('e'), item('f')] }, own.key);
    expect(res.body.results.map((r: any) => r.status)).to.deep.equal([201, 400, 201, 201, 201, 402, 402]);
    expect(res.body.results[5].error.error).to.equal('limit_exceeded');
    const [usage] = await query('select used from usage_counters where organization_id = ?', [own.organizationId]);
    expect(usage.used).to.equal(5);
    expect(await count(ownForm.id)).to.equal(5);
  });

  it('claims each payment intent once: a repeated or already used intent gets 409 for that item only', async () => {
    const payForm = await createPublishedForm(t.url, tenant.key, [
      field('fld_pay', 'payment', 'Payment', { required: true, config: { amount: 1500, currency: 'eur' } }),
    ]);
    const [used, fresh, other, unpaid] = [
      stripe.addIntent({ amount: 1500, currency: 'eur' }), stripe.addIntent({ amount: 1500, currency: 'eur' }),
      stripe.addIntent({ amount: 1500, currency: 'eur' }), stripe.addIntent({ amount: 1500, currency: 'eur', status: 'requires_payment_method' }),
    ];
    expect((await single(payForm.id, { data: { fld_pay: used } })).status).to.equal(201);
    const res = await batch(payForm.id, { submissions: [fresh, used, fresh, unpaid, other].map((id) => ({ data: { fld_pay: id } })) });
    expect(res.body.results.map((r: any) => r.status)).to.deep.equal([201, 409, 409, 400, 201]);
    expect(res.body.results[1].error.error).to.equal('payment_already_used');
    const claims = await query(`select count(*)::int as n from payment_claims where payment_intent_id in (?, ?, ?)`, [used, fresh, other]);
    expect(claims[0].n).to.equal(3);
  });

  it('replays the whole answer for the same Idempotency-Key and body, and refuses another body with 422', async () => {
    const body = { submissions: [item('a'), { data: {} }, item('b')] };
    const headers = { 'Idempotency-Key': 'batch-replay-1' };
    const first = await batch(form.id, body, tenant.key, headers);
    expect(first.headers.get('idempotent-replayed')).to.equal(null);
    const stored = await count(form.id);
    const again = await batch(form.id, body, tenant.key, headers);
    expect(again.status).to.equal(200);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    expect(again.body).to.deep.equal(first.body);
    expect(await count(form.id)).to.equal(stored);
    const other = await batch(form.id, { submissions: [item('z')] }, tenant.key, headers);
    expect(other.status).to.equal(422);
    expect(other.body.error).to.equal('idempotency_key_reused');
    // A single post under the batch's key is another request too.
    const alone = await call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: item('a'), headers });
    expect(alone.status).to.equal(422);
  });

  it('is safe to retry after a crash midway: stored items replay with their ids, only the rest is stored', async () => {
    const own = await createTenant(t.app, { monthlyQuota: 100 });
    const ownForm = await createPublishedForm(t.url, own.key, fields);
    const headers = { 'Idempotency-Key': 'crashy' };
    const items = [item('a'), item('b'), item('c'), item('d')];
    const partial = await batch(ownForm.id, { submissions: items.slice(0, 2) }, own.key, headers);
    // As if the process died after storing items 0 and 1 but before keeping the batch's answer.
    await query('delete from idempotency_keys where organization_id = ? and key = ?', [own.organizationId, 'crashy']);
    const retry = await batch(ownForm.id, { submissions: items }, own.key, headers);
    expect(retry.body.results.map((r: any) => r.status)).to.deep.equal([201, 201, 201, 201]);
    expect(retry.body.results.slice(0, 2).map((r: any) => r.submission)).to.deep.equal(partial.body.results.map((r: any) => r.submission));
    expect(await count(ownForm.id)).to.equal(4);
    const [usage] = await query('select used from usage_counters where organization_id = ?', [own.organizationId]);
    expect(usage.used).to.equal(4);
  });

  it('stores each item once when the same batch is sent twice at the same time', async () => {
    const own = await createTenant(t.app);
    const ownForm = await createPublishedForm(t.url, own.key, fields);
    const body = { submissions: Array.from({ length: 30 }, (_, i) => item(`n${i}`)) };
    const headers = { 'Idempotency-Key': 'twins' };
    const twins = await Promise.all([batch(ownForm.id, body, own.key, headers), batch(ownForm.id, body, own.key, headers)]);
    // The twin that comes while the first runs is told to wait (409 idempotency_key_in_use, Retry-After 1).
    for (const res of twins) {
      expect(res.status === 200 || (res.status === 409 && res.body.error === 'idempotency_key_in_use' && res.headers.get('retry-after') === '1'),
        `${res.status} ${res.text}`).to.equal(true);
    }
    const answered = twins.find((res) => res.status === 200)!;
    expect(answered).to.not.equal(undefined);
    const retry = await batch(ownForm.id, body, own.key, headers);
    expect(retry.status).to.equal(200);
    expect(retry.body.results.map((r: any) => r.submission.id)).to.deep.equal(answered.body.results.map((r: any) => r.submission.id));
    expect(await count(ownForm.id)).to.equal(30);
  });

  it('answers 409 idempotency_key_in_use while the first batch with the key runs, and frees a key whose batch died', async () => {
    const own = await createTenant(t.app);
    const ownForm = await createPublishedForm(t.url, own.key, fields);
    const body = { submissions: [item('held')] };
    await t.app.orm.em.fork().execute(
      `insert into idempotency_keys (organization_id, key, request_hash, claim_token, lease_expires_at)
       values (?, 'held-batch', 'first', 'token-of-the-first', now() + interval '30 seconds')`, [own.organizationId],
    );
    const waiting = await batch(ownForm.id, body, own.key, { 'Idempotency-Key': 'held-batch' });
    expect(waiting.status).to.equal(409);
    expect(waiting.body.error).to.equal('idempotency_key_in_use');
    expect(waiting.headers.get('retry-after')).to.equal('1');
    await t.app.orm.em.fork().execute(
      `update idempotency_keys set lease_expires_at = now() - interval '1 second' where organization_id = ? and key = 'held-batch'`,
      [own.organizationId],
    );
    expect((await batch(ownForm.id, body, own.key, { 'Idempotency-Key': 'held-batch' })).status).to.equal(200);
    expect(await count(ownForm.id)).to.equal(1);
  });
});

describe('batch submissions with workers running', () => {
  let stack: Stack;
  let receiver: Receiver;
  before(async () => {
    stack = await startStack(['submissions', 'webhooks']);
    receiver = await startReceiver({ respond: () => ({ status: 200 }) });
  });
  after(async () => {
    await stack.close();
    await receiver.close();
  });

  it('fires the webhook once for each stored item, as single posts do, and never for a refused one', async () => {
    const url = stack.api.url;
    const tenant = await createTenant(stack.api.app);
    const form = await createPublishedForm(url, tenant.key, [field('fld_name', 'text', 'Name', { required: true })]);
    const hook = await call(url, 'POST', '/v1/webhooks', { key: tenant.key, body: { name: 'hook', url: receiver.url, events: ['submission.created'] } });
    expect(hook.status).to.equal(201);
    const res = await call(url, 'POST', `/v1/forms/${form.id}/submissions/batch`, {
      key: tenant.key, body: { submissions: [{ data: { fld_name: 'a' } }, { data: {} }, { data: { fld_name: 'b' } }, { data: { fld_name: 'c' } }] },
    });
    const stored = res.body.results.filter((r: any) => r.status === 201).map((r: any) => r.submission.id);
    expect(stored).to.have.length(3);
    await receiver.waitFor(3);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const delivered = receiver.deliveries.map((d) => JSON.parse(d.rawBody).data.submission.id);
    expect(delivered.sort()).to.deep.equal([...stored].sort());
  });
});
