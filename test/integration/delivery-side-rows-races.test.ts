import { expect } from 'chai';
import type { Em } from '../../src/db/orm';
import { walkDeliverySideRows } from '../../src/domain/maintenance/delivery-side-rows';
import { deleteEndedDeliveries } from '../../src/domain/maintenance/store';
import { sweepOwed } from '../../src/domain/outbox/sweep-owed';
import {
  failDelivery, findDeliveryForAttempt, holdDelivery, recordDeliveryAttempt, releaseHeld, resetFailedDeliveries,
} from '../../src/domain/webhooks/store';
import { resetDeliveryForRetry } from '../../src/domain/webhooks/webhook-service';
import { attemptResult, startDeliveriesStage, type DeliveriesStage } from '../support/deliveries';
import { call, type TestApp, type TestTenant } from '../support/harness';

/**
 * The owed and failed rows beside the deliveries (src/README.md, "Webhook deliveries and HOT
 * updates") when statements on the same deliveries run at once (two jobs of one delivery, a retry
 * from the API during an attempt, the sweep's repair, recovery, retention), by the statements alone
 * (no trigger keeps them since Migration20261129000100_delivery_rollout_contract): a
 * pending delivery never lacks its owed row (it would never be swept again), nor has one due later
 * than it is; what a race leaves behind is only ever a row the sweep or recovery passes by.
 */
describe('owed and failed delivery rows under concurrent statements', function () {
  this.timeout(300_000);
  let stage: DeliveriesStage;
  let api: TestApp;
  let tenant: TestTenant;
  let formId: string;
  const webhooks: string[] = [];
  const em = (): Em => api.app.orm.em.fork();

  before(async () => {
    stage = await startDeliveriesStage('siderace');
    ({ api, tenant, formId } = stage);
    for (const ofForm of [true, false]) webhooks.push(await stage.createWebhook(ofForm));
  });
  after(async () => {
    await stage?.close();
  });

  const random = <T>(list: T[]): T => list[Math.floor(Math.random() * list.length)];

  async function op(ids: string[]): Promise<void> {
    const id = random(ids);
    const kind = random(['attempt', 'attempt', 'attempt', 'retry', 'retry', 'fail', 'hold', 'release', 'recover', 'sweep', 'retention', 'repair']);
    switch (kind) {
      case 'attempt': {
        // As a job does: the row read first, the attempt recorded later, whatever ran meanwhile.
        const row = await findDeliveryForAttempt(em(), id);
        if (!row) return;
        const { result, decision } = attemptResult(random(['succeeded', 'retry', 'failed']));
        await recordDeliveryAttempt(em(), row, result, decision, new Date());
        return;
      }
      case 'retry': {
        const [d] = await api.query(`select webhook_id from webhook_deliveries where id = ?`, [id]);
        if (d) await resetDeliveryForRetry(em(), tenant.organizationId, d.webhook_id, id);
        return;
      }
      case 'fail': return failDelivery(em(), id, 'Webhook is disabled');
      case 'hold': return holdDelivery(em(), id, random([0, 1, 50]));
      case 'release': await releaseHeld(em(), tenant.organizationId, random(webhooks), 1_000); return;
      case 'recover':
        await resetFailedDeliveries(em(), tenant.organizationId, random(webhooks),
          { since: new Date(Date.now() - 86_400_000), until: new Date(Date.now() + 1_000) }, 3);
        return;
      case 'sweep': await sweepOwed(api.app, 0); return;
      case 'retention': await deleteEndedDeliveries(em(), 0); return;
      // `deliveries repair` of one webhook, its pages read while the other statements change them
      case 'repair': await walkDeliverySideRows(em(), { repair: true, webhookId: random(webhooks), pageSize: 3 }, () => {});
    }
  }

  it('a success recorded after another job failed the delivery meanwhile (its webhook disabled) leaves no failed row', async () => {
    for (const outcome of ['first', 'later', 'many'] as const) {
      const res = await call(api.url, 'POST', `/v1/forms/${formId}/submissions`, { key: tenant.key, body: { data: { fld_email: 'a@example.com' } } });
      expect(res.status, res.text).to.equal(201);
      const ids: string[] = (await api.query(`select id from webhook_deliveries order by created_at desc, id limit 2`)).map((r: { id: string }) => r.id);
      if (outcome === 'later') await api.query(`update webhook_deliveries set attempts = 1 where id = any(?::text[])`, [`{${ids.join(',')}}`]);
      // Both jobs read the delivery pending; one fails it, the other's send then succeeds.
      const rows = await Promise.all(ids.map((id) => findDeliveryForAttempt(em(), id)));
      for (const id of ids) await failDelivery(em(), id, 'Webhook is disabled');
      const { result, decision } = attemptResult('succeeded');
      if (outcome === 'many') await Promise.all(rows.map((row) => recordDeliveryAttempt(em(), row!, result, decision, new Date())));
      else for (const row of rows) await recordDeliveryAttempt(em(), row!, result, decision, new Date());
      const left = await api.query(`select f.delivery_id, d.status from webhook_delivery_failed f join webhook_deliveries d on d.id = f.delivery_id
        where f.delivery_id = any(?::text[])`, [`{${ids.join(',')}}`]);
      expect(left, outcome).to.deep.equal([]);
    }
  });

  it('never leaves a pending delivery without its owed row, or with one due later than it is', async () => {
    const problems: string[] = [];
    for (let round = 0; round < 40; round++) {
      for (let i = 0; i < 2; i++) {
        const res = await call(api.url, 'POST', `/v1/forms/${formId}/submissions`, { key: tenant.key, body: { data: { fld_email: 'a@example.com' } } });
        expect(res.status, res.text).to.equal(201);
      }
      const ids = (await api.query(`select id from webhook_deliveries order by created_at desc limit 6`)).map((r: { id: string }) => r.id);
      const results = await Promise.allSettled(Array.from({ length: 12 }, () => op(ids)));
      for (const r of results) if (r.status === 'rejected') problems.push(`round ${round}: ${String(r.reason)}`);
      const lost = await api.query(`select d.id, d.next_attempt_at::text as due, o.next_attempt_at::text as owed from webhook_deliveries d
          left join webhook_delivery_owed o on o.delivery_id = d.id
         where d.status = 'pending' and (o.delivery_id is null or o.next_attempt_at > coalesce(d.next_attempt_at, d.created_at))`);
      for (const l of lost) problems.push(`round ${round}: pending ${l.id} due ${l.due} owed ${l.owed}`);
    }
    const [stale] = await api.query(`select
      (select count(*) from webhook_delivery_owed o left join webhook_deliveries d on d.id = o.delivery_id where d.status is distinct from 'pending')::int as owed,
      (select count(*) from webhook_delivery_failed f left join webhook_deliveries d on d.id = f.delivery_id where d.status is distinct from 'failed')::int as failed`);
    expect(problems).to.deep.equal([]);
  });
});
