import { expect } from 'chai';
import { attemptDelivery } from '../../src/domain/webhooks/deliver';
import { findDeliveryForAttempt, recordDeliveryAttempt } from '../../src/domain/webhooks/store';
import { startReceiver, type Receiver } from '../support/fakes/receiver';
import { call, createPublishedForm, createTenant } from '../support/harness';
import { startStack, waitUntil, type Stack } from '../support/worker-stack';

const FIELDS = [{ id: 'fld_email', type: 'email', label: 'Email', required: true, config: {}, validationRules: {}, order: 0 }];

describe('delivery attempts of concurrent jobs share their statements', () => {
  let stack: Stack;
  let receiver: Receiver;
  // No webhooks worker: the test runs the attempts itself, all in one turn of the event loop.
  before(async () => { stack = await startStack(['submissions']); });
  after(async () => {
    await receiver?.close();
    await stack.close();
  });

  async function fiveDeliveries(failingSince: boolean): Promise<{ webhookId: string; ids: string[] }> {
    const { app, url } = stack.api;
    const tenant = await createTenant(app);
    const form = await createPublishedForm(url, tenant.key, FIELDS);
    receiver ??= await startReceiver({ respond: () => ({ status: 200 }) });
    const res = await call(url, 'POST', '/v1/webhooks', { key: tenant.key, body: { name: 'hook', url: receiver.url, events: ['submission.created'] } });
    const webhookId = res.body.webhook.id as string;
    for (let i = 0; i < 5; i++) {
      const sub = await call(url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data: { fld_email: `a${i}@example.com` } } });
      expect(sub.status).to.equal(201);
    }
    const em = app.orm.em.fork();
    const ids = await waitUntil('five deliveries', async () => {
      const rows = await em.execute<{ id: string }[]>('select id from webhook_deliveries where webhook_id = ? order by id', [webhookId]);
      return rows.length === 5 ? rows.map((r) => r.id) : undefined;
    }) as string[];
    // A failure streak that successful attempts end.
    if (failingSince) await em.execute(`update webhooks set failing_since = now() - interval '1 hour' where id = ?`, [webhookId]);
    return { webhookId, ids };
  }

  /** How many pooled connections `fn` takes, i.e. how many statements it runs. */
  async function countingStatements<T>(fn: () => Promise<T>): Promise<{ value: T; statements: number }> {
    const client = (stack.api.app.orm.em.getConnection().getKnex() as any).client;
    const acquire = client.acquireConnection;
    let statements = 0;
    client.acquireConnection = function (this: unknown, ...args: unknown[]) { statements++; return acquire.apply(this, args); };
    try {
      return { value: await fn(), statements };
    } finally {
      client.acquireConnection = acquire;
    }
  }

  const ok = { statusCode: 200, retryAfterMs: null, error: null, durationMs: 3, responseExcerpt: 'ok' };

  it('reads five deliveries and records their successful attempts with one statement each, as if recorded one by one', async () => {
    const { webhookId, ids } = await fiveDeliveries(true);
    const em = stack.api.app.orm.em.fork();
    const read = await countingStatements(() => Promise.all(ids.map((id) => findDeliveryForAttempt(em, id))));
    expect(read.statements).to.equal(1);
    expect(read.value.map((row) => [row?.id, row?.status, row?.attempts, row?.webhook_id])).to.deep.equal(ids.map((id) => [id, 'pending', 0, webhookId]));
    expect(new Set(read.value).size).to.equal(5);

    const now = new Date();
    const recorded = await countingStatements(() => Promise.all(read.value.map((row) => recordDeliveryAttempt(em, row!, ok, { kind: 'succeeded' }, now))));
    expect(recorded.statements).to.equal(1);

    const rows = await em.execute('select id, status, attempts, last_status_code, last_error, next_attempt_at from webhook_deliveries where webhook_id = ? order by id', [webhookId]);
    expect(rows.map((r: any) => [r.id, r.status, r.attempts, r.last_status_code, r.last_error, r.next_attempt_at]))
      .to.deep.equal(ids.map((id) => [id, 'succeeded', 1, 200, null, null]));
    const attempts = await em.execute(
      'select delivery_id, attempt_no, status_code, error, duration_ms, response_excerpt from delivery_attempts where delivery_id in (?) order by delivery_id', [ids],
    );
    expect(attempts.map((a: any) => [a.delivery_id, a.attempt_no, a.status_code, a.error, a.duration_ms, a.response_excerpt]))
      .to.deep.equal(ids.map((id) => [id, 1, 200, null, 3, 'ok']));
    const [webhook] = await em.execute('select failing_since from webhooks where id = ?', [webhookId]);
    expect(webhook.failing_since).to.equal(null);
  });

  it('records a retry beside a batch of successes with its own statement', async () => {
    const { webhookId, ids } = await fiveDeliveries(false);
    const em = stack.api.app.orm.em.fork();
    const rows = await Promise.all(ids.map((id) => findDeliveryForAttempt(em, id)));
    const now = new Date();
    const failed = { statusCode: 500, retryAfterMs: null, error: 'Unexpected status 500', durationMs: 4, responseExcerpt: null };
    const recorded = await countingStatements(() => Promise.all(rows.map((row, i) => (i === 0
      ? recordDeliveryAttempt(em, row!, failed, { kind: 'retry', delayMs: 60_000, retryAfterMs: null }, now)
      : recordDeliveryAttempt(em, row!, ok, { kind: 'succeeded' }, now)))));
    expect(recorded.statements).to.equal(2);
    const after = await em.execute('select id, status, attempts, last_status_code from webhook_deliveries where webhook_id = ? order by id', [webhookId]);
    expect(after.map((r: any) => [r.id, r.status, r.attempts, r.last_status_code]))
      .to.deep.equal(ids.map((id, i) => [id, i === 0 ? 'pending' : 'succeeded', 1, i === 0 ? 500 : 200]));
    // Whether the webhook's failure streak survives is not asserted: the retry's statement and the
    // successes' batch run on two connections at once, and either may commit last.
    const attempts = await em.execute(
      `select delivery_id, status_code from delivery_attempts
        where delivery_id in (select jsonb_array_elements_text(?::jsonb)) order by delivery_id`, [JSON.stringify(ids)]);
    expect(attempts.map((a: any) => [a.delivery_id, a.status_code])).to.deep.equal(ids.map((id, i) => [id, i === 0 ? 500 : 200]));
  });

  it('attempts five deliveries at once: each sent once, signed, and recorded', async () => {
    const { webhookId, ids } = await fiveDeliveries(false);
    const before = receiver.deliveries.length;
    const runs = await Promise.all(ids.map((id) => attemptDelivery(stack.api.app, id)));
    expect(runs.map((r) => r.kind)).to.deep.equal(Array(5).fill('attempted'));
    expect(receiver.deliveries.slice(before).map((d) => d.headers['x-service-delivery']).sort()).to.deep.equal(ids);
    const em = stack.api.app.orm.em.fork();
    const rows = await em.execute('select status, attempts from webhook_deliveries where webhook_id = ? order by id', [webhookId]);
    expect(rows).to.deep.equal(ids.map(() => ({ status: 'succeeded', attempts: 1 })));
  });
});
