import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchBrowser, openPhonePage, requireChromium, SCREENSHOTS } from '../support/browser';
import { everyFieldForm } from '../support/every-field-form';
import { fileServiceEnv, jpegBytes } from '../support/files';
import { call, createPublishedForm, createTenant, startTestApp, type TestApp, type TestTenant } from '../support/harness';

/** Answers that survive a closed tab: kept in the browser per form, put back with the page reached. */
describe('answers kept across a closed tab on the hosted page (browser)', function () {
  this.timeout(90_000);
  let t: TestApp;
  let tenant: TestTenant;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let problems: string[];
  let storageDir: string;
  let form: any;
  let other: any;

  before(async function () {
    requireChromium(this);
    storageDir = mkdtempSync(path.join(tmpdir(), 'fs-e2e-kept-'));
    t = await startTestApp(await fileServiceEnv(storageDir, { FILE_STORAGE: 'local' }));
    tenant = await createTenant(t.app);
    const spec = everyFieldForm();
    form = await createPublishedForm(t.url, tenant.key, spec.fields, spec);
    other = await createPublishedForm(t.url, tenant.key, spec.fields, { ...spec, title: 'Another form' });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await t?.close();
    if (storageDir) rmSync(storageDir, { recursive: true, force: true });
  });
  beforeEach(async () => {
    ({ context, page, problems } = await openPhonePage(browser));
  });
  afterEach(async () => context?.close());

  const key = (formId: string) => `formservice:draft:${formId}`;
  const stored = (target: Page, formId: string) => target.evaluate((k) => window.localStorage.getItem(k), key(formId));
  const shot = (name: string, target: Page) => target.screenshot({ path: path.join(SCREENSHOTS, `kept-answers-${name}.png`), fullPage: true });

  /** Closes the tab and opens the form again in a new one of the same browser. */
  async function reopen(formId = form.id): Promise<Page> {
    await page.close();
    page = await context.newPage();
    page.on('pageerror', (error) => problems.push(error.message));
    await page.goto(`${t.url}/f/${formId}`);
    return page;
  }

  async function fillPageOne(target: Page): Promise<void> {
    await target.locator('#fs-fld_name-first').fill('Ada');
    await target.locator('#fs-fld_name-last').fill('Lovelace');
    await target.locator('#fs-fld_text-input').fill('Analytical Engines Ltd');
    await target.locator('#fs-fld_email-input').fill('ada@example.com');
    await target.locator('#fs-fld_number-input').fill('12');
    await target.locator('#fs-fld_date-input').fill('2026-12-01');
    await target.locator('#fs-fld_select-input').selectOption('pro');
    await target.getByRole('radio', { name: 'Yes' }).check();
    await target.locator('#fs-fld_secret-input').fill('GB-SECRET-123');
    await target.locator('#fs-fld_consent-input').check();
  }

  it('puts back the answers and the page reached after the tab is closed, never the sensitive ones or the signature; a submission clears them', async () => {
    await page.goto(`${t.url}/f/${form.id}`);
    await fillPageOne(page);
    await page.getByRole('button', { name: 'Next' }).click();
    await page.getByRole('heading', { name: 'Your opinion' }).waitFor();
    await page.getByRole('radio', { name: '4 of 5 stars' }).check({ force: true });
    await page.locator('#fs-fld_upload-input').setInputFiles({ name: 'photo.jpg', mimeType: 'image/jpeg', buffer: jpegBytes(8192) });
    await page.locator('.fs-upload[data-state="done"]').waitFor();
    await page.locator('#fs-fld_signature-typed').fill('Ada Lovelace');
    const kept = (await stored(page, form.id))!;
    expect(kept).to.include('Lovelace').and.include('photo.jpg');
    expect(kept, 'sensitive and signature answers are never kept').to.not.include('GB-SECRET').and.not.include('data:image');

    await reopen();
    // Back on page 2, where the tab was closed, with its answers and the upload (its claim, not its bytes).
    await page.getByRole('heading', { name: 'Your opinion' }).waitFor();
    expect(await page.getByText('Your answers from your last visit are filled in.').isVisible()).to.equal(true);
    expect(await page.getByRole('button', { name: 'Start over' }).isVisible()).to.equal(true);
    expect(await page.getByRole('radio', { name: '4 of 5 stars' }).isChecked()).to.equal(true);
    expect(await page.locator('.fs-upload[data-state="done"] .fs-upload-name').textContent()).to.equal('photo.jpg');
    expect(await page.locator('#fs-fld_signature-typed').inputValue()).to.equal('');
    await shot('1-restored-page-2', page);
    await page.getByRole('button', { name: 'Back' }).click();
    expect(await page.locator('#fs-fld_name-last').inputValue()).to.equal('Lovelace');
    expect(await page.locator('#fs-fld_select-input').inputValue()).to.equal('pro');
    expect(await page.locator('#fs-fld_consent-input').isChecked()).to.equal(true);
    expect(await page.locator('#fs-fld_secret-input').inputValue()).to.equal('');

    // Kept per form: another form opened in the same browser starts empty.
    await reopen(other.id);
    expect(await page.locator('#fs-fld_name-last').inputValue()).to.equal('');
    expect(await page.locator('.fs-draft').isVisible()).to.equal(false);

    // Finishing the form sends the kept upload and clears what was kept. (The tab was last on page 1.)
    await reopen();
    await page.getByRole('button', { name: 'Next' }).click();
    await page.getByRole('heading', { name: 'Your opinion' }).waitFor();
    await page.locator('[data-field-id="fld_scale"]').getByRole('radio', { name: '2', exact: true }).check({ force: true });
    await page.locator('[data-field-id="fld_nps"]').getByRole('radio', { name: /^9$/ }).check({ force: true });
    await page.getByRole('radio', { name: 'Agree', exact: true }).check({ force: true });
    await page.locator('#fs-fld_signature-typed').fill('Ada Lovelace');
    const submitted = page.waitForResponse((res) => res.url().endsWith(`/public/forms/${form.id}`) && res.request().method() === 'POST');
    await page.getByRole('button', { name: 'Send answers' }).click();
    const response = await submitted;
    expect(response.status(), await response.text()).to.equal(200);
    await page.getByText('Thanks for your answers.').waitFor();
    expect(await stored(page, form.id)).to.equal(null);
    const { submissionId } = await response.json();
    const submission = (await call(t.url, 'GET', `/v1/submissions/${submissionId}`, { key: tenant.key })).body.submission;
    expect(submission.rawData).to.deep.include({ fld_text: 'Analytical Engines Ltd', fld_rating: 4, fld_nps: 9 });
    expect(submission.rawData.fld_upload).to.include({ name: 'photo.jpg' });
    expect(submission.rawData).to.not.have.property('fld_secret');

    await reopen();
    expect(await page.locator('#fs-fld_name-last').inputValue()).to.equal('');
    expect(await page.locator('.fs-draft').isVisible()).to.equal(false);
    expect(problems).to.deep.equal([]);
  });

  it('"Start over" clears the kept answers', async () => {
    await page.goto(`${t.url}/f/${form.id}`);
    await page.locator('#fs-fld_text-input').fill('Difference Engines plc');
    await page.getByRole('radio', { name: 'No' }).check();
    await reopen();
    expect(await page.locator('#fs-fld_text-input').inputValue()).to.equal('Difference Engines plc');
    await page.getByRole('button', { name: 'Start over' }).click();
    expect(await page.locator('#fs-fld_text-input').inputValue()).to.equal('');
    expect(await page.getByRole('radio', { name: 'No' }).isChecked()).to.equal(false);
    expect(await page.locator('.fs-draft').isVisible()).to.equal(false);
    expect(await stored(page, form.id)).to.equal(null);
    await reopen();
    expect(await page.locator('#fs-fld_text-input').inputValue()).to.equal('');
    expect(problems).to.deep.equal([]);
  });

  it('ignores what is stale, corrupt or not its own, and removes it', async () => {
    const eightDaysAgo = Date.now() - 8 * 24 * 60 * 60 * 1000;
    for (const text of [
      '{not json',
      JSON.stringify({ v: 1, formId: other.id, savedAt: Date.now(), page: 0, values: { fld_text: 'Foreign' } }),
      JSON.stringify({ v: 1, formId: form.id, savedAt: eightDaysAgo, page: 1, values: { fld_text: 'Stale' } }),
    ]) {
      await page.goto(`${t.url}/f/${form.id}`);
      await page.evaluate(([k, v]) => window.localStorage.setItem(k, v), [key(form.id), text]);
      await reopen();
      expect(await page.locator('#fs-fld_text-input').inputValue(), text).to.equal('');
      expect(await page.locator('.fs-draft').isVisible()).to.equal(false);
      expect(await stored(page, form.id)).to.equal(null);
    }
    expect(problems).to.deep.equal([]);
  });
});
