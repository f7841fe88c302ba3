import { expect } from 'chai';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchBrowser, requireChromium, SCREENSHOTS } from '../support/browser';
import { startLoopbackServer, type LoopbackServer } from '../support/fakes/http-server';
import { call, createPublishedForm, createTenant, startTestApp, type TestApp, type TestTenant, fieldInput as field } from '../support/harness';

const showWhen = (fieldId: string, value: unknown) => ({ show: true, logic: 'all', rules: [{ fieldId, operator: 'equals', value }] });

/** Two pages; page 2 shows the order number or the details, depending on the topic picked on page 1. */
const twoPageForm = {
  title: 'Contact support',
  description: 'We answer within a day.',
  pages: [
    { id: 'p_you', title: 'About you', order: 0 },
    { id: 'p_issue', title: 'Your question', order: 1 },
  ],
  fields: [
    field('fld_name', 'text', 'Full name', { required: true, order: 0, pageId: 'p_you' }),
    field('fld_email', 'email', 'Email', { required: true, order: 1, pageId: 'p_you' }),
    field('fld_topic', 'select', 'Topic', {
      required: true, order: 2, pageId: 'p_you',
      config: { options: [{ label: 'An order', value: 'order' }, { label: 'Something else', value: 'other' }] },
    }),
    field('fld_order', 'text', 'Order number', { required: true, order: 0, pageId: 'p_issue', conditionalLogic: showWhen('fld_topic', 'order') }),
    field('fld_details', 'textarea', 'Details', { required: true, order: 1, pageId: 'p_issue', conditionalLogic: showWhen('fld_topic', 'other') }),
    field('fld_ref', 'text', 'Referrer', { order: 2, pageId: 'p_issue', hidden: true, prefillParam: 'ref' }),
  ],
  settings: { submitButtonText: 'Send question', successMessage: 'Thanks, we will be in touch.' },
};

async function poll<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('hosted page (browser)', function () {
  this.timeout(60_000);
  let t: TestApp;
  let tenant: TestTenant;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let form: any;
  /** Console errors and uncaught exceptions, CSP violations included. */
  let pageErrors: string[];

  before(async function () {
    requireChromium(this);
    t = await startTestApp();
    tenant = await createTenant(t.app);
    form = await createPublishedForm(t.url, tenant.key, twoPageForm.fields, twoPageForm);
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await t?.close();
  });
  beforeEach(async () => {
    context = await browser.newContext({ viewport: { width: 800, height: 900 } });
    page = await context.newPage();
    pageErrors = [];
    page.on('console', (message) => { if (message.type() === 'error') pageErrors.push(message.text()); });
    page.on('pageerror', (error) => pageErrors.push(error.message));
  });
  afterEach(async () => context?.close());

  const stored = async (submissionId: string) =>
    (await call(t.url, 'GET', `/v1/submissions/${submissionId}`, { key: tenant.key })).body.submission;
  const shot = (name: string) => page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });

  async function fillFirstPage(target: Page | ReturnType<Page['frameLocator']>, topic: string) {
    await target.locator('#fs-fld_name-input').fill('Ada Lovelace');
    await target.locator('#fs-fld_email-input').fill('ada@example.com');
    await target.locator('#fs-fld_topic-input').selectOption(topic);
    await target.getByRole('button', { name: 'Next' }).click();
  }

  it('walks a two-page form with a conditional field, submits it and stores it', async () => {
    const submitted = page.waitForResponse((res) => res.url().endsWith(`/public/forms/${form.id}`) && res.request().method() === 'POST');
    await page.goto(`${t.url}/f/${form.id}`);
    await expect(await page.locator('h1').textContent()).to.equal('Contact support');

    // Page 1 refuses to go on while required fields are empty. (Until a topic is picked, page 2 has
    // nothing to show, so the button offers to send.)
    await page.locator('button.fs-button--primary').click();
    expect(await page.locator('#fs-fld_name-error').textContent()).to.match(/required/i);
    await shot('hosted-page-1-required-errors');

    await fillFirstPage(page, 'other');
    await page.locator('#fs-fld_details-input').waitFor({ state: 'visible' });
    expect(await page.locator('#fs-fld_order-input').isVisible()).to.equal(false);
    await page.locator('#fs-fld_details-input').fill('Where is the manual?');
    await shot('hosted-page-2-conditional');
    await page.getByRole('button', { name: 'Send question' }).click();

    await page.getByText('Thanks, we will be in touch.').waitFor({ state: 'visible' });
    await shot('hosted-page-3-success');
    const { submissionId } = await (await submitted).json();
    const submission = await stored(submissionId);
    expect(submission.rawData).to.deep.equal({
      fld_name: 'Ada Lovelace', fld_email: 'ada@example.com', fld_topic: 'other', fld_details: 'Where is the manual?',
    });
    expect(submission).to.include({ submitterEmail: 'ada@example.com', formId: form.id });

    // The page reported its view, start and completion through the analytics beacon.
    const analytics = await poll(
      async () => (await call(t.url, 'GET', `/v1/forms/${form.id}/analytics`, { key: tenant.key })).body,
      (a) => a.completions >= 1,
    );
    expect(analytics.views).to.be.at.least(1);
    expect(analytics.starts).to.be.at.least(1);
    expect(analytics.completions).to.be.at.least(1);
    expect(pageErrors, 'console errors (CSP violations show here)').to.deep.equal([]);
  });

  it('shows a server-side field error next to its field', async () => {
    let posted = 0;
    await page.route(`**/public/forms/${form.id}`, async (route) => {
      if (route.request().method() !== 'POST') return route.continue();
      posted++;
      await route.fulfill({
        status: 422, contentType: 'application/json',
        body: JSON.stringify({ success: false, errors: { fld_email: 'This address cannot receive mail' } }),
      });
    });
    await page.goto(`${t.url}/f/${form.id}`);
    await fillFirstPage(page, 'order');
    await page.locator('#fs-fld_order-input').fill('A-1001');
    await page.getByRole('button', { name: 'Send question' }).click();

    const error = page.locator('#fs-fld_email-error');
    await error.getByText('This address cannot receive mail').waitFor({ state: 'visible' });
    expect(posted).to.equal(1);
    // The error sits inside the email field's own frame, and the field is marked invalid.
    expect(await page.locator('[data-field-id="fld_email"] #fs-fld_email-error').count()).to.equal(1);
    expect(await page.locator('#fs-fld_email-input').getAttribute('aria-invalid')).to.equal('true');
    expect(await page.locator('#fs-fld_email-input').isVisible()).to.equal(true);
    await shot('hosted-page-4-server-field-error');
  });

  it('pre-fills a hidden field from the URL and stores it', async () => {
    const submitted = page.waitForResponse((res) => res.url().endsWith(`/public/forms/${form.id}`) && res.request().method() === 'POST');
    await page.goto(`${t.url}/f/${form.id}?ref=abc`);
    expect(await page.locator('#fs-fld_ref-input').count()).to.equal(0);
    await fillFirstPage(page, 'order');
    await page.locator('#fs-fld_order-input').fill('A-1002');
    await page.getByRole('button', { name: 'Send question' }).click();
    await page.getByText('Thanks, we will be in touch.').waitFor({ state: 'visible' });
    const { submissionId } = await (await submitted).json();
    expect((await stored(submissionId)).rawData).to.include({ fld_ref: 'abc', fld_topic: 'order', fld_order: 'A-1002' });
    expect(pageErrors).to.deep.equal([]);
  });

  describe('embedded on another site', () => {
    let host: LoopbackServer;

    before(async () => {
      host = await startLoopbackServer((_req, res) => {
        res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
        res.end(`<!doctype html><html><head><title>Partner site</title></head><body>
<h1>Partner site</h1>
<p>Our support form:</p>
<script src="${t.url}/embed.js" data-form="${form.id}" async></script>
<script>
  document.addEventListener('formservice:submitted', (event) => { window.__submitted = event.detail; });
</script>
</body></html>`);
      });
    });
    after(async () => host?.close());

    it("forwards into the frame only the form's prefill parameters and utm_*", async () => {
      await page.goto(`${host.origin}/?ref=partner&reset_token=s3cret&code=oauth-code&utm_source=news&utm_campaign=fall`);
      const iframe = page.locator('iframe.formservice-embed');
      await page.waitForFunction(() => Boolean(document.querySelector('iframe.formservice-embed')?.getAttribute('src')));
      const src = new URL((await iframe.getAttribute('src'))!);
      expect([...src.searchParams.keys()].sort()).to.deep.equal(['embed', 'ref', 'utm_campaign', 'utm_source']);
      expect(src.searchParams.get('ref')).to.equal('partner');
      expect(src.href).to.not.include('s3cret');
      expect(src.href).to.not.include('oauth-code');
    });

    it('submits through the embed and announces it to the host page', async () => {
      await page.goto(`${host.origin}/?ref=partner`);
      const frame = page.frameLocator('iframe.formservice-embed');
      await fillFirstPage(frame, 'other');
      await frame.locator('#fs-fld_details-input').fill('Sent from the embed');
      await frame.getByRole('button', { name: 'Send question' }).click();

      const detail = await (await page.waitForFunction(() => (window as any).__submitted, undefined, { timeout: 15_000 })).jsonValue();
      expect(detail.formId).to.equal(form.id);
      expect(detail.submissionId).to.match(/^sub_/);
      await frame.getByText('Thanks, we will be in touch.').waitFor({ state: 'visible' });
      await shot('embed-1-submitted');
      const submission = await stored(detail.submissionId);
      expect(submission.rawData).to.include({ fld_details: 'Sent from the embed', fld_ref: 'partner' });
    });
  });
});
