import { expect } from 'chai';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { launchBrowser, requireChromium, SCREENSHOTS } from '../support/browser';
import { startLoopbackServer, type LoopbackServer } from '../support/fakes/http-server';
import { startFakeTurnstile, type FakeTurnstile } from '../support/fakes/turnstile';
import { call, createPublishedForm, createTenant, startTestApp, type TestApp, type TestTenant, fieldInput as field } from '../support/harness';

const PASS_SECRET = '1x0000000000000000000000000000000AA';
const STUB_TOKEN = 'stub-turnstile-token-0123456789';

/**
 * A stand-in for Cloudflare's api.js with the documented surface the page uses (render, execute,
 * getResponse, reset): `execute` "solves" the invisible challenge by calling back with a token.
 */
const STUB_SCRIPT = `
window.turnstile = (() => {
  const widgets = new Map();
  let next = 0;
  return {
    render(container, params) {
      const id = 'w' + (next++);
      widgets.set(id, { params, token: undefined });
      container.setAttribute('data-stub-sitekey', params.sitekey);
      return id;
    },
    execute(container) {
      for (const widget of widgets.values()) {
        setTimeout(() => { widget.token = ${JSON.stringify(STUB_TOKEN)}; widget.params.callback(widget.token); }, 50);
      }
    },
    getResponse(id) { return widgets.get(id)?.token; },
    reset(id) { const widget = widgets.get(id); if (widget) widget.token = undefined; },
  };
})();`;

describe('hosted page with the bot challenge (browser)', function () {
  this.timeout(60_000);
  let scriptHost: LoopbackServer;
  let turnstile: FakeTurnstile;
  let t: TestApp;
  let tenant: TestTenant;
  let browser: Browser;
  let form: any;

  before(async function () {
    requireChromium(this);
    scriptHost = await startLoopbackServer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/javascript' });
      res.end(STUB_SCRIPT);
    });
    turnstile = await startFakeTurnstile();
    t = await startTestApp({
      TURNSTILE_SITE_KEY: '1x00000000000000000000AA', TURNSTILE_SECRET_KEY: PASS_SECRET,
      TURNSTILE_VERIFY_URL: turnstile.url, TURNSTILE_SCRIPT_URL: `${scriptHost.origin}/turnstile/v0/api.js`,
    });
    tenant = await createTenant(t.app);
    form = await createPublishedForm(t.url, tenant.key, [field('fld_email', 'email', 'Email', { required: true })], {
      title: 'Protected form', settings: { botProtection: { enabled: true } },
    });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await t?.close();
    await turnstile?.close();
    await scriptHost?.close();
  });

  it('loads the configured challenge script, sends its token, and the server verifies it before storing', async () => {
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(error.message));
    page.on('console', (message) => { if (message.type() === 'error') errors.push(message.text()); });
    await page.goto(`${t.url}/f/${form.id}`);
    await page.locator('#fs-fld_email-input').fill('grace@example.com');
    const submitted = page.waitForResponse((res) => res.url().endsWith(`/public/forms/${form.id}`) && res.request().method() === 'POST');
    await page.getByRole('button', { name: 'Submit' }).click();
    const response = await submitted;
    expect(response.status()).to.equal(200);
    expect(response.request().postDataJSON().captchaToken).to.equal(STUB_TOKEN);
    await page.getByText('Thank you!').waitFor({ state: 'visible' });
    await page.screenshot({ path: path.join(SCREENSHOTS, 'bot-challenge-1-submitted.png'), fullPage: true });

    expect(turnstile.requests.map((r) => ({ secret: r.secret, response: r.response })))
      .to.deep.equal([{ secret: PASS_SECRET, response: STUB_TOKEN }]);
    const { submissionId } = await response.json();
    const stored = await call(t.url, 'GET', `/v1/submissions/${submissionId}`, { key: tenant.key });
    expect(stored.body.submission.rawData).to.deep.equal({ fld_email: 'grace@example.com' });
    expect(errors).to.deep.equal([]);
    await page.close();
  });
});
