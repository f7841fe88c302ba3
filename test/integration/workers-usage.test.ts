import { expect } from 'chai';
import { UnrecoverableError, Worker } from 'bullmq';
import IORedis from 'ioredis';
import { runMaintenance } from '../../src/domain/maintenance/maintenance';
import { deleteEndedDeliveries } from '../../src/domain/maintenance/store';
import { relayOutbox } from '../../src/domain/outbox/relay';
import { sweepOwed } from '../../src/domain/outbox/sweep-owed';
import { rollupUsage } from '../../src/domain/usage/rollup';
import { jobIds } from '../../src/queues/catalogue';
import { call, createPublishedForm, createTenant, type TestTenant } from '../support/harness';
import { keepSideRows } from '../support/deliveries';
import { startStack, waitUntil, type Stack } from '../support/worker-stack';

const FIELDS = [{ id: 'fld_a', type: 'text', label: 'A', required: false, config: {}, validationRules: {}, order: 0 }];

describe('usage queue jobs', () => {
  // No workers: the API enqueues to a queue nobody consumes, so outbox rows stay unprocessed.
  let stack: Stack;
  let tenant: TestTenant;
  before(async () => {
    stack = await startStack([]);
    tenant = await createTenant(stack.api.app);
  });
  after(async () => stack.close());
  const em = () => stack.api.app.orm.em.fork();

  async function submit(formId: string): Promise<string> {
    const res = await call(stack.api.url, 'POST', `/v1/forms/${formId}/submissions`, { key: tenant.key, body: { data: { fld_a: 'x' } } });
    expect(res.status).to.equal(201);
    return res.body.submission.id;
  }

  /** A created submission's outbox row as written before its fan-out moved into the storing statement. */
  async function submitWithOutboxRow(formId: string): Promise<string> {
    const submissionId = await submit(formId);
    await em().execute(
      `insert into outbox (topic, payload) values ('submission.created', jsonb_build_object('submissionId', ?::text))`, [submissionId],
    );
    return submissionId;
  }

  it('relays only outbox rows whose relay time has come (5 s after commit), with the deterministic fan-out job id', async () => {
    const form = await createPublishedForm(stack.api.url, tenant.key, FIELDS);
    const [old, young] = [await submitWithOutboxRow(form.id), await submitWithOutboxRow(form.id)];
    const queue = stack.api.app.producer.queue('submissions');
    await queue.remove(jobIds.fanout(old));
    await queue.remove(jobIds.fanout(young));
    // Earliest relay times go first; other test files may have left unconsumed rows behind.
    await em().execute(`update outbox set next_relay_at = now() - interval '10 years' where payload->>'submissionId' = ?`, [old]);

    expect(await relayOutbox(stack.api.app)).to.be.at.least(1);
    const relayed = await queue.getJob(jobIds.fanout(old));
    expect(relayed?.name).to.equal('fanout');
    expect(relayed?.data.submissionId).to.equal(old);
    expect(await queue.getJob(jobIds.fanout(young))).to.equal(undefined);
    await relayOutbox(stack.api.app);
    const jobs = await queue.getJobs(['wait', 'delayed', 'prioritized']);
    expect(jobs.filter((j) => j.data.submissionId === old)).to.have.length(1);
  });

  it('pushes a relayed row back (doubling), so rows that keep failing never hold newer ones back', async () => {
    const form = await createPublishedForm(stack.api.url, tenant.key, FIELDS);
    const submissionId = await submitWithOutboxRow(form.id);
    const relayTime = async () => {
      const [row] = await em().execute(
        `select relay_attempts, extract(epoch from next_relay_at - now()) as wait_s from outbox where payload->>'submissionId' = ?`, [submissionId],
      );
      return { attempts: row.relay_attempts, waitS: Number(row.wait_s) };
    };
    await em().execute(`update outbox set next_relay_at = now() - interval '10 years' where payload->>'submissionId' = ?`, [submissionId]);
    await relayOutbox(stack.api.app);
    const first = await relayTime();
    expect(first.attempts).to.equal(1);
    expect(first.waitS).to.be.within(5, 11);
    await em().execute(`update outbox set next_relay_at = now() - interval '10 years' where payload->>'submissionId' = ?`, [submissionId]);
    await relayOutbox(stack.api.app);
    const second = await relayTime();
    expect(second.attempts).to.equal(2);
    expect(second.waitS).to.be.within(15, 21);
  });

  it('queues again a fan-out that used up its attempts, at the next relay of its row', async () => {
    const form = await createPublishedForm(stack.api.url, tenant.key, FIELDS);
    const submissionId = await submitWithOutboxRow(form.id);
    const [outbox] = await em().execute(`select id::text as id from outbox where payload->>'submissionId' = ?`, [submissionId]);
    await stack.api.app.producer.add('submissions', 'fanout', { submissionId, outboxId: outbox.id });
    const queue = stack.api.app.producer.queue('submissions');
    // A worker whose every attempt fails for good plays a fan-out that exhausted its retries.
    const connection = new IORedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
    const failing = new Worker('submissions', async () => { throw new UnrecoverableError('database away'); }, { connection, prefix: stack.prefix });
    try {
      await waitUntil('the fan-out to fail', async () => (await queue.getJob(jobIds.fanout(submissionId)))?.isFailed() ?? false);
    } finally {
      await failing.close();
      connection.disconnect();
    }

    // Its relay time has not come: nothing happens to it.
    await relayOutbox(stack.api.app);
    expect(await (await queue.getJob(jobIds.fanout(submissionId)))!.getState()).to.equal('failed');

    await em().execute(
      `update outbox set next_relay_at = now() - interval '1 second', relay_attempts = 1 where payload->>'submissionId' = ?`, [submissionId],
    );
    await relayOutbox(stack.api.app);
    expect(await (await queue.getJob(jobIds.fanout(submissionId)))!.getState()).to.be.oneOf(['waiting', 'wait', 'prioritized']);
  });

  it('rolls up submissions per organization, form and UTC month', async () => {
    const [a, b] = [await createPublishedForm(stack.api.url, tenant.key, FIELDS), await createPublishedForm(stack.api.url, tenant.key, FIELDS)];
    await submit(a.id);
    await submit(a.id);
    await submit(b.id);
    await rollupUsage(em());
    const rows = await em().execute('select form_id, month, submissions from usage_rollups where organization_id = ? and form_id in (?, ?)', [tenant.organizationId, a.id, b.id]);
    const month = new Date().toISOString().slice(0, 7);
    expect(Object.fromEntries(rows.map((r: any) => [r.form_id, [r.month, r.submissions]]))).to.deep.equal({ [a.id]: [month, 2], [b.id]: [month, 1] });
    await submit(b.id);
    await rollupUsage(em());
    const [after] = await em().execute('select submissions from usage_rollups where form_id = ?', [b.id]);
    expect(after.submissions).to.equal(2);
  });

  it('recounts only the forms with recent submissions each minute, and every form in the hourly maintenance', async () => {
    const form = await createPublishedForm(stack.api.url, tenant.key, FIELDS);
    const [first] = [await submit(form.id), await submit(form.id)];
    await rollupUsage(em());
    const count = async () => (await em().execute('select submissions from usage_rollups where form_id = ?', [form.id]))[0].submissions;
    expect(await count()).to.equal(2);
    // The form's submissions are old news now (rows and day counts moved to the month's first day, and
    // the last run two days ahead, past any day the form was counted on): a deletion is not seen by
    // the incremental run...
    await em().execute(`update submissions set created_at = date_trunc('month', now()) where form_id = ?`, [form.id]);
    await em().execute(`update submission_day_counts set day = date_trunc('month', now())::date where form_id = ?`, [form.id]);
    await em().execute(`update system_settings set value = (now() + interval '2 days')::text where key = 'usage_rollup_from'`);
    expect((await call(stack.api.url, 'DELETE', `/v1/submissions/${first}`, { key: tenant.key })).status).to.equal(204);
    await rollupUsage(em());
    expect(await count()).to.equal(2);
    // ...but by the full recount of the maintenance.
    await runMaintenance(em());
    expect(await count()).to.equal(1);
  });

  it('maintenance deletes idempotency keys older than 24 hours only', async () => {
    await em().execute(
      `insert into idempotency_keys (organization_id, key, request_hash, response_status, response_body, created_at)
       values (?, 'old', 'h', 201, '{}', now() - interval '25 hours'), (?, 'fresh', 'h', 201, '{}', now() - interval '23 hours')`,
      [tenant.organizationId, tenant.organizationId],
    );
    await runMaintenance(em());
    const rows = await em().execute('select key from idempotency_keys where organization_id = ? order by key', [tenant.organizationId]);
    expect(rows.map((r: any) => r.key)).to.deep.equal(['fresh']);
  });

  describe('owed deliveries and retention', () => {
    let webhookId: string;
    before(async () => {
      const res = await call(stack.api.url, 'POST', '/v1/webhooks', {
        key: tenant.key, body: { name: 'hook', url: 'http://127.0.0.1:9/hook', events: ['submission.created'] },
      });
      webhookId = res.body.webhook.id;
    });

    /** A delivery is created no later than it last changed: `createdAt` defaults to `updatedAt`. */
    async function delivery(id: string, status: string, extra: { nextAttemptAt?: string; updatedAt?: string; createdAt?: string } = {}) {
      await em().execute(
        `insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, next_attempt_at, updated_at, created_at)
         values (?, ?, ?, ?, 'form.submission.created', '{}', ?, ${extra.nextAttemptAt ?? 'null'}, ${extra.updatedAt ?? 'now()'},
                 ${extra.createdAt ?? extra.updatedAt ?? 'now()'})`,
        [id, webhookId, tenant.organizationId, `evt_${id}`, status],
      );
      await keepSideRows((sql, params) => em().execute(sql, params), 'id = ?', [id]);
      await em().execute(
        `insert into delivery_attempts (delivery_id, attempt_no, status_code, duration_ms) values (?, 1, 503, 5)`, [id],
      );
    }

    it('the sweep queues an overdue pending delivery that has no live job, under its own job id, brings forward a delayed job whose row is due, and leaves the rest alone', async () => {
      const queue = stack.api.app.producer.queue('webhooks');
      await delivery('dlv_sweepOverdue', 'pending', { nextAttemptAt: `now() - interval '1 hour'` });
      await delivery('dlv_sweepLive', 'pending', { nextAttemptAt: `now() - interval '1 hour'` });
      await delivery('dlv_sweepNotDue', 'pending', { nextAttemptAt: `now() + interval '1 hour'` });
      await delivery('dlv_sweepEnded', 'succeeded', { nextAttemptAt: `now() - interval '1 hour'` });
      await stack.api.app.producer.add('webhooks', 'deliver', { deliveryId: 'dlv_sweepLive' }, { jobId: jobIds.deliver('dlv_sweepLive'), delay: 600_000 });

      const report = await sweepOwed(stack.api.app, 1_000);
      expect(report.deliveriesQueued).to.be.at.least(1);
      const overdue = await queue.getJob(jobIds.deliver('dlv_sweepOverdue'));
      expect(overdue?.data).to.deep.equal({ deliveryId: 'dlv_sweepOverdue' });
      expect(await overdue!.getState()).to.equal('waiting');
      // Its row says it is due while its job still waits out a delay (a hold released): the job goes now, the same job.
      expect(await (await queue.getJob(jobIds.deliver('dlv_sweepLive')))!.getState()).to.equal('waiting');
      expect(await queue.getJob(jobIds.deliver('dlv_sweepNotDue'))).to.equal(undefined);
      expect(await queue.getJob(jobIds.deliver('dlv_sweepEnded'))).to.equal(undefined);
      // Run again: the job it queued is live now, so nothing is queued twice.
      await sweepOwed(stack.api.app, 1_000);
      const jobs = await queue.getJobs(['wait', 'delayed', 'prioritized']);
      expect(jobs.filter((j) => j.data.deliveryId === 'dlv_sweepOverdue')).to.have.length(1);
      expect(jobs.filter((j) => j.data.deliveryId === 'dlv_sweepLive')).to.have.length(1);
    });

    it('maintenance removes ended deliveries (with their attempts), ended CRM syncs and processed outbox rows past RETENTION_DAYS', async () => {
      await delivery('dlv_retOld', 'succeeded', { updatedAt: `now() - interval '31 days'` });
      await delivery('dlv_retOldFailed', 'failed', { updatedAt: `now() - interval '31 days'` });
      await delivery('dlv_retYoung', 'succeeded', { updatedAt: `now() - interval '29 days'` });
      await delivery('dlv_retPending', 'pending', { nextAttemptAt: 'now()', updatedAt: `now() - interval '40 days'` });
      // Created long ago, recovered and failed again yesterday: it ended a day ago, so it stays.
      await delivery('dlv_retRecovered', 'failed', { createdAt: `now() - interval '40 days'`, updatedAt: `now() - interval '1 day'` });
      const form = await createPublishedForm(stack.api.url, tenant.key, FIELDS);
      await em().execute(
        `insert into crm_syncs (id, organization_id, form_id, submission_id, integration_index, provider, status, updated_at) values
           ('crm_retOld', ?, ?, 'sub_retOld', 0, 'hubspot', 'succeeded', now() - interval '31 days'),
           ('crm_retPending', ?, ?, 'sub_retPending', 0, 'hubspot', 'pending', now() - interval '31 days'),
           ('crm_retYoung', ?, ?, 'sub_retYoung', 0, 'hubspot', 'failed', now() - interval '1 day')`,
        [tenant.organizationId, form.id, tenant.organizationId, form.id, tenant.organizationId, form.id],
      );
      const [oldRow] = await em().execute(
        `insert into outbox (topic, payload, processed_at) values ('submission.created', '{"submissionId":"sub_retOld"}', now() - interval '31 days') returning id`,
      );
      const [youngRow] = await em().execute(
        `insert into outbox (topic, payload, processed_at) values ('submission.created', '{"submissionId":"sub_retYoung"}', now() - interval '29 days') returning id`,
      );

      const report = await runMaintenance(em(), { retentionDays: 30 });
      expect(report.deliveriesDeleted).to.be.at.least(2);
      const deliveries = await em().execute(`select id from webhook_deliveries where id like 'dlv_ret%' order by id`);
      expect(deliveries.map((r: any) => r.id)).to.deep.equal(['dlv_retPending', 'dlv_retRecovered', 'dlv_retYoung']);
      const attempts = await em().execute(`select delivery_id from delivery_attempts where delivery_id like 'dlv_ret%' order by delivery_id`);
      expect(attempts.map((r: any) => r.delivery_id)).to.deep.equal(['dlv_retPending', 'dlv_retRecovered', 'dlv_retYoung']);
      // The failed row of the failed delivery deleted went with it; the one kept keeps its own.
      const failedRows = await em().execute(`select delivery_id from webhook_delivery_failed where delivery_id like 'dlv_ret%' order by delivery_id`);
      expect(failedRows.map((r: any) => r.delivery_id)).to.deep.equal(['dlv_retRecovered']);
      const syncs = await em().execute(`select id from crm_syncs where id like 'crm_ret%' order by id`);
      expect(syncs.map((r: any) => r.id)).to.deep.equal(['crm_retPending', 'crm_retYoung']);
      const outbox = await em().execute('select id from outbox where id in (?, ?)', [oldRow.id, youngRow.id]);
      expect(outbox.map((r: any) => String(r.id))).to.deep.equal([String(youngRow.id)]);
    });

    it('retention pages past the deliveries it keeps: ended ones created after 2,500 still pending go in the same run', async () => {
      await em().execute(
        `insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, next_attempt_at, created_at, updated_at)
         select 'dlv_keptAhead' || g, ?, ?, 'evt_keptAhead' || g, 'form.submission.created', '{}', 'pending', now() + interval '1 day',
                now() - interval '60 days' + g * interval '1 millisecond', now() - interval '60 days'
           from generate_series(1, 2500) g`, [webhookId, tenant.organizationId]);
      await keepSideRows((sql, params) => em().execute(sql, params), `id like 'dlv_keptAhead%'`);
      for (let i = 0; i < 3; i++) await delivery(`dlv_endedBehind${i}`, 'succeeded', { createdAt: `now() - interval '59 days'`, updatedAt: `now() - interval '50 days'` });
      expect(await deleteEndedDeliveries(em(), 30)).to.be.at.least(3);
      const [left] = await em().execute(`select count(*) filter (where id like 'dlv_keptAhead%')::int as kept,
        count(*) filter (where id like 'dlv_endedBehind%')::int as ended from webhook_deliveries`);
      expect(left).to.deep.equal({ kept: 2500, ended: 0 });
    });
  });
});
