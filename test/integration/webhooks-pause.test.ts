import { expect } from 'chai';
import { sweepOwed } from '../../src/domain/outbox/sweep-owed';
import { holdDelivery } from '../../src/domain/webhooks/store';
import { RELEASE_BATCH } from '../../src/domain/webhooks/webhook-service';
import { jobIds } from '../../src/queues/catalogue';
import { call, createTenant, type TestTenant } from '../support/harness';
import { keepSideRows } from '../support/deliveries';
import { startStack, type Stack } from '../support/worker-stack';

/**
 * A receiver's 429 pause shows on the webhook's read (`pausedUntil`), and a new URL, `enabled: true`,
 * a manual retry and `recover` end it, in the database and in Redis: the deliveries it held are due
 * now and their jobs wait no more. A throttleRate change releases held deliveries too (to take slots
 * at the new rate). No workers run: the jobs stay in the queue to be looked at.
 */
describe('webhook pauses: shown, and lifted by a new URL, enabling, a retry, a recovery', function () {
  this.timeout(60_000);
  let stack: Stack;
  let tenant: TestTenant;
  let webhookId: string;
  before(async () => {
    stack = await startStack([]);
    tenant = await createTenant(stack.api.app);
    const res = await call(stack.api.url, 'POST', '/v1/webhooks', {
      key: tenant.key, body: { name: 'hook', url: 'http://127.0.0.1:9/a', events: ['submission.created'] },
    });
    expect(res.status, res.text).to.equal(201);
    expect(res.body.webhook.pausedUntil).to.equal(null);
    webhookId = res.body.webhook.id;
  });
  after(async () => stack.close());

  const read = async () => (await call(stack.api.url, 'GET', `/v1/webhooks/${webhookId}`, { key: tenant.key })).body.webhook;
  let n = 0;

  /** Paused for an hour, with one delivery held until then behind a delayed job, as a worker leaves it. */
  async function pausedWithHeld(): Promise<string> {
    const id = `dlv_pause${String(++n).padStart(11, '0')}`;
    await stack.api.query(`update webhooks set paused_until = now() + interval '1 hour' where id = ?`, [webhookId]);
    await stack.api.query(
      `insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, attempts, next_attempt_at)
       values (?, ?, ?, ?, 'form.submission.created', '{"id":"evt"}', 'pending', 0, now() + interval '1 hour')`,
      [id, webhookId, tenant.organizationId, `evt_${id.slice(4)}`],
    );
    await keepSideRows(stack.api.query, 'organization_id = ?', [tenant.organizationId]);
    await stack.api.app.producer.add('webhooks', 'deliver', { deliveryId: id }, { delay: 3_600_000 });
    const webhook = await read();
    expect(Date.parse(webhook.pausedUntil)).to.be.closeTo(Date.now() + 3_600_000, 60_000);
    return id;
  }

  async function expectReleased(deliveryId: string): Promise<void> {
    expect((await read()).pausedUntil).to.equal(null);
    const [row] = await stack.api.query('select next_attempt_at <= now() as due from webhook_deliveries where id = ?', [deliveryId]);
    expect(row.due).to.equal(true);
    const job = await stack.api.app.producer.queue('webhooks').getJob(jobIds.deliver(deliveryId));
    expect(await job?.getState()).to.equal('waiting');
  }

  it('a new URL lifts the pause', async () => {
    const held = await pausedWithHeld();
    const res = await call(stack.api.url, 'PUT', `/v1/webhooks/${webhookId}`, { key: tenant.key, body: { url: 'http://127.0.0.1:9/b' } });
    expect(res.status, res.text).to.equal(200);
    expect(res.body.webhook.pausedUntil).to.equal(null);
    await expectReleased(held);
  });

  it('enabled: true lifts the pause; another change (the name) does not', async () => {
    const held = await pausedWithHeld();
    await call(stack.api.url, 'PUT', `/v1/webhooks/${webhookId}`, { key: tenant.key, body: { name: 'renamed' } });
    expect((await read()).pausedUntil).to.not.equal(null);
    const res = await call(stack.api.url, 'PUT', `/v1/webhooks/${webhookId}`, { key: tenant.key, body: { enabled: true } });
    expect(res.status, res.text).to.equal(200);
    await expectReleased(held);
  });

  it('a manual retry lifts the pause and releases what it held', async () => {
    const held = await pausedWithHeld();
    await stack.api.query(
      `insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, attempts, next_attempt_at)
       values ('dlv_failedonce0000001', ?, ?, 'evt_failedonce0000001', 'form.submission.created', '{"id":"evt"}', 'failed', 3, null)`,
      [webhookId, tenant.organizationId],
    );
    await keepSideRows(stack.api.query, 'organization_id = ?', [tenant.organizationId]);
    const res = await call(stack.api.url, 'POST', `/v1/webhooks/${webhookId}/deliveries/dlv_failedonce0000001/retry`, { key: tenant.key });
    expect(res.status, res.text).to.equal(202);
    await expectReleased(held);
  });

  it('recover lifts the pause and releases what it held', async () => {
    const held = await pausedWithHeld();
    const res = await call(stack.api.url, 'POST', `/v1/webhooks/${webhookId}/recover`, {
      key: tenant.key, body: { since: new Date(Date.now() - 3_600_000).toISOString() },
    });
    expect(res.status, res.text).to.equal(202);
    await expectReleased(held);
  });

  it('a throttleRate change releases the deliveries held at the old rate', async () => {
    const id = 'dlv_ratehold000000001';
    await stack.api.query(
      `insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, attempts, next_attempt_at)
       values (?, ?, ?, 'evt_ratehold000000001', 'form.submission.created', '{"id":"evt"}', 'pending', 0, now() + interval '10 minutes')`,
      [id, webhookId, tenant.organizationId],
    );
    await keepSideRows(stack.api.query, 'organization_id = ?', [tenant.organizationId]);
    await stack.api.app.producer.add('webhooks', 'deliver', { deliveryId: id }, { delay: 600_000 });
    // A retry waiting its delay (one failed attempt) is not held by the rate: it keeps its delay.
    await stack.api.query(
      `insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, attempts, last_error, next_attempt_at)
       values ('dlv_pausewait00000001', ?, ?, 'evt_pausewait00000001', 'form.submission.created', '{"id":"evt"}', 'pending', 1, 'Unexpected status 500', now() + interval '1 hour')`,
      [webhookId, tenant.organizationId],
    );
    await keepSideRows(stack.api.query, 'organization_id = ?', [tenant.organizationId]);
    const res = await call(stack.api.url, 'PUT', `/v1/webhooks/${webhookId}`, { key: tenant.key, body: { throttleRate: 50 } });
    expect(res.status, res.text).to.equal(200);
    expect(res.body.webhook.throttleRate).to.equal(50);
    await expectReleased(id);
    const [retry] = await stack.api.query(`select next_attempt_at > now() + interval '50 minutes' as waits from webhook_deliveries where id = 'dlv_pausewait00000001'`);
    expect(retry.waits).to.equal(true);
  });
  it('lifting a pause releases every held delivery, past the first RELEASE_BATCH too: the rest are due now and the sweep brings their jobs forward', async () => {
    const hook = await call(stack.api.url, 'POST', '/v1/webhooks', {
      key: tenant.key, body: { name: 'many', url: 'http://127.0.0.1:9/many', events: ['submission.created'] },
    });
    expect(hook.status, hook.text).to.equal(201);
    const id = hook.body.webhook.id as string;
    const count = RELEASE_BATCH + 5;
    await stack.api.query(`update webhooks set paused_until = now() + interval '1 day' where id = ?`, [id]);
    const ids: string[] = await stack.api.query(
      `insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, attempts, next_attempt_at)
       select 'dlv_many' || lpad(g::text, 13, '0'), ?, ?, 'evt_many' || lpad(g::text, 13, '0'), 'form.submission.created', '{"id":"evt"}',
              'pending', 0, now() + interval '1 day' + g * interval '1 millisecond'
         from generate_series(1, ?) g returning id`,
      [id, tenant.organizationId, count],
    ).then((rows: Array<{ id: string }>) => rows.map((r) => r.id));
    await keepSideRows(stack.api.query, 'organization_id = ?', [tenant.organizationId]);
    await stack.api.app.producer.addBulk('webhooks', ids.map((deliveryId) => ({ name: 'deliver' as const, data: { deliveryId }, opts: { delay: 86_400_000 } })));
    const res = await call(stack.api.url, 'PUT', `/v1/webhooks/${id}`, { key: tenant.key, body: { url: 'http://127.0.0.1:9/moved' } });
    expect(res.status, res.text).to.equal(200);
    const [{ held }] = await stack.api.query(`select count(*)::int as held from webhook_deliveries where webhook_id = ? and next_attempt_at > now()`, [id]);
    expect(held, 'deliveries still held for a day after the pause was lifted').to.equal(0);
    const last = ids[ids.length - 1];
    const queue = stack.api.app.producer.queue('webhooks');
    expect(await (await queue.getJob(jobIds.deliver(ids[0])))?.getState()).to.equal('waiting');
    // The ones past the batch: their rows are due, and the sweep of owed work brings their jobs forward.
    await sweepOwed(stack.api.app, 0);
    expect(await (await queue.getJob(jobIds.deliver(last)))?.getState()).to.equal('waiting');
  });
  it('a manual retry on a webhook that is not paused leaves the other deliveries\' retry delays alone (no attempt spent early)', async () => {
    await stack.api.query(`update webhooks set paused_until = null where id = ?`, [webhookId]);
    await stack.api.query(
      `insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, attempts, last_error, next_attempt_at)
       values ('dlv_backoff0000000001', ?, ?, 'evt_backoff0000000001', 'form.submission.created', '{"id":"evt"}', 'pending', 2, 'Unexpected status 500', now() + interval '1 hour'),
              ('dlv_failedtwice000001', ?, ?, 'evt_failedtwice000001', 'form.submission.created', '{"id":"evt"}', 'failed', 3, 'Unexpected status 500', null)`,
      [webhookId, tenant.organizationId, webhookId, tenant.organizationId],
    );
    await keepSideRows(stack.api.query, 'organization_id = ?', [tenant.organizationId]);
    await stack.api.app.producer.add('webhooks', 'deliver', { deliveryId: 'dlv_backoff0000000001' }, { delay: 3_600_000 });
    const res = await call(stack.api.url, 'POST', `/v1/webhooks/${webhookId}/deliveries/dlv_failedtwice000001/retry`, { key: tenant.key });
    expect(res.status, res.text).to.equal(202);
    const [row] = await stack.api.query(`select next_attempt_at > now() + interval '50 minutes' as waits from webhook_deliveries where id = 'dlv_backoff0000000001'`);
    expect(row.waits, 'a retry waiting its delay was made due by another delivery\'s manual retry').to.equal(true);
    const job = await stack.api.app.producer.queue('webhooks').getJob(jobIds.deliver('dlv_backoff0000000001'));
    expect(await job?.getState()).to.equal('delayed');
  });
  it('enabled: true after a pause that already ended releases nothing: retries waiting their delay keep it', async () => {
    await stack.api.query(`update webhooks set paused_until = now() - interval '1 hour' where id = ?`, [webhookId]);
    await stack.api.query(
      `insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, attempts, last_error, next_attempt_at)
       values ('dlv_backoff0000000002', ?, ?, 'evt_backoff0000000002', 'form.submission.created', '{"id":"evt"}', 'pending', 2, 'Unexpected status 500', now() + interval '1 hour')`,
      [webhookId, tenant.organizationId],
    );
    await keepSideRows(stack.api.query, 'organization_id = ?', [tenant.organizationId]);
    const res = await call(stack.api.url, 'PUT', `/v1/webhooks/${webhookId}`, { key: tenant.key, body: { enabled: true } });
    expect(res.status, res.text).to.equal(200);
    const [row] = await stack.api.query(`select next_attempt_at > now() + interval '50 minutes' as waits from webhook_deliveries where id = 'dlv_backoff0000000002'`);
    expect(row.waits, 'a retry waiting its delay was released by lifting a pause that had ended').to.equal(true);
  });
  it('a worker that read the pause before it was lifted holds nothing: the row stays due (the sweep brings its job forward)', async () => {
    const id = 'dlv_raced00000000001';
    await stack.api.query(`update webhooks set paused_until = null where id = ?`, [webhookId]);
    await stack.api.query(
      `insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, attempts, next_attempt_at)
       values (?, ?, ?, 'evt_raced00000000001', 'form.submission.created', '{"id":"evt"}', 'pending', 0, now())`,
      [id, webhookId, tenant.organizationId],
    );
    await keepSideRows(stack.api.query, 'organization_id = ?', [tenant.organizationId]);
    const em = stack.api.app.orm.em.fork();
    // The worker's read said "paused for an hour"; the pause was lifted before it wrote the hold.
    await holdDelivery(em, id, 3_600_000, { paused: true });
    const [lifted] = await stack.api.query(`select next_attempt_at <= now() as due from webhook_deliveries where id = ?`, [id]);
    expect(lifted.due, 'held for a pause that was lifted').to.equal(true);
    // While the pause runs, the hold is written; a throttle's hold always is.
    await stack.api.query(`update webhooks set paused_until = now() + interval '1 hour' where id = ?`, [webhookId]);
    await holdDelivery(em, id, 3_600_000, { paused: true });
    const [held] = await stack.api.query(`select next_attempt_at > now() + interval '50 minutes' as held from webhook_deliveries where id = ?`, [id]);
    expect(held.held).to.equal(true);
    await stack.api.query(`update webhooks set paused_until = null where id = ?`, [webhookId]);
    await holdDelivery(em, id, 7_200_000);
    const [throttled] = await stack.api.query(`select next_attempt_at > now() + interval '110 minutes' as held from webhook_deliveries where id = ?`, [id]);
    expect(throttled.held).to.equal(true);
  });
});
