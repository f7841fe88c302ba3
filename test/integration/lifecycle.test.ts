import { expect } from 'chai';
import http from 'node:http';
import net from 'node:net';
import { sendJson, startLoopbackServer, type LoopbackServer } from '../support/fakes/http-server';
import { startFakeStripe, type FakeStripe } from '../support/fakes/stripe';
import { call, createPublishedForm, createTenant, startTestApp, type TestApp } from '../support/harness';
import { spawnApi, waitUntil } from '../support/processes';

const STRIPE_DELAY_MS = 3_000;

/** Status of a GET on a connection of its own (no keep-alive pool). */
function freshGet(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http.get(url, { agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode!);
    }).on('error', reject);
  });
}

function connectionRefused(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    socket.once('connect', () => { socket.destroy(); resolve(false); });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
  });
}

describe('graceful shutdown of the API process', () => {
  let t: TestApp;
  let stripe: FakeStripe;
  let slowStripe: LoopbackServer;
  let stripeCalls = 0;

  before(async () => {
    t = await startTestApp();
    stripe = await startFakeStripe();
    // Stripe answering slowly keeps a submission in flight without any test hook in the service.
    slowStripe = await startLoopbackServer(async (req, res) => {
      stripeCalls += 1;
      await new Promise((r) => setTimeout(r, STRIPE_DELAY_MS));
      const upstream = await fetch(`${stripe.url}${req.url}`, { headers: { authorization: req.headers.authorization ?? '' } });
      sendJson(res, upstream.status, await upstream.json());
    });
  });
  after(async () => {
    await slowStripe.close();
    await stripe.close();
    await t.close();
  });

  it('on SIGTERM: readiness 503, listener closed, the in-flight request answered normally, exit 0', async function () {
    this.timeout(30_000);
    const tenant = await createTenant(t.app);
    const form = await createPublishedForm(t.url, tenant.key, [
      { id: 'fld_pay', type: 'payment', label: 'Payment', required: true, config: { amount: 1500, currency: 'eur' }, validationRules: {}, order: 0, pageId: null },
    ]);
    const api = await spawnApi({ STRIPE_API_BASE: slowStripe.origin, STRIPE_SECRET_KEY: stripe.secretKey });
    expect(await freshGet(`${api.url}/readyz`)).to.equal(200);

    let answered = false;
    const inFlight = call(api.url, 'POST', `/v1/forms/${form.id}/submissions`, {
      key: tenant.key, body: { data: { fld_pay: stripe.addIntent({ amount: 1500, currency: 'eur' }) } },
    }).finally(() => { answered = true; });
    await waitUntil(() => stripeCalls === 1, 5_000, 20);
    const exited = api.stop('SIGTERM');

    await waitUntil(async () => (await freshGet(`${api.url}/readyz`)) === 503, 900, 20);
    await waitUntil(() => connectionRefused(api.url), 2_000, 50);
    expect(answered, 'the listener closed while the request was still in flight').to.equal(false);

    const res = await inFlight;
    expect(res.status, res.text).to.equal(201);
    expect(res.body.submission.id).to.match(/^sub_/);
    const answeredAt = Date.now();
    expect(await exited, api.output()).to.equal(0);
    // The client's keep-alive connection is closed once idle instead of holding the exit back.
    expect(Date.now() - answeredAt).to.be.below(1_500);
    const [row] = await t.app.orm.em.getConnection().execute('select count(*)::int as n from submissions where id = ?', [res.body.submission.id]);
    expect(row.n).to.equal(1);
  });
});
