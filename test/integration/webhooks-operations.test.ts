import { expect } from 'chai';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { readFileSync } from 'node:fs';
import * as nodePath from 'node:path';
import { fanOutDeletion } from '../../src/domain/submissions/fanout';
import { relayOutbox } from '../../src/domain/outbox/relay';
import { verifySignature } from '../../src/domain/webhooks/signing';
import { RECOVERY_BATCH } from '../../src/domain/webhooks/webhook-service';
import { jobIds } from '../../src/queues/catalogue';
import { startReceiver, type Delivery, type Receiver, type ReceiverReply } from '../support/fakes/receiver';
import { call, createKey, createPublishedForm, createTenant, type TestTenant } from '../support/harness';
import { keepSideRows } from '../support/deliveries';
import { deliveryProblems, openapiPath } from '../support/openapi-webhooks';
import { startStack, waitUntil, type Stack } from '../support/worker-stack';

const FIELDS = [
  { id: 'fld_email', type: 'email', label: 'Email', required: true, config: {}, validationRules: {}, order: 0 },
  { id: 'fld_name', type: 'name', label: 'Full name', required: false, config: { sensitive: true }, validationRules: {}, order: 1 },
];
const WEBHOOK_KEYS = ['createdAt', 'enabled', 'events', 'formId', 'id', 'name', 'pausedUntil', 'secret', 'throttleRate', 'updatedAt', 'url'];
const SECRET_PATTERN = /^whsec_[a-zA-Z0-9]{32,}$/;

const quietly = (ms: number) => new Promise((r) => setTimeout(r, ms));

function signedWith(secret: string, d: Delivery, header = 'x-service-signature'): boolean {
  return verifySignature({ secret, signature: d.headers[header], timestamp: d.headers['x-service-timestamp'], rawBody: d.rawBody });
}

/** Every delivery a receiver got validates against the `webhooks` section of openapi.yaml. */
function expectDocumented(receiver: Receiver): void {
  expect(receiver.deliveries).to.not.have.length(0);
  for (const d of receiver.deliveries) expect(deliveryProblems(d), d.rawBody).to.deep.equal([]);
}

/** The verifier the README shows receivers, configured with the secrets it knows. */
function readmeVerifier(secrets: string[]): (headers: Record<string, string>, rawBody: string) => boolean {
  const readme = readFileSync(nodePath.join(nodePath.dirname(openapiPath()), 'README.md'), 'utf8');
  const block = readme.split('```js\n').find((b) => b.includes('function isValidDelivery'))!;
  const code = block.slice(0, block.indexOf('http.createServer('));
  // eslint-disable-next-line no-new-func
  return new Function('require', 'process', `${code}\nreturn isValidDelivery;`)(require, { env: { WEBHOOK_SECRETS: secrets.join(',') } });
}

interface Setup {
  tenant: TestTenant;
  formId: string;
  receiver: Receiver;
  webhook: { id: string; secret: string };
}

function harness(getStack: () => Stack) {
  const receivers: Receiver[] = [];
  const url = () => getStack().api.url;
  const api = (method: string, path: string, key: string, body?: unknown) => call(url(), method, path, { key, body });

  async function setup(opts: { events?: string[]; respond?: (attempt: number, req: Delivery) => ReceiverReply } = {}): Promise<Setup> {
    const tenant = await createTenant(getStack().api.app);
    const form = await createPublishedForm(url(), tenant.key, FIELDS);
    const receiver = await startReceiver({ respond: opts.respond });
    receivers.push(receiver);
    const res = await api('POST', '/v1/webhooks', tenant.key, { name: 'hook', url: receiver.url, events: opts.events ?? ['submission.created'] });
    expect(res.status, res.text).to.equal(201);
    return { tenant, formId: form.id, receiver, webhook: res.body.webhook };
  }

  async function submit(s: Setup): Promise<{ id: string; createdAt: string }> {
    const res = await api('POST', `/v1/forms/${s.formId}/submissions`, s.tenant.key, { data: { fld_email: 'ada@example.com', fld_name: { format: 'full', fullName: 'Ada L' } } });
    expect(res.status, res.text).to.equal(201);
    return res.body.submission;
  }

  async function deliveries(s: Setup): Promise<any[]> {
    return (await api('GET', `/v1/webhooks/${s.webhook.id}/deliveries`, s.tenant.key)).body.deliveries;
  }

  async function allSettled(s: Setup, count: number, status: string): Promise<any[]> {
    return (await waitUntil(`${count} ${status} deliveries`, async () => {
      const list = await deliveries(s);
      return list.length === count && list.every((d) => d.status === status) ? list : null;
    }, 8_000))!;
  }

  return { receivers, api, setup, submit, deliveries, allSettled };
}

describe('webhook operations (workers in process)', () => {
  let stack: Stack;
  const h = harness(() => stack);
  before(async () => { stack = await startStack(['submissions', 'webhooks']); });
  after(async () => {
    await Promise.all(h.receivers.map((r) => r.close()));
    await stack.close();
  });

  describe('secret rotation', () => {
    it('signs every attempt with the new secret and, within the grace, with the previous one too', async () => {
      const s = await h.setup({ respond: (attempt) => ({ status: attempt === 1 ? 500 : 200 }) });
      const before = Date.now();
      const rotated = await h.api('POST', `/v1/webhooks/${s.webhook.id}/rotate-secret`, s.tenant.key);
      expect(rotated.status, rotated.text).to.equal(200);
      expect(Object.keys(rotated.body).sort()).to.deep.equal(['previousSecretExpiresAt', 'webhook']);
      expect(Object.keys(rotated.body.webhook).sort()).to.deep.equal(WEBHOOK_KEYS);
      const newSecret = rotated.body.webhook.secret as string;
      expect(newSecret).to.match(SECRET_PATTERN).and.not.equal(s.webhook.secret);
      const expiresIn = Date.parse(rotated.body.previousSecretExpiresAt) - before;
      expect(expiresIn).to.be.within(86_400_000 - 5_000, 86_400_000 + 5_000);

      await h.submit(s);
      await s.receiver.waitFor(2);
      await h.allSettled(s, 1, 'succeeded');
      for (const d of s.receiver.deliveries) {
        expect(signedWith(newSecret, d)).to.equal(true);
        expect(signedWith(s.webhook.secret, d)).to.equal(false);
        expect(signedWith(s.webhook.secret, d, 'x-service-signature-previous')).to.equal(true);
      }
      const test = await h.api('POST', `/v1/webhooks/${s.webhook.id}/test`, s.tenant.key);
      expect(test.body.delivered).to.equal(true);
      const sent = s.receiver.deliveries[2];
      expect(sent.headers['x-service-event']).to.equal('webhook.test');
      expect(signedWith(newSecret, sent)).to.equal(true);
      expect(signedWith(s.webhook.secret, sent, 'x-service-signature-previous')).to.equal(true);
      expectDocumented(s.receiver);

      // The README's receiver accepts every delivery of the grace whichever secrets it has deployed.
      for (const secrets of [[s.webhook.secret], [newSecret], [s.webhook.secret, newSecret]]) {
        const verify = readmeVerifier(secrets);
        for (const d of s.receiver.deliveries) expect(verify(d.headers, d.rawBody), `${secrets.length} secrets`).to.equal(true);
      }
      const stranger = readmeVerifier(['whsec_not_ours']);
      expect(s.receiver.deliveries.some((d) => stranger(d.headers, d.rawBody))).to.equal(false);

      // The Standard Webhooks libraries verify every delivery of the grace with the old and the new
      // secret alike; webhook-id is the event id, the same on the retry, and the timestamp the same seconds.
      const [first, retry] = s.receiver.deliveries;
      expect(first.headers['webhook-id']).to.equal(JSON.parse(first.rawBody).id).and.equal(retry.headers['webhook-id']);
      for (const d of s.receiver.deliveries) {
        expect(d.headers['webhook-timestamp']).to.equal(d.headers['x-service-timestamp']);
        expect(d.headers['webhook-signature'].split(' ')).to.have.length(2);
        for (const secret of [s.webhook.secret, newSecret]) {
          expect(new StandardWebhook(secret).verify(d.rawBody, d.headers)).to.deep.equal(JSON.parse(d.rawBody));
          expect(new SvixWebhook(secret).verify(d.rawBody, d.headers)).to.deep.equal(JSON.parse(d.rawBody));
        }
        expect(() => new StandardWebhook(`whsec_${Buffer.alloc(24, 7).toString('base64')}`).verify(d.rawBody, d.headers)).to.throw();
      }
    });

    it('retires the previous secret at once with graceSeconds 0, and keeps only the last replaced one', async () => {
      const s = await h.setup();
      const rotate = async (body?: unknown) => {
        const res = await h.api('POST', `/v1/webhooks/${s.webhook.id}/rotate-secret`, s.tenant.key, body);
        expect(res.status, res.text).to.equal(200);
        return res.body as { webhook: { secret: string }; previousSecretExpiresAt: string | null };
      };
      const b = await rotate({ graceSeconds: 3600 });
      const c = await rotate({ graceSeconds: 0 });
      expect(c.previousSecretExpiresAt).to.equal(null);
      await h.api('POST', `/v1/webhooks/${s.webhook.id}/test`, s.tenant.key);
      await s.receiver.waitFor(1);
      const [afterZero] = s.receiver.deliveries;
      expect(signedWith(c.webhook.secret, afterZero)).to.equal(true);
      expect(afterZero.headers).to.not.have.property('x-service-signature-previous');

      const d = await rotate({ graceSeconds: 60 });
      expect(Date.parse(d.previousSecretExpiresAt!) - Date.now()).to.be.within(55_000, 61_000);
      await h.submit(s);
      await s.receiver.waitFor(2);
      const delivered = s.receiver.deliveries[1];
      expect(signedWith(d.webhook.secret, delivered)).to.equal(true);
      expect(signedWith(c.webhook.secret, delivered, 'x-service-signature-previous')).to.equal(true);
      expect(signedWith(b.webhook.secret, delivered, 'x-service-signature-previous')).to.equal(false);

      // Once the grace is over, the previous signature is gone.
      await stack.api.app.orm.em.fork().execute(
        `update webhooks set previous_secret_expires_at = now() - interval '1 second' where id = ?`, [s.webhook.id],
      );
      await h.api('POST', `/v1/webhooks/${s.webhook.id}/test`, s.tenant.key);
      await s.receiver.waitFor(3);
      expect(s.receiver.deliveries[2].headers).to.not.have.property('x-service-signature-previous');
      expect(signedWith(d.webhook.secret, s.receiver.deliveries[2])).to.equal(true);
      expectDocumented(s.receiver);
    });

    it('refuses a bad grace, and answers 404 and 403 like the other webhook routes', async () => {
      const s = await h.setup();
      const path = `/v1/webhooks/${s.webhook.id}/rotate-secret`;
      for (const body of [{ graceSeconds: -1 }, { graceSeconds: 604_801 }, { graceSeconds: 1.5 }, { graceSeconds: 'soon' }, { other: 1 }, []]) {
        const res = await h.api('POST', path, s.tenant.key, body);
        expect(res.status, JSON.stringify(body)).to.equal(400);
        expect(res.body.error).to.equal('validation_error');
      }
      expect((await call(stack.api.url, 'POST', path, { key: s.tenant.key, body: '{nope' })).body.error).to.equal('invalid_json');
      const max = await h.api('POST', path, s.tenant.key, { graceSeconds: 604_800 });
      expect(max.status).to.equal(200);
      expect(Date.parse(max.body.previousSecretExpiresAt) - Date.now()).to.be.within(604_795_000, 604_801_000);

      const other = await createTenant(stack.api.app);
      expect((await h.api('POST', path, other.key, {})).status).to.equal(404);
      expect((await h.api('POST', '/v1/webhooks/wh_missing/rotate-secret', s.tenant.key, {})).status).to.equal(404);
      const readOnly = await createKey(stack.api.app, s.tenant.organizationId, ['webhooks:read']);
      expect((await h.api('POST', path, readOnly, {})).status).to.equal(403);
      // the secret shown by the rotation is the one that signs
      await h.api('POST', `/v1/webhooks/${s.webhook.id}/test`, s.tenant.key);
      await s.receiver.waitFor(1);
      expect(signedWith(max.body.webhook.secret, s.receiver.deliveries[0])).to.equal(true);
    });
  });

  describe('recovery', () => {
    it('re-sends each failed delivery of the window once, with its original delivery id', async () => {
      let up = false;
      const s = await h.setup({ respond: () => ({ status: up ? 200 : 500 }) });
      await h.submit(s);
      await h.submit(s);
      const failed = await h.allSettled(s, 2, 'failed');
      const sentBefore = s.receiver.deliveries.length;
      expect(sentBefore).to.equal(8); // 4 attempts each

      up = true;
      const res = await h.api('POST', `/v1/webhooks/${s.webhook.id}/recover`, s.tenant.key, { since: new Date(Date.now() - 60_000).toISOString() });
      expect(res.status, res.text).to.equal(202);
      expect(res.body).to.deep.equal({ queued: 2 });
      const recovered = await h.allSettled(s, 2, 'succeeded');
      await quietly(500);
      const resent = s.receiver.deliveries.slice(sentBefore);
      expect(resent.map((d) => d.headers['x-service-delivery']).sort()).to.deep.equal(failed.map((d) => d.id).sort());
      for (const d of resent) expect(signedWith(s.webhook.secret, d)).to.equal(true);
      expect(recovered.map((d) => d.attempts)).to.deep.equal([5, 5]);

      const again = await h.api('POST', `/v1/webhooks/${s.webhook.id}/recover`, s.tenant.key, { since: new Date(Date.now() - 60_000).toISOString() });
      expect(again.body).to.deep.equal({ queued: 0 });
      await quietly(300);
      expect(s.receiver.deliveries).to.have.length(sentBefore + 2);
      expectDocumented(s.receiver);
    });

    it('takes only deliveries created in [since, until)', async () => {
      const s = await h.setup({ respond: () => ({ status: 500 }) });
      await h.submit(s);
      await h.submit(s);
      await h.submit(s);
      const failed = await h.allSettled(s, 3, 'failed');
      const em = stack.api.app.orm.em.fork();
      // The service never changes a delivery's created_at: moved by hand here, with its failed row's copy (recovery's window).
      const at = async (id: string, iso: string) => {
        await em.execute('update webhook_deliveries set created_at = ? where id = ?', [iso, id]);
        await keepSideRows((sql, params) => em.execute(sql, params), 'id = ?', [id]);
      };
      const [early, inside, edge] = failed.map((d) => d.id);
      await at(early, '2026-01-01T09:59:59.999Z');
      await at(inside, '2026-01-01T10:00:00.000Z');
      await at(edge, '2026-01-01T11:00:00.000Z');
      const res = await h.api('POST', `/v1/webhooks/${s.webhook.id}/recover`, s.tenant.key, {
        since: '2026-01-01T10:00:00.000Z', until: '2026-01-01T11:00:00.000Z',
      });
      expect(res.body).to.deep.equal({ queued: 1 });
      const list = await h.deliveries(s);
      expect(list.find((d) => d.id === inside).status).to.be.oneOf(['pending', 'failed']);
      expect(list.find((d) => d.id === early).status).to.equal('failed');
      expect(list.find((d) => d.id === edge).status).to.equal('failed');
      await waitUntil('the recovered delivery to fail again', async () =>
        (await h.deliveries(s)).find((d) => d.id === inside && d.status === 'failed' && d.attempts === 8));
    });

    it('answers 409 webhook_disabled on a disabled webhook, 400 on a bad window, 404 for another organization', async () => {
      const s = await h.setup();
      const path = `/v1/webhooks/${s.webhook.id}/recover`;
      for (const body of [{}, { since: 'yesterday' }, { since: '2026-01-02T00:00:00Z', until: '2026-01-01T00:00:00Z' }, { since: '2026-01-01T00:00:00Z', extra: 1 }]) {
        const res = await h.api('POST', path, s.tenant.key, body);
        expect(res.status, JSON.stringify(body)).to.equal(400);
        expect(res.body.error).to.equal('validation_error');
      }
      const other = await createTenant(stack.api.app);
      expect((await h.api('POST', path, other.key, { since: '2026-01-01T00:00:00Z' })).status).to.equal(404);
      await h.api('PUT', `/v1/webhooks/${s.webhook.id}`, s.tenant.key, { enabled: false });
      const disabled = await h.api('POST', path, s.tenant.key, { since: '2026-01-01T00:00:00Z' });
      expect(disabled.status).to.equal(409);
      expect(disabled.body.error).to.equal('webhook_disabled');
    });
  });

  describe('submission.deleted', () => {
    it('sends a signed deletion event, retried like the created one, only to webhooks subscribed to it', async () => {
      const s = await h.setup({ events: ['form.submission.deleted'], respond: (attempt) => ({ status: attempt === 1 ? 503 : 200 }) });
      expect(s.webhook).to.deep.include({ events: ['submission.deleted'] });
      const both = await startReceiver();
      const createdOnly = await startReceiver();
      h.receivers.push(both, createdOnly);
      for (const [receiver, events] of [[both, ['submission.created', 'submission.deleted']], [createdOnly, ['submission.created']]] as const) {
        expect((await h.api('POST', '/v1/webhooks', s.tenant.key, { name: 'x', url: receiver.url, events, formId: s.formId })).status).to.equal(201);
      }
      const submission = await h.submit(s);
      await Promise.all([both.waitFor(1), createdOnly.waitFor(1)]);
      const deletedAt = Date.now();
      expect((await h.api('DELETE', `/v1/submissions/${submission.id}`, s.tenant.key)).status).to.equal(204);

      await Promise.all([s.receiver.waitFor(2), both.waitFor(2)]);
      const [first, second] = s.receiver.deliveries;
      expect(first.headers['x-service-delivery']).to.equal(second.headers['x-service-delivery']);
      for (const d of s.receiver.deliveries) {
        expect(signedWith(s.webhook.secret, d)).to.equal(true);
        expect(d.headers).to.include({ 'x-service-event': 'form.submission.deleted', 'user-agent': 'FormService-Webhooks/1', 'content-type': 'application/json' });
        expect(d.rawBody).to.equal(first.rawBody);
      }
      const event = JSON.parse(first.rawBody);
      expect(event).to.deep.equal({
        id: `evt_${submission.id.slice(4)}_deleted`,
        type: 'form.submission.deleted',
        createdAt: event.createdAt,
        data: { form: { id: s.formId, title: 'Test form' }, submission: { id: submission.id, formId: s.formId } },
      });
      expect(Math.abs(Date.parse(event.createdAt) - deletedAt)).to.be.below(5_000);
      const [delivery] = await h.allSettled(s, 1, 'succeeded');
      expect(delivery).to.include({ id: first.headers['x-service-delivery'], eventId: event.id, eventType: 'form.submission.deleted', attempts: 2 });
      expect(JSON.parse(both.deliveries[1].rawBody).type).to.equal('form.submission.deleted');
      await quietly(300);
      expect(createdOnly.deliveries).to.have.length(1);
      for (const r of [s.receiver, both, createdOnly]) expectDocumented(r);

      // A re-run of the fan-out creates nothing new.
      const em = stack.api.app.orm.em.fork();
      const [outbox] = await em.execute(`select id::text as id, processed_at from outbox where topic = 'submission.deleted' and payload->>'submissionId' = ?`, [submission.id]);
      expect(outbox.processed_at).to.not.equal(null);
      expect(await fanOutDeletion(em, { submissionId: submission.id, outboxId: outbox.id })).to.deep.equal({ deliveryIds: [] });
      const [{ n }] = await em.execute('select count(*)::int as n from webhook_deliveries where event_id = ?', [event.id]);
      expect(n).to.equal(2);
    });

    it('writes no event for a submission that is not there', async () => {
      const s = await h.setup({ events: ['submission.deleted'] });
      const submission = await h.submit(s);
      const other = await createTenant(stack.api.app);
      expect((await h.api('DELETE', `/v1/submissions/${submission.id}`, other.key)).status).to.equal(404);
      expect((await h.api('DELETE', `/v1/submissions/${submission.id}`, s.tenant.key)).status).to.equal(204);
      expect((await h.api('DELETE', `/v1/submissions/${submission.id}`, s.tenant.key)).status).to.equal(404);
      const [{ n }] = await stack.api.app.orm.em.fork().execute(
        `select count(*)::int as n from outbox where topic = 'submission.deleted' and payload->>'submissionId' = ?`, [submission.id],
      );
      expect(n).to.equal(1);
      await s.receiver.waitFor(1);
      await quietly(300);
      expect(s.receiver.deliveries).to.have.length(1);
    });
  });

  describe('at most 100 webhooks per organization', () => {
    it('refuses the 101st with 400 validation_error, also under concurrent creates', async () => {
      const tenant = await createTenant(stack.api.app);
      const receiver = await startReceiver();
      h.receivers.push(receiver);
      const create = () => h.api('POST', '/v1/webhooks', tenant.key, { name: 'x', url: receiver.url, events: ['submission.created'] });
      for (let i = 0; i < 90; i += 10) {
        const batch = await Promise.all(Array.from({ length: 10 }, create));
        expect(batch.map((r) => r.status)).to.deep.equal(Array(10).fill(201));
      }
      const racing = await Promise.all(Array.from({ length: 15 }, create));
      expect(racing.filter((r) => r.status === 201)).to.have.length(10);
      const refused = racing.filter((r) => r.status !== 201);
      expect(refused.map((r) => [r.status, r.body.error])).to.deep.equal(Array(5).fill([400, 'validation_error']));
      expect(refused[0].body.message).to.match(/100 webhooks/);
      const list = await h.api('GET', '/v1/webhooks', tenant.key);
      expect(list.body.webhooks).to.have.length(100);

      expect((await h.api('DELETE', `/v1/webhooks/${list.body.webhooks[0].id}`, tenant.key)).status).to.equal(204);
      expect((await create()).status).to.equal(201);
      expect((await create()).status).to.equal(400);
      // another organization is not affected
      const other = await createTenant(stack.api.app);
      expect((await h.api('POST', '/v1/webhooks', other.key, { name: 'x', url: receiver.url, events: ['submission.created'] })).status).to.equal(201);
    });
  });
});

describe('manual retry of a delivery waiting on a long retry delay', () => {
  let stack: Stack;
  const h = harness(() => stack);
  // The first attempt fails and the next one is a minute away: only a manual retry sends it sooner.
  before(async () => { stack = await startStack(['submissions', 'webhooks'], { WEBHOOK_RETRY_DELAYS_MS: '60000,60000' }); });
  after(async () => {
    await Promise.all(h.receivers.map((r) => r.close()));
    await stack.close();
  });

  const jobsOf = async (deliveryId: string) => {
    const jobs = await stack.api.app.producer.queue('webhooks').getJobs(['wait', 'delayed', 'active', 'prioritized']);
    return jobs.filter((j) => j?.data.deliveryId === deliveryId);
  };

  it('replaces the waiting job: duplicate POSTs send once and leave no second chain', async () => {
    const s = await h.setup({ respond: (attempt) => (attempt === 1 ? { status: 500 } : { status: 200, delayMs: 300 }) });
    await h.submit(s);
    await s.receiver.waitFor(1);
    const [waiting] = (await waitUntil('the delivery to wait for its retry', async () => {
      const list = await h.deliveries(s);
      return list.length === 1 && list[0].attempts === 1 && list[0].status === 'pending' ? list : null;
    }))!;
    await waitUntil('the job to sit out its delay', async () => (await jobsOf(waiting.id)).length === 1 && (await (await jobsOf(waiting.id))[0].getState()) === 'delayed');

    const path = `/v1/webhooks/${s.webhook.id}/deliveries/${waiting.id}/retry`;
    const retries = await Promise.all([h.api('POST', path, s.tenant.key), h.api('POST', path, s.tenant.key)]);
    expect(retries.map((r) => r.status)).to.deep.equal([202, 202]);
    await s.receiver.waitFor(2);
    await h.allSettled(s, 1, 'succeeded');
    await quietly(700);
    expect(s.receiver.deliveries).to.have.length(2);
    expect(s.receiver.deliveries[1].headers['x-service-delivery']).to.equal(waiting.id);
    expect(await jobsOf(waiting.id)).to.deep.equal([]);
    expect(await stack.api.app.producer.queue('webhooks').getJob(jobIds.deliver(waiting.id))).to.not.equal(undefined);

    // Once more, after it succeeded: one more POST, still one job id.
    expect((await h.api('POST', path, s.tenant.key)).status).to.equal(202);
    await s.receiver.waitFor(3);
    await quietly(500);
    expect(s.receiver.deliveries).to.have.length(3);
    expect(await jobsOf(waiting.id)).to.deep.equal([]);
  });
});

describe('webhook recovery and deletion without workers', () => {
  // No workers: what is queued stays in the queue, where the test can count it.
  let stack: Stack;
  before(async () => { stack = await startStack([]); });
  after(async () => stack.close());

  it(`recovers at most ${RECOVERY_BATCH} deliveries per call, oldest first, and the rest on the next call`, async () => {
    const tenant = await createTenant(stack.api.app);
    const receiver = await startReceiver();
    try {
      const res = await call(stack.api.url, 'POST', '/v1/webhooks', { key: tenant.key, body: { name: 'x', url: receiver.url, events: ['submission.created'] } });
      const webhookId = res.body.webhook.id;
      const em = stack.api.app.orm.em.fork();
      await em.execute(
        `insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, attempts, created_at)
         select 'dlv_bulk' || lpad(g::text, 5, '0'), ?, ?, 'evt_bulk' || g, 'form.submission.created', '{}', 'failed', 10,
                now() - interval '1 hour' + g * interval '1 millisecond'
           from generate_series(1, ${RECOVERY_BATCH + 1}) g`,
        [webhookId, tenant.organizationId],
      );
      await keepSideRows((sql, params) => em.execute(sql, params), 'webhook_id = ?', [webhookId]);
      const recover = () => call(stack.api.url, 'POST', `/v1/webhooks/${webhookId}/recover`, { key: tenant.key, body: { since: new Date(Date.now() - 7_200_000).toISOString() } });
      expect((await recover()).body).to.deep.equal({ queued: RECOVERY_BATCH });
      const [last] = await em.execute(`select status from webhook_deliveries where id = 'dlv_bulk' || lpad(?::text, 5, '0')`, [RECOVERY_BATCH + 1]);
      expect(last.status).to.equal('failed');
      expect((await recover()).body).to.deep.equal({ queued: 1 });
      expect((await recover()).body).to.deep.equal({ queued: 0 });
      const queue = stack.api.app.producer.queue('webhooks');
      expect(await queue.getJob(jobIds.deliver('dlv_bulk00001'))).to.not.equal(undefined);
      const counts = await queue.getJobCounts('wait');
      expect(counts.wait).to.be.at.least(RECOVERY_BATCH + 1);
    } finally {
      await receiver.close();
    }
  });

  it('relays a deletion event whose fan-out never reached the queue', async () => {
    const tenant = await createTenant(stack.api.app);
    const form = await createPublishedForm(stack.api.url, tenant.key, FIELDS);
    const created = await call(stack.api.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data: { fld_email: 'a@example.com' } } });
    const submissionId = created.body.submission.id;
    expect((await call(stack.api.url, 'DELETE', `/v1/submissions/${submissionId}`, { key: tenant.key })).status).to.equal(204);
    const queue = stack.api.app.producer.queue('submissions');
    await waitUntil('the fan-out job', async () => queue.getJob(jobIds.fanoutDeletion(submissionId)));
    await queue.remove(jobIds.fanoutDeletion(submissionId));
    const em = stack.api.app.orm.em.fork();
    await em.execute(`update outbox set next_relay_at = now() - interval '10 years' where topic = 'submission.deleted' and payload->>'submissionId' = ?`, [submissionId]);
    await relayOutbox(stack.api.app);
    const job = await queue.getJob(jobIds.fanoutDeletion(submissionId));
    expect(job?.name).to.equal('fanout-deletion');
    expect(job?.data.submissionId).to.equal(submissionId);
  });
});
