import { expect } from 'chai';
import path from 'node:path';
import type { Browser, BrowserContext, FrameLocator, Page } from 'playwright-core';
import { launchBrowser, openPhonePage, requireChromium, SCREENSHOTS } from '../support/browser';
import { startLoopbackServer, type LoopbackServer } from '../support/fakes/http-server';
import { startFakeStripe, TEST_CARDS, type FakeStripe } from '../support/fakes/stripe';
import { call, createPublishedForm, createTenant, startTestApp, type TestApp, type TestTenant, fieldInput as field } from '../support/harness';

describe('paying on the hosted page with Stripe\'s Payment Element (browser)', function () {
  this.timeout(60_000);
  let stripe: FakeStripe;
  let t: TestApp;
  let tenant: TestTenant;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let form: any;
  let problems: string[];

  before(async function () {
    requireChromium(this);
    stripe = await startFakeStripe();
    t = await startTestApp({
      STRIPE_API_BASE: stripe.url, STRIPE_SECRET_KEY: stripe.secretKey, STRIPE_PUBLISHABLE_KEY: stripe.publishableKey,
      STRIPE_JS_URL: stripe.jsUrl,
    });
    tenant = await createTenant(t.app);
    form = await createPublishedForm(t.url, tenant.key, [
      field('fld_name', 'text', 'Your name', { required: true, order: 0 }),
      field('fld_pay', 'payment', 'Workshop ticket', { required: true, order: 1, config: { amount: 1500, currency: 'eur' } }),
    ], { title: 'Autumn workshop', settings: { submitButtonText: 'Pay and register' } });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await t?.close();
    await stripe?.close();
  });
  beforeEach(async () => {
    ({ context, page, problems } = await openPhonePage(browser));
    page.on('response', (res) => { if (res.status() === 401) problems.push(`401 from ${res.url()}`); });
  });
  afterEach(async () => context?.close());

  const shot = (name: string, target: Page = page) => target.screenshot({ path: path.join(SCREENSHOTS, `payments-${name}.png`), fullPage: true });
  const storedFor = async (intentId: string) =>
    t.query(`select id, data from submissions where form_id = ? and data->>'fld_pay' = ?`, [form.id, intentId]);

  async function fillCard(scope: Page | FrameLocator, number: string): Promise<void> {
    await scope.locator('input[name=cardnumber]').fill(number);
    await scope.locator('input[name=exp-date]').fill('12 / 34');
    await scope.locator('input[name=cvc]').fill('123');
  }

  /** The intent the page asked the service for (its answer to POST .../payments). */
  function intentOfPage(target: Page = page): Promise<string> {
    return target.waitForResponse((res) => res.url().endsWith(`/public/forms/${form.id}/payments`))
      .then(async (res) => (await res.json()).paymentIntentId);
  }

  it('takes the card in the form and stores the submission holding the paid intent', async () => {
    const order: string[] = [];
    page.on('request', (req) => {
      const url = new URL(req.url());
      if (req.method() === 'POST') order.push(url.pathname.replace(form.id, '{id}').replace(/pi_[A-Za-z0-9]+/, '{pi}'));
    });
    const intent = intentOfPage();
    const response = await page.goto(`${t.url}/f/${form.id}`);
    const csp = response!.headers()['content-security-policy'];
    expect(csp).to.include(`script-src 'self' 'nonce-`).and.include(` ${stripe.url}`);
    expect(csp).to.include(`connect-src 'self' ${stripe.url};`);
    expect(csp).to.include(`frame-src https://challenges.cloudflare.com ${stripe.url};`);
    const intentId = await intent;
    await page.locator('input[name=cardnumber]').waitFor();
    expect(await page.getByText('Amount due: €15.00').isVisible()).to.equal(true);
    await shot('1-form');

    await page.locator('#fs-fld_name-input').fill('Ada Lovelace');
    await fillCard(page, TEST_CARDS.good);
    const submitted = page.waitForResponse((res) => res.url().endsWith(`/public/forms/${form.id}`) && res.request().method() === 'POST');
    await page.getByRole('button', { name: 'Pay and register' }).click();
    expect((await submitted).status()).to.equal(200);
    await page.getByText('Thank you!').waitFor();
    await shot('2-paid');

    const steps = order.filter((p) => !p.endsWith('/events'));
    expect(steps).to.deep.equal(['/public/forms/{id}/payments', '/public/forms/{id}/check', '/v1/payment_intents/{pi}/confirm', '/public/forms/{id}']);
    const stored = await storedFor(intentId);
    expect(stored).to.have.length(1);
    expect(stored[0].data).to.deep.equal({ fld_name: 'Ada Lovelace', fld_pay: intentId });
    expect(stripe.intent(intentId)).to.include({ status: 'succeeded', amount: 1500, currency: 'eur' });
    expect(stripe.intent(intentId)!.metadata).to.deep.equal({ form_id: form.id, field_id: 'fld_pay' });
    expect(problems).to.deep.equal([]);
  });

  it('shows Stripe\'s decline message beside the field and stores nothing', async () => {
    const intent = intentOfPage();
    await page.goto(`${t.url}/f/${form.id}`);
    const intentId = await intent;
    await page.locator('#fs-fld_name-input').fill('Grace Hopper');
    await fillCard(page, TEST_CARDS.declined);
    await page.getByRole('button', { name: 'Pay and register' }).click();
    const error = page.locator('.fs-field--payment .fs-error');
    await page.getByText('Your card was declined.').waitFor();
    expect(await error.textContent()).to.equal('Your card was declined.');
    await shot('3-declined');
    expect(await storedFor(intentId)).to.have.length(0);
    expect(stripe.intent(intentId)!.status).to.equal('requires_payment_method');

    // Another card on the same intent goes through.
    await fillCard(page, TEST_CARDS.good);
    expect(await error.textContent()).to.equal('');
    await page.getByRole('button', { name: 'Pay and register' }).click();
    await page.getByText('Thank you!').waitFor();
    expect(await storedFor(intentId)).to.have.length(1);
    expect(problems.filter((p) => !p.includes('402'))).to.deep.equal([]);
  });

  it('checks the answers before charging: nothing is confirmed while the form has a problem', async () => {
    const intent = intentOfPage();
    await page.goto(`${t.url}/f/${form.id}`);
    const intentId = await intent;
    await fillCard(page, TEST_CARDS.good);
    await page.getByRole('button', { name: 'Pay and register' }).click();
    await page.locator('#fs-fld_name-error').getByText('This field is required.').waitFor();
    expect(stripe.calls.filter((c) => c.path === `/v1/payment_intents/${intentId}/confirm`)).to.have.length(0);
    expect(stripe.intent(intentId)!.status).to.equal('requires_payment_method');
  });

  it('after a 3-D Secure redirect, comes back, restores the answers and submits them once', async () => {
    const intent = intentOfPage();
    await page.goto(`${t.url}/f/${form.id}?utm_source=news`);
    const intentId = await intent;
    await page.locator('#fs-fld_name-input').fill('Katherine Johnson');
    await fillCard(page, TEST_CARDS.threeDSecure);
    await page.getByRole('button', { name: 'Pay and register' }).click();
    await page.waitForURL(`${stripe.url}/3ds/authorize?**`);
    await shot('4-authenticate');
    const back = page.waitForResponse((res) => res.url().endsWith(`/public/forms/${form.id}`) && res.request().method() === 'POST');
    await page.getByRole('button', { name: 'Complete authentication' }).click();
    expect((await back).status()).to.equal(200);
    await page.getByText('Thank you!').waitFor();
    await shot('5-returned');
    expect(new URL(page.url()).search).to.equal('?utm_source=news');
    const stored = await storedFor(intentId);
    expect(stored).to.have.length(1);
    expect(stored[0].data).to.deep.equal({ fld_name: 'Katherine Johnson', fld_pay: intentId });
    expect(await page.evaluate((key) => sessionStorage.getItem(key), `fs-payment:${form.id}`)).to.equal(null);

    // A reload of the page does not submit again.
    await page.reload();
    await page.locator('input[name=cardnumber]').waitFor();
    expect(await storedFor(intentId)).to.have.length(1);
    expect(problems).to.deep.equal([]);
  });

  it('a failed 3-D Secure authentication comes back with the answers restored and the reason beside the field', async () => {
    const intent = intentOfPage();
    await page.goto(`${t.url}/f/${form.id}`);
    const intentId = await intent;
    await page.locator('#fs-fld_name-input').fill('Dorothy Vaughan');
    await fillCard(page, TEST_CARDS.threeDSecure);
    await page.getByRole('button', { name: 'Pay and register' }).click();
    await page.waitForURL(`${stripe.url}/3ds/authorize?**`);
    await page.getByRole('button', { name: 'Fail authentication' }).click();
    await page.getByText('We are unable to authenticate your payment method.', { exact: false }).waitFor();
    expect(await page.locator('#fs-fld_name-input').inputValue()).to.equal('Dorothy Vaughan');
    await shot('6-authentication-failed');
    expect(await storedFor(intentId)).to.have.length(0);
  });

  it('a payment that went through though its answer was lost is not charged again: the submission goes on', async () => {
    const intent = intentOfPage();
    await page.goto(`${t.url}/f/${form.id}`);
    const intentId = await intent;
    await page.locator('#fs-fld_name-input').fill('Annie Easley');
    await fillCard(page, TEST_CARDS.good);
    // As if an earlier confirmation reached Stripe and its answer never came back.
    stripe.setIntentStatus(intentId, 'succeeded');
    await page.getByRole('button', { name: 'Pay and register' }).click();
    await page.getByText('Thank you!').waitFor();
    expect(await storedFor(intentId)).to.have.length(1);
    expect(stripe.refunds.filter((r) => r.paymentIntent === intentId)).to.have.length(0);
  });

  it('makes the intent only when the payment field comes into view (a later page), and pays there', async () => {
    const twoPages = await createPublishedForm(t.url, tenant.key, [
      field('fld_name', 'text', 'Your name', { required: true, order: 0, pageId: 'p_you' }),
      field('fld_pay', 'payment', 'Ticket', { required: true, order: 1, pageId: 'p_pay', config: { amount: 900, currency: 'usd' } }),
    ], { pages: [{ id: 'p_you', title: 'About you', order: 0 }, { id: 'p_pay', title: 'Payment', order: 1 }] });
    const asked: string[] = [];
    page.on('request', (req) => { if (req.url().endsWith('/payments')) asked.push(req.url()); });
    await page.goto(`${t.url}/f/${twoPages.id}`);
    await page.locator('#fs-fld_name-input').fill('Ada');
    await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
    expect(asked).to.deep.equal([]);
    const intent = page.waitForResponse((res) => res.url().endsWith(`/public/forms/${twoPages.id}/payments`));
    await page.getByRole('button', { name: 'Next' }).click();
    const intentId = (await (await intent).json()).paymentIntentId;
    await page.getByText('Amount due: $9.00').waitFor();
    await fillCard(page, TEST_CARDS.good);
    await page.getByRole('button', { name: 'Submit' }).click();
    await page.getByText('Thank you!').waitFor();
    const stored = await t.query(`select data from submissions where form_id = ?`, [twoPages.id]);
    expect(stored.map((row: any) => row.data)).to.deep.equal([{ fld_name: 'Ada', fld_pay: intentId }]);
    expect(asked).to.have.length(1);
  });

  describe('embedded on another site', () => {
    let host: LoopbackServer;
    before(async () => {
      host = await startLoopbackServer((_req, res) => {
        res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
        res.end(`<!doctype html><html><head><meta name="viewport" content="width=device-width, initial-scale=1"><title>Partner</title></head>
<body><h1>Register</h1><script src="${t.url}/embed.js" data-form="${form.id}" async></script></body></html>`);
      });
    });
    after(async () => host?.close());

    it('pays and submits inside the iframe', async () => {
      const intent = intentOfPage();
      await page.goto(host.origin);
      const intentId = await intent;
      const frame = page.frameLocator('iframe.formservice-embed');
      await frame.locator('input[name=cardnumber]').waitFor();
      await frame.locator('#fs-fld_name-input').fill('Mary Jackson');
      await fillCard(frame, TEST_CARDS.good);
      await frame.getByRole('button', { name: 'Pay and register' }).click();
      await frame.getByText('Thank you!').waitFor();
      await shot('7-embed-paid');
      expect(await storedFor(intentId)).to.have.length(1);
      expect(problems).to.deep.equal([]);
    });
  });
});
