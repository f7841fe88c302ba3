import { expect } from 'chai';
import { sweepUnqueued } from '../../src/domain/outbox/sweep-owed';
import { jobIds } from '../../src/queues/catalogue';
import { startReceiver, type Receiver } from '../support/fakes/receiver';
import { call, createTenant, type TestTenant } from '../support/harness';
import { keepSideRows } from '../support/deliveries';
import { startStack, waitUntil, type Stack } from '../support/worker-stack';

/** More held deliveries than one page of the sweep (OWED_BATCH, 500) holds. */
const HELD = 700;

/**
 * No tenant waits on another: an organization whose webhook is paused for a day has 700 deliveries
 * owed and no job for any of them (Redis forgot them: this stack's queue prefix is new), and another
 * organization's delivery was stored and its enqueue lost. The relay's sweep of unqueued deliveries
 * (every 5 s) must reach the bystander within 30 s however many of the paused organization's rows
 * are older: the ones it queues are held by the pause and then carry the pause's end as their next
 * attempt time, and a run pages past rows whose jobs are live.
 */
describe('sweeps: one organization\'s held backlog never delays another\'s recovery', function () {
  this.timeout(90_000);
  let stack: Stack;
  let paused: TestTenant;
  let bystander: TestTenant;
  let pausedHook: string;
  let bystanderHook: string;
  let receiver: Receiver;
  let pausedReceiver: Receiver;

  before(async () => {
    stack = await startStack(['webhooks', 'usage']);
    receiver = await startReceiver();
    pausedReceiver = await startReceiver();
    paused = await createTenant(stack.api.app);
    bystander = await createTenant(stack.api.app);
    const make = async (tenant: TestTenant, url: string) => (await call(stack.api.url, 'POST', '/v1/webhooks', {
      key: tenant.key, body: { name: 'hook', url, events: ['submission.created'] },
    })).body.webhook.id as string;
    pausedHook = await make(paused, pausedReceiver.url);
    bystanderHook = await make(bystander, receiver.url);
  });
  after(async () => {
    await receiver.close();
    await pausedReceiver.close();
    await stack.close();
  });

  const insertOwed = (tenant: TestTenant, webhookId: string, ids: string[], dueSecondsAgo: number) => stack.api.query(
    `insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, attempts, next_attempt_at)
     select d, ?, ?, 'evt_' || substr(d, 5), 'form.submission.created', '{"id":"evt","type":"form.submission.created"}', 'pending', 0,
            now() - ? * interval '1 second'
       from unnest(?::text[]) as d`,
    [webhookId, tenant.organizationId, dueSecondsAgo, `{${ids.join(',')}}`],
  ).then(() => keepSideRows(stack.api.query, 'id = any(?::text[])', [`{${ids.join(',')}}`]));

  it('a lost enqueue of another organization is re-queued and arrives within 30 s behind 700 held deliveries', async () => {
    // A receiver's 429 paused the webhook for a day; its 700 deliveries are older than the bystander's.
    await stack.api.query(`update webhooks set paused_until = now() + interval '1 day' where id = ?`, [pausedHook]);
    const heldIds = Array.from({ length: HELD }, (_, i) => `dlv_tnheld${String(i).padStart(10, '0')}`);
    await insertOwed(paused, pausedHook, heldIds, 60);
    const started = Date.now();
    await insertOwed(bystander, bystanderHook, ['dlv_bystander000000001'], 0);

    await waitUntil('the bystander\'s delivery to arrive', async () => receiver.deliveries.length > 0, 30_000, 100);
    const seconds = (Date.now() - started) / 1000;
    console.log(`      bystander's lost delivery arrived ${seconds.toFixed(1)} s after it was stored, behind ${HELD} held deliveries`);
    expect(receiver.deliveries[0].headers['x-service-delivery']).to.equal('dlv_bystander000000001');
    expect(pausedReceiver.deliveries).to.have.length(0);

    // The held deliveries the sweep reached show when they will be tried: the pause's end.
    const [{ pause_end: pauseEnd }] = await stack.api.query('select paused_until as pause_end from webhooks where id = ?', [pausedHook]);
    await waitUntil('every held delivery to carry the pause\'s end', async () => {
      const [{ n }] = await stack.api.query(
        `select count(*)::int as n from webhook_deliveries where webhook_id = ? and next_attempt_at >= ?`, [pausedHook, pauseEnd],
      );
      return n === HELD;
    }, 30_000, 200);
    const log = await call(stack.api.url, 'GET', `/v1/webhooks/${pausedHook}/deliveries?limit=5`, { key: paused.key });
    expect(log.status).to.equal(200);
    for (const d of log.body.deliveries) {
      expect(d.status).to.equal('pending');
      expect(Date.parse(d.nextAttemptAt)).to.be.at.least(new Date(pauseEnd).getTime());
    }
  });

  it('the same for CRM syncs: a run pages past 600 syncs whose jobs are live to another organization\'s lost one', async () => {
    const insertSyncs = (tenant: TestTenant, ids: string[], dueSecondsAgo: number) => stack.api.query(
      `insert into crm_syncs (id, organization_id, form_id, submission_id, integration_index, provider, status, attempts, next_attempt_at)
       select d, ?, 'form_x', 'sub_' || substr(d, 5), 0, 'hubspot', 'pending', 0, now() - ? * interval '1 second'
         from unnest(?::text[]) as d`,
      [tenant.organizationId, dueSecondsAgo, `{${ids.join(',')}}`],
    );
    const live = Array.from({ length: 600 }, (_, i) => `crm_live${String(i).padStart(12, '0')}`);
    await insertSyncs(paused, live, 60);
    // Their jobs are live (delayed, as a paused connection leaves them); no crm worker runs here.
    await stack.api.app.producer.addBulk('crm', live.map((syncId) => ({ name: 'sync' as const, data: { syncId }, opts: { delay: 3_600_000 } })));
    await insertSyncs(bystander, ['crm_bystander000000001'], 10);
    const report = await sweepUnqueued(stack.api.app);
    const job = await stack.api.app.producer.queue('crm').getJob(jobIds.crmSync('crm_bystander000000001'));
    expect(job, `sweep report ${JSON.stringify(report)}`).to.not.equal(undefined);
  });
});
