import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import yaml from 'js-yaml';
import type { Browser } from 'playwright-core';
import { launchBrowser, openPage, requireChromium, SCREENSHOTS } from '../support/browser';
import { call, startTestApp, type TestApp } from '../support/harness';

/** The operations of openapi.yaml tagged Submissions: what an integrator comes to /docs for. */
function submissionOperations(): Array<{ id: string; summary: string; path: string }> {
  const doc = yaml.load(readFileSync(path.resolve(__dirname, '../../../openapi.yaml'), 'utf8')) as any;
  return Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([p, ops]) =>
    Object.values(ops).filter((op) => op?.tags?.includes('Submissions')).map((op) => ({ id: op.operationId, summary: op.summary, path: p })));
}

describe('API reference at /docs (browser)', function () {
  this.timeout(60_000);
  let t: TestApp;
  let browser: Browser;

  before(async function () {
    requireChromium(this);
    t = await startTestApp();
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await t?.close();
  });

  it('renders every submissions endpoint of openapi.yaml, from the service alone, inside its CSP', async () => {
    const operations = submissionOperations();
    expect(operations.length, 'submissions operations in openapi.yaml').to.be.at.least(5);
    // Console errors and uncaught exceptions (CSP violations included) go to `problems`; every
    // request the page made, and those answered: none but this service's may be.
    const { context, page, problems } = await openPage(browser, { viewport: { width: 1280, height: 900 } });
    const requested: string[] = [];
    const answered: string[] = [];
    page.on('request', (request) => { if (/^https?:/.test(request.url())) requested.push(request.url()); });
    page.on('response', (res) => answered.push(res.url()));
    await page.addInitScript(() => {
      document.addEventListener('securitypolicyviolation', (e) => console.error(`CSP violation: ${e.violatedDirective} ${e.blockedURI}`));
    });
    try {
      const response = await page.goto(`${t.url}/docs`);
      expect(response?.status()).to.equal(200);
      const csp = response?.headers()['content-security-policy'] ?? '';
      expect(csp).to.match(/script-src 'nonce-[^']+'(;|$)/);
      expect(csp).to.include("default-src 'none'");

      const create = operations.find((op) => op.id === 'createSubmission')!;
      const section = page.locator(`[id="operation/${create.id}"]`);
      await section.waitFor({ state: 'visible', timeout: 30_000 });
      expect((await section.locator('h2').first().textContent())?.trim()).to.equal(create.summary);
      expect(await section.textContent()).to.include(create.path);
      for (const op of operations) {
        expect((await page.locator(`[id="operation/${op.id}"] h2`).first().textContent())?.trim(), op.id).to.equal(op.summary);
      }
      await section.locator('h2').first().evaluate((heading) => heading.scrollIntoView({ block: 'start' }));
      await page.screenshot({ path: path.join(SCREENSHOTS, 'api-reference-create-submission.png') });

      // Redoc's sidebar footer asks for its maker's logo from a CDN; the page's CSP refuses it (the
      // image hides itself on error), so nothing but this service answers the page.
      const ours = new URL(t.url).origin;
      expect([...new Set(answered.map((url) => new URL(url).origin))]).to.deep.equal([ours]);
      const refused = (text: string) => /cdn\.redoc\.ly\/redoc\/logo-mini\.svg/.test(text) && /img-src/.test(text);
      expect(requested.filter((url) => new URL(url).origin !== ours)).to.deep.equal(['https://cdn.redoc.ly/redoc/logo-mini.svg']);
      expect(problems.filter((text) => !refused(text))).to.deep.equal([]);
    } finally {
      await context.close();
    }
  });

  it('serves the page uncached with a fresh nonce, and the renderer as a script', async () => {
    const [a, b] = [await call(t.url, 'GET', '/docs'), await call(t.url, 'GET', '/docs')];
    expect(a.status).to.equal(200);
    expect(a.headers.get('content-type')).to.match(/^text\/html/);
    expect(a.headers.get('cache-control')).to.equal('no-store');
    expect(a.headers.get('content-security-policy')).to.not.equal(b.headers.get('content-security-policy'));
    const script = await call(t.url, 'GET', '/docs/redoc.standalone.js');
    expect(script.status).to.equal(200);
    expect(script.headers.get('content-type')).to.match(/^text\/javascript/);
    expect(script.text).to.include('ReDoc');
  });
});
