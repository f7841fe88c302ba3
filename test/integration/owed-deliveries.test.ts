import { expect } from 'chai';
import { sweepOwed, sweepUnqueued } from '../../src/domain/outbox/sweep-owed';
import { jobIds } from '../../src/queues/catalogue';
import { startReceiver, type Receiver } from '../support/fakes/receiver';
import { call, createTenant, type TestTenant } from '../support/harness';
import { keepSideRows } from '../support/deliveries';
import { startStack, waitUntil, type Stack } from '../support/worker-stack';

/** FAST_RETRIES has three delays: four attempts in all. */
const MAX_ATTEMPTS = 4;

describe('owed deliveries: the row, not the job, counts the attempts', () => {
  let stack: Stack;
  let tenant: TestTenant;
  let receiver: Receiver;
  let webhookId: string;
  before(async () => {
    stack = await startStack(['webhooks']);
    tenant = await createTenant(stack.api.app);
    receiver = await startReceiver({ respond: () => ({ status: 500 }) });
    const res = await call(stack.api.url, 'POST', '/v1/webhooks', {
      key: tenant.key, body: { name: 'hook', url: receiver.url, events: ['submission.created'] },
    });
    webhookId = res.body.webhook.id;
  });
  after(async () => {
    await receiver.close();
    await stack.close();
  });
  const em = () => stack.api.app.orm.em.fork();

  async function owedDelivery(id: string, attempts: number, dueSecondsAgo = 60): Promise<void> {
    await em().execute(
      `insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, attempts, next_attempt_at)
       values (?, ?, ?, ?, 'form.submission.created', '{"id":"evt"}', 'pending', ?, now() - ? * interval '1 second')`,
      [id, webhookId, tenant.organizationId, `evt_${id}`, attempts, dueSecondsAgo],
    );
    await keepSideRows((sql, params) => em().execute(sql, params), 'id = ?', [id]);
  }
  const sentFor = (id: string) => receiver.deliveries.filter((d) => d.headers['x-service-delivery'] === id).length;
  const rowOf = async (id: string) => (await em().execute('select status, attempts, next_attempt_at from webhook_deliveries where id = ?', [id]))[0];

  it('a delivery queued again by the sweep continues its schedule: with one attempt left, it makes one', async () => {
    await owedDelivery('dlv_oneLeft', MAX_ATTEMPTS - 1);
    await sweepOwed(stack.api.app, 0);
    await waitUntil('the delivery to fail for good', async () => (await rowOf('dlv_oneLeft')).status === 'failed');
    await new Promise((r) => setTimeout(r, 700)); // longer than every retry delay
    expect(sentFor('dlv_oneLeft')).to.equal(1);
    expect((await rowOf('dlv_oneLeft')).attempts).to.equal(MAX_ATTEMPTS);
  });

  it('a retry records when it is due on the row, and the job runs then', async () => {
    await owedDelivery('dlv_fresh', 0);
    await sweepOwed(stack.api.app, 0);
    // Retries come 100-300 ms apart: look at the row between two attempts, in one read.
    let between: any = null;
    await waitUntil('a row between two attempts', async () => {
      const row = await rowOf('dlv_fresh');
      if (row.attempts >= 1 && row.attempts < MAX_ATTEMPTS && row.status === 'pending') between = row;
      return between !== null || row.status === 'failed';
    }, 10_000, 10);
    expect(between, 'the row was never seen pending between two attempts').to.not.equal(null);
    expect(new Date(between.next_attempt_at).getTime()).to.be.greaterThan(Date.now() - 1_000);
    await waitUntil('the delivery to fail for good', async () => (await rowOf('dlv_fresh')).status === 'failed', 10_000);
    expect(sentFor('dlv_fresh')).to.equal(MAX_ATTEMPTS);
    expect((await rowOf('dlv_fresh')).next_attempt_at).to.equal(null);
  });

  it('the relay\'s run queues a new delivery whose job was never added, 5 s after it was due; attempted ones wait for the sweep', async () => {
    await owedDelivery('dlv_neverQueued', 0, 6);
    await owedDelivery('dlv_justStored', 0, 0);
    await owedDelivery('dlv_attempted', 1, 6);
    await sweepUnqueued(stack.api.app);
    const queue = stack.api.app.producer.queue('webhooks');
    expect(await queue.getJob(jobIds.deliver('dlv_neverQueued'))).to.not.equal(undefined);
    expect(await queue.getJob(jobIds.deliver('dlv_justStored'))).to.equal(undefined);
    expect(await queue.getJob(jobIds.deliver('dlv_attempted'))).to.equal(undefined);
    await em().execute(`delete from webhook_deliveries where id in ('dlv_justStored', 'dlv_attempted')`);
  });

  it('a manual retry starts a fresh schedule under the same job id, even from a failed delivery with its attempts used up', async () => {
    const res = await call(stack.api.url, 'POST', `/v1/webhooks/${webhookId}/deliveries/dlv_oneLeft/retry`, { key: tenant.key });
    expect(res.status).to.equal(202);
    await waitUntil('the retried delivery to fail again', async () => {
      const row = await rowOf('dlv_oneLeft');
      return row.status === 'failed' && row.attempts === 2 * MAX_ATTEMPTS;
    }, 10_000);
    expect(sentFor('dlv_oneLeft')).to.equal(1 + MAX_ATTEMPTS);
  });
});
