import { expect } from 'chai';
import { PAYMENT_INTENTS_PER_FORM_PER_MINUTE } from '../../src/http/routes/public';
import { refundUnclaimedIntent, sweepAbandonedPayments } from '../../src/domain/payments/refunds';
import { maintenance } from '../../workers/processors/usage';
import { refundIdempotencyKey } from '../../src/domain/payments/stripe';
import { createLogger } from '../../src/lib/logger';
import { metrics } from '../../src/lib/metrics';
import { startFakeStripe, type FakeStripe } from '../support/fakes/stripe';
import { call, createPublishedForm, createTenant, startTestApp, type TestApp, type TestTenant, fieldInput as field } from '../support/harness';

const PAY = field('fld_pay', 'payment', 'Ticket', { required: true, order: 1, config: { amount: 1500, currency: 'eur' } });
const NAME = field('fld_name', 'text', 'Name', { required: true, order: 0 });

async function refundsCounted(reason: string): Promise<number> {
  return (await metrics.paymentRefunds.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;
}

describe('payments made on the hosted page (§19)', function () {
  this.timeout(30_000);
  let stripe: FakeStripe;
  let t: TestApp;
  let tenant: TestTenant;
  let form: any;
  const logLines: Array<Record<string, any>> = [];

  before(async () => {
    stripe = await startFakeStripe();
    t = await startTestApp({
      STRIPE_API_BASE: stripe.url, STRIPE_SECRET_KEY: stripe.secretKey, STRIPE_PUBLISHABLE_KEY: stripe.publishableKey,
      TRUSTED_PROXIES: '127.0.0.1,::1',
    }, { logger: createLogger('info', { write: (line: string) => { logLines.push(JSON.parse(line)); } }) });
    tenant = await createTenant(t.app);
    form = await createPublishedForm(t.url, tenant.key, [NAME, PAY]);
  });
  after(async () => {
    await t?.close();
    await stripe?.close();
  });

  const newIntent = async (formId = form.id, headers: Record<string, string> = {}) =>
    call(t.url, 'POST', `/public/forms/${formId}/payments`, { body: { fieldId: 'fld_pay' }, headers });
  let clients = 0;
  /** Each from its own client address: the tests make more intents than one client may in a minute. */
  const paidIntent = async (formId = form.id) => {
    clients++;
    const res = await newIntent(formId, { 'X-Forwarded-For': `10.9.${clients >> 8}.${clients & 255}` });
    expect(res.status, res.text).to.equal(201);
    stripe.setIntentStatus(res.body.paymentIntentId, 'succeeded');
    return res.body.paymentIntentId as string;
  };
  const submitPublic = (formId: string, values: Record<string, unknown>) =>
    call(t.url, 'POST', `/public/forms/${formId}`, { body: { values } });
  const intentRow = async (id: string) => (await t.query('select * from payment_intents where id = ?', [id]))[0];

  describe('POST /public/forms/{formId}/payments', () => {
    it('creates a PaymentIntent at Stripe for the field, bound to the form, records it and answers the client secret', async () => {
      const before = stripe.calls.length;
      const res = await newIntent();
      expect(res.status, res.text).to.equal(201);
      expect(res.body).to.have.keys('paymentIntentId', 'clientSecret', 'amount', 'currency');
      expect(res.body).to.include({ amount: 1500, currency: 'eur' });
      expect(res.body.clientSecret).to.match(new RegExp(`^${res.body.paymentIntentId}_secret_`));
      expect(res.headers.get('cache-control')).to.equal('no-store');
      const created = stripe.calls.slice(before).find((c) => c.method === 'POST' && c.path === '/v1/payment_intents');
      expect(created?.params).to.deep.equal({
        amount: '1500', currency: 'eur', automatic_payment_methods: { enabled: 'true' },
        metadata: { form_id: form.id, field_id: 'fld_pay' },
      });
      const row = await intentRow(res.body.paymentIntentId);
      expect(row).to.include({ organization_id: tenant.organizationId, form_id: form.id, field_id: 'fld_pay', currency: 'eur', state: 'open' });
      expect(Number(row.amount)).to.equal(1500);
      expect(row.refund_id).to.equal(null);
    });

    it('refuses a field that is not a payment field, and a body without one (400)', async () => {
      for (const body of [{ fieldId: 'fld_name' }, { fieldId: 'fld_nope' }, {}, { fieldId: 7 }]) {
        const res = await call(t.url, 'POST', `/public/forms/${form.id}/payments`, { body });
        expect(res.status, JSON.stringify(body)).to.equal(400);
        expect(res.body).to.include({ success: false, error: 'invalid_payment' });
      }
    });

    it('answers 404 for a form that is not published', async () => {
      expect((await newIntent('form_doesNotExist')).status).to.equal(404);
    });

    it('Stripe unreachable: 503 with Retry-After, nothing recorded', async () => {
      const [{ n: before }] = await t.query('select count(*)::int as n from payment_intents');
      stripe.setDown(true);
      try {
        const res = await newIntent();
        expect(res.status).to.equal(503);
        expect(res.headers.get('retry-after')).to.equal('5');
        expect(res.body).to.include({ success: false, error: 'service_unavailable' });
      } finally {
        stripe.setDown(false);
      }
      const [{ n: after }] = await t.query('select count(*)::int as n from payment_intents');
      expect(after).to.equal(before);
    });

    it('limits intents per client like public submissions, and per form whoever asks', async () => {
      const limited = await createPublishedForm(t.url, tenant.key, [PAY]);
      // The limits count per minute: start early in one, so all these requests fall in it.
      const left = 60_000 - (Date.now() % 60_000);
      if (left < 20_000) await new Promise((resolve) => setTimeout(resolve, left + 50));
      const perClient = t.app.config.publicRateLimitPost;
      const statuses: number[] = [];
      for (let i = 0; i <= perClient; i++) statuses.push((await newIntent(limited.id, { 'X-Forwarded-For': '203.0.113.7' })).status);
      expect(statuses.slice(0, perClient).every((s) => s === 201)).to.equal(true);
      expect(statuses[perClient]).to.equal(429);

      const made = perClient;
      const answers: number[] = [];
      for (let i = 0; made + i <= PAYMENT_INTENTS_PER_FORM_PER_MINUTE; i++) {
        answers.push((await newIntent(limited.id, { 'X-Forwarded-For': `198.51.100.${i % 250}`})).status);
      }
      expect(answers.filter((s) => s === 201)).to.have.length(PAYMENT_INTENTS_PER_FORM_PER_MINUTE - made);
      expect(answers[answers.length - 1]).to.equal(429);
      const [{ n }] = await t.query('select count(*)::int as n from payment_intents where form_id = ?', [limited.id]);
      expect(n).to.equal(PAYMENT_INTENTS_PER_FORM_PER_MINUTE);
    });

    it('answers 400 when payments are not enabled (no publishable key), and the public form says payments: null', async () => {
      const noKey = await startTestApp({ STRIPE_API_BASE: stripe.url, STRIPE_SECRET_KEY: stripe.secretKey });
      try {
        const res = await call(noKey.url, 'POST', `/public/forms/${form.id}/payments`, { body: { fieldId: 'fld_pay' } });
        expect(res.status).to.equal(400);
        expect(res.body).to.include({ success: false, error: 'invalid_payment', message: 'Payments are not enabled on this service' });
        expect((await call(noKey.url, 'GET', `/public/forms/${form.id}`)).body.payments).to.equal(null);
      } finally {
        await noKey.close();
      }
    });

    it('the public form names Stripe and the publishable key', async () => {
      const res = await call(t.url, 'GET', `/public/forms/${form.id}`);
      expect(res.body.payments).to.deep.equal({ provider: 'stripe', publishableKey: stripe.publishableKey });
      const plain = await createPublishedForm(t.url, tenant.key, [NAME]);
      expect((await call(t.url, 'GET', `/public/forms/${plain.id}`)).body.payments).to.equal(null);
    });
  });

  describe('POST /public/forms/{formId}/check', () => {
    const check = (formId: string, body: unknown) => call(t.url, 'POST', `/public/forms/${formId}/check`, { body });
    const stored = async (formId: string) => (await t.query('select count(*)::int as n from submissions where form_id = ?', [formId]))[0].n;

    it('answers 200 for answers a submission would take, before the payment is made, and stores nothing', async () => {
      const intent = (await newIntent()).body.paymentIntentId;
      const before = await stored(form.id);
      const res = await check(form.id, { values: { fld_name: 'Ada', fld_pay: intent } });
      expect(res.status, res.text).to.equal(200);
      expect(res.body).to.deep.equal({ success: true });
      expect(await stored(form.id)).to.equal(before);
      expect((await intentRow(intent)).state).to.equal('open');
    });

    it('answers what the submission would: 422 per field, 400 for a bad body, 404 for a missing form', async () => {
      const missing = await check(form.id, { values: { fld_pay: 'pi_123' } });
      expect(missing.status).to.equal(422);
      expect(missing.body).to.deep.equal({ success: false, errors: { fld_name: 'Name is required' } });
      const asSubmitted = await submitPublic(form.id, { fld_pay: 'pi_123' });
      expect(asSubmitted.status).to.equal(422);
      expect(asSubmitted.body).to.deep.equal(missing.body);

      const unknown = await check(form.id, { values: { fld_name: 'A', fld_pay: 'pi_1', fld_bogus: 1 } });
      expect(unknown.status).to.equal(422);
      expect(unknown.body.errors).to.have.keys('fld_bogus');
      expect((await check(form.id, { values: { fld_name: 'A', fld_pay: 'pi_1' }, captchaToken: 'x' })).status).to.equal(400);
      expect((await check(form.id, [])).status).to.equal(400);
      expect((await check('form_doesNotExist', { values: {} })).status).to.equal(404);
    });

    it('answers 402 when the quota has no room left', async () => {
      const full = await createTenant(t.app, { monthlyQuota: 0 });
      const fullForm = await createPublishedForm(t.url, full.key, [NAME]);
      const res = await check(fullForm.id, { values: { fld_name: 'Ada' } });
      expect(res.status).to.equal(402);
      expect(res.body).to.deep.equal({ success: false, error: 'limit_exceeded' });
      expect((await submitPublic(fullForm.id, { fld_name: 'Ada' })).body).to.deep.equal(res.body);
    });
  });

  describe('paying and submitting', () => {
    it('a paid intent backs one stored submission, which holds it', async () => {
      const intent = await paidIntent();
      const res = await submitPublic(form.id, { fld_name: 'Ada', fld_pay: intent });
      expect(res.status, res.text).to.equal(200);
      const read = await call(t.url, 'GET', `/v1/submissions/${res.body.submissionId}`, { key: tenant.key });
      expect(read.body.submission.rawData).to.deep.equal({ fld_name: 'Ada', fld_pay: intent });
      const [claim] = await t.query('select submission_id from payment_claims where payment_intent_id = ?', [intent]);
      expect(claim.submission_id).to.equal(res.body.submissionId);
      expect((await submitPublic(form.id, { fld_name: 'Bob', fld_pay: intent })).status).to.equal(409);
    });

    it('an intent made for another form is refused on the field (public 422, API 400 validation_error)', async () => {
      const other = await createPublishedForm(t.url, tenant.key, [NAME, PAY]);
      const intent = await paidIntent(other.id);
      const pub = await submitPublic(form.id, { fld_name: 'Ada', fld_pay: intent });
      expect(pub.status).to.equal(422);
      expect(pub.body).to.deep.equal({ success: false, errors: { fld_pay: 'This payment was made for another form' } });
      const api = await call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data: { fld_name: 'Ada', fld_pay: intent } } });
      expect(api.status).to.equal(400);
      expect(api.body.error).to.equal('validation_error');
      expect(api.body.details).to.deep.equal([{ field: 'fld_pay', message: 'This payment was made for another form' }]);
      expect((await submitPublic(other.id, { fld_name: 'Ada', fld_pay: intent })).status).to.equal(200);
    });
  });

  describe('no one is charged without a stored submission', () => {
    it('refunds at once when the submission is refused for the quota (402), once, and the intent backs nothing after', async () => {
      const full = await createTenant(t.app, { monthlyQuota: 0 });
      const fullForm = await createPublishedForm(t.url, full.key, [NAME, PAY]);
      const intent = await paidIntent(fullForm.id);
      const counted = await refundsCounted('refused_submission');
      const res = await submitPublic(fullForm.id, { fld_name: 'Ada', fld_pay: intent });
      expect(res.status).to.equal(402);
      const refunds = stripe.refunds.filter((r) => r.paymentIntent === intent);
      expect(refunds).to.have.length(1);
      expect(refunds[0]).to.include({ amount: 1500, idempotencyKey: refundIdempotencyKey(intent) });
      const row = await intentRow(intent);
      expect(row).to.include({ state: 'refunded', refund_id: refunds[0].id });
      expect(row.refunded_at).to.not.equal(null);
      expect(await refundsCounted('refused_submission')).to.equal(counted + 1);
      const logged = logLines.filter((line) => line.msg === 'payment refunded: no stored submission holds it' && line.paymentIntentId === intent);
      expect(logged).to.have.length(1);
      expect(logged[0]).to.include({ refundId: refunds[0].id, formId: fullForm.id, amount: 1500, currency: 'eur', reason: 'refused_submission', level: 30 });

      // The organization gets room again: the refunded payment still backs no submission.
      await t.query('update organizations set monthly_quota = null where id = ?', [full.organizationId]);
      const again = await submitPublic(fullForm.id, { fld_name: 'Ada', fld_pay: intent });
      expect(again.status).to.equal(409);
      expect((await submitPublic(fullForm.id, { fld_name: 'Ada', fld_pay: intent })).status).to.equal(409);
      expect(stripe.refunds.filter((r) => r.paymentIntent === intent)).to.have.length(1);
    });

    it('refunds at once on the API too (402 of the caller\'s own form)', async () => {
      const full = await createTenant(t.app, { monthlyQuota: 0 });
      const fullForm = await createPublishedForm(t.url, full.key, [NAME, PAY]);
      const intent = await paidIntent(fullForm.id);
      const res = await call(t.url, 'POST', `/v1/forms/${fullForm.id}/submissions`, { key: full.key, body: { data: { fld_name: 'Ada', fld_pay: intent } } });
      expect(res.status).to.equal(402);
      expect(stripe.refunds.filter((r) => r.paymentIntent === intent)).to.have.length(1);
      expect((await intentRow(intent)).state).to.equal('refunded');
    });

    it('another organization naming the form (404) refunds nothing', async () => {
      const intent = await paidIntent();
      const stranger = await createTenant(t.app);
      const res = await call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: stranger.key, body: { data: { fld_name: 'Ada', fld_pay: intent } } });
      expect(res.status).to.equal(404);
      expect(stripe.refunds.filter((r) => r.paymentIntent === intent)).to.have.length(0);
      expect((await intentRow(intent)).state).to.equal('open');
    });

    it('refunds at once when the form was unpublished while the person paid (404)', async () => {
      const closing = await createPublishedForm(t.url, tenant.key, [NAME, PAY]);
      const intent = await paidIntent(closing.id);
      const put = await call(t.url, 'PUT', `/v1/forms/${closing.id}`, { key: tenant.key, body: { status: 'archived' } });
      expect(put.status, put.text).to.equal(200);
      const res = await submitPublic(closing.id, { fld_name: 'Ada', fld_pay: intent });
      expect(res.status).to.equal(404);
      expect(stripe.refunds.filter((r) => r.paymentIntent === intent)).to.have.length(1);
      expect((await intentRow(intent)).state).to.equal('refunded');
    });

    it('refunds nothing for a refusal the person can fix (422), nor an intent not paid', async () => {
      const fixable = await paidIntent();
      expect((await submitPublic(form.id, { fld_pay: fixable })).status).to.equal(422);
      const full = await createTenant(t.app, { monthlyQuota: 0 });
      const fullForm = await createPublishedForm(t.url, full.key, [NAME, PAY]);
      const unpaid = (await newIntent(fullForm.id)).body.paymentIntentId;
      expect((await submitPublic(fullForm.id, { fld_name: 'Ada', fld_pay: unpaid })).status).to.equal(422);
      expect(stripe.refunds.filter((r) => r.paymentIntent === fixable || r.paymentIntent === unpaid)).to.have.length(0);
      expect((await intentRow(fixable)).state).to.equal('open');
      // Fixed, the submission is stored with its payment.
      expect((await submitPublic(form.id, { fld_name: 'Ada', fld_pay: fixable })).status).to.equal(200);
    });

    it('Stripe down at the refund: the answer is still 402, the intent backs nothing, and the maintenance job refunds it once', async () => {
      const full = await createTenant(t.app, { monthlyQuota: 0 });
      const fullForm = await createPublishedForm(t.url, full.key, [NAME, PAY]);
      const intent = await paidIntent(fullForm.id);
      stripe.setFailing((method, path) => method === 'POST' && path === '/v1/refunds');
      let res;
      try {
        res = await submitPublic(fullForm.id, { fld_name: 'Ada', fld_pay: intent });
      } finally {
        stripe.setFailing(null);
      }
      expect(res.status).to.equal(402);
      expect(stripe.refunds.filter((r) => r.paymentIntent === intent)).to.have.length(0);
      expect((await intentRow(intent)).state).to.equal('refunding');
      const [claim] = await t.query('select submission_id from payment_claims where payment_intent_id = ?', [intent]);
      expect(claim.submission_id).to.equal('refund');

      // A run inside the retry lease leaves it; one after it sends the refund again, with the same key.
      await sweepAbandonedPayments(t.app);
      expect(stripe.refunds.filter((r) => r.paymentIntent === intent)).to.have.length(0);
      await t.query(`update payment_intents set updated_at = now() - interval '11 minutes' where id = ?`, [intent]);
      await sweepAbandonedPayments(t.app);
      await t.query(`update payment_intents set updated_at = now() - interval '11 minutes' where id = ?`, [intent]);
      await sweepAbandonedPayments(t.app);
      const refunds = stripe.refunds.filter((r) => r.paymentIntent === intent);
      expect(refunds).to.have.length(1);
      expect(refunds[0].idempotencyKey).to.equal(refundIdempotencyKey(intent));
      expect((await intentRow(intent)).state).to.equal('refunded');
      const attempts = stripe.calls.filter((c) => c.path === '/v1/refunds' && c.params.payment_intent === intent);
      expect(attempts.map((c) => c.idempotencyKey)).to.deep.equal([refundIdempotencyKey(intent), refundIdempotencyKey(intent)]);
    });
  });

  describe('the maintenance sweep', () => {
    const age = (id: string, hours: number) =>
      t.query(`update payment_intents set created_at = now() - (? * interval '1 hour'), updated_at = now() - (? * interval '1 hour') where id = ?`, [hours, hours, id]);

    it('refunds old succeeded intents nothing claimed, settles claimed ones, cancels unpaid ones, leaves young ones', async () => {
      const abandoned = await paidIntent();
      const claimed = await paidIntent();
      expect((await submitPublic(form.id, { fld_name: 'Ada', fld_pay: claimed })).status).to.equal(200);
      const unpaid = (await newIntent()).body.paymentIntentId;
      const young = await paidIntent();
      for (const id of [abandoned, claimed, unpaid]) await age(id, 25);
      await age(young, 23);
      const counted = await refundsCounted('abandoned');

      // The hourly maintenance job runs the sweep.
      const report = await maintenance(t.app);
      expect(report.paymentsRefunded).to.be.at.least(1);
      expect(report.paymentIntentsCanceled).to.be.at.least(1);
      expect(report.paymentIntentsClaimed).to.be.at.least(1);
      expect(stripe.refunds.filter((r) => r.paymentIntent === abandoned)).to.have.length(1);
      expect(stripe.refunds.filter((r) => [claimed, unpaid, young].includes(r.paymentIntent))).to.have.length(0);
      expect((await intentRow(abandoned)).state).to.equal('refunded');
      expect((await intentRow(claimed)).state).to.equal('claimed');
      expect((await intentRow(unpaid)).state).to.equal('canceled');
      expect(stripe.intent(unpaid)!.status).to.equal('canceled');
      expect((await intentRow(young)).state).to.equal('open');
      expect(await refundsCounted('abandoned')).to.be.at.least(counted + 1);

      await sweepAbandonedPayments(t.app);
      expect(stripe.refunds.filter((r) => r.paymentIntent === abandoned)).to.have.length(1);
      expect((await submitPublic(form.id, { fld_name: 'Ada', fld_pay: abandoned })).status).to.equal(409);
    });

    it('Stripe down during the sweep: the run ends without failing the job, and the next one refunds', async () => {
      const intent = await paidIntent();
      await age(intent, 25);
      stripe.setDown(true);
      let report;
      try {
        report = await sweepAbandonedPayments(t.app);
      } finally {
        stripe.setDown(false);
      }
      expect(report.paymentsRefunded).to.equal(0);
      expect((await intentRow(intent)).state).to.equal('open');
      await sweepAbandonedPayments(t.app);
      expect(stripe.refunds.filter((r) => r.paymentIntent === intent)).to.have.length(1);
      expect((await intentRow(intent)).state).to.equal('refunded');
    });

    it('a refund Stripe already made (its answer was lost) is recorded as made, not made twice', async () => {
      const intent = await paidIntent();
      await age(intent, 25);
      // The refund reached Stripe, but the answer did not come back: the key replays it.
      const replay = await fetch(`${stripe.url}/v1/refunds`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${stripe.secretKey}`, 'Content-Type': 'application/x-www-form-urlencoded', 'Idempotency-Key': refundIdempotencyKey(intent) },
        body: `payment_intent=${intent}&metadata[reason]=no_submission`,
      });
      expect(replay.status).to.equal(200);
      await sweepAbandonedPayments(t.app);
      expect(stripe.refunds.filter((r) => r.paymentIntent === intent)).to.have.length(1);
      expect((await intentRow(intent)).state).to.equal('refunded');
    });

    it('two processes racing to refund one intent make exactly one refund at Stripe', async () => {
      const other = await startTestApp({
        STRIPE_API_BASE: stripe.url, STRIPE_SECRET_KEY: stripe.secretKey, STRIPE_PUBLISHABLE_KEY: stripe.publishableKey,
      });
      try {
        for (let round = 0; round < 5; round++) {
          const intent = await paidIntent();
          const outcomes = await Promise.all([
            refundUnclaimedIntent(t.app, intent, 'abandoned'),
            refundUnclaimedIntent(other.app, intent, 'abandoned'),
            refundUnclaimedIntent(other.app, intent, 'abandoned'),
          ]);
          expect(outcomes.filter((o) => o === 'refunded')).to.have.length(1);
          expect(stripe.refunds.filter((r) => r.paymentIntent === intent)).to.have.length(1);
          expect(stripe.calls.filter((c) => c.path === '/v1/refunds' && c.params.payment_intent === intent)).to.have.length(1);
        }
      } finally {
        await other.close();
      }
    });
  });
});
