import { expect } from 'chai';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, requireChromium } from '../support/browser';
import { call, createPublishedForm, createTenant, fieldInput as field, startTestApp, type TestApp, type TestTenant } from '../support/harness';

/** The hosted page's drop-off events, as a visitor walking a two-page form sends them. */
describe('hosted page drop-off events (browser)', function () {
  this.timeout(60_000);
  let t: TestApp;
  let tenant: TestTenant;
  let browser: Browser;
  let page: Page;
  let formId = '';
  /** The event requests the page made (a beacon's body is not shown to the test). */
  const sent: string[] = [];

  const analytics = async () => (await call(t.url, 'GET', `/v1/forms/${formId}/analytics`, { key: tenant.key })).body;
  async function settled(done: (a: any) => boolean): Promise<any> {
    const deadline = Date.now() + 5_000;
    for (;;) {
      const value = await analytics();
      if (done(value) || Date.now() > deadline) return value;
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  before(async function () {
    requireChromium(this);
    t = await startTestApp();
    tenant = await createTenant(t.app);
    formId = (await createPublishedForm(t.url, tenant.key, [
      field('fld_name', 'text', 'Full name', { required: true, order: 0, pageId: 'p_you' }),
      field('fld_details', 'textarea', 'Details', { order: 0, pageId: 'p_issue' }),
    ], { pages: [{ id: 'p_you', title: 'About you', order: 0 }, { id: 'p_issue', title: 'Your question', order: 1 }] })).id;
    browser = await launchBrowser();
    page = await (await browser.newContext({ viewport: { width: 800, height: 900 } })).newPage();
    page.on('request', (req) => {
      if (req.url().endsWith(`/public/forms/${formId}/events`)) sent.push(req.method());
    });
  });
  after(async () => {
    await browser?.close();
    await t?.close();
  });

  it('sends view and the first page on load, start on the first answer typed, each page once when reached', async () => {
    await page.goto(`${t.url}/f/${formId}`);
    let counts = await settled((a) => a.views === 1 && a.reached.p_you === 1);
    expect(counts).to.deep.include({ views: 1, starts: 0, reached: { p_you: 1 } });

    await page.locator('#fs-fld_name-input').fill('Ada');
    await page.locator('#fs-fld_name-input').fill('Ada Lovelace');
    await page.getByRole('button', { name: 'Next' }).click();
    await page.locator('#fs-fld_details-input').waitFor({ state: 'visible' });
    // Back and forth again: a page counts once per page load.
    await page.getByRole('button', { name: 'Back' }).click();
    await page.getByRole('button', { name: 'Next' }).click();
    await page.locator('#fs-fld_details-input').waitFor({ state: 'visible' });

    counts = await settled((a) => a.starts === 1 && a.reached.p_issue === 1);
    expect(counts).to.deep.include({ views: 1, starts: 1, reached: { p_you: 1, p_issue: 1 } });
    expect(counts.days).to.have.length(1);
    // Four requests in all (view, page one, start, page two): Back and Next again sent nothing more.
    expect(sent).to.have.length(4);
  });
});
