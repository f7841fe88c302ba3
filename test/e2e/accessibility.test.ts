import { expect } from 'chai';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Browser, BrowserContext, FileChooser, Page } from 'playwright-core';
import { launchBrowser, openPage, PHONE, requireChromium, SCREENSHOTS } from '../support/browser';
import { fileServiceEnv, jpegBytes } from '../support/files';
import { startFakeStripe, type FakeStripe } from '../support/fakes/stripe';
import { everyFieldForm } from '../support/every-field-form';
import { call, createPublishedForm, createTenant, startTestApp, type TestApp, type TestTenant, fieldInput as field } from '../support/harness';

/** axe-core's WCAG 2.0, 2.1 and 2.2 rules of levels A and AA (target-size is wcag22aa). */
const WCAG_TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22a', 'wcag22aa'];
const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const DESKTOP = { width: 1280, height: 900 };
export interface AxeViolation { id: string; impact: string; nodes: string[] }

/** axe-core's WCAG A/AA violations on the page as it stands, and the rules that found something to pass. */
export async function axeViolations(page: Page): Promise<{ violations: AxeViolation[]; passed: string[] }> {
  // Evaluated through the DevTools protocol, so the page's CSP (which allows no such script) stays on.
  if (!(await page.evaluate(() => Boolean((window as any).axe)))) await page.evaluate(AXE_SOURCE);
  return page.evaluate(async (tags) => {
    const result = await (window as any).axe.run(document, { runOnly: { type: 'tag', values: tags }, resultTypes: ['violations'] });
    return {
      violations: result.violations.map((v: any) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n: any) => n.target.join(' ')) })),
      passed: result.passes.map((p: any) => p.id),
    };
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
  // Each state is checked left to right and right to left (`dir="rtl"` on <html>, as a right-to-left
  // language sets it), in the same visit.
  for (const theme of ['default', 'dark']) {
    for (const size of ['phone', 'desktop'] as const) {
      it(`has no violation in any state, ltr and rtl: ${theme} theme, ${size}`, async () => {
        const { context, page, problems } = await openPage(browser, { ...sizes[size], deviceScaleFactor: 1 });
        try {
          const found: Record<string, AxeViolation[]> = {};
          const open = (url: string) => page.goto(url);
          const passed = new Set<string>();
          const check = async (state: string) => {
            const original = await page.evaluate(() => document.documentElement.getAttribute('dir'));
            for (const dir of ['ltr', 'rtl']) {
              await page.evaluate((d) => { document.documentElement.dir = d; }, dir);
              const result = await axeViolations(page);
              found[`${state} (${dir})`] = result.violations;
              if (state === 'page 2, errors shown') {
                await page.screenshot({ path: path.join(SCREENSHOTS, `accessibility-${theme}-${size}-${dir}-page-2-errors.png`), fullPage: true, animations: 'disabled' });
              }
              result.passed.forEach((id) => passed.add(id));
            }
            await page.evaluate((d) => { if (d) document.documentElement.dir = d; else document.documentElement.removeAttribute('dir'); }, original);
          };

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
          await page.locator('.fs-upload[data-state="done"]').waitFor();

          // Opened again: the answers kept from this visit are back, with "Start over".
          await open(`${t.url}/f/${forms[theme].id}`);
          await page.getByRole('button', { name: 'Start over' }).waitFor();
          await check('answers kept from the last visit');

          await open(`${t.url}/f/${payForms[theme].id}`);
          await page.locator('input[name=cardnumber]').waitFor();
          await check('payment field');

          const report = Object.entries(found).flatMap(([state, violations]) =>
            violations.map((v) => `${state}: ${v.id} (${v.impact}) on ${v.nodes.join(', ')}`));
          if (process.env.A11Y_REPORT) console.log(JSON.stringify({ theme, size, found }));
          expect(report).to.deep.equal([]);
          // The rules this issue is about did run on something.
          expect([...passed]).to.include.members(['color-contrast', 'target-size', 'label', 'aria-valid-attr-value']);
          expect(problems.filter((p) => !p.includes('ERR_ABORTED'))).to.deep.equal([]);
        } finally {
          await context.close();
        }
      });
    }
  }

  describe('with a keyboard alone', () => {
    /** Presses Tab (only Tab) until the focused element matches `selector`; fails past `max` presses. */
    async function tabTo(page: Page, selector: string, max = 40): Promise<void> {
      for (let i = 0; i < max; i++) {
        if (await page.evaluate((s) => document.activeElement?.matches(s) ?? false, selector)) return;
        await page.keyboard.press('Tab');
      }
      throw new Error(`Tab never reached ${selector}`);
    }
    const focused = (page: Page) => page.evaluate(() => {
      const el = document.activeElement as HTMLElement | null;
      return { id: el?.id ?? '', tag: el?.tagName ?? '', text: el?.textContent?.trim() ?? '' };
    });

    /** What the accessibility tree says of the focused element: Chromium's computed role, name, description and invalid state. */
    async function spoken(page: Page): Promise<{ role: string; name: string; description: string; invalid: string }> {
      const cdp = await page.context().newCDPSession(page);
      try {
        const { nodes } = await cdp.send('Accessibility.getFullAXTree') as { nodes: any[] };
        const node = nodes.find((n) => n.role?.value !== 'RootWebArea' && n.properties?.some((p: any) => p.name === 'focused' && p.value?.value === true));
        const property = (name: string) => String(node?.properties?.find((p: any) => p.name === name)?.value?.value ?? '');
        return { role: node?.role?.value ?? '', name: node?.name?.value ?? '', description: node?.description?.value ?? '', invalid: property('invalid') };
      } finally {
        await cdp.detach();
      }
    }

    it('fills and submits the two-page form, focus following each step, errors tied to their fields and announced', async () => {
      const { context, page, problems } = await openPage(browser, { viewport: DESKTOP, deviceScaleFactor: 1 });
      // Listened for before any key is pressed: Playwright turns the file chooser's interception on when the first
      // listener is added, without waiting, so a Space that reaches the browser first opens the browser's own
      // dialog and no event ever comes (the test timed out so on a loaded machine).
      const chooser = new Promise<FileChooser>((resolve) => page.on('filechooser', resolve));
      try {
        const form = forms.default;
        await page.goto(`${t.url}/f/${form.id}`);

        // Next on an empty page 1: focus goes to the first invalid field, which names its error.
        await tabTo(page, 'button.fs-button--primary');
        await page.keyboard.press('Enter');
        expect((await focused(page)).id).to.equal('fs-fld_name-first');
        const firstName = page.locator('#fs-fld_name-first');
        expect(await firstName.getAttribute('aria-invalid')).to.equal('true');
        expect((await firstName.getAttribute('aria-describedby'))!.split(' ')).to.include('fs-fld_name-error');
        // The error slots are live regions (role=alert), so the messages are announced as they appear.
        expect(await page.locator('#fs-fld_name-error').getAttribute('role')).to.equal('alert');
        const told = await spoken(page);
        if (process.env.A11Y_REPORT) console.log('screen reader on the first invalid field:', JSON.stringify(told));
        expect(told).to.include({ role: 'textbox', name: 'First name', invalid: 'true' });
        expect(told.description).to.equal('This field is required.');
        const snapshot = await page.locator('[data-field-id="fld_name"]').ariaSnapshot();
        if (process.env.A11Y_REPORT) console.log(snapshot);
        expect(snapshot).to.include('textbox "First name"').and.include('This field is required.');

        // Page 1 by keyboard.
        await page.keyboard.type('Ada');
        await tabTo(page, '#fs-fld_name-last');
        await page.keyboard.type('Lovelace');
        await tabTo(page, '#fs-fld_text-input');
        await page.keyboard.type('Analytical Engines Ltd');
        await tabTo(page, '#fs-fld_email-input');
        await page.keyboard.type('ada@example.com');
        await tabTo(page, '#fs-fld_phone-input');
        await page.keyboard.type('+44 20 7946 0000');
        await tabTo(page, '#fs-fld_url-input');
        await page.keyboard.type('https://example.com');
        await tabTo(page, '#fs-fld_number-input');
        await page.keyboard.type('12');
        await tabTo(page, '#fs-fld_date-input');
        await page.keyboard.type('12012026');
        await tabTo(page, '#fs-fld_textarea-input');
        await page.keyboard.type('Typed, not pasted.');
        await tabTo(page, '#fs-fld_select-input');
        await page.keyboard.press('ArrowDown');
        await page.keyboard.press('ArrowDown');
        await tabTo(page, 'input[name="fs-fld_radio-choice"]');
        await page.keyboard.press('Space');
        await tabTo(page, 'input[name="fs-fld_checks-choice"]');
        await page.keyboard.press('Space');
        await tabTo(page, '#fs-fld_secret-input');
        await page.keyboard.type('GB-123');
        await tabTo(page, '#fs-fld_consent-input');
        await page.keyboard.press('Space');
        await tabTo(page, 'button.fs-button--primary');
        await page.keyboard.press('Enter');

        // Next: focus on the new page's heading.
        expect(await focused(page)).to.include({ tag: 'H2', text: 'Your opinion' });
        expect((await spoken(page))).to.include({ role: 'heading', name: 'Your opinion' });

        // Page 2 by keyboard: radios move with the arrow keys, the ranking with its buttons.
        await tabTo(page, 'input[name="fs-fld_rating-choice"]');
        for (let i = 0; i < 3; i++) await page.keyboard.press('ArrowRight');
        await tabTo(page, 'input[name="fs-fld_scale-choice"]:checked, input[name="fs-fld_scale-choice"]');
        await page.keyboard.press('ArrowRight');
        await tabTo(page, 'input[name="fs-fld_nps-choice"]');
        for (let i = 0; i < 9; i++) await page.keyboard.press('ArrowRight');
        await tabTo(page, 'input[name="fs-fld_likert-choice"]');
        await page.keyboard.press('ArrowRight');
        await page.keyboard.press('ArrowRight');
        await tabTo(page, 'button[aria-label="Move Speed down"]');
        await page.keyboard.press('Enter');
        await tabTo(page, '#fs-fld_signature-typed');
        await page.keyboard.type('Ada Lovelace');
        await tabTo(page, '#fs-fld_upload-input');
        await page.keyboard.press('Space');
        await (await chooser).setFiles({ name: 'photo.jpg', mimeType: 'image/jpeg', buffer: jpegBytes(4096) });
        await page.locator('.fs-upload[data-state="done"]').waitFor();
        await tabTo(page, 'button.fs-button--primary');
        const submitted = page.waitForResponse((res) => res.url().endsWith(`/public/forms/${form.id}`) && res.request().method() === 'POST');
        await page.keyboard.press('Enter');
        const { submissionId } = await (await submitted).json();
        await page.getByText('Thanks for your answers.').waitFor();
        expect((await focused(page)).text).to.include('Thanks for your answers.');

        const res = await call(t.url, 'GET', `/v1/submissions/${submissionId}`, { key: tenant.key });
        const data = res.body.submission.rawData;
        expect(data).to.deep.include({
          fld_name: { format: 'split', firstName: 'Ada', lastName: 'Lovelace' }, fld_text: 'Analytical Engines Ltd',
          fld_email: 'ada@example.com', fld_number: 12, fld_date: '2026-12-01', fld_select: 'pro', fld_radio: 'yes',
          fld_checks: ['forms'], fld_consent: true, fld_rating: 4, fld_scale: 2, fld_nps: 9, fld_likert: 'agree',
          fld_ranking: ['price', 'speed', 'support'],
        });
        expect(data.fld_signature).to.match(/^data:image\/png;base64,/);
        expect(data.fld_upload).to.include({ name: 'photo.jpg' });
        expect(problems).to.deep.equal([]);
      } finally {
        await context.close();
      }
    });
  });
});
