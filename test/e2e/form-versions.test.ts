import { expect } from 'chai';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { launchBrowser, openPage, requireChromium, SCREENSHOTS } from '../support/browser';
import { call, createPublishedForm, createTenant, fieldInput as field, startTestApp, type TestApp, type TestTenant } from '../support/harness';
import { FORM_CHANGED_NOTICE } from '../../src/public/browser/values';

// A respondent never loses answers to a change (README "Form versions"): the page open at version 1
// submits after version 2 replaced it; the page shows version 2, keeps the answers whose questions
// are still there, says what changed, and the answers go in under version 2.

describe('hosted page: the form changes while it is filled in (browser)', function () {
  this.timeout(60_000);
  let t: TestApp;
  let tenant: TestTenant;
  let browser: Browser;

  before(async function () {
    requireChromium(this);
    t = await startTestApp();
    tenant = await createTenant(t.app);
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await t?.close();
  });

  it('re-renders the new version, keeps the answers whose questions remain, says what changed, then stores under it', async () => {
    const form = await createPublishedForm(t.url, tenant.key, [
      field('fld_name', 'text', 'Full name', { required: true, order: 0 }),
      field('fld_email', 'email', 'Email', { order: 1 }),
      field('fld_topic', 'text', 'Topic', { order: 2 }),
    ]);
    const { context, page, problems } = await openPage(browser, { viewport: { width: 800, height: 900 } });
    try {
      await page.goto(`${t.url}/f/${form.id}`);
      await page.locator('#fs-fld_name-input').fill('Ada Lovelace');
      await page.locator('#fs-fld_email-input').fill('ada@example.com');
      await page.locator('#fs-fld_topic-input').fill('Engines');

      // Meanwhile the owner publishes a new version: Topic reworded, Email removed, a required Phone added.
      const replaced = await call(t.url, 'PUT', `/v1/forms/${form.id}/structure`, {
        key: tenant.key,
        body: {
          pages: [],
          fields: [
            field('fld_name', 'text', 'Full name', { required: true, order: 0 }),
            field('fld_topic', 'text', 'Department', { order: 1 }),
            field('fld_phone', 'phone', 'Phone', { required: true, order: 2 }),
          ],
        },
      });
      expect(replaced.body.form.version).to.equal(2);

      const refused = page.waitForResponse((res) => res.url().endsWith(`/public/forms/${form.id}`) && res.request().method() === 'POST');
      await page.getByRole('button', { name: 'Submit' }).click();
      expect((await refused).status()).to.equal(409);

      const alert = page.locator('.fs-alert');
      await alert.getByText(FORM_CHANGED_NOTICE.intro, { exact: false }).waitFor({ state: 'visible' });
      const notice = await alert.textContent();
      console.log(`      the person sees: "${notice}"`);
      expect(notice).to.contain(`${FORM_CHANGED_NOTICE.added} Phone.`);
      expect(notice).to.contain(`${FORM_CHANGED_NOTICE.removed} Email.`);
      expect(notice).to.contain(`${FORM_CHANGED_NOTICE.reworded} Topic → Department.`);
      expect(await page.locator('#fs-fld_name-input').inputValue()).to.equal('Ada Lovelace');
      expect(await page.locator('#fs-fld_topic-input').inputValue()).to.equal('Engines');
      expect(await page.locator('label[for="fs-fld_topic-input"]').textContent()).to.contain('Department');
      expect(await page.locator('#fs-fld_email-input').count()).to.equal(0);
      expect(await page.locator('#fs-fld_phone-input').inputValue()).to.equal('');
      await page.screenshot({ path: path.join(SCREENSHOTS, 'hosted-page-form-changed.png'), fullPage: true });

      await page.locator('#fs-fld_phone-input').fill('+44 20 7946 0000');
      const submitted = page.waitForResponse((res) => res.url().endsWith(`/public/forms/${form.id}`) && res.request().method() === 'POST');
      await page.getByRole('button', { name: 'Submit' }).click();
      const answer = await submitted;
      expect(answer.status()).to.equal(200);
      expect(JSON.parse(answer.request().postData() ?? '{}').formVersion).to.equal(2);
      const { submissionId } = await answer.json();
      const stored = (await call(t.url, 'GET', `/v1/submissions/${submissionId}`, { key: tenant.key })).body.submission;
      expect(stored.formVersion).to.equal(2);
      expect(stored.rawData).to.deep.equal({ fld_name: 'Ada Lovelace', fld_topic: 'Engines', fld_phone: '+44 20 7946 0000' });
      expect(problems.filter((p) => !/409/.test(p)), 'console errors').to.deep.equal([]);
    } finally {
      await context.close();
    }
  });
});
