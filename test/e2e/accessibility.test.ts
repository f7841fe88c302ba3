import { expect } from 'chai';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchBrowser, openPage, PHONE, requireChromium } from '../support/browser';
import { fileServiceEnv, jpegBytes } from '../support/files';
import { startFakeStripe, type FakeStripe } from '../support/fakes/stripe';
import { createPublishedForm, createTenant, startTestApp, type TestApp, type TestTenant, fieldInput as field } from '../support/harness';

/** axe-core's WCAG 2.0, 2.1 and 2.2 rules of levels A and AA (target-size is wcag22aa). */
const WCAG_TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22a', 'wcag22aa'];
const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const DESKTOP = { width: 1280, height: 900 };
const options = [{ label: 'Yes', value: 'yes' }, { label: 'No', value: 'no' }];

/** Every field type over two pages; page 2 holds the rating, scale, NPS, likert, ranking, signature and upload. */
export function everyFieldForm(extra: Record<string, unknown> = {}) {
  const p1 = { pageId: 'p_one' };
  const p2 = { pageId: 'p_two' };
  return {
    title: 'Every field',
    description: 'A form holding every field type.',
    pages: [{ id: 'p_one', title: 'About you', order: 0 }, { id: 'p_two', title: 'Your opinion', order: 1 }],
    fields: [
      field('fld_heading', 'heading', 'Contact details', { order: 0, ...p1, description: 'How we reach you.' }),
      field('fld_name', 'name', 'Name', { required: true, order: 1, ...p1, config: { format: 'split' } }),
      field('fld_text', 'text', 'Company', { required: true, order: 2, ...p1, description: 'Where you work.' }),
      field('fld_email', 'email', 'Email', { required: true, order: 3, ...p1 }),
      field('fld_phone', 'phone', 'Phone', { order: 4, ...p1 }),
      field('fld_url', 'url', 'Website', { order: 5, ...p1 }),
      field('fld_number', 'number', 'Team size', { required: true, order: 6, ...p1 }),
      field('fld_date', 'date', 'Start date', { required: true, order: 7, ...p1 }),
      field('fld_textarea', 'textarea', 'Notes', { order: 8, ...p1 }),
      field('fld_select', 'select', 'Plan', { required: true, order: 9, ...p1, config: { options: [{ label: 'Free', value: 'free' }, { label: 'Pro', value: 'pro' }] } }),
      field('fld_radio', 'radio', 'Newsletter', { required: true, order: 10, ...p1, config: { options } }),
      field('fld_checks', 'checkbox', 'Interests', { order: 11, ...p1, config: { options: [{ label: 'Forms', value: 'forms' }, { label: 'Surveys', value: 'surveys' }] } }),
      field('fld_secret', 'text', 'Tax number', { order: 12, ...p1, config: { sensitive: true } }),
      field('fld_consent', 'checkbox', 'I agree to the terms', { required: true, order: 13, ...p1 }),
      field('fld_rating', 'rating', 'Rating', { required: true, order: 0, ...p2, config: { max: 5 } }),
      field('fld_scale', 'scale', 'Ease of use', { required: true, order: 1, ...p2, config: { min: 1, max: 5, minLabel: 'Hard', maxLabel: 'Easy' } }),
      field('fld_nps', 'nps', 'Recommend us', { required: true, order: 2, ...p2 }),
      field('fld_likert', 'likert-score', 'The docs are clear', { required: true, order: 3, ...p2, config: { options: [{ label: 'Disagree', value: 'disagree' }, { label: 'Neutral', value: 'neutral' }, { label: 'Agree', value: 'agree' }] } }),
      field('fld_ranking', 'ranking', 'Rank the features', { order: 4, ...p2, config: { options: [{ label: 'Speed', value: 'speed' }, { label: 'Price', value: 'price' }, { label: 'Support', value: 'support' }] } }),
      field('fld_signature', 'signature', 'Signature', { required: true, order: 5, ...p2 }),
      field('fld_upload', 'file-upload', 'Attachment', { order: 6, ...p2, config: { accept: ['image/*'] } }),
    ],
    settings: { submitButtonText: 'Send answers', successMessage: 'Thanks for your answers.' },
    ...extra,
  };
}

export interface AxeViolation { id: string; impact: string; nodes: string[] }

/** axe-core's WCAG A/AA violations on the page as it stands. */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  // Evaluated through the DevTools protocol, so the page's CSP (which allows no such script) stays on.
  if (!(await page.evaluate(() => Boolean((window as any).axe)))) await page.evaluate(AXE_SOURCE);
  return page.evaluate(async (tags) => {
    const result = await (window as any).axe.run(document, { runOnly: { type: 'tag', values: tags }, resultTypes: ['violations'] });
    return result.violations.map((v: any) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n: any) => n.target.join(' ')) }));
  }, WCAG_TAGS);
}

/** Fills page 1 of everyFieldForm with valid answers (by script: the keyboard test does it by keyboard). */
async function fillPageOne(page: Page): Promise<void> {
  await page.locator('#fs-fld_name-first').fill('Ada');
  await page.locator('#fs-fld_name-last').fill('Lovelace');
  await page.locator('#fs-fld_text-input').fill('Analytical Engines Ltd');
  await page.locator('#fs-fld_email-input').fill('ada@example.com');
  await page.locator('#fs-fld_number-input').fill('12');
  await page.locator('#fs-fld_date-input').fill('2026-12-01');
  await page.locator('#fs-fld_select-input').selectOption('pro');
  await page.getByRole('radio', { name: 'Yes' }).check();
  await page.locator('#fs-fld_consent-input').check();
}

describe('accessibility of the hosted page (browser, axe-core WCAG 2.2 A/AA)', function () {
  this.timeout(120_000);
  let stripe: FakeStripe;
  let t: TestApp;
  let tenant: TestTenant;
  let browser: Browser;
  let storageDir: string;
  const forms: Record<string, any> = {};
  const payForms: Record<string, any> = {};

  before(async function () {
    requireChromium(this);
    stripe = await startFakeStripe();
    storageDir = mkdtempSync(path.join(tmpdir(), 'fs-e2e-a11y-'));
    t = await startTestApp({
      ...(await fileServiceEnv(storageDir, { FILE_STORAGE: 'local' })),
      STRIPE_API_BASE: stripe.url, STRIPE_SECRET_KEY: stripe.secretKey, STRIPE_PUBLISHABLE_KEY: stripe.publishableKey,
      STRIPE_JS_URL: stripe.jsUrl,
    });
    tenant = await createTenant(t.app);
    for (const theme of ['default', 'dark']) {
      const form = everyFieldForm({ settings: { submitButtonText: 'Send answers', successMessage: 'Thanks for your answers.', theme: { preset: theme, tokens: {} } } });
      forms[theme] = await createPublishedForm(t.url, tenant.key, form.fields, form);
      payForms[theme] = await createPublishedForm(t.url, tenant.key, [
        field('fld_name', 'text', 'Your name', { required: true, order: 0 }),
        field('fld_pay', 'payment', 'Workshop ticket', { required: true, order: 1, config: { amount: 1500, currency: 'eur' } }),
      ], { title: 'Autumn workshop', settings: { submitButtonText: 'Pay and register', theme: { preset: theme, tokens: {} } } });
    }
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await t?.close();
    await stripe?.close();
    if (storageDir) rmSync(storageDir, { recursive: true, force: true });
  });

  const sizes = { phone: { viewport: PHONE, isMobile: true, hasTouch: true }, desktop: { viewport: DESKTOP } } as const;
  for (const theme of ['default', 'dark']) {
    for (const dir of ['ltr', 'rtl']) {
      for (const size of ['phone', 'desktop'] as const) {
        it(`has no violation in any state: ${theme} theme, ${dir}, ${size}`, async () => {
          const { context, page, problems } = await openPage(browser, { ...sizes[size], deviceScaleFactor: 1 });
          try {
            const found: Record<string, AxeViolation[]> = {};
            const open = async (url: string) => {
              await page.goto(url);
              if (dir === 'rtl') await page.evaluate(() => { document.documentElement.dir = 'rtl'; });
            };
            const check = async (state: string) => { found[state] = await axeViolations(page); };

            let releaseUpload!: () => void;
            const held = new Promise<void>((resolve) => { releaseUpload = resolve; });
            await page.route((url) => url.pathname.startsWith('/uploads/'), async (route) => {
              if (route.request().method() !== 'PUT') return route.continue();
              await held;
              return route.continue().catch(() => undefined);
            });

            await open(`${t.url}/f/${forms[theme].id}`);
            await check('page 1');
            await page.locator('button.fs-button--primary').click();
            await page.locator('#fs-fld_name-error').getByText(/./).waitFor();
            await check('page 1, errors shown');
            await fillPageOne(page);
            await page.locator('button.fs-button--primary').click();
            await page.locator('#fs-fld_rating-error').waitFor({ state: 'attached' });
            await page.getByRole('heading', { name: 'Your opinion' }).waitFor();
            await check('page 2');
            await page.locator('#fs-fld_upload-input').setInputFiles({ name: 'photo.jpg', mimeType: 'image/jpeg', buffer: jpegBytes(64 * 1024) });
            await page.locator('.fs-upload[data-state="uploading"]').waitFor();
            await check('page 2, upload in progress');
            await page.locator('button.fs-button--primary').click();
            await page.locator('#fs-fld_rating-error').getByText(/./).waitFor();
            await check('page 2, errors shown');
            releaseUpload();

            await open(`${t.url}/f/${payForms[theme].id}`);
            await page.locator('input[name=cardnumber]').waitFor();
            await check('payment field');

            const report = Object.entries(found).flatMap(([state, violations]) =>
              violations.map((v) => `${state}: ${v.id} (${v.impact}) on ${v.nodes.join(', ')}`));
            if (process.env.A11Y_REPORT) console.log(JSON.stringify({ theme, dir, size, found }));
            expect(report).to.deep.equal([]);
            expect(problems.filter((p) => !p.includes('ERR_ABORTED'))).to.deep.equal([]);
          } finally {
            await context.close();
          }
        });
      }
    }
  }
});
