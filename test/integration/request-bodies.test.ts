import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { call, createTenant, startTestApp, type TestApp } from '../support/harness';
import { startEntry } from '../support/processes';

describe('request bodies', () => {
  let t: TestApp;
  before(async () => { t = await startTestApp(); });
  after(async () => t.close());

  it('checks a Content-MD5 header against the body (400) and refuses a declared identity encoding (415)', async () => {
    const tenant = await createTenant(t.app);
    const body = JSON.stringify({ title: 'md5' });
    const good = createHash('md5').update(body).digest('base64');
    const withMd5 = (md5: string) => call(t.url, 'POST', '/v1/forms', { key: tenant.key, body, headers: { 'Content-MD5': md5 } });
    expect((await withMd5(good)).status).to.equal(201);
    const mismatch = await withMd5(createHash('md5').update('other').digest('base64'));
    expect(mismatch.status).to.equal(400);
    expect(mismatch.body.error).to.equal('invalid_json');
    const identity = await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body, headers: { 'Content-Encoding': 'identity' } });
    expect(identity.status).to.equal(415);
  });

  it('reads bodies without the deprecated Buffer() constructor (checked on every call until 10,000)', async function () {
    this.timeout(60_000);
    // --pending-deprecation makes Node report Buffer() even when called from node_modules.
    const api = await startEntry('src/api.js', { NODE_NO_WARNINGS: '0' }, 'PORT', ['--pending-deprecation']);
    try {
      const res = await call(api.url, 'POST', '/public/forms/form_missing', { body: { values: { a: 1 } } });
      expect(res.status).to.equal(404);
      await new Promise((r) => setTimeout(r, 300)); // a warning would be written to stderr by now
      expect(api.proc.output()).to.not.include('DEP0005');
    } finally {
      await api.proc.stop();
    }
  });
});
