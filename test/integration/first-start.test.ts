import { expect } from 'chai';
import { dropDatabase, sideDatabaseUrl } from '../support/databases';
import { call } from '../support/harness';
import { freePort, spawnEntry, waitUntil, type ServiceProcess } from '../support/processes';

/** `npm start`'s entry against a database that does not exist yet. */
describe('first start (node dist/src/main.js)', function () {
  this.timeout(60_000);
  const databaseUrl = sideDatabaseUrl('boot');

  async function start(): Promise<{ proc: ServiceProcess; base: string }> {
    const port = await freePort();
    const proc = spawnEntry('src/main.js', {
      DATABASE_URL: databaseUrl, HOST: '127.0.0.1', PORT: String(port), METRICS_PORT: '0', LOG_LEVEL: 'warn',
    });
    const base = `http://127.0.0.1:${port}`;
    try {
      await waitUntil(async () => (await fetch(`${base}/readyz`)).ok, 40_000, 100);
    } catch {
      await proc.stop('SIGKILL');
      throw new Error(`main did not become ready:\n${proc.output()}`);
    }
    return { proc, base };
  }

  after(async () => dropDatabase(databaseUrl));

  it('creates the database, migrates, prints the default organization\'s key once, and the key works', async () => {
    const first = await start();
    const keys = first.proc.output().match(/fs_live_[0-9A-Za-z]{32,}/g) ?? [];
    expect(keys).to.have.length(1);
    expect(first.proc.output()).to.include('Created organization "default"');
    const list = await call(first.base, 'GET', '/v1/forms', { key: keys[0] });
    expect(list.status).to.equal(200);
    expect(list.headers.get('x-ratelimit-limit')).to.equal('2000');
    expect(await first.proc.stop('SIGTERM')).to.equal(0);

    const second = await start();
    expect(second.proc.output()).to.not.match(/fs_live_/);
    expect((await call(second.base, 'GET', '/v1/forms', { key: keys[0] })).status).to.equal(200);
    expect(await second.proc.stop('SIGTERM')).to.equal(0);
  });

  it('stops at start with a message naming a wrong variable', async () => {
    const proc = spawnEntry('src/main.js', { DATABASE_URL: databaseUrl, WEBHOOK_TIMEOUT_MS: 'soon' });
    expect(await new Promise((resolve) => proc.child.once('exit', resolve))).to.not.equal(0);
    expect(proc.output()).to.include('WEBHOOK_TIMEOUT_MS');
  });
});
