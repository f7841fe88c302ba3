import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchBrowser, openPhonePage, requireChromium, SCREENSHOTS } from '../support/browser';
import { download as fetchLink, fileServiceEnv } from '../support/files';
import { startS3Server, type OwnS3 } from '../support/s3-server';
import { call, createPublishedForm, createTenant, startTestApp, type TestApp, type TestTenant, fieldInput as field } from '../support/harness';

const MB = 1024 * 1024;

/** A phone photo as far as anyone checks: a JPEG/JFIF header, then the camera's noise. */
function phonePhoto(size: number): Buffer {
  const header = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01, 0x01, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00]);
  return Buffer.concat([header, randomBytes(size - header.length)]);
}

const sha256 = (bytes: Buffer | Uint8Array) => createHash('sha256').update(bytes).digest('hex');

describe('file uploads on the hosted page (browser)', function () {
  this.timeout(90_000);
  let t: TestApp;
  let tenant: TestTenant;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let storageDir: string;
  let photoForm: any;
  let documentsForm: any;
  /** Console errors and uncaught exceptions (a failed request a test causes on purpose is filtered by it). */
  let problems: string[];

  before(async function () {
    requireChromium(this);
    storageDir = mkdtempSync(path.join(tmpdir(), 'fs-e2e-files-'));
    t = await startTestApp(await fileServiceEnv(storageDir, { FILE_STORAGE: 'local' }));
    tenant = await createTenant(t.app);
    photoForm = await createPublishedForm(t.url, tenant.key, [
      field('fld_name', 'text', 'Your name', { required: true, order: 0 }),
      field('fld_photo', 'file-upload', 'Photo of the damage', { required: true, order: 1, config: { accept: ['image/*'] } }),
    ], { title: 'Report damage', settings: { submitButtonText: 'Send report' } });
    documentsForm = await createPublishedForm(t.url, tenant.key, [
      field('fld_docs', 'file-upload', 'Documents', {
        required: true, order: 0, description: 'Scans or photos of your receipts.',
        config: { accept: ['image/*', '.pdf'], maxFiles: 3, maxSize: 2 * MB },
      }),
    ], { title: 'Expense claim', settings: { submitButtonText: 'Send claim' } });
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

  const shot = (name: string) => page.screenshot({ path: path.join(SCREENSHOTS, `file-upload-${name}.png`), fullPage: true, animations: 'disabled' });
  const submittedTo = (form: any) => page.waitForResponse((res) => res.url().endsWith(`/public/forms/${form.id}`) && res.request().method() === 'POST');
  const storedCount = async (form: any) => Number((await t.query('select count(*)::int as n from submissions where form_id = ?', [form.id]))[0].n);
  const readBack = async (form: any, submissionId: string) => {
    const res = await call(t.url, 'GET', `/v1/submissions/${submissionId}`, { key: tenant.key });
    expect(res.status, res.text).to.equal(200);
    expect(res.body.submission.formId).to.equal(form.id);
    return res.body.submission;
  };
  /** The bytes behind a signed link, as anyone holding the link gets them. */
  const download = async (url: string) => {
    const res = await fetchLink(url);
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-disposition')).to.match(/^attachment/);
    return res.bytes;
  };
  /** Every aria-valuenow the upload's progress bar shows, recorded in the page as it changes. */
  const recordProgress = () => page.evaluate(() => {
    const seen: number[] = ((window as any).__progress = []);
    new MutationObserver((records) => {
      for (const record of records) {
        const target = record.target as HTMLElement;
        if (target.classList.contains('fs-upload-track')) seen.push(Number(target.getAttribute('aria-valuenow')));
      }
    }).observe(document.body, { subtree: true, attributes: true, attributeFilter: ['aria-valuenow'] });
  });

  it('uploads a 10 MB phone photo as soon as it is picked, with a progress bar, and the link gives back the same bytes', async () => {
    const photo = phonePhoto(10 * MB);
    const response = await page.goto(`${t.url}/f/${photoForm.id}`);
    // The page may send bytes where its uploads go: here the service's own upload URL (PUBLIC_URL).
    expect(response!.headers()['content-security-policy']).to.include(`connect-src 'self' ${t.url};`);
    await page.locator('#fs-fld_name-input').fill('Ada Lovelace');
    await recordProgress();
    // A phone's uplink, so that the bar is seen moving (and photographed) on a loopback server.
    const cdp = await context.newCDPSession(page);
    await cdp.send('Network.enable');
    await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 20, downloadThroughput: -1, uploadThroughput: 4 * MB });

    const asked = page.waitForResponse((res) => res.url().endsWith(`/public/forms/${photoForm.id}/uploads`));
    await page.locator('#fs-fld_photo-input').setInputFiles({ name: 'IMG_2041.jpg', mimeType: 'image/jpeg', buffer: photo });
    const ticket = await (await asked).json();
    expect((await asked).status()).to.equal(201);
    expect(ticket.uploadId).to.match(/^upl_/);

    const item = page.locator('.fs-upload');
    const bar = item.getByRole('progressbar', { name: 'IMG_2041.jpg' });
    await bar.waitFor({ state: 'visible' });
    await page.waitForFunction(() => {
      const now = Number(document.querySelector('.fs-upload [role=progressbar]')?.getAttribute('aria-valuenow'));
      return now >= 20 && now < 100;
    });
    expect(await item.locator('.fs-upload-name').textContent()).to.equal('IMG_2041.jpg');
    expect(await item.locator('.fs-upload-size').textContent()).to.equal('10.0 MB');
    await shot('1-uploading');

    await item.getByText('Uploaded').waitFor({ timeout: 30_000 });
    await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
    expect(await bar.getAttribute('aria-valuenow')).to.equal('100');
    const seen: number[] = await page.evaluate(() => (window as any).__progress);
    expect(seen.filter((n) => n > 0 && n < 100).length, `progress seen: ${seen.join(',')}`).to.be.at.least(2);
    expect(seen).to.deep.equal([...seen].sort((a, b) => a - b));
    await shot('2-uploaded');

    const submitted = submittedTo(photoForm);
    await page.getByRole('button', { name: 'Send report' }).click();
    await page.getByText('Thank you!').waitFor();
    const answer = await submitted;
    const sent = JSON.parse(answer.request().postData()!);
    expect(sent.values.fld_photo).to.deep.equal({ uploadId: ticket.uploadId });
    const { submissionId } = await answer.json();

    const submission = await readBack(photoForm, submissionId);
    const stored = submission.rawData.fld_photo;
    expect(stored).to.include({ name: 'IMG_2041.jpg', type: 'image/jpeg', size: photo.length });
    expect(sha256(await download(stored.url))).to.equal(sha256(photo));
    expect(problems).to.deep.equal([]);
  });

  it('sends the answers only once an upload in flight has finished, and says so meanwhile', async () => {
    const photo = phonePhoto(512 * 1024);
    let release!: () => void;
    const held = new Promise<void>((resolve) => { release = resolve; });
    let putSeen!: () => void;
    const putArrived = new Promise<void>((resolve) => { putSeen = resolve; });
    // The bytes are held on their way until the test has seen the page wait for them.
    await page.route((url) => url.pathname.startsWith('/uploads/'), async (route) => {
      if (route.request().method() !== 'PUT') return route.continue();
      putSeen();
      await held;
      return route.continue();
    });
    await page.goto(`${t.url}/f/${photoForm.id}`);
    await page.locator('#fs-fld_name-input').fill('Grace Hopper');
    await page.locator('#fs-fld_photo-input').setInputFiles({ name: 'dent.jpg', mimeType: 'image/jpeg', buffer: photo });
    await putArrived;
    let posted = false;
    page.on('request', (req) => { if (req.url().endsWith(`/public/forms/${photoForm.id}`) && req.method() === 'POST') posted = true; });

    const submitted = submittedTo(photoForm);
    await page.getByRole('button', { name: 'Send report' }).click();
    await page.locator('.fs-status').getByText('Your answers will be sent as soon as your files have finished uploading.').waitFor();
    expect(await page.locator('button.fs-button--primary').textContent()).to.equal('Finishing uploads…');
    expect(await page.locator('.fs-upload').getAttribute('data-state')).to.equal('uploading');
    // Waiting for a file is not a missing answer.
    expect(await page.locator('#fs-fld_photo-error').textContent()).to.equal('');
    expect(posted).to.equal(false);
    await shot('3-waiting');

    release();
    await page.getByText('Thank you!').waitFor();
    const { submissionId } = await (await submitted).json();
    const stored = (await readBack(photoForm, submissionId)).rawData.fld_photo;
    expect(stored).to.include({ name: 'dent.jpg', size: photo.length });
    expect(sha256(await download(stored.url))).to.equal(sha256(photo));
    expect(problems).to.deep.equal([]);
  });

  it('uploads from a page opened under another host name than PUBLIC_URL (CSP and CORS allow the upload URL)', async () => {
    const otherName = t.url.replace('127.0.0.1', 'localhost');
    const photo = phonePhoto(64 * 1024);
    await page.goto(`${otherName}/f/${photoForm.id}`);
    await page.locator('#fs-fld_name-input').fill('Katherine Johnson');
    const put = page.waitForRequest((req) => req.method() === 'PUT');
    await page.locator('#fs-fld_photo-input').setInputFiles({ name: 'bumper.jpg', mimeType: 'image/jpeg', buffer: photo });
    expect(new URL((await put).url()).origin).to.equal(t.url);
    await page.locator('.fs-upload[data-state="done"]').waitFor();
    const submitted = submittedTo(photoForm);
    await page.getByRole('button', { name: 'Send report' }).click();
    await page.getByText('Thank you!').waitFor();
    const { submissionId } = await (await submitted).json();
    const stored = (await readBack(photoForm, submissionId)).rawData.fld_photo;
    expect(sha256(await download(stored.url))).to.equal(sha256(photo));
    expect(problems).to.deep.equal([]);
  });

  it('names a file the field refuses, sends nothing for it, and stores nothing', async () => {
    let uploadsAsked = 0;
    page.on('request', (req) => { if (req.url().endsWith(`/public/forms/${documentsForm.id}/uploads`)) uploadsAsked++; });
    await page.goto(`${t.url}/f/${documentsForm.id}`);
    expect(await page.locator('#fs-fld_docs-file').textContent()).to.equal('Up to 2.0 MB each. Accepted: images, PDF. Up to 3 files.');

    await page.locator('#fs-fld_docs-input').setInputFiles([
      { name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('not a receipt\n') },
      { name: 'scan.pdf', mimeType: 'application/pdf', buffer: Buffer.concat([Buffer.from('%PDF-1.7\n'), randomBytes(3 * MB)]) },
    ]);
    const refused = page.locator('.fs-upload[data-state="refused"]');
    await refused.nth(1).waitFor();
    expect(await refused.count()).to.equal(2);
    expect(await refused.nth(0).locator('.fs-upload-message').textContent())
      .to.equal("notes.txt can't be attached: this question accepts images, PDF only.");
    expect(await refused.nth(1).locator('.fs-upload-message').textContent())
      .to.equal('scan.pdf is 3.0 MB, larger than the 2.0 MB limit. Please choose a smaller file.');
    expect(await refused.nth(0).getByRole('progressbar').count()).to.equal(0);
    await shot('4-refused');

    await page.getByRole('button', { name: 'Send claim' }).click();
    expect(await page.locator('#fs-fld_docs-error').textContent()).to.equal('Please choose a file.');
    expect(uploadsAsked).to.equal(0);
    expect(await storedCount(documentsForm)).to.equal(0);
    expect(problems).to.deep.equal([]);
  });

  it('shows the reason the service gives when it refuses an upload', async () => {
    // The page and the service share the field's rules, so only the service can refuse here what the
    // page let through: it is made to, in the service's own shape.
    await page.route(`**/public/forms/${documentsForm.id}/uploads`, (route) => route.fulfill({
      status: 422, contentType: 'application/json',
      body: JSON.stringify({ success: false, errors: { fld_docs: 'uploads are paused for this form' } }),
    }));
    await page.goto(`${t.url}/f/${documentsForm.id}`);
    await page.locator('#fs-fld_docs-input').setInputFiles({ name: 'receipt.png', mimeType: 'image/png', buffer: randomBytes(1024) });
    const item = page.locator('.fs-upload[data-state="refused"]');
    await item.waitFor();
    expect(await item.locator('.fs-upload-message').textContent()).to.equal('receipt.png: uploads are paused for this form');
    expect(await item.getByRole('button', { name: 'Retry uploading receipt.png' }).isVisible()).to.equal(false);
  });

  it('gives up an upload that stops moving, with Retry, instead of showing its progress for ever', async () => {
    const receipt = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), randomBytes(64 * 1024)]);
    // The page's timers run on a clock the test moves: the stall limit passes without waiting for it.
    await page.clock.install();
    let puts = 0;
    await page.route((url) => url.pathname.startsWith('/uploads/'), async (route) => {
      if (route.request().method() !== 'PUT') return route.continue();
      puts++;
      // The first PUT never gets an answer (a connection that died quietly); the next goes through.
      return puts === 1 ? undefined : route.continue();
    });
    await page.goto(`${t.url}/f/${documentsForm.id}`);
    await page.locator('#fs-fld_docs-input').setInputFiles({ name: 'receipt.png', mimeType: 'image/png', buffer: receipt });
    await page.locator('.fs-upload[data-state="uploading"]').waitFor();
    for (let i = 0; puts === 0 && i < 200; i++) await new Promise((r) => setTimeout(r, 50));
    expect(puts, 'the PUT reached the network').to.equal(1);
    await page.clock.fastForward(29_000);
    expect(await page.locator('.fs-upload').getAttribute('data-state'), 'still within the stall limit').to.equal('uploading');
    await page.clock.fastForward(2_000);
    const failed = page.locator('.fs-upload[data-state="failed"]');
    await failed.waitFor();
    expect(await failed.locator('.fs-upload-message').textContent())
      .to.equal('Not uploaded. The upload stopped moving. Please check your connection and try again.');
    await failed.getByRole('button', { name: 'Retry uploading receipt.png' }).click();
    await page.locator('.fs-upload[data-state="done"]').waitFor();
    expect(puts).to.equal(2);
  });

  it('offers Retry when an upload fails, and the retried upload is the one stored', async () => {
    const receipt = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), randomBytes(300 * 1024)]);
    const pdf = Buffer.concat([Buffer.from('%PDF-1.7\n'), randomBytes(200 * 1024)]);
    let puts = 0;
    await page.route((url) => url.pathname.startsWith('/uploads/'), async (route) => {
      if (route.request().method() !== 'PUT') return route.continue();
      puts++;
      // The first PUT is lost on the way (a dropped connection); the rest go through.
      return puts === 1 ? route.abort('connectionreset') : route.continue();
    });
    await page.goto(`${t.url}/f/${documentsForm.id}`);
    await page.locator('#fs-fld_docs-input').setInputFiles({ name: 'receipt.png', mimeType: 'image/png', buffer: receipt });
    const failed = page.locator('.fs-upload[data-state="failed"]');
    await failed.waitFor();
    expect(await failed.locator('.fs-upload-message').textContent()).to.match(/^Not uploaded\. We couldn't reach the server/);
    const retry = failed.getByRole('button', { name: 'Retry uploading receipt.png' });
    expect(await retry.isVisible()).to.equal(true);

    // A failed upload holds the submission back, with the reason beside the field.
    await page.getByRole('button', { name: 'Send claim' }).click();
    expect(await page.locator('#fs-fld_docs-error').textContent()).to.equal('receipt.png did not finish uploading. Retry it or remove it.');
    expect(await storedCount(documentsForm)).to.equal(0);
    await shot('5-failed');

    await retry.click();
    await page.locator('.fs-upload[data-state="done"]').waitFor();
    expect(puts).to.equal(2);
    expect(await page.locator('#fs-fld_docs-error').textContent()).to.equal('');

    // Two more files, up to maxFiles (the picker goes away), and one is removed again (it comes back).
    const picker = page.locator('label.fs-file');
    expect(await picker.textContent()).to.equal('Add another file');
    await page.locator('#fs-fld_docs-input').setInputFiles([
      { name: 'hotel.pdf', mimeType: 'application/pdf', buffer: pdf },
      { name: 'wrong.pdf', mimeType: 'application/pdf', buffer: pdf },
    ]);
    expect(await picker.isVisible()).to.equal(false);
    await page.getByRole('button', { name: 'Remove wrong.pdf' }).click();
    expect(await picker.isVisible()).to.equal(true);
    await page.locator('.fs-upload[data-state="done"]').nth(1).waitFor();
    expect(await page.locator('.fs-upload').count()).to.equal(2);
    await shot('6-two-files');

    const submitted = submittedTo(documentsForm);
    await page.getByRole('button', { name: 'Send claim' }).click();
    await page.getByText('Thank you!').waitFor();
    const { submissionId } = await (await submitted).json();
    const files = (await readBack(documentsForm, submissionId)).rawData.fld_docs;
    expect(files.map((f: any) => f.name)).to.deep.equal(['receipt.png', 'hotel.pdf']);
    expect(sha256(await download(files[0].url))).to.equal(sha256(receipt));
    expect(sha256(await download(files[1].url))).to.equal(sha256(pdf));
    expect(problems.filter((p) => !p.includes('ERR_CONNECTION_RESET'))).to.deep.equal([]);
  });

  describe('with an S3-compatible store (s3rver on loopback)', () => {
    let s3: OwnS3;
    let s3App: TestApp;
    let s3Tenant: TestTenant;
    let s3Form: any;

    before(async () => {
      const env = await fileServiceEnv(storageDir);
      s3 = await startS3Server('form-files', { corsOrigins: [env.PUBLIC_URL] });
      s3App = await startTestApp({ ...env, ...s3.env });
      s3Tenant = await createTenant(s3App.app);
      s3Form = await createPublishedForm(s3App.url, s3Tenant.key, [
        field('fld_photo', 'file-upload', 'Photo', { required: true, order: 0, config: { accept: ['image/*'] } }),
      ], { title: 'Photo contest' });
    });
    after(async () => {
      await s3App?.close();
      await s3?.stop();
    });

    it('sends a 10 MB photo straight to the bucket with a presigned PUT, and the link gives back the same bytes', async () => {
      const photo = phonePhoto(10 * MB);
      const response = await page.goto(`${s3App.url}/f/${s3Form.id}`);
      expect(response!.headers()['content-security-policy']).to.include(`connect-src 'self' ${s3.endpoint};`);
      const put = page.waitForRequest((req) => req.method() === 'PUT');
      await page.locator('#fs-fld_photo-input').setInputFiles({ name: 'sunset.jpg', mimeType: 'image/jpeg', buffer: photo });
      expect((await put).url()).to.match(new RegExp(`^${s3.endpoint}/form-files/upl_\\w+\\?.*X-Amz-Signature=`));
      await page.locator('.fs-upload[data-state="done"]').waitFor({ timeout: 30_000 });
      await shot('7-s3-uploaded');
      const submitted = page.waitForResponse((res) => res.url().endsWith(`/public/forms/${s3Form.id}`) && res.request().method() === 'POST');
      await page.getByRole('button', { name: 'Submit' }).click();
      await page.getByText('Thank you!').waitFor();
      const { submissionId } = await (await submitted).json();
      const read = await call(s3App.url, 'GET', `/v1/submissions/${submissionId}`, { key: s3Tenant.key });
      const stored = read.body.submission.rawData.fld_photo;
      expect(stored).to.include({ name: 'sunset.jpg', type: 'image/jpeg', size: photo.length });
      expect(sha256(await download(stored.url))).to.equal(sha256(photo));
      expect(problems).to.deep.equal([]);
    });
  });
});
