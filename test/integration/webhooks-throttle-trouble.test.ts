import { expect } from 'chai';
import { mostInWindow, startReceiver, type Delivery, type Receiver, type ReceiverReply } from '../support/fakes/receiver';
import { call, createPublishedForm, createTenant, fieldInput, startTestApp, type TestApp, type TestTenant } from '../support/harness';
import { deleteQueueKeys } from '../support/databases';
import { freshQueuePrefix, spawnWorker, waitUntil, type WorkerChild } from '../support/worker-stack';

const FIELDS = [fieldInput('fld_n', 'text', 'N', { required: true })];
const RATE = 2;


/**
 * A throttled backlog under trouble: the worker restarts, the worker stalls, a pause ends. A
 * reservation whose slot passed meanwhile is spaced again at the rate: no sliding second holds
 * more than throttleRate + 1 arrivals, and every delivery arrives once.
 */
describe('throttleRate under trouble (restart, stall, pause)', function () {
  this.timeout(120_000);
  const prefix = freshQueuePrefix();
  const env = { QUEUE_PREFIX: prefix, WEBHOOK_RETRY_DELAYS_MS: '100,200,300' };
  let t: TestApp;
  let tenant: TestTenant;
  let formId: string;
  let worker: WorkerChild;
  const receivers: Receiver[] = [];

  async function startWorker(): Promise<WorkerChild> {
    const w = spawnWorker('webhooks', { ...env, LOG_LEVEL: 'info' });
    await waitUntil('the worker to start', async () => w.output().includes('workers started'), 30_000);
    return w;
  }

  before(async () => {
    t = await startTestApp(env);
    tenant = await createTenant(t.app);
    formId = (await createPublishedForm(t.url, tenant.key, FIELDS)).id;
    worker = await startWorker();
  });
  after(async () => {
    await worker?.stop();
    await Promise.all(receivers.map((r) => r.close()));
    await t.close();
    await deleteQueueKeys(prefix);
  });

  async function backlog(n: number, respond?: (attempt: number) => ReceiverReply): Promise<Receiver> {
    const receiver = await startReceiver({ respond });
    receivers.push(receiver);
    const hook = await call(t.url, 'POST', '/v1/webhooks', {
      key: tenant.key, body: { name: 'slow', url: receiver.url, events: ['submission.created'], formId, throttleRate: RATE },
    });
    expect(hook.status, hook.text).to.equal(201);
    const answers = await Promise.all(Array.from({ length: n }, (_, i) => call(t.url, 'POST', `/v1/forms/${formId}/submissions`, {
      key: tenant.key, body: { data: { fld_n: String(i) } },
    })));
    expect(answers.map((a) => a.status)).to.deep.equal(new Array(n).fill(201));
    return receiver;
  }

  function check(receiver: Receiver, n: number, what: string): void {
    const most = mostInWindow(receiver.deliveries);
    console.log(`      ${what}: ${receiver.deliveries.length} arrivals, most in any second ${most} (rate ${RATE})`);
    expect(most).to.be.at.most(RATE + 1);
    expect(new Set(receiver.deliveries.map((d) => d.headers['x-service-delivery'])).size).to.equal(n);
  }

  it('the worker restarts with a backlog whose slots passed while it was away', async () => {
    const receiver = await backlog(10);
    await receiver.waitFor(2, 15_000);
    await worker.stop();
    // Four seconds away: eight slots pass.
    await new Promise((r) => setTimeout(r, 4_000));
    worker = await startWorker();
    await receiver.waitFor(10, 30_000);
    check(receiver, 10, 'restart after 4 s');
  });

  it('the worker stalls (SIGSTOP) for 3 s with a backlog', async () => {
    const receiver = await backlog(10);
    await receiver.waitFor(2, 15_000);
    worker.child.kill('SIGSTOP');
    await new Promise((r) => setTimeout(r, 3_000));
    worker.child.kill('SIGCONT');
    await receiver.waitFor(10, 30_000);
    check(receiver, 10, 'stall of 3 s');
  });

  it('a 429 pause shorter than the backlog ends', async () => {
    const receiver = await backlog(10, (attempt) => (attempt === 1 ? { status: 429, headers: { 'Retry-After': '2' } } : { status: 200 }));
    await receiver.waitFor(11, 30_000);
    // The 429'd delivery's answer is not a delivery that arrived for good; every other counts.
    const delivered = receiver.deliveries.slice(1);
    const most = mostInWindow(delivered);
    console.log(`      pause of 2 s ending: ${delivered.length} arrivals after the 429, most in any second ${most} (rate ${RATE})`);
    expect(most).to.be.at.most(RATE + 1);
  });
});
