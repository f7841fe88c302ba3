import { expect } from 'chai';
import { UnrecoverableError, Worker } from 'bullmq';
import IORedis from 'ioredis';
import { relayOutbox, rollupUsage, runMaintenance } from '../../src/domain/usage/usage-jobs';
import { jobIds } from '../../src/queues/catalogue';
import { call, createPublishedForm, createTenant, type TestTenant } from '../support/harness';
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

  it('relays only outbox rows older than 5 s, with the deterministic fan-out job id', async () => {
    const form = await createPublishedForm(stack.api.url, tenant.key, FIELDS);
    const [old, young] = [await submit(form.id), await submit(form.id)];
    const queue = stack.api.app.producer.queue('submissions');
    await queue.remove(jobIds.fanout(old));
    await queue.remove(jobIds.fanout(young));
    // Oldest rows are relayed first; other test files may have left unconsumed rows behind.
    await em().execute(`update outbox set created_at = now() - interval '10 years' where payload->>'submissionId' = ?`, [old]);

    expect(await relayOutbox(stack.api.app)).to.be.at.least(1);
    const relayed = await queue.getJob(jobIds.fanout(old));
    expect(relayed?.name).to.equal('fanout');
    expect(relayed?.data.submissionId).to.equal(old);
    expect(await queue.getJob(jobIds.fanout(young))).to.equal(undefined);
    await relayOutbox(stack.api.app);
    const jobs = await queue.getJobs(['wait', 'delayed', 'prioritized']);
    expect(jobs.filter((j) => j.data.submissionId === old)).to.have.length(1);
  });

  it('retries a fan-out that used up its attempts once its outbox row has waited 30 minutes', async () => {
    const form = await createPublishedForm(stack.api.url, tenant.key, FIELDS);
    const submissionId = await submit(form.id);
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

    await em().execute(`update outbox set created_at = now() - interval '20 minutes' where payload->>'submissionId' = ?`, [submissionId]);
    await relayOutbox(stack.api.app);
    expect(await (await queue.getJob(jobIds.fanout(submissionId)))!.getState()).to.equal('failed');

    await em().execute(`update outbox set created_at = now() - interval '31 minutes' where payload->>'submissionId' = ?`, [submissionId]);
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
});
