import { expect } from 'chai';
import type { SendResult } from '../../src/domain/webhooks/sender';
import { failingTooLong } from '../../src/domain/webhooks/policy';
import { findDeliveryForAttempt, recordDeliveryAttempt, type DeliveryRow } from '../../src/domain/webhooks/store';
import { startReceiver, type Receiver } from '../support/fakes/receiver';
import { call, createPublishedForm, createTenant } from '../support/harness';
import { startStack, waitUntil, type Stack } from '../support/worker-stack';

const FIELDS = [{ id: 'fld_email', type: 'email', label: 'Email', required: true, config: {}, validationRules: {}, order: 0 }];
const ok: SendResult = { statusCode: 200, retryAfterMs: null, error: null, durationMs: 3, responseExcerpt: 'ok' };
const unavailable: SendResult = { statusCode: 503, retryAfterMs: null, error: 'Unexpected status 503', durationMs: 3, responseExcerpt: null };
const retry = { kind: 'retry' as const, delayMs: 60_000, retryAfterMs: null };

/**
 * The delivery path writes the webhook row only when its failure streak starts or ends, or its last
 * success is due to be recorded again (src/domain/webhooks/policy.ts): not on every success of a
 * healthy webhook, nor on every failure between successes or within a streak. A row's `xmin`
 * changes with every write of it.
 */
describe('webhook row writes on the delivery path', () => {
  let stack: Stack;
  let receiver: Receiver;
  // No webhooks worker: the test records the attempts itself.
  before(async () => { stack = await startStack(['submissions']); });
  after(async () => {
    await receiver?.close();
    await stack.close();
  });

  async function deliveries(count: number): Promise<{ webhookId: string; ids: string[] }> {
    const { app, url } = stack.api;
    const tenant = await createTenant(app);
    const form = await createPublishedForm(url, tenant.key, FIELDS);
    receiver ??= await startReceiver({ respond: () => ({ status: 200 }) });
    const res = await call(url, 'POST', '/v1/webhooks', { key: tenant.key, body: { name: 'hook', url: receiver.url, events: ['submission.created'] } });
    const webhookId = res.body.webhook.id as string;
    for (let i = 0; i < count; i++) {
      const sub = await call(url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data: { fld_email: `a${i}@example.com` } } });
      expect(sub.status).to.equal(201);
    }
    const em = app.orm.em.fork();
    const ids = await waitUntil(`${count} deliveries`, async () => {
      const rows = await em.execute<{ id: string }[]>('select id from webhook_deliveries where webhook_id = ? order by id', [webhookId]);
      return rows.length === count ? rows.map((r) => r.id) : undefined;
    }) as string[];
    return { webhookId, ids };
  }

  const em = () => stack.api.app.orm.em.fork();

  /** The webhook row's version and its streak's times (epoch ms, null when unset). */
  async function webhookRow(id: string): Promise<{ xmin: string; failing_since: number | null; last_success_at: number | null }> {
    const [row] = await em().execute(`select xmin::text as xmin, (extract(epoch from failing_since) * 1000)::float8 as failing_since,
      (extract(epoch from last_success_at) * 1000)::float8 as last_success_at from webhooks where id = ?`, [id]);
    return row as any;
  }

  /** Records one attempt of a delivery, as read now (its own statement). */
  async function attempt(id: string, result: SendResult, decision: Parameters<typeof recordDeliveryAttempt>[3]): Promise<void> {
    const row = await findDeliveryForAttempt(em(), id) as DeliveryRow;
    await recordDeliveryAttempt(em(), row, result, decision, new Date());
  }

  it('writes a healthy webhook once for many successes and not at all for failures between them', async () => {
    const { webhookId, ids } = await deliveries(10);
    const created = await webhookRow(webhookId);
    await attempt(ids[0], ok, { kind: 'succeeded' });
    const marked = await webhookRow(webhookId);
    expect(marked.xmin, 'the first success records itself').to.not.equal(created.xmin);
    expect(marked.last_success_at).to.be.a('number');

    await attempt(ids[1], ok, { kind: 'succeeded' });
    // Three successes in one statement (concurrent jobs).
    const rows = await Promise.all(ids.slice(2, 5).map((id) => findDeliveryForAttempt(em(), id)));
    const batchEm = em();
    await Promise.all(rows.map((row) => recordDeliveryAttempt(batchEm, row!, ok, { kind: 'succeeded' }, new Date())));
    await attempt(ids[5], unavailable, retry);
    await attempt(ids[6], ok, { kind: 'succeeded' });
    await attempt(ids[7], unavailable, retry);
    await attempt(ids[5], ok, { kind: 'succeeded' }); // the retry of a failed delivery succeeds
    await attempt(ids[8], ok, { kind: 'succeeded' });

    const after = await webhookRow(webhookId);
    expect(after.xmin, 'no write for the successes and failures since').to.equal(marked.xmin);
    expect(after.failing_since).to.equal(null);
    const statuses = await em().execute('select status, count(*)::int as n from webhook_deliveries where webhook_id = ? group by 1 order by 1', [webhookId]);
    expect(statuses).to.deep.equal([{ status: 'pending', n: 2 }, { status: 'succeeded', n: 8 }]);
  });

  it('starts a streak after a quiet minute with one write, keeps it through failures without a write, ends it at the next success', async () => {
    const { webhookId, ids } = await deliveries(4);
    await attempt(ids[0], ok, { kind: 'succeeded' });
    // The last success was two minutes ago: the next failure starts a streak.
    await em().execute(`update webhooks set last_success_at = now() - interval '2 minutes' where id = ?`, [webhookId]);
    const quiet = await webhookRow(webhookId);

    await attempt(ids[1], unavailable, retry);
    const started = await webhookRow(webhookId);
    expect(started.xmin).to.not.equal(quiet.xmin);
    expect(started.failing_since).to.be.a('number');

    await attempt(ids[2], unavailable, retry);
    await attempt(ids[1], unavailable, retry);
    await attempt(ids[3], unavailable, retry);
    const within = await webhookRow(webhookId);
    expect(within.xmin, 'failures within the streak write nothing').to.equal(started.xmin);
    expect(within.failing_since).to.deep.equal(started.failing_since);

    await attempt(ids[2], ok, { kind: 'succeeded' });
    const ended = await webhookRow(webhookId);
    expect(ended.xmin).to.not.equal(within.xmin);
    expect(ended.failing_since).to.equal(null);
    expect(ended.last_success_at!).to.be.greaterThan(quiet.last_success_at!);
  });

  it('does not disable a webhook for a streak a success ended while the failing attempt was in flight', async () => {
    const disable = { kind: 'disable' as const, reason: 'failing_too_long' as const };
    /** A webhook failing for six days, and a delivery of it read for its attempt (the streak as the attempt sees it). */
    async function failingSixDays(): Promise<{ webhookId: string; ids: string[]; inFlight: DeliveryRow }> {
      const { webhookId, ids } = await deliveries(2);
      await em().execute(`update webhooks set failing_since = now() - interval '6 days', last_success_at = now() - interval '6 days'
        where id = ?`, [webhookId]);
      const inFlight = await findDeliveryForAttempt(em(), ids[0]) as DeliveryRow;
      expect(failingTooLong(new Date(inFlight.failing_since!), new Date()), 'the attempt decides to disable').to.equal(true);
      return { webhookId, ids, inFlight };
    }
    const state = async (id: string) => (await em().execute(`select enabled, failing_since from webhooks where id = ?`, [id]))[0];

    // Another job's success ends the streak before the failing attempt is recorded: the webhook stays on.
    const recovering = await failingSixDays();
    await attempt(recovering.ids[1], ok, { kind: 'succeeded' });
    await recordDeliveryAttempt(em(), recovering.inFlight, unavailable, disable, new Date());
    expect(await state(recovering.webhookId)).to.deep.equal({ enabled: true, failing_since: null });

    // Without that success, the same attempt disables it.
    const failing = await failingSixDays();
    await recordDeliveryAttempt(em(), failing.inFlight, unavailable, disable, new Date());
    expect((await state(failing.webhookId)).enabled).to.equal(false);
  });

  it('starts a streak at the first failure of a webhook that never succeeded', async () => {
    const { webhookId, ids } = await deliveries(1);
    await attempt(ids[0], unavailable, retry);
    expect((await webhookRow(webhookId)).failing_since).to.be.a('number');
  });
});
