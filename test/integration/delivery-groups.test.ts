import { expect } from 'chai';
import type { Job } from 'bullmq';
import { sweepOwed } from '../../src/domain/outbox/sweep-owed';
import { eventIdForSubmission } from '../../src/domain/webhooks/events';
import { jobIds, type JobPayload } from '../../src/queues/catalogue';
import { MAX_GROUP_MEMBERS } from '../../src/queues/producer';
import { deliverGroup } from '../../workers/processors/webhooks';
import { startReceiver, type Receiver, type ReceiverReply } from '../support/fakes/receiver';
import { deleteQueueKeys } from '../support/databases';
import { keepSideRows } from '../support/deliveries';
import { call, createPublishedForm, createTenant, type TestTenant } from '../support/harness';
import { startInProcessWorkers, startStack, waitUntil, type InProcessWorkers, type Stack } from '../support/worker-stack';

const FIELDS = [{ id: 'fld_email', type: 'email', label: 'Email', required: true, config: {}, validationRules: {}, order: 0 }];

type GroupJob = Job<JobPayload<'webhooks', 'deliver-group'>>;

/**
 * The deliveries one storing group creates share one job (`deliver-group-<job_group>`), which makes
 * their first attempts. These are the races that job must not lose: the sweeps and a manual retry
 * while it waits or runs, a re-run after a stall, Redis forgetting it. No webhooks worker runs
 * until a test starts one, so a group job waits for as long as a test needs.
 */
describe('delivery groups: one job for the first attempts of a storing group\'s deliveries', function () {
  this.timeout(30_000);
  let stack: Stack;
  let tenant: TestTenant;
  let formId: string;
  let receiver: Receiver;
  let reply: (attempt: number) => ReceiverReply = () => ({ status: 200 });
  let worker: InProcessWorkers | null = null;

  before(async () => {
    stack = await startStack([]);
    tenant = await createTenant(stack.api.app);
    formId = (await createPublishedForm(stack.api.url, tenant.key, FIELDS)).id;
    receiver = await startReceiver({ respond: (attempt) => reply(attempt) });
    for (const name of ['first', 'second']) {
      const res = await call(stack.api.url, 'POST', '/v1/webhooks', {
        key: tenant.key, body: { name, url: `${receiver.url}/${name}`, events: ['submission.created'] },
      });
      expect(res.status).to.equal(201);
    }
  });
  afterEach(async () => {
    await worker?.close();
    worker = null;
    reply = () => ({ status: 200 });
  });
  after(async () => {
    await receiver.close();
    await stack.close();
  });

  const app = () => stack.api.app;
  const queue = () => app().producer.queue('webhooks');
  const em = () => app().orm.em.fork();
  const startWorker = async () => { worker = await startInProcessWorkers(['webhooks'], stack.env); };
  const sentFor = (id: string) => receiver.deliveries.filter((d) => d.headers['x-service-delivery'] === id).length;
  const rowOf = async (id: string) => (await em().execute('select status, attempts, job_group from webhook_deliveries where id = ?', [id]))[0];

  /** Submits `count` submissions at once; the deliveries they created, with their groups. */
  async function submitted(count = 1): Promise<Array<{ id: string; job_group: string }>> {
    const answers = await Promise.all(Array.from({ length: count }, (_, i) => call(stack.api.url, 'POST', `/v1/forms/${formId}/submissions`, {
      key: tenant.key, body: { data: { fld_email: `group-${i}-${Date.now()}@example.com` } },
    })));
    expect(answers.map((a) => a.status)).to.deep.equal(answers.map(() => 201));
    const eventIds = answers.map((a) => eventIdForSubmission(a.body.submission.id));
    const rows = await em().execute<Array<{ id: string; job_group: string }>>(
      'select id, job_group from webhook_deliveries where event_id = any(string_to_array(?, \',\')) order by id', [eventIds.join(',')],
    );
    expect(rows).to.have.length(2 * count);
    return rows;
  }

  const groupJob = async (group: string) => (await queue().getJob(jobIds.deliverGroup(group))) as GroupJob | undefined;
  const waitForGroupJob = async (group: string): Promise<GroupJob> => (await waitUntil(`the job of group ${group}`, () => groupJob(group)))!;
  const delivered = (ids: string[]) => waitUntil('every delivery to succeed', async () => {
    for (const id of ids) if ((await rowOf(id)).status !== 'succeeded') return false;
    return true;
  }, 10_000);
  /** Longer than FAST_RETRIES' delays and a worker's fetch: what would go twice has gone by then. */
  const settleAWhile = () => new Promise((r) => setTimeout(r, 800));

  it('gives concurrent submissions\' deliveries one job per storing group, naming exactly its rows, and delivers each once', async () => {
    const rows = await submitted(6);
    const groups = [...new Set(rows.map((r) => r.job_group))];
    expect(groups.every((g) => /^grp_[0-9A-Za-z]{20}$/.test(g))).to.equal(true);
    expect(groups.length).to.be.lessThan(rows.length);
    for (const group of groups) {
      const job = await waitForGroupJob(group);
      expect(job.data.deliveries.map((m) => m.deliveryId).sort())
        .to.deep.equal(rows.filter((r) => r.job_group === group).map((r) => r.id).sort());
      expect(job.opts.attempts).to.equal(1);
    }
    for (const row of rows) expect(await queue().getJob(jobIds.deliver(row.id)), row.id).to.equal(undefined);

    await startWorker();
    await delivered(rows.map((r) => r.id));
    await settleAWhile();
    for (const row of rows) expect(sentFor(row.id), row.id).to.equal(1);
    // Run once, then gone: a completed group job says nothing its rows do not.
    for (const group of groups) expect(await groupJob(group)).to.equal(undefined);
  });

  it('the sweep of owed work leaves a waiting group job\'s deliveries to it, and queues them on their own once Redis forgot it', async () => {
    const rows = await submitted();
    await waitForGroupJob(rows[0].job_group);
    // The database is the whole suite's: other tests' owed rows are swept too. Made the oldest due,
    // these two are in the sweep's first batch (OWED_BATCH) whatever else is owed.
    await em().execute(`update webhook_deliveries set next_attempt_at = '2000-01-01' where id in (?, ?)`, [rows[0].id, rows[1].id]);
    await keepSideRows((sql, params) => em().execute(sql, params), 'id in (?, ?)', [rows[0].id, rows[1].id]);
    await sweepOwed(app(), 0);
    for (const row of rows) expect(await queue().getJob(jobIds.deliver(row.id))).to.equal(undefined);

    await deleteQueueKeys(stack.prefix);
    await sweepOwed(app(), 0);
    const ownJobs = new Set(rows.map((row) => jobIds.deliver(row.id)));
    for (const id of ownJobs) expect(await queue().getJob(id)).to.not.equal(undefined);
    for (const job of await queue().getJobs(['waiting', 'delayed', 'prioritized'])) if (!ownJobs.has(job.id!)) await job.remove();

    await startWorker();
    await delivered(rows.map((r) => r.id));
    await settleAWhile();
    for (const row of rows) expect(sentFor(row.id)).to.equal(1);
  });

  it('a manual retry while the group job waits leaves the delivery to it: one attempt', async () => {
    const rows = await submitted();
    await waitForGroupJob(rows[0].job_group);
    const [{ webhook_id: webhookId }] = await em().execute('select webhook_id from webhook_deliveries where id = ?', [rows[0].id]);
    const retried = await call(stack.api.url, 'POST', `/v1/webhooks/${webhookId}/deliveries/${rows[0].id}/retry`, { key: tenant.key });
    expect(retried.status).to.equal(202);
    expect(await queue().getJob(jobIds.deliver(rows[0].id))).to.equal(undefined);

    await startWorker();
    await delivered(rows.map((r) => r.id));
    await settleAWhile();
    for (const row of rows) expect(sentFor(row.id)).to.equal(1);
  });

  it('a manual retry while the group job makes the attempt leaves it to finish: no second attempt at once', async () => {
    reply = () => ({ status: 200, delayMs: 1_000 });
    const rows = await submitted();
    await waitForGroupJob(rows[0].job_group);
    await startWorker();
    await waitUntil('the first attempt to be in flight', async () => sentFor(rows[0].id) === 1);
    const [{ webhook_id: webhookId }] = await em().execute('select webhook_id from webhook_deliveries where id = ?', [rows[0].id]);
    const retried = await call(stack.api.url, 'POST', `/v1/webhooks/${webhookId}/deliveries/${rows[0].id}/retry`, { key: tenant.key });
    expect(retried.status).to.equal(202);
    expect(await queue().getJob(jobIds.deliver(rows[0].id))).to.equal(undefined);

    await delivered(rows.map((r) => r.id));
    await settleAWhile();
    expect(sentFor(rows[0].id)).to.equal(1);
    expect((await rowOf(rows[0].id)).attempts).to.equal(1);
  });

  it('a run after a stall attempts only the members the dead run had not recorded an attempt of', async () => {
    const rows = await submitted();
    const job = await waitForGroupJob(rows[0].job_group);
    // The dead run had recorded the first member's (failed) attempt and queued its retry for later.
    await em().execute(`update webhook_deliveries set attempts = 1, next_attempt_at = now() + interval '1 hour' where id = ?`, [rows[0].id]);
    await keepSideRows((sql, params) => em().execute(sql, params), 'id = ?', [rows[0].id]);

    expect(await deliverGroup(app(), job)).to.deep.equal({ deliveries: 2, attempted: 1 });
    expect(sentFor(rows[0].id)).to.equal(0);
    expect(sentFor(rows[1].id)).to.equal(1);
    expect(await deliverGroup(app(), job)).to.deep.equal({ deliveries: 2, attempted: 0 });
    expect(sentFor(rows[1].id)).to.equal(1);
    await job.remove();
  });

  it('a failed first attempt continues as the delivery\'s own job, due when its row says', async () => {
    reply = () => ({ status: 500 });
    const rows = await submitted();
    await startWorker();
    await waitUntil('both first attempts', async () => sentFor(rows[0].id) === 1 && sentFor(rows[1].id) === 1);
    reply = () => ({ status: 200 });
    await delivered(rows.map((r) => r.id));
    for (const row of rows) {
      expect(await rowOf(row.id)).to.include({ status: 'succeeded', attempts: 2 });
      expect(await (await queue().getJob(jobIds.deliver(row.id)))?.getState()).to.equal('completed');
    }
    await settleAWhile();
    for (const row of rows) expect(sentFor(row.id)).to.equal(2);
  });

  it('a delivery handed over after its group\'s job was added gets a job of its own', async () => {
    const producer = app().producer;
    await producer.deliverSoon('dlv_groupEarly', 'grp_handedOverLate');
    await producer.deliverSoon('dlv_groupLate', 'grp_handedOverLate');
    const job = (await groupJob('grp_handedOverLate'))!;
    expect(job.data.deliveries.map((m) => m.deliveryId)).to.deep.equal(['dlv_groupEarly']);
    expect(await queue().getJob(jobIds.deliver('dlv_groupLate'))).to.not.equal(undefined);
    await deleteQueueKeys(stack.prefix);
  });

  it('holds at most MAX_GROUP_MEMBERS deliveries in a group job; the rest of the group get jobs of their own', async () => {
    const ids = Array.from({ length: MAX_GROUP_MEMBERS + 2 }, (_, i) => `dlv_big${String(i).padStart(3, '0')}`);
    await Promise.all(ids.map((id) => app().producer.deliverSoon(id, 'grp_big')));
    const job = (await groupJob('grp_big'))!;
    expect(job.data.deliveries.map((m) => m.deliveryId)).to.deep.equal(ids.slice(0, MAX_GROUP_MEMBERS));
    for (const id of ids.slice(0, MAX_GROUP_MEMBERS)) expect(await queue().getJob(jobIds.deliver(id)), id).to.equal(undefined);
    for (const id of ids.slice(MAX_GROUP_MEMBERS)) expect(await queue().getJob(jobIds.deliver(id)), id).to.not.equal(undefined);
    await deleteQueueKeys(stack.prefix);
  });
});
