import { expect } from 'chai';
import { OutboundError, outboundFetch, type OutboundRequest } from '../../src/lib/outbound';
import { startFakeHubspot, type FakeHubspot } from '../support/fakes/hubspot';
import { startReceiver } from '../support/fakes/receiver';
import { startFakeStripe, type FakeStripe } from '../support/fakes/stripe';
import { startFakeTurnstile, type FakeTurnstile } from '../support/fakes/turnstile';

async function call(url: string, req: Partial<OutboundRequest> = {}) {
  const res = await outboundFetch(url, { allowPrivate: true, timeoutMs: 3_000, ...req });
  const isJson = res.headers['content-type']?.startsWith('application/json');
  return { ...res, json: isJson ? JSON.parse(res.body) : undefined };
}

async function expectConnectionError(url: string, req: Partial<OutboundRequest> = {}): Promise<void> {
  const err = await call(url, req).then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).to.be.instanceOf(OutboundError);
  expect((err as OutboundError).kind).to.equal('connection');
}

describe('fake external services', () => {
  describe('Stripe', () => {
    let stripe: FakeStripe;
    const auth = () => ({ headers: { Authorization: `Bearer ${stripe.secretKey}` } });

    beforeEach(async () => {
      stripe = await startFakeStripe();
    });
    afterEach(() => stripe.close());

    it('retrieves a payment intent in Stripe\'s object shape', async () => {
      const id = stripe.addIntent({ amount: 1999, currency: 'usd' });
      const res = await call(`${stripe.url}/v1/payment_intents/${id}`, auth());
      expect(res.status).to.equal(200);
      expect(id).to.match(/^pi_[A-Za-z0-9]{24}$/);
      expect(res.json).to.include({
        id,
        object: 'payment_intent',
        amount: 1999,
        amount_received: 1999,
        currency: 'usd',
        status: 'succeeded',
        livemode: false,
      });
      expect(res.json.metadata).to.deep.equal({});
      expect(res.json.created).to.be.a('number');
      expect(res.json.client_secret).to.match(new RegExp(`^${id}_secret_`));
      expect(stripe.requests).to.deep.equal([
        { method: 'GET', path: `/v1/payment_intents/${id}`, authorization: `Bearer ${stripe.secretKey}` },
      ]);
    });

    it('reports nothing received for an intent that has not succeeded', async () => {
      const id = stripe.addIntent({ id: 'pi_pending', amount: 500, currency: 'eur', status: 'requires_payment_method' });
      const res = await call(`${stripe.url}/v1/payment_intents/${id}`, auth());
      expect(res.json).to.include({ id: 'pi_pending', status: 'requires_payment_method', amount_received: 0 });
    });

    it('answers an unknown id with resource_missing', async () => {
      const res = await call(`${stripe.url}/v1/payment_intents/pi_nope`, auth());
      expect(res.status).to.equal(404);
      expect(res.json).to.deep.equal({
        error: {
          code: 'resource_missing',
          doc_url: 'https://stripe.com/docs/error-codes/resource-missing',
          message: "No such payment_intent: 'pi_nope'",
          param: 'intent',
          type: 'invalid_request_error',
        },
      });
    });

    for (const [label, headers] of [
      ['no key', {}],
      ['a wrong key', { Authorization: 'Bearer sk_test_wrong1234' }],
    ] as const) {
      it(`answers 401 for ${label}`, async () => {
        const id = stripe.addIntent({ amount: 100, currency: 'usd' });
        const res = await call(`${stripe.url}/v1/payment_intents/${id}`, { headers });
        expect(res.status).to.equal(401);
        expect(res.json.error.type).to.equal('invalid_request_error');
        expect(res.json.error.message).to.be.a('string').and.not.include('wrong');
      });
    }

    const form = (body: string, headers: Record<string, string> = {}): Partial<OutboundRequest> => ({
      method: 'POST', body,
      headers: { Authorization: `Bearer ${stripe.secretKey}`, 'Content-Type': 'application/x-www-form-urlencoded', ...headers },
    });

    it('creates a payment intent from a form-encoded body, and refuses JSON bodies and missing parameters', async () => {
      const created = await call(`${stripe.url}/v1/payment_intents`,
        form('amount=1500&currency=eur&automatic_payment_methods%5Benabled%5D=true&metadata%5Bform_id%5D=form_a'));
      expect(created.status).to.equal(200);
      expect(created.json).to.include({ object: 'payment_intent', amount: 1500, currency: 'eur', status: 'requires_payment_method' });
      expect(created.json.metadata).to.deep.equal({ form_id: 'form_a' });
      expect(created.json.automatic_payment_methods).to.deep.equal({ allow_redirects: 'always', enabled: true });

      const json = await call(`${stripe.url}/v1/payment_intents`, form('{"amount":1500}', { 'Content-Type': 'application/json' }));
      expect(json.status).to.equal(400);
      expect(json.json.error.type).to.equal('invalid_request_error');
      const missing = await call(`${stripe.url}/v1/payment_intents`, form('currency=eur'));
      expect(missing.status).to.equal(400);
      expect(missing.json.error).to.include({ code: 'parameter_missing', param: 'amount', type: 'invalid_request_error' });
    });

    it('replays a refund for the same Idempotency-Key, refuses the key with other parameters, and refunds a charge once', async () => {
      const id = stripe.addIntent({ amount: 700, currency: 'usd' });
      const first = await call(`${stripe.url}/v1/refunds`, form(`payment_intent=${id}`, { 'Idempotency-Key': 'k1' }));
      expect(first.status).to.equal(200);
      expect(first.json).to.include({ object: 'refund', amount: 700, payment_intent: id, status: 'succeeded' });
      const again = await call(`${stripe.url}/v1/refunds`, form(`payment_intent=${id}`, { 'Idempotency-Key': 'k1' }));
      expect(again.status).to.equal(200);
      expect(again.headers['idempotent-replayed']).to.equal('true');
      expect(again.json.id).to.equal(first.json.id);
      const other = await call(`${stripe.url}/v1/refunds`, form(`payment_intent=${id}&reason=duplicate`, { 'Idempotency-Key': 'k1' }));
      expect(other.status).to.equal(400);
      expect(other.json.error.type).to.equal('idempotency_error');
      const twice = await call(`${stripe.url}/v1/refunds`, form(`payment_intent=${id}`, { 'Idempotency-Key': 'k2' }));
      expect(twice.status).to.equal(400);
      expect(twice.json.error.code).to.equal('charge_already_refunded');
      expect(stripe.refunds).to.have.length(1);
    });

    it('confirms with the publishable key and client secret, declining the decline test card with Stripe\'s card error', async () => {
      const created = await call(`${stripe.url}/v1/payment_intents`, form('amount=1500&currency=eur'));
      const { id, client_secret: secret } = created.json;
      const confirm = (card: string, key = stripe.publishableKey) => call(`${stripe.url}/v1/payment_intents/${id}/confirm`, {
        method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
        body: `key=${key}&client_secret=${secret}&payment_method_data%5Btype%5D=card&payment_method_data%5Bcard%5D%5Bnumber%5D=${card}`,
      });
      expect((await confirm('4242424242424242', 'pk_test_wrong')).status).to.equal(401);
      const declined = await confirm('4000000000000002');
      expect(declined.status).to.equal(402);
      expect(declined.json.error).to.include({ type: 'card_error', code: 'card_declined', decline_code: 'generic_decline', message: 'Your card was declined.' });
      const paid = await confirm('4242424242424242');
      expect(paid.status).to.equal(200);
      expect(paid.json.status).to.equal('succeeded');
    });

    it('drops connections while down', async () => {
      const id = stripe.addIntent({ amount: 100, currency: 'usd' });
      stripe.setDown(true);
      await expectConnectionError(`${stripe.url}/v1/payment_intents/${id}`, auth());
      stripe.setDown(false);
      expect((await call(`${stripe.url}/v1/payment_intents/${id}`, auth())).status).to.equal(200);
    });
  });

  describe('Turnstile', () => {
    let turnstile: FakeTurnstile;
    const form = (fields: Record<string, string>): Partial<OutboundRequest> => ({
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(fields).toString(),
    });
    const json = (fields: Record<string, string>): Partial<OutboundRequest> => ({
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(fields),
    });

    beforeEach(async () => {
      turnstile = await startFakeTurnstile();
    });
    afterEach(() => turnstile.close());

    it('serves siteverify at Cloudflare\'s path', () => {
      expect(new URL(turnstile.url).pathname).to.equal('/turnstile/v0/siteverify');
    });

    it('passes any token with the always-pass secret (form encoded) and records the fields', async () => {
      const res = await call(
        turnstile.url,
        form({ secret: '1x0000000000000000000000000000000AA', response: 'XXXX.DUMMY.TOKEN.XXXX', remoteip: '203.0.113.9' }),
      );
      expect(res.status).to.equal(200);
      expect(res.json).to.include({ success: true, hostname: 'example.com', action: '', cdata: '' });
      expect(res.json['error-codes']).to.deep.equal([]);
      expect(Date.parse(res.json.challenge_ts)).to.be.closeTo(Date.now(), 5_000);
      expect(turnstile.requests).to.deep.equal([
        {
          secret: '1x0000000000000000000000000000000AA',
          response: 'XXXX.DUMMY.TOKEN.XXXX',
          remoteip: '203.0.113.9',
          idempotency_key: undefined,
        },
      ]);
    });

    const outcomes: Array<[string, string]> = [
      ['2x0000000000000000000000000000000AA', 'invalid-input-response'],
      ['3x0000000000000000000000000000000AA', 'timeout-or-duplicate'],
      ['0x4AAAAAAAreal-looking-secret', 'invalid-input-secret'],
    ];
    for (const [secret, code] of outcomes) {
      it(`answers ${code} for secret ${secret} (JSON)`, async () => {
        const res = await call(turnstile.url, json({ secret, response: 'tok', idempotency_key: 'idem-1' }));
        expect(res.status).to.equal(200);
        expect(res.json).to.include({ success: false });
        expect(res.json['error-codes']).to.deep.equal([code]);
        expect(turnstile.requests[0]).to.include({ secret, response: 'tok', idempotency_key: 'idem-1' });
      });
    }

    it('fails the next verifications as scripted, then recovers', async () => {
      turnstile.failNext(1, 'http500');
      turnstile.failNext(1, 'internal-error');
      const pass = form({ secret: '1x0000000000000000000000000000000AA', response: 'tok' });
      const serverError = await call(turnstile.url, pass);
      expect(serverError.status).to.equal(500);
      expect(serverError.json).to.equal(undefined);
      const internal = await call(turnstile.url, pass);
      expect(internal.status).to.equal(200);
      expect(internal.json['error-codes']).to.deep.equal(['internal-error']);
      expect((await call(turnstile.url, pass)).json.success).to.equal(true);
      expect(turnstile.requests).to.have.length(3);
    });

    it('drops connections while down', async () => {
      turnstile.setDown(true);
      await expectConnectionError(turnstile.url, form({ secret: '1x0000000000000000000000000000000AA', response: 'tok' }));
    });
  });

  describe('HubSpot', () => {
    let hubspot: FakeHubspot;
    const upsert = (token: string | null, inputs: unknown) =>
      call(`${hubspot.url}/crm/v3/objects/contacts/batch/upsert`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', ...(token ? { Authorization: `Bearer ${token}` } : {}) },
        body: JSON.stringify({ inputs }),
      });
    const contact = (email: string, properties: Record<string, string>) => ({ idProperty: 'email', id: email, properties });

    beforeEach(async () => {
      hubspot = await startFakeHubspot();
    });
    afterEach(() => hubspot.close());

    it('creates, then updates, a contact by email in HubSpot\'s batch response shape', async () => {
      const created = await upsert('pat-token', [contact('Ada@Example.com', { firstname: 'Ada' })]);
      expect(created.status).to.equal(200);
      expect(created.json.status).to.equal('COMPLETE');
      expect(created.json.results).to.have.length(1);
      const first = created.json.results[0];
      expect(first).to.include({ new: true, archived: false });
      expect(first.properties).to.include({ email: 'ada@example.com', firstname: 'Ada' });
      expect(Date.parse(first.createdAt)).to.not.be.NaN;

      const updated = await upsert('pat-token', [contact('ada@example.com', { lastname: 'Lovelace' })]);
      const second = updated.json.results[0];
      expect(second).to.include({ id: first.id, new: false, createdAt: first.createdAt });
      expect(hubspot.contacts.get('ada@example.com')).to.deep.equal({
        email: 'ada@example.com',
        firstname: 'Ada',
        lastname: 'Lovelace',
      });
      expect(hubspot.requests[0]).to.include({
        method: 'POST',
        path: '/crm/v3/objects/contacts/batch/upsert',
        authorization: 'Bearer pat-token',
      });
    });

    it('requires a Bearer token that has not been rejected', async () => {
      hubspot.rejectToken('revoked');
      for (const token of [null, 'revoked']) {
        const res = await upsert(token, [contact('a@b.co', {})]);
        expect(res.status).to.equal(401);
        expect(res.json).to.include({ status: 'error', category: 'INVALID_AUTHENTICATION' });
      }
      expect(hubspot.contacts.size).to.equal(0);
    });

    it('rate limits the next calls with HubSpot\'s error body and Retry-After', async () => {
      hubspot.rateLimitNext(2, 3);
      for (let i = 0; i < 2; i++) {
        const res = await upsert('pat-token', [contact('a@b.co', { firstname: 'A' })]);
        expect(res.status).to.equal(429);
        expect(res.headers['retry-after']).to.equal('3');
        expect(res.json).to.include({
          status: 'error',
          message: 'You have reached your secondly limit.',
          errorType: 'RATE_LIMIT',
          policyName: 'SECONDLY',
        });
        expect(res.json.correlationId).to.be.a('string');
      }
      expect(hubspot.contacts.size).to.equal(0);
      expect((await upsert('pat-token', [contact('a@b.co', { firstname: 'A' })])).status).to.equal(200);
      expect(hubspot.contacts.get('a@b.co')).to.deep.equal({ email: 'a@b.co', firstname: 'A' });
    });

    it('omits Retry-After when no delay is given', async () => {
      hubspot.rateLimitNext(1);
      const res = await upsert('pat-token', [contact('a@b.co', {})]);
      expect(res.status).to.equal(429);
      expect(res.headers).to.not.have.property('retry-after');
    });

    it('rejects inputs that are not email upserts', async () => {
      const res = await upsert('pat-token', [{ idProperty: 'hs_object_id', id: '1', properties: {} }]);
      expect(res.status).to.equal(400);
      expect(res.json).to.include({ status: 'error', category: 'VALIDATION_ERROR' });
    });
  });

  describe('webhook receiver', () => {
    it('records every request in order with its exact raw body and headers', async () => {
      const receiver = await startReceiver();
      try {
        const bodies = ['{"n":1,"s":"é"}', '{ "n" : 2 }'];
        for (const body of bodies) {
          await call(receiver.url, { method: 'POST', headers: { 'X-Service-Delivery': 'dlv_1' }, body });
        }
        await receiver.waitFor(2);
        expect(receiver.deliveries.map((d) => d.rawBody)).to.deep.equal(bodies);
        expect(receiver.deliveries[0].headers['x-service-delivery']).to.equal('dlv_1');
        expect(receiver.deliveries[0].receivedAt).to.be.at.most(receiver.deliveries[1].receivedAt);
      } finally {
        await receiver.close();
      }
    });

    it('answers each attempt as scripted, including delays', async () => {
      const receiver = await startReceiver({
        respond: (attempt) =>
          attempt === 1 ? { status: 503, headers: { 'Retry-After': '7' } } : { status: 204, delayMs: 300 },
      });
      try {
        const first = await call(receiver.url, { method: 'POST', body: '{}' });
        expect(first.status).to.equal(503);
        expect(first.headers['retry-after']).to.equal('7');
        const second = await call(receiver.url, { method: 'POST', body: '{}' });
        expect(second.status).to.equal(204);
        expect(second.durationMs).to.be.at.least(250);
      } finally {
        await receiver.close();
      }
    });

    it('waitFor rejects when the deliveries do not arrive in time', async () => {
      const receiver = await startReceiver();
      try {
        const outcome = await receiver.waitFor(1, 100).then(
          () => 'resolved',
          (err: Error) => err.message,
        );
        expect(outcome).to.match(/got 0 of 1 deliveries/);
      } finally {
        await receiver.close();
      }
    });
  });
});
