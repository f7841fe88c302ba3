import { expect } from 'chai';
import fc from 'fast-check';
import { ensureDatabase, initOrm, migrate, type Em, type Orm } from '../../src/db/orm';
import { deleteEndedDeliveries } from '../../src/domain/maintenance/store';
import { sweepOwed } from '../../src/domain/outbox/sweep-owed';
import { insertSubmissionFanout } from '../../src/domain/submissions/fanout-store';
import type { DeliveryDecision } from '../../src/domain/webhooks/policy';
import type { SendResult } from '../../src/domain/webhooks/sender';
import {
  failDelivery, findDeliveryForAttempt, holdDelivery, recordDeliveryAttempt, releaseHeld, resetFailedDeliveries,
} from '../../src/domain/webhooks/store';
import { resetDeliveryForRetry } from '../../src/domain/webhooks/webhook-service';
import { newId } from '../../src/lib/ids';
import { jobIds } from '../../src/queues/catalogue';
import { dropDatabase, sideDatabaseUrl } from '../support/databases';
import { call, type TestApp, type TestTenant } from '../support/harness';
import { expectSideRowsExact, startDeliveriesStage, type DeliveriesStage } from '../support/deliveries';

/**
 * The owed and failed rows beside the deliveries (src/README.md, "Webhook deliveries and HOT
 * updates") say exactly what `webhook_deliveries` says: a row in `webhook_delivery_owed` for each
 * pending delivery, due when it is, and one in `webhook_delivery_failed` for each failed one,
 * whatever the service does to them. Checked after every step of random sequences of what the
 * service does (store, attempt, hold, release, fail, retry, recover, fan out, retention, delete or
 * disable a webhook), on a database of its own: by the statements alone, as no trigger keeps them
 * since the rollout's bridge was dropped (Migration20261129000100_delivery_rollout_contract).
 */
describe('owed and failed delivery rows stay exact', function () {
  this.timeout(300_000);
  let stage: DeliveriesStage;
  let api: TestApp;
  let tenant: TestTenant;
  let formId: string;
  const webhooks: string[] = [];
  const em = (): Em => api.app.orm.em.fork();

  before(async () => {
    stage = await startDeliveriesStage('siderows');
    ({ api, tenant, formId } = stage);
    // One webhook of the form, one of the organization that also hears about the other's trouble.
    webhooks.push(await createWebhook(true), await createWebhook(false));
  });
  after(async () => {
    await stage?.close();
  });

  const createWebhook = (ofForm: boolean): Promise<string> => stage.createWebhook(ofForm, ofForm
    ? ['submission.created'] : ['submission.created', 'message.attempt.failing', 'message.attempt.exhausted', 'endpoint.disabled']);

  /** The side tables against what the deliveries say, in one snapshot. */
  async function expectExact(after: string): Promise<void> {
    await expectSideRowsExact(api.query, after);
  }

  type Op =
    | { kind: 'store'; n: number }
    | { kind: 'attempt'; pick: number; outcome: 'succeeded' | 'retry' | 'failed' | 'gone' | 'many' }
    | { kind: 'hold'; pick: number; waitMs: number }
    | { kind: 'release'; hook: number; firstOnly: boolean }
    | { kind: 'fail'; pick: number }
    | { kind: 'retry'; pick: number }
    | { kind: 'recover'; hook: number; limit: number }
    | { kind: 'fanout'; hooks: number }
    | { kind: 'retention' }
    | { kind: 'enable'; hook: number }
    | { kind: 'replaceWebhook'; hook: number };

  const ops: fc.Arbitrary<Op> = fc.oneof(
    { arbitrary: fc.record({ kind: fc.constant('store' as const), n: fc.integer({ min: 1, max: 3 }) }), weight: 4 },
    {
      arbitrary: fc.record({ kind: fc.constant('attempt' as const), pick: fc.nat(), outcome: fc.constantFrom('succeeded', 'retry', 'failed', 'gone', 'many') }),
      weight: 6,
    },
    { arbitrary: fc.record({ kind: fc.constant('hold' as const), pick: fc.nat(), waitMs: fc.integer({ min: 1, max: 3_600_000 }) }), weight: 2 },
    { arbitrary: fc.record({ kind: fc.constant('release' as const), hook: fc.nat(), firstOnly: fc.boolean() }), weight: 1 },
    { arbitrary: fc.record({ kind: fc.constant('fail' as const), pick: fc.nat() }), weight: 1 },
    { arbitrary: fc.record({ kind: fc.constant('retry' as const), pick: fc.nat() }), weight: 2 },
    { arbitrary: fc.record({ kind: fc.constant('recover' as const), hook: fc.nat(), limit: fc.integer({ min: 1, max: 3 }) }), weight: 2 },
    { arbitrary: fc.record({ kind: fc.constant('fanout' as const), hooks: fc.integer({ min: 1, max: 2 }) }), weight: 1 },
    { arbitrary: fc.record({ kind: fc.constant('retention' as const) }), weight: 1 },
    { arbitrary: fc.record({ kind: fc.constant('enable' as const), hook: fc.nat() }), weight: 1 },
    { arbitrary: fc.record({ kind: fc.constant('replaceWebhook' as const), hook: fc.nat() }), weight: 1 },
  );

  async function deliveries(where: string): Promise<Array<{ id: string; webhook_id: string }>> {
    return api.query(`select id, webhook_id from webhook_deliveries where ${where} order by id`);
  }
  const pickOf = <T>(list: T[], pick: number): T | undefined => (list.length ? list[pick % list.length] : undefined);

  function attemptResult(outcome: string): { result: SendResult; decision: DeliveryDecision } {
    const statusCode = outcome === 'succeeded' || outcome === 'many' ? 200 : outcome === 'gone' ? 410 : 500;
    const result = {
      statusCode, retryAfterMs: null, error: statusCode === 200 ? null : `Unexpected status ${statusCode}`, durationMs: 5, responseExcerpt: null,
    } as SendResult;
    const decision: DeliveryDecision = outcome === 'succeeded' || outcome === 'many' ? { kind: 'succeeded' }
      : outcome === 'gone' ? { kind: 'disable', reason: 'gone' }
        : outcome === 'failed' ? { kind: 'failed' } : { kind: 'retry', delayMs: 60_000, retryAfterMs: null };
    return { result, decision };
  }

  async function attempt(id: string, outcome: string): Promise<void> {
    const row = await findDeliveryForAttempt(em(), id);
    if (!row) return;
    const { result, decision } = attemptResult(outcome);
    await recordDeliveryAttempt(em(), row, result, decision, new Date());
  }

  async function run(op: Op): Promise<void> {
    switch (op.kind) {
      case 'store':
        for (let i = 0; i < op.n; i++) {
          const res = await call(api.url, 'POST', `/v1/forms/${formId}/submissions`, { key: tenant.key, body: { data: { fld_email: 'a@example.com' } } });
          expect(res.status, res.text).to.equal(201);
        }
        return;
      case 'attempt': {
        const pending = await deliveries(`status = 'pending'`);
        if (op.outcome === 'many') {
          // First attempts that succeed in one turn of the event loop share one statement.
          const first = (await deliveries(`status = 'pending' and attempts = 0`)).slice(0, 3);
          await Promise.all(first.map((d) => attempt(d.id, 'many')));
          return;
        }
        const d = pickOf(pending, op.pick);
        if (d) await attempt(d.id, op.outcome);
        return;
      }
      case 'hold': {
        const d = pickOf(await deliveries(`status = 'pending'`), op.pick);
        if (d) await holdDelivery(em(), d.id, op.waitMs);
        return;
      }
      case 'release':
        await releaseHeld(em(), tenant.organizationId, pickOf(webhooks, op.hook)!, 1_000, { awaitingFirstAttempt: op.firstOnly });
        return;
      case 'fail': {
        const d = pickOf(await deliveries(`status = 'pending'`), op.pick);
        if (d) await failDelivery(em(), d.id, 'Webhook is disabled');
        return;
      }
      case 'retry': {
        const d = pickOf(await deliveries('true'), op.pick);
        if (d) await resetDeliveryForRetry(em(), tenant.organizationId, d.webhook_id, d.id);
        return;
      }
      case 'recover':
        await resetFailedDeliveries(em(), tenant.organizationId, pickOf(webhooks, op.hook)!,
          { since: new Date(Date.now() - 86_400_000), until: new Date(Date.now() + 1_000) }, op.limit);
        return;
      case 'fanout':
        await em().transactional((tx) => insertSubmissionFanout(tx, {
          organizationId: tenant.organizationId, formId, submissionId: newId('sub'), outboxId: '0', event: { id: newId('evt') },
          deliveries: webhooks.slice(0, op.hooks).map((webhookId) => ({ id: newId('dlv'), webhookId })), syncs: [],
        }));
        return;
      case 'retention':
        await deleteEndedDeliveries(em(), 0);
        return;
      case 'enable': {
        const res = await call(api.url, 'PUT', `/v1/webhooks/${pickOf(webhooks, op.hook)}`, { key: tenant.key, body: { enabled: true } });
        expect(res.status, res.text).to.equal(200);
        return;
      }
      case 'replaceWebhook': {
        const i = op.hook % webhooks.length;
        const res = await call(api.url, 'DELETE', `/v1/webhooks/${webhooks[i]}`, { key: tenant.key });
        expect(res.status, res.text).to.equal(204);
        webhooks[i] = await createWebhook(i === 0);
      }
    }
  }

  it('the sweep of owed work repairs an owed row its delivery disagrees with (gone, ended, due at another time) and queues none of them', async () => {
    await call(api.url, 'POST', `/v1/forms/${formId}/submissions`, { key: tenant.key, body: { data: { fld_email: 'a@example.com' } } });
    const [ended, moved] = await deliveries(`status = 'pending'`);
    await api.query(`update webhook_deliveries set status = 'succeeded', next_attempt_at = null where id = ?`, [ended.id]);
    await api.query(`update webhook_deliveries set next_attempt_at = now() + interval '1 hour' where id = ?`, [moved.id]);
    await api.query(`update webhook_delivery_owed set next_attempt_at = now() - interval '1 hour' where delivery_id in (?, ?)`, [ended.id, moved.id]);
    await api.query(`insert into webhook_delivery_owed (delivery_id, organization_id, webhook_id, next_attempt_at)
      values ('dlv_gone000000000000001', ?, ?, now() - interval '1 hour')`, [tenant.organizationId, webhooks[1]]);
    await sweepOwed(api.app, 0);
    await expectExact('the sweep');
    const queue = api.app.producer.queue('webhooks');
    for (const id of [ended.id, moved.id, 'dlv_gone000000000000001']) expect(await queue.getJob(jobIds.deliver(id)), id).to.equal(undefined);
  });

  it('after every step of random sequences of what the service does', async () => {
    await fc.assert(fc.asyncProperty(fc.array(ops, { minLength: 5, maxLength: 25 }), async (sequence) => {
      for (const [i, op] of sequence.entries()) {
        await run(op);
        await expectExact(`step ${i} ${JSON.stringify(op)}`);
      }
    }), { numRuns: 20 });
  });
});

/**
 * Migration20261128000201_delivery_owed_backfill: the deliveries pending or failed before the side
 * tables get their rows (over more than one of its pages), the others none.
 */
describe('migration Migration20261128000201_delivery_owed_backfill', function () {
  this.timeout(120_000);
  const databaseUrl = sideDatabaseUrl('owedfill');
  let orm: Orm;

  before(async () => {
    await ensureDatabase(databaseUrl);
    orm = await initOrm(databaseUrl, 1, { timeouts: { statementMs: 0, lockMs: 30_000, idleInTransactionMs: 0 } });
    await orm.getMigrator().up({ to: 'Migration20261127000601_form_version_columns' });
    const conn = orm.em.getConnection();
    await conn.execute(`insert into organizations (id, name, plan) values ('org_b', 'b', 'free')`);
    await conn.execute(`insert into webhooks (id, organization_id, name, url, events, secret_sealed) values
      ('wh_b1', 'org_b', 'one', 'https://example.com/1', '["submission.created"]', 'x'),
      ('wh_b2', 'org_b', 'two', 'https://example.com/2', '["submission.created"]', 'x')`);
    await conn.execute(`insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, attempts, next_attempt_at, created_at)
      select 'dlv_b' || lpad(g::text, 6, '0'), case when g % 2 = 0 then 'wh_b1' else 'wh_b2' end, 'org_b', 'evt_b' || g, 'form.submission.created', '{}',
             case when g % 3 = 0 then 'pending' when g % 3 = 1 then 'failed' else 'succeeded' end, 1,
             case when g % 3 = 0 then now() + (g % 7) * interval '1 minute' end,
             now() - g * interval '1 second'
        from generate_series(1, 36000) g`);
    await migrate(orm);
  });
  after(async () => {
    await orm?.close();
    await dropDatabase(databaseUrl);
  });

  it('gives every pending delivery its owed row (due when it is) and every failed one its failed row, and no other delivery any', async () => {
    const [counts] = await orm.em.getConnection().execute(`select
      (select count(*) from webhook_delivery_owed)::int as owed,
      (select count(*) from webhook_delivery_failed)::int as failed,
      (select count(*) from webhook_delivery_owed o join webhook_deliveries d on d.id = o.delivery_id
        where d.status = 'pending' and d.next_attempt_at = o.next_attempt_at and d.webhook_id = o.webhook_id and d.organization_id = o.organization_id)::int as owed_right,
      (select count(*) from webhook_delivery_failed f join webhook_deliveries d on d.id = f.delivery_id
        where d.status = 'failed' and d.created_at = f.created_at and d.webhook_id = f.webhook_id)::int as failed_right`);
    expect(counts).to.deep.equal({ owed: 12_000, failed: 12_000, owed_right: 12_000, failed_right: 12_000 });
  });
});
