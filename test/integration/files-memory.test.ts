import { expect } from 'chai';
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { call, createPublishedForm, createTenant, fieldInput as field, startTestApp, type TestApp, type TestTenant } from '../support/harness';
import { jpegBytes, putBytes } from '../support/files';
import { freePort, spawnEntry, waitUntil, type ServiceProcess } from '../support/processes';

const MB = 1024 * 1024;

/** The resident set of a process, in bytes (Linux). */
async function rssOf(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

/** Samples the process's RSS every 10 ms while `work` runs; answers the highest. */
async function peakRssDuring(pid: number, work: () => Promise<unknown>): Promise<number> {
  let peak = await rssOf(pid);
  let running = true;
  const sampler = (async () => {
    while (running) {
      peak = Math.max(peak, await rssOf(pid));
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  })();
  try {
    await work();
  } finally {
    running = false;
    await sampler;
  }
  return Math.max(peak, await rssOf(pid));
}

const mb = (bytes: number) => `${(bytes / MB).toFixed(1)} MB`;

/**
 * Why two sizes: chunks a stream has passed on are freed by the garbage collector, which V8 runs on
 * external memory only past a threshold (about 64 MB), so RSS grows by up to that much whatever the
 * file's size (measured: +24 MB for 25 MB, +64 MB for 100 MB, +63 MB for 250 MB). A service holding
 * a whole file would grow by at least its size: at 100 MB that is what the bound catches.
 */
const SIZES_MB = [25, 100];

describe('files: memory of the service process during an upload and a download (local driver)', () => {
  let setup: TestApp;
  let tenant: TestTenant;
  let dir: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'files-memory-'));
    setup = await startTestApp({ FILE_STORAGE_DIR: dir });
    tenant = await createTenant(setup.app);
  });
  after(async () => {
    await setup?.close();
    await rm(dir, { recursive: true, force: true });
  });

  for (const sizeMb of SIZES_MB) {
    it(sizeMb >= 100
      ? `streams a ${sizeMb} MB file both ways: the RSS growth of a fresh service process stays below the file size`
      : `streams a ${sizeMb} MB file both ways and reports the RSS of a fresh service process`, async () => {
      const fileSize = sizeMb * MB;
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      const api: ServiceProcess = spawnEntry('src/api.js', {
        HOST: '127.0.0.1', PORT: String(port), PUBLIC_URL: url, FILE_STORAGE_DIR: dir, UPLOAD_MAX_BYTES: String(fileSize),
      });
      try {
        await waitUntil(async () => (await fetch(`${url}/healthz`)).ok, 60_000, 100);
        const form = await createPublishedForm(url, tenant.key, [field('fld_file', 'file-upload', 'File', { config: { maxSize: fileSize } })]);
        const announce = async (bytes: Buffer) => {
          const announced = await call(url, 'POST', `/v1/forms/${form.id}/uploads`, {
            key: tenant.key, body: { fieldId: 'fld_file', name: 'big.jpg', type: 'image/jpeg', size: bytes.length },
          });
          expect(announced.status, announced.text).to.equal(201);
          return announced.body;
        };
        const link = async (uploadId: string) => {
          const res = await call(url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data: { fld_file: { uploadId } } } });
          expect(res.status, res.text).to.equal(201);
          const read = await call(url, 'GET', `/v1/submissions/${res.body.submission.id}`, { key: tenant.key });
          return read.body.submission.rawData.fld_file.url as string;
        };

        // Every path once with a small file first, so the baseline includes what any request costs.
        const small = jpegBytes(256 * 1024);
        const warm = await announce(small);
        await putBytes(warm, small);
        await (await fetch(await link(warm.uploadId))).arrayBuffer();

        const bytes = jpegBytes(fileSize);
        const target = await announce(bytes);
        const pid = api.child.pid!;
        const before = await rssOf(pid);
        const uploadPeak = await peakRssDuring(pid, async () => expect((await putBytes(target, bytes)).status).to.equal(200));
        const downloadUrl = await link(target.uploadId);
        const beforeDownload = await rssOf(pid);
        let received: Buffer | null = null;
        const downloadPeak = await peakRssDuring(pid, async () => {
          received = Buffer.from(await (await fetch(downloadUrl)).arrayBuffer());
        });
        expect(received!.equals(bytes)).to.equal(true);

        const uploadGrowth = uploadPeak - before;
        const downloadGrowth = downloadPeak - beforeDownload;
        console.log(`      ${sizeMb} MB file, service RSS: before the upload ${mb(before)}, peak during it ${mb(uploadPeak)} (+${mb(uploadGrowth)}); `
          + `before the download ${mb(beforeDownload)}, peak during it ${mb(downloadPeak)} (+${mb(downloadGrowth)})`);
        if (sizeMb >= 100) {
          expect(uploadGrowth).to.be.below(fileSize);
          expect(downloadGrowth).to.be.below(fileSize);
        }
      } finally {
        await api.stop();
      }
    });
  }
});
