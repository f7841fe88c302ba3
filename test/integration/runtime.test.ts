import { expect } from 'chai';
import http from 'node:http';
import type { Socket } from 'node:net';
import path from 'node:path';
import { dropDatabase, sideDatabaseUrl } from '../support/databases';
import { call, fieldInput } from '../support/harness';
import { freePort, waitUntil } from '../support/processes';
import { spawn } from 'node:child_process';
import { DIST_ROOT } from '../support/processes';

/** The Node.js the project pins (the `node` dev dependency), as README.md's opening says. */
const pinned = require('node/package.json') as { version: string };
const pinnedBinary = path.join(path.dirname(require.resolve('node/package.json')), 'bin', 'node');

/** What Node prints when code uses a deprecated or experimental API: `(node:123) [DEP0111] DeprecationWarning: …`. */
const RUNTIME_WARNING = /DeprecationWarning|ExperimentalWarning|\(node:\d+\) (\[\w+\] )?Warning/;

/** An idle keep-alive connection is announced with the configured timeout and closed by the server after it. */
async function expectIdleSocketClosed(port: number): Promise<void> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const { header, socket } = await new Promise<{ header: string | undefined; socket: Socket }>((resolve, reject) => {
      const req = http.get({ host: '127.0.0.1', port, path: '/healthz', agent }, (res) => {
        res.resume();
        res.on('end', () => resolve({ header: res.headers['keep-alive'] as string | undefined, socket: req.socket! }));
      });
      req.on('error', reject);
    });
    expect(header).to.equal('timeout=1');
    await new Promise<void>((resolve, reject) => {
      const bound = setTimeout(() => reject(new Error('the idle keep-alive socket was never closed')), 15_000);
      socket.once('close', () => { clearTimeout(bound); resolve(); });
    });
  } finally {
    agent.destroy();
  }
}

describe('runtime: the pinned Node.js 24 LTS (README.md: pinned as the dev dependency `node`)', function () {
  this.timeout(60_000);
  const databaseUrl = sideDatabaseUrl('runtime');
  after(async () => dropDatabase(databaseUrl));

  it('pins an active LTS line, 24, and npm scripts run the suite on it', () => {
    expect(Number(pinned.version.split('.')[0])).to.equal(24);
    expect(process.version, 'npm test runs on node_modules/.bin/node').to.equal(`v${pinned.version}`);
  });

  it('npm start\'s entry starts, serves and stops on the pinned Node with no deprecation or experimental warning', async () => {
    const port = await freePort();
    // Warnings are on (the other tests' children run with NODE_NO_WARNINGS=1).
    const env: NodeJS.ProcessEnv = {
      ...process.env, DATABASE_URL: databaseUrl, HOST: '127.0.0.1', PORT: String(port), METRICS_PORT: '0', LOG_LEVEL: 'warn',
      HTTP_KEEP_ALIVE_TIMEOUT_MS: '1500',
    };
    delete env.NODE_NO_WARNINGS;
    delete env.NODE_OPTIONS;
    const child = spawn(pinnedBinary, [path.join(DIST_ROOT, 'src/main.js')], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout!.on('data', (chunk) => { output += chunk; });
    child.stderr!.on('data', (chunk) => { output += chunk; });
    const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
    const base = `http://127.0.0.1:${port}`;
    try {
      await waitUntil(async () => (await fetch(`${base}/readyz`).catch(() => null))?.ok === true, 40_000, 100)
        .catch(() => { throw new Error(`main did not become ready:\n${output}`); });
      const key = output.match(/fs_live_[0-9A-Za-z]{32,}/)?.[0];
      expect(key, 'the first start prints a key').to.be.a('string');
      // Touch what restify serves: JSON in and out, a 404 and a 405, the hosted page and its assets.
      const form = await call(base, 'POST', '/v1/forms', {
        key, body: { title: 'Runtime', status: 'published', pages: [], fields: [fieldInput('fld_a', 'text', 'A')] },
      });
      expect(form.status).to.equal(201);
      const formId = form.body.form.id;
      expect((await call(base, 'POST', `/v1/forms/${formId}/submissions`, { key, body: { data: { fld_a: 'x' } } })).status).to.equal(201);
      expect((await call(base, 'POST', `/public/forms/${formId}`, { body: { values: { fld_a: 'y' } } })).status).to.equal(200);
      expect((await call(base, 'GET', '/v1/nowhere', { key })).status).to.equal(404);
      expect((await call(base, 'DELETE', '/openapi.yaml')).status).to.equal(405);
      const page = await fetch(`${base}/f/${formId}`);
      expect(page.status).to.equal(200);
      const script = (await page.text()).match(/src="([^"]+\.js)"/)?.[1];
      expect(script, 'the hosted page loads its script').to.be.a('string');
      expect((await fetch(new URL(script!, base))).status).to.equal(200);
      expect((await fetch(`${base}/embed.js`)).status).to.equal(200);
      const tooLarge = await call(base, 'POST', `/v1/forms/${formId}/submissions`, { key, body: { data: { fld_a: 'x'.repeat(1_100_000) } } });
      expect(tooLarge.status).to.equal(413);
      expect(tooLarge.body).to.have.property('error');
      await expectIdleSocketClosed(port);
    } finally {
      if (child.exitCode === null) child.kill('SIGTERM');
      expect(await exited).to.equal(0);
    }
    expect(output).to.not.match(RUNTIME_WARNING);
    expect(output).to.include('Created organization "default"');
  });
});
