import { expect } from 'chai';
import { fanOutSubmission } from '../../src/domain/submissions/fanout';
import { eventIdForSubmission } from '../../src/domain/webhooks/events';
import { verifySignature } from '../../src/domain/webhooks/signing';
import { runMaintenance } from '../../src/domain/maintenance/maintenance';
import { startReceiver, type Delivery, type Receiver, type ReceiverReply } from '../support/fakes/receiver';
import { call, createPublishedForm, createTenant, type TestTenant } from '../support/harness';
import { deliveryJob, startStack, waitUntil, type Stack } from '../support/worker-stack';

const FIELDS = [
  { id: 'fld_email', type: 'email', label: 'Email', required: true, config: {}, validationRules: {}, order: 0 },
  { id: 'fld_name', type: 'name', label: 'Full name', required: false, config: { sensitive: true }, validationRules: {}, order: 1 },
  { id: 'fld_topic', type: 'text', label: 'Topic', required: false, config: {}, validationRules: {}, order: 2 },
];

interface Setup {
  tenant: TestTenant;
  formId: string;
  webhook: { id: string; secret: string };
  receiver: Receiver;
}

async function setup(stack: Stack, respond: (attempt: number, req: Delivery) => ReceiverReply = () => ({ status: 200 })): Promise<Setup> {
  const url = stack.api.url;
  const tenant = await createTenant(stack.api.app);
  const form = await createPublishedForm(url, tenant.key, FIELDS);
  const receiver = await startReceiver({ respond });
  const res = await call(url, 'POST', '/v1/webhooks', { key: tenant.key, body: { name: 'hook', url: receiver.url, events: ['submission.created'] } });
  expect(res.status).to.equal(201);
  return { tenant, formId: form.id, webhook: res.body.webhook, receiver };
}

async function submit(stack: Stack, s: Setup, data: Record<string, unknown> = { fld_email: 'ada@example.com', fld_topic: 'returns' }) {
  const res = await call(stack.api.url, 'POST', `/v1/forms/${s.formId}/submissions`, { key: s.tenant.key, body: { data, submitterName: 'Ada' } });
  expect(res.status).to.equal(201);
  return res.body.submission as { id: string; createdAt: string };
}

async function deliveries(stack: Stack, s: Setup) {
  const res = await call(stack.api.url, 'GET', `/v1/webhooks/${s.webhook.id}/deliveries`, { key: s.tenant.key });
  return res.body.deliveries as any[];
}

async function settled(stack: Stack, s: Setup, status: string) {
  return waitUntil(`a ${status} delivery`, async () => (await deliveries(stack, s)).find((d) => d.status === status));
}

async function attemptsOf(stack: Stack, deliveryId: string) {
  return stack.api.app.orm.em.fork().execute(
    'select attempt_no, status_code, error, duration_ms, response_excerpt from delivery_attempts where delivery_id = ? order by attempt_no', [deliveryId],
  );
}

/** Raw queries return timestamps as PostgreSQL text. */
const isTimestamp = (value: unknown) => value !== null && !Number.isNaN(new Date(value as string).getTime());

const quietly = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('webhook deliveries (workers in process)', () => {
  let stack: Stack;
  const receivers: Receiver[] = [];
  before(async () => { stack = await startStack(['submissions', 'webhooks']); });
  after(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await stack.close();
  });
  const track = (s: Setup) => { receivers.push(s.receiver); return s; };

  it('delivers the README "Webhooks" payload, signed so the receiver can verify it', async () => {
    const s = track(await setup(stack));
    const submission = await submit(stack, s, { fld_email: 'ada@example.com', fld_name: { format: 'full', fullName: 'Ada L' }, fld_topic: 'returns' });
    await s.receiver.waitFor(1);
    const got = s.receiver.deliveries[0];
    expect(verifySignature({
      secret: s.webhook.secret, signature: got.headers['x-service-signature'], timestamp: got.headers['x-service-timestamp'], rawBody: got.rawBody,
    })).to.equal(true);
    expect(got.headers['x-service-signature']).to.match(/^v1=[0-9a-f]{64}$/);
    expect(got.headers).to.include({
      'content-type': 'application/json', 'user-agent': 'FormService-Webhooks/1', 'x-service-event': 'form.submission.created',
    });
    expect(Math.abs(Number(got.headers['x-service-timestamp']) - Date.now() / 1000)).to.be.below(10);
    expect(JSON.parse(got.rawBody)).to.deep.equal({
      id: `evt_${submission.id.slice(4)}`,
      type: 'form.submission.created',
      createdAt: submission.createdAt,
      data: {
        form: { id: s.formId, title: 'Test form' },
        submission: {
          id: submission.id, formId: s.formId, createdAt: submission.createdAt, formVersion: 1, submitterEmail: null, submitterName: 'Ada',
          data: { Email: 'ada@example.com', 'Full name': 'Redacted', Topic: 'returns' },
          rawData: { fld_email: 'ada@example.com', fld_name: 'Redacted', fld_topic: 'returns' },
        },
      },
    });
    const delivery = await settled(stack, s, 'succeeded');
    expect(delivery).to.include({ id: got.headers['x-service-delivery'], eventType: 'form.submission.created', attempts: 1, lastStatusCode: 200, lastError: null, nextAttemptAt: null });
    expect(delivery.eventId).to.equal(`evt_${submission.id.slice(4)}`);
  });

  it('sends only to enabled webhooks of the organization for that form or for all forms', async () => {
    const s = track(await setup(stack));
    const url = stack.api.url;
    const otherForm = await createPublishedForm(url, s.tenant.key, FIELDS);
    const hooks = { sameForm: await startReceiver(), otherForm: await startReceiver(), disabled: await startReceiver() };
    receivers.push(...Object.values(hooks));
    const add = (body: object) => call(url, 'POST', '/v1/webhooks', { key: s.tenant.key, body: { name: 'x', events: ['submission.created'], ...body } });
    await add({ url: hooks.sameForm.url, formId: s.formId });
    await add({ url: hooks.otherForm.url, formId: otherForm.id });
    await add({ url: hooks.disabled.url, enabled: false });
    const foreign = await createTenant(stack.api.app);
    const foreignHook = await startReceiver();
    receivers.push(foreignHook);
    await call(url, 'POST', '/v1/webhooks', { key: foreign.key, body: { name: 'x', url: foreignHook.url, events: ['submission.created'] } });

    await submit(stack, s);
    await Promise.all([s.receiver.waitFor(1), hooks.sameForm.waitFor(1)]);
    await quietly(300);
    expect([s.receiver, hooks.sameForm, hooks.otherForm, hooks.disabled, foreignHook].map((r) => r.deliveries.length)).to.deep.equal([1, 1, 0, 0, 0]);
  });

  it('retries a receiver that fails twice: three attempts, one success, one delivery id', async () => {
    const s = track(await setup(stack, (attempt) => ({ status: attempt <= 2 ? 500 : 200 })));
    await submit(stack, s);
    await s.receiver.waitFor(3);
    const delivery = await settled(stack, s, 'succeeded');
    await quietly(400);
    expect(s.receiver.deliveries).to.have.length(3);
    expect(new Set(s.receiver.deliveries.map((d) => d.headers['x-service-delivery']))).to.deep.equal(new Set([delivery.id]));
    for (const d of s.receiver.deliveries) {
      expect(verifySignature({ secret: s.webhook.secret, signature: d.headers['x-service-signature'], timestamp: d.headers['x-service-timestamp'], rawBody: d.rawBody })).to.equal(true);
    }
    expect(delivery).to.include({ attempts: 3, lastStatusCode: 200, lastError: null });
    const attempts = await attemptsOf(stack, delivery.id);
    expect(attempts.map((a: any) => [a.attempt_no, a.status_code, a.error])).to.deep.equal([
      [1, 500, 'Unexpected status 500'], [2, 500, 'Unexpected status 500'], [3, 200, null],
    ]);
    const [{ failing_since }] = await stack.api.app.orm.em.fork().execute('select failing_since from webhooks where id = ?', [s.webhook.id]);
    expect(failing_since).to.equal(null);
  });

  it('gives up after the last scheduled attempt and records the failure streak', async () => {
    const s = track(await setup(stack, () => ({ status: 502 })));
    await submit(stack, s);
    const delivery = await settled(stack, s, 'failed');
    expect(delivery).to.include({ attempts: 4, lastStatusCode: 502, lastError: 'Unexpected status 502', nextAttemptAt: null });
    expect(s.receiver.deliveries).to.have.length(4);
    const [{ failing_since }] = await stack.api.app.orm.em.fork().execute('select failing_since from webhooks where id = ?', [s.webhook.id]);
    expect(isTimestamp(failing_since)).to.equal(true);
  });

  it('disables the webhook at once on 410; re-enabled, a manual retry delivers with the same id', async () => {
    const s = track(await setup(stack, (attempt) => ({ status: attempt === 1 ? 410 : 200 })));
    await submit(stack, s);
    const failed = await settled(stack, s, 'failed');
    expect(failed).to.include({ attempts: 1, lastStatusCode: 410 });
    const path = `/v1/webhooks/${s.webhook.id}`;
    expect((await call(stack.api.url, 'GET', path, { key: s.tenant.key })).body.webhook.enabled).to.equal(false);
    await quietly(400);
    expect(s.receiver.deliveries).to.have.length(1);

    expect((await call(stack.api.url, 'PUT', path, { key: s.tenant.key, body: { enabled: true } })).status).to.equal(200);
    const retry = await call(stack.api.url, 'POST', `${path}/deliveries/${failed.id}/retry`, { key: s.tenant.key });
    expect(retry.status).to.equal(202);
    expect(retry.body.delivery).to.include({ id: failed.id, status: 'pending' });
    await s.receiver.waitFor(2);
    expect(s.receiver.deliveries[1].headers['x-service-delivery']).to.equal(failed.id);
    expect(await settled(stack, s, 'succeeded')).to.include({ id: failed.id, attempts: 2 });
  });

  it('stops at a disabled webhook without sending', async () => {
    const s = track(await setup(stack, () => ({ status: 500 })));
    await submit(stack, s);
    await s.receiver.waitFor(1);
    await call(stack.api.url, 'PUT', `/v1/webhooks/${s.webhook.id}`, { key: s.tenant.key, body: { enabled: false } });
    const failed = await settled(stack, s, 'failed');
    expect(failed.lastError).to.equal('Webhook is disabled');
    await quietly(700);
    expect(s.receiver.deliveries).to.have.length(1);
  });

  it('disables a webhook that has been failing for more than 5 days', async () => {
    const s = track(await setup(stack, () => ({ status: 500 })));
    const em = stack.api.app.orm.em.fork();
    await em.execute(`update webhooks set failing_since = now() - interval '6 days' where id = ?`, [s.webhook.id]);
    await submit(stack, s);
    const failed = await settled(stack, s, 'failed');
    expect(failed.attempts).to.equal(1);
    expect((await call(stack.api.url, 'GET', `/v1/webhooks/${s.webhook.id}`, { key: s.tenant.key })).body.webhook.enabled).to.equal(false);
  });

  it('maintenance disables webhooks failing for more than 5 days and keeps the others', async () => {
    const a = track(await setup(stack));
    const b = track(await setup(stack));
    const em = stack.api.app.orm.em.fork();
    await em.execute(`update webhooks set failing_since = now() - interval '5 days 1 minute' where id = ?`, [a.webhook.id]);
    await em.execute(`update webhooks set failing_since = now() - interval '4 days' where id = ?`, [b.webhook.id]);
    await runMaintenance(em);
    const rows = await em.execute('select id, enabled from webhooks where id in (?, ?) order by id', [a.webhook.id, b.webhook.id]);
    expect(Object.fromEntries(rows.map((r: any) => [r.id, r.enabled]))).to.deep.equal({ [a.webhook.id]: false, [b.webhook.id]: true });
  });

  it('writes the delivery in the storing statement, and no outbox row; an old outbox row of it fans out to nothing new', async () => {
    const s = track(await setup(stack));
    const submission = await submit(stack, s);
    await s.receiver.waitFor(1);
    // The worker records the success after the receiver answered: until then the delivery is pending.
    await settled(stack, s, 'succeeded');
    const em = stack.api.app.orm.em.fork();
    expect(await em.execute(`select id from outbox where payload->>'submissionId' = ?`, [submission.id])).to.deep.equal([]);
    // A row the relay still holds from before the upgrade: its fan-out finds the delivery there already.
    const [outbox] = await em.execute(
      `insert into outbox (topic, payload) values ('submission.created', jsonb_build_object('submissionId', ?::text)) returning id::text as id`,
      [submission.id],
    );
    const again = await fanOutSubmission(em, { submissionId: submission.id, outboxId: outbox.id });
    expect(again).to.deep.equal({ submissionFound: true, deliveryIds: [], syncIds: [] });
    const [{ n }] = await em.execute(`select count(*)::int as n from webhook_deliveries where webhook_id = ?`, [s.webhook.id]);
    expect(n).to.equal(1);
    const [row] = await em.execute('select processed_at from outbox where id = ?', [outbox.id]);
    expect(isTimestamp(row.processed_at)).to.equal(true);
  });

  it('skips a submission deleted before fan-out and marks its outbox row processed', async () => {
    const em = stack.api.app.orm.em.fork();
    const [row] = await em.execute(`insert into outbox (topic, payload) values ('submission.created', '{"submissionId":"sub_gone"}') returning id::text as id`);
    expect(await fanOutSubmission(em, { submissionId: 'sub_gone', outboxId: row.id })).to.deep.equal({ submissionFound: false, deliveryIds: [], syncIds: [] });
    const [after] = await em.execute('select processed_at from outbox where id = ?', [row.id]);
    expect(isTimestamp(after.processed_at)).to.equal(true);
  });
});

describe('webhook Retry-After', () => {
  let stack: Stack;
  let s: Setup;
  // 600 ms scheduled: without honouring Retry-After the retry comes within 720 ms; honoured, after 1 s.
  before(async () => { stack = await startStack(['submissions', 'webhooks'], { WEBHOOK_RETRY_DELAYS_MS: '600,600' }); });
  after(async () => {
    await s?.receiver.close();
    await stack.close();
  });

  it('waits at least the Retry-After of a 429 before the next attempt', async () => {
    s = await setup(stack, (attempt) => (attempt === 1 ? { status: 429, headers: { 'Retry-After': '1' } } : { status: 200 }));
    await submit(stack, s);
    await s.receiver.waitFor(2, 5_000);
    const gap = s.receiver.deliveries[1].receivedAt - s.receiver.deliveries[0].receivedAt;
    expect(gap).to.be.at.least(950).and.below(2_000);
    const delivery = await settled(stack, s, 'succeeded');
    expect(delivery.attempts).to.equal(2);
  });
});

describe('fan-out decided by the storing statement (no workers running)', () => {
  // No workers: the jobs the API queues stay in their queues, where the test reads them.
  let quiet: Stack;
  before(async () => { quiet = await startStack([]); });
  after(async () => quiet.close());

  async function deliveriesOf(submissionId: string) {
    return quiet.api.app.orm.em.fork().execute(
      `select d.id, d.webhook_id, d.status, d.payload from webhook_deliveries d where d.event_id = ? order by d.webhook_id`,
      [eventIdForSubmission(submissionId)],
    );
  }

  it('queues nothing when nothing listens, and a delivery per webhook created after the form\'s listener hint was cached', async () => {
    const tenant = await createTenant(quiet.api.app);
    const quietForm = await createPublishedForm(quiet.api.url, tenant.key, FIELDS);
    const other = await createPublishedForm(quiet.api.url, tenant.key, FIELDS);
    const receiver = await startReceiver();
    const createWebhook = async (body: Record<string, unknown>) => {
      const res = await call(quiet.api.url, 'POST', '/v1/webhooks', { key: tenant.key, body: { url: receiver.url, events: ['submission.created'], ...body } });
      expect(res.status).to.equal(201);
      return res.body.webhook.id as string;
    };
    const submitted = async () => {
      const res = await call(quiet.api.url, 'POST', `/v1/forms/${quietForm.id}/submissions`, { key: tenant.key, body: { data: { fld_email: 'q@example.com', fld_topic: 'hints' } } });
      expect(res.status).to.equal(201);
      return res.body.submission as { id: string; createdAt: string };
    };
    try {
      // A webhook of another form and a disabled one do not listen to `quietForm`.
      await createWebhook({ name: 'other form', formId: other.id });
      await createWebhook({ name: 'disabled', enabled: false });
      const first = await submitted();
      expect(await deliveriesOf(first.id)).to.deep.equal([]);
      expect(quiet.api.app.formCache.webhookHint(quietForm.id)).to.equal(0);
      const em = quiet.api.app.orm.em.fork();
      expect(await em.execute(`select id from outbox where payload->>'submissionId' = ?`, [first.id])).to.deep.equal([]);

      // The hint says nobody listens: the statement refuses, and the retry brings the delivery.
      const orgWide = await createWebhook({ name: 'org-wide' });
      const second = await submitted();
      const [delivery] = await deliveriesOf(second.id);
      expect(delivery).to.include({ webhook_id: orgWide, status: 'pending' });
      expect(delivery.id).to.match(/^dlv_[0-9A-Za-z]{20}$/);
      expect(JSON.parse(delivery.payload)).to.deep.equal({
        id: eventIdForSubmission(second.id), type: 'form.submission.created', createdAt: second.createdAt,
        data: {
          form: { id: quietForm.id, title: quietForm.title },
          submission: {
            id: second.id, formId: quietForm.id, createdAt: second.createdAt, formVersion: 1, submitterEmail: null, submitterName: null,
            data: { Email: 'q@example.com', Topic: 'hints' }, rawData: { fld_email: 'q@example.com', fld_topic: 'hints' },
          },
        },
      });
      await waitUntil('its job', async () => deliveryJob(quiet.api.app, delivery.id));
      expect(quiet.api.app.formCache.webhookHint(quietForm.id)).to.equal(1);

      // The hint says one: a second webhook since then still gets its own delivery.
      const formHook = await createWebhook({ name: 'this form', formId: quietForm.id });
      const third = await submitted();
      const rows = await deliveriesOf(third.id);
      expect(rows.map((r: any) => r.webhook_id).sort()).to.deep.equal([orgWide, formHook].sort());
      for (const row of rows) await waitUntil('its job', async () => deliveryJob(quiet.api.app, row.id));

      // Stale the other way (webhooks gone): the payload was built for nothing, and nothing is stored.
      await em.execute('update webhooks set enabled = false where id in (?, ?)', [orgWide, formHook]);
      const fourth = await submitted();
      expect(await deliveriesOf(fourth.id)).to.deep.equal([]);
      expect(quiet.api.app.formCache.webhookHint(quietForm.id)).to.equal(0);
    } finally {
      await receiver.close();
    }
  });

  it('fans out an outbox row written before the upgrade, once, like before', async () => {
    const tenant = await createTenant(quiet.api.app);
    const form = await createPublishedForm(quiet.api.url, tenant.key, FIELDS);
    const res = await call(quiet.api.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data: { fld_email: 'q@example.com' } } });
    expect(res.status).to.equal(201);
    const submissionId = res.body.submission.id as string;
    const em = quiet.api.app.orm.em.fork();
    const [outbox] = await em.execute(
      `insert into outbox (topic, payload) values ('submission.created', jsonb_build_object('submissionId', ?::text)) returning id::text as id`,
      [submissionId],
    );
    const job = { submissionId, outboxId: outbox.id as string };
    // Nothing listens: one statement marks the row processed.
    expect(await fanOutSubmission(em, job)).to.deep.equal({ submissionFound: true, deliveryIds: [], syncIds: [] });
    const [row] = await em.execute('select processed_at from outbox where id = ?', [outbox.id]);
    expect(isTimestamp(row.processed_at)).to.equal(true);

    const receiver = await startReceiver();
    try {
      const hook = await call(quiet.api.url, 'POST', '/v1/webhooks', { key: tenant.key, body: { name: 'org-wide', url: receiver.url, events: ['submission.created'] } });
      expect(hook.status).to.equal(201);
      await em.execute('update outbox set processed_at = null where id = ?', [outbox.id]);
      const result = await fanOutSubmission(em, job);
      expect(result.deliveryIds).to.have.length(1);
      expect(await fanOutSubmission(em, job)).to.deep.equal(result);
    } finally {
      await receiver.close();
    }
  });
});
