// The browser for e2e tests: Debian's Chromium, never one downloaded by Playwright.
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';

export const CHROMIUM_PATH = '/usr/bin/chromium';

export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS });
}

/** Where the browser tests leave their screenshots (test-artifacts/ at the top of the repo). */
export const SCREENSHOTS = path.resolve(__dirname, '../../../test-artifacts/screenshots');

/** A phone's viewport, as the hosted page is mostly filled in on one. */
export const PHONE = { width: 390, height: 844 };

/**
 * In a suite's `before`: skips the suite, saying how to install it, where Debian's Chromium is
 * missing; otherwise makes sure the screenshot folder exists.
 */
export function requireChromium(suite: Mocha.Context): void {
  if (!existsSync(CHROMIUM_PATH)) {
    console.warn(`    skipping the browser tests: no Chromium at ${CHROMIUM_PATH} (apt-get install -y chromium)`);
    suite.skip();
  }
  mkdirSync(SCREENSHOTS, { recursive: true });
}

/** A phone-sized page of its own context; its console errors and uncaught exceptions are collected in `problems`. */
export function openPhonePage(browser: Browser): Promise<{ context: BrowserContext; page: Page; problems: string[] }> {
  return openPage(browser, { viewport: PHONE, deviceScaleFactor: 1, isMobile: true, hasTouch: true });
}

/** A page of its own context made with `options`; its console errors and uncaught exceptions are collected in `problems`. */
export async function openPage(browser: Browser, options: Parameters<Browser['newContext']>[0])
  : Promise<{ context: BrowserContext; page: Page; problems: string[] }> {
  const context = await browser.newContext(options);
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(error.message));
  page.on('console', (message) => { if (message.type() === 'error') problems.push(message.text()); });
  return { context, page, problems };
}
