import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { call, startTestApp, type TestApp } from '../support/harness';
import { DIST_ROOT } from '../support/processes';

const run = promisify(execFile);

async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string; json: any }> {
  return cliWith({}, ...args);
}

async function cliWith(env: Record<string, string>, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string; json: any }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [path.join(DIST_ROOT, 'src/cli/index.js'), ...args], {
      env: { ...process.env, NODE_NO_WARNINGS: '1', ...env },
    });
    return { code: 0, stdout, stderr, json: JSON.parse(stdout) };
  } catch (err: any) {
    return { code: err.code, stdout: err.stdout, stderr: err.stderr, json: null };
  }
}

describe('admin CLI', function () {
  // each command is a Node process of its own (2-4 s to start on a loaded machine), up to eight a test
  this.timeout(60_000);
  let t: TestApp;
  before(async () => { t = await startTestApp(); });
  after(async () => t.close());

  it('creates an organization, a key that works, lists, reports usage, updates and revokes', async () => {
    const org = await cli('orgs', 'create', '--name', 'Acme', '--plan', 'pro', '--monthly-quota', '500');
    expect(org.code).to.equal(0);
    expect(org.stdout.trim().split('\n')).to.have.length(1);
    expect(org.json).to.deep.include({ name: 'Acme', plan: 'pro', monthlyQuota: 500 });
    expect(org.json.id).to.match(/^org_/);

    const key = await cli('keys', 'create', '--org', org.json.id, '--scopes', 'forms:read,submissions:*', '--name', 'ci');
    expect(key.code).to.equal(0);
    expect(key.json.id).to.match(/^key_/);
    expect(key.json.key).to.match(/^fs_live_[0-9A-Za-z]{32,}$/);
    expect(key.json.scopes).to.deep.equal(['forms:read', 'submissions:*']);
    expect(key.json.expiresAt).to.equal(null);
    expect((await call(t.url, 'GET', '/v1/forms', { key: key.json.key })).status).to.equal(200);
    expect((await call(t.url, 'POST', '/v1/forms', { key: key.json.key, body: { title: 'x' } })).status).to.equal(403);

    const list = await cli('keys', 'list', '--org', org.json.id);
    expect(list.json.keys).to.have.length(1);
    const listed = list.json.keys[0];
    expect(listed).to.have.keys('id', 'name', 'prefix', 'last4', 'scopes', 'createdAt', 'expiresAt', 'lastUsedAt', 'revokedAt');
    expect(listed.prefix).to.equal('fs_live_');
    expect(listed.last4).to.equal(key.json.key.slice(-4));
    expect(JSON.stringify(list.json)).to.not.include(key.json.key);

    const usage = await cli('orgs', 'usage', org.json.id);
    expect(usage.json).to.deep.equal({ month: new Date().toISOString().slice(0, 7), used: 0, quota: 500 });

    const updated = await cli('orgs', 'update', org.json.id, '--plan', 'business');
    expect(updated.json).to.deep.include({ plan: 'business', monthlyQuota: 500 });
    const res = await call(t.url, 'GET', '/v1/forms', { key: key.json.key });
    expect(res.headers.get('x-ratelimit-limit')).to.equal('500');

    const revoked = await cli('keys', 'revoke', key.json.id);
    expect(revoked.code).to.equal(0);
    expect(revoked.json.revokedAt).to.be.a('string');
    expect((await call(t.url, 'GET', '/v1/forms', { key: key.json.key })).status).to.equal(401);
  });

  it('uses the plan\'s default quota when none is given, and honours --expires-at', async () => {
    const org = await cli('orgs', 'create', '--name', 'Free', '--plan', 'free');
    expect(org.json.monthlyQuota).to.equal(100);
    const key = await cli('keys', 'create', '--org', org.json.id, '--scopes', '*', '--expires-at', '2020-01-01T00:00:00Z');
    expect(key.json.expiresAt).to.equal('2020-01-01T00:00:00.000Z');
    expect((await call(t.url, 'GET', '/v1/forms', { key: key.json.key })).status).to.equal(401);
  });

  it('re-encrypts secrets with the current key, and refuses when a sealed value opens with no configured key', async () => {
    const tenant = await (await import('../support/harness')).createTenant(t.app);
    const hook = await call(t.url, 'POST', '/v1/webhooks', { key: tenant.key, body: { name: 'x', url: 'http://127.0.0.1:9/h', events: ['submission.created'] } });
    expect(hook.status).to.equal(201);
    const done = await cli('secrets', 'reencrypt');
    expect(done.code).to.equal(0);
    expect(done.json).to.deep.equal({ webhooks: 0, forms: 0, submissions: 0, unopenable: [] });
    const [before] = await t.app.orm.em.getConnection().execute('select secret_sealed from webhooks where id = ?', [hook.body.webhook.id]);

    const wrongKey = await cliWith({ ENCRYPTION_KEY: randomBytes(32).toString('base64') }, 'secrets', 'reencrypt');
    expect(wrongKey.code).to.not.equal(0);
    expect(wrongKey.stderr).to.include('no encryption key opens this value');
    const [after] = await t.app.orm.em.getConnection().execute('select secret_sealed from webhooks where id = ?', [hook.body.webhook.id]);
    expect(after.secret_sealed).to.equal(before.secret_sealed);
  });

  it('fails with a message on stderr and a non-zero exit for bad input', async () => {
    for (const args of [
      ['orgs', 'create', '--name', 'X', '--plan', 'gold'],
      ['orgs', 'create', '--plan', 'free'],
      ['keys', 'create', '--org', 'org_missing', '--scopes', '*'],
      ['keys', 'create', '--org', 'org_missing', '--scopes', 'forms:delete'],
      ['keys', 'revoke', 'key_missing'],
      ['frobnicate'],
    ]) {
      const res = await cli(...args);
      expect(res.code, args.join(' ')).to.not.equal(0);
      expect(res.stdout, args.join(' ')).to.equal('');
      expect(res.stderr, args.join(' ')).to.match(/error: .+/);
    }
  });
});
