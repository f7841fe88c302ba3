import { expect } from 'chai';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { runMaintenance } from '../../src/domain/maintenance/maintenance';
import { attemptDelivery } from '../../src/domain/webhooks/deliver';
import { startReceiver, type Delivery, type Receiver, type ReceiverReply } from '../support/fakes/receiver';
import { call, createPublishedForm, createTenant, fieldInput, startTestApp, type TestApp, type TestTenant } from '../support/harness';
import { deleteQueueKeys } from '../support/databases';
import { keepSideRows } from '../support/deliveries';
import { deliveryProblems } from '../support/openapi-webhooks';
import { freshQueuePrefix, spawnWorker, waitUntil, type WorkerChild } from '../support/worker-stack';

const FIELDS = [fieldInput('fld_n', 'text', 'N', { required: true })];
const OPERATIONAL = ['endpoint.disabled', 'message.attempt.failing', 'message.attempt.exhausted', 'message.attempt.recovered'];
/** Six attempts in about half a second: the 4th failure comes before the schedule ends. */
const RETRIES = '100,100,100,100,100';

interface Hook { id: string; secret: string; receiver: Receiver }

const body = (d: Delivery) => JSON.parse(d.rawBody);
const isOperational = (d: Delivery) => OPERATIONAL.includes(body(d).type);

/**
 * Operational events end to end, with two worker processes (every queue each) sharing the work:
 * a delivery that keeps failing raises `message.attempt.failing` at its 4th attempt and
 * `message.attempt.exhausted` at its last, one that succeeds after failures
 * `message.attempt.recovered`, a 410 or 5 days of failures `endpoint.disabled`; each once, to the
 * organization-wide webhooks subscribed to it and never to the webhook it is about, signed (Standard
 * Webhooks too), retried like any event, and as openapi.yaml's `webhooks` section describes.
 */
describe('operational events with two worker processes', function () {
  this.timeout(120_000);
  const prefix = freshQueuePrefix();
  const env = { QUEUE_PREFIX: prefix, WEBHOOK_RETRY_DELAYS_MS: RETRIES };
  let t: TestApp;
  let tenant: TestTenant;
  let formId: string;
  const workers: WorkerChild[] = [];
  const receivers: Receiver[] = [];
  /** Subscribed to every operational event; its first answer is a 503, so an event is retried too. */
  let watcher: Hook;
  /** Another organization's subscriber. */
  let stranger: Hook;

  async function hook(events: string[], respond?: (attempt: number) => ReceiverReply, org = tenant, hookFormId?: string): Promise<Hook> {
    const receiver = await startReceiver({ respond });
    receivers.push(receiver);
    const res = await call(t.url, 'POST', '/v1/webhooks', {
      key: org.key, body: { name: 'hook', url: `${receiver.url}/services/T000/B000/s3cr3t`, events, ...(hookFormId ? { formId: hookFormId } : {}) },
    });
    expect(res.status, res.text).to.equal(201);
    return { ...res.body.webhook, receiver };
  }

  async function submit(): Promise<void> {
    const res = await call(t.url, 'POST', `/v1/forms/${formId}/submissions`, { key: tenant.key, body: { data: { fld_n: 'x' } } });
    expect(res.status, res.text).to.equal(201);
  }

  async function deliveriesOf(h: Hook): Promise<any[]> {
    return (await call(t.url, 'GET', `/v1/webhooks/${h.id}/deliveries?limit=100`, { key: tenant.key })).body.deliveries;
  }

  /**
   * The rows of the operational events of `type` about `about` written for each subscriber: a duplicate
   * event is a second row, written by the statement that records the attempt or disables the webhook.
   */
  async function eventRows(about: Hook, type: string): Promise<Array<{ webhook_id: string; n: number }>> {
    return t.query(
      `select webhook_id, count(*)::int as n from webhook_deliveries
        where organization_id = ? and event_type = ? and payload::json->'data'->>'webhookId' = ? group by 1 order by 1`,
      [tenant.organizationId, type, about.id],
    );
  }

  /** The operational events the watcher got about `about`, one per delivery id (retries of one delivery collapse). */
  function eventsAbout(about: Hook, type: string): any[] {
    const byDelivery = new Map<string, any>();
    for (const d of watcher.receiver.deliveries) {
      const event = body(d);
      if (event.type === type && event.data.webhookId === about.id) byDelivery.set(d.headers['x-service-delivery'], event);
    }
    return [...byDelivery.values()];
  }

  before(async () => {
    t = await startTestApp(env);
    tenant = await createTenant(t.app);
    formId = (await createPublishedForm(t.url, tenant.key, FIELDS)).id;
    for (let i = 0; i < 2; i++) workers.push(spawnWorker('all', { ...env, LOG_LEVEL: 'info' }));
    await waitUntil('both workers to start', async () => workers.every((w) => w.output().includes('workers started')), 30_000);
    watcher = await hook(OPERATIONAL, (attempt) => ({ status: attempt === 1 ? 503 : 200 }));
    stranger = await hook(OPERATIONAL, undefined, await createTenant(t.app));
  });
  after(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await Promise.all(receivers.map((r) => r.close()));
    await t.close();
    await deleteQueueKeys(prefix);
  });

  it('failing at the 4th failed attempt, exhausted at the last, each once, never to the webhook they are about', async () => {
    // Fails everything; subscribed to the operational events itself, which must never tell it about itself.
    const broken = await hook(['submission.created', ...OPERATIONAL], () => ({ status: 500 }));
    await submit();
    await waitUntil('failing and exhausted about the broken webhook', async () => (
      eventsAbout(broken, 'message.attempt.failing').length && eventsAbout(broken, 'message.attempt.exhausted').length), 20_000);
    const [delivery] = await deliveriesOf(broken);
    expect(delivery).to.include({ status: 'failed', attempts: 6, lastStatusCode: 500 });
    // The delivery has ended, so every event it raised is written: one row each to the watcher (and none to itself).
    expect(await eventRows(broken, 'message.attempt.failing')).to.deep.equal([{ webhook_id: watcher.id, n: 1 }]);
    expect(await eventRows(broken, 'message.attempt.exhausted')).to.deep.equal([{ webhook_id: watcher.id, n: 1 }]);

    const failing = eventsAbout(broken, 'message.attempt.failing');
    const exhausted = eventsAbout(broken, 'message.attempt.exhausted');
    expect(failing).to.have.length(1);
    expect(exhausted).to.have.length(1);
    const about = { webhookId: broken.id, deliveryId: delivery.id, eventId: delivery.eventId, eventType: 'form.submission.created' };
    expect(failing[0].data).to.deep.equal({ ...about, attempts: 4, lastStatusCode: 500 });
    expect(exhausted[0].data).to.deep.equal({ ...about, attempts: 6, lastStatusCode: 500 });
    expect(eventsAbout(broken, 'message.attempt.recovered')).to.have.length(0);
    expect(broken.receiver.deliveries.filter((d) => body(d).data?.webhookId === broken.id && isOperational(d))).to.have.length(0);
  });

  it('recovered when a delivery succeeds after failed attempts, once', async () => {
    const flaky = await hook(['submission.created'], (attempt) => ({ status: attempt <= 2 ? 502 : 200 }));
    await submit();
    await waitUntil('recovered about the flaky webhook', async () => eventsAbout(flaky, 'message.attempt.recovered').length, 20_000);
    const [delivery] = await deliveriesOf(flaky);
    expect(delivery).to.include({ status: 'succeeded', attempts: 3 });
    expect((await eventRows(flaky, 'message.attempt.recovered')).find((r) => r.webhook_id === watcher.id)).to.deep.equal({ webhook_id: watcher.id, n: 1 });
    const recovered = eventsAbout(flaky, 'message.attempt.recovered');
    expect(recovered).to.have.length(1);
    expect(recovered[0].data).to.deep.equal({
      webhookId: flaky.id, deliveryId: delivery.id, eventId: delivery.eventId, eventType: 'form.submission.created', attempts: 3, lastStatusCode: 200,
    });
    expect(eventsAbout(flaky, 'message.attempt.failing')).to.have.length(0);
  });

  it('endpoint.disabled when a 410 disables a webhook (reason gone) and when maintenance disables one failing for 5 days (reason failing)', async () => {
    // Tied to the form (formId named in the event); the organization-wide one's event has formId null.
    const gone = await hook(['submission.created'], () => ({ status: 410 }), tenant, formId);
    const failing = await hook(['submission.created'], () => ({ status: 500 }));
    await submit();
    await waitUntil('endpoint.disabled about the gone webhook', async () => eventsAbout(gone, 'endpoint.disabled').length, 20_000);
    const [goneEvent] = eventsAbout(gone, 'endpoint.disabled');
    expect(Object.keys(goneEvent.data).sort()).to.deep.equal(['failingSince', 'formId', 'reason', 'webhookId']);
    expect(goneEvent.data).to.include({ webhookId: gone.id, formId, reason: 'gone' });
    expect(Date.parse(goneEvent.data.failingSince)).to.be.closeTo(Date.now(), 30_000);
    // The URL (its path holds a Slack-style secret here) is in no operational event.
    expect(watcher.receiver.deliveries.filter((d) => d.rawBody.includes('s3cr3t'))).to.have.length(0);
    const read = await call(t.url, 'GET', `/v1/webhooks/${gone.id}`, { key: tenant.key });
    expect(read.body.webhook.enabled).to.equal(false);

    // Five days and a minute of failures, then the hourly maintenance (run here at once, twice).
    await t.query(`update webhooks set failing_since = now() - interval '5 days 1 minute' where id = ?`, [failing.id]);
    const [first, second] = [await runMaintenance(t.app.orm.em.fork()), await runMaintenance(t.app.orm.em.fork())];
    expect(first.webhooksDisabled).to.be.at.least(1);
    expect(second.webhooksDisabled).to.equal(0);
    // Written by the maintenance's statement with no job: the relay's sweep of unqueued deliveries queues it.
    await waitUntil('endpoint.disabled about the failing webhook', async () => eventsAbout(failing, 'endpoint.disabled').length, 30_000);
    const [failingEvent] = eventsAbout(failing, 'endpoint.disabled');
    expect(Object.keys(failingEvent.data).sort()).to.deep.equal(['failingSince', 'formId', 'reason', 'webhookId']);
    expect(failingEvent.data).to.include({ webhookId: failing.id, formId: null, reason: 'failing' });
    expect(Date.parse(failingEvent.data.failingSince)).to.be.below(Date.now() - 5 * 86_400_000);
    expect(eventsAbout(gone, 'endpoint.disabled')).to.have.length(1);
    expect(eventsAbout(failing, 'endpoint.disabled')).to.have.length(1);
    // One row each to the watcher, whatever ran twice (the maintenance ran twice).
    for (const about of [gone, failing]) {
      expect((await eventRows(about, 'endpoint.disabled')).find((r) => r.webhook_id === watcher.id)).to.deep.equal({ webhook_id: watcher.id, n: 1 });
    }
    expect(watcher.receiver.deliveries.filter((d) => d.rawBody.includes('s3cr3t'))).to.have.length(0);
  });

  it('raises each event once when two runs attempt the same delivery at the same moment', async () => {
    const twice = await hook(['submission.created'], () => ({ status: 500 }));
    // A delivery three attempts in (and due in an hour, so no worker takes it), then its 4th attempt twice at once.
    const make = async (id: string, attempts: number) => {
      await t.query(
        `insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, attempts, last_error, next_attempt_at)
         values (?, ?, ?, ?, 'form.submission.created', '{"id":"evt_x","type":"form.submission.created"}', 'pending', ?, 'Unexpected status 500', now() + interval '1 hour')`,
        [id, twice.id, tenant.organizationId, `evt_${id.slice(4)}`, attempts],
      );
      await keepSideRows(t.query, 'id = ?', [id]);
    };
    await make('dlv_twicefourth00000001', 3);
    await make('dlv_twicelast000000001', 5);
    const runs = await Promise.all([
      attemptDelivery(t.app, 'dlv_twicefourth00000001'), attemptDelivery(t.app, 'dlv_twicefourth00000001'),
      attemptDelivery(t.app, 'dlv_twicelast000000001'), attemptDelivery(t.app, 'dlv_twicelast000000001'),
    ]);
    expect(runs.map((r) => r.kind)).to.deep.equal(['attempted', 'attempted', 'attempted', 'attempted']);
    // Queued as the worker queues the events an attempt raised (else the relay's sweep would, 5 to 10 s later).
    for (const run of runs) if (run.kind === 'attempted') for (const deliveryId of run.events) await t.app.producer.addSoon('webhooks', 'deliver', { deliveryId });
    const written = await t.query(
      `select webhook_id, event_type, payload::json->'data'->>'deliveryId' as about, count(*)::int as n from webhook_deliveries
        where organization_id = ? and payload::json->'data'->>'webhookId' = ? group by 1, 2, 3 order by 2, 1`, [tenant.organizationId, twice.id],
    );
    // To each subscriber (the watcher, and the broken webhook of the first test): one failing about the
    // 4th attempt (the twin run made the 5th, which raises nothing), one exhausted (the twin found it ended).
    const subscribers = (await t.query(
      `select id from webhooks where organization_id = ? and enabled and form_id is null and events @> '["message.attempt.failing"]' order by id`,
      [tenant.organizationId],
    )).map((r: { id: string }) => r.id);
    expect(subscribers).to.include(watcher.id);
    expect(written).to.deep.equal([
      ...subscribers.map((id: string) => ({ webhook_id: id, event_type: 'message.attempt.exhausted', about: 'dlv_twicelast000000001', n: 1 })),
      ...subscribers.map((id: string) => ({ webhook_id: id, event_type: 'message.attempt.failing', about: 'dlv_twicefourth00000001', n: 1 })),
    ]);
  });

  it('goes to organization-wide subscribers of that organization only, signed, retried, and as openapi.yaml describes', async () => {
    // An event of this organization of its own (so the check holds when this test runs alone): the
    // watcher gets it; another organization's watcher, there from the start, gets no row of it or of any other.
    const gone = await hook(['submission.created'], () => ({ status: 410 }));
    await submit();
    await waitUntil('endpoint.disabled about the gone webhook', async () => eventsAbout(gone, 'endpoint.disabled').length, 20_000);
    const written = await t.query(`select webhook_id from webhook_deliveries where event_type in (?, ?, ?, ?)`, OPERATIONAL);
    expect(written.map((r: { webhook_id: string }) => r.webhook_id)).to.include(watcher.id).and.not.include(stranger.id);
    expect(stranger.receiver.deliveries).to.have.length(0);

    const operational = watcher.receiver.deliveries.filter(isOperational);
    expect(new Set(operational.map((d) => body(d).type))).to.have.keys(OPERATIONAL);
    // The watcher's first answer was a 503: that event came again, same delivery id, and then succeeded.
    const [firstEvent] = watcher.receiver.deliveries;
    const again = watcher.receiver.deliveries.filter((d) => d.headers['x-service-delivery'] === firstEvent.headers['x-service-delivery']);
    expect(again.length).to.be.at.least(2);
    expect(new Set(again.map((d) => d.headers['webhook-id'])).size).to.equal(1);

    const verifier = new StandardWebhook(watcher.secret);
    for (const d of operational) {
      expect(deliveryProblems(d), d.rawBody).to.deep.equal([]);
      expect(verifier.verify(d.rawBody, d.headers)).to.deep.equal(body(d));
      expect(d.headers['webhook-id']).to.equal(body(d).id);
      expect(d.headers['x-service-event']).to.equal(body(d).type);
    }
    // Every event reached the watcher in the end, those a worker queued and those the sweep of unqueued deliveries did.
    await waitUntil('every delivery to the watcher succeeded', async () => (await deliveriesOf(watcher)).every((r: any) => r.status === 'succeeded'), 30_000);
  });
});
