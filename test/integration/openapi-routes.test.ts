import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import yaml from 'js-yaml';
import { createHttpServer, routeTable } from '../../src/http/server';
import { call, startTestApp, type TestApp } from '../support/harness';

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];

describe('openapi.yaml and the server', () => {
  let t: TestApp;
  before(async () => { t = await startTestApp(); });
  after(async () => t.close());

  it('documents exactly the routes the server answers', () => {
    const doc = yaml.load(readFileSync(path.resolve(__dirname, '../../../openapi.yaml'), 'utf8')) as any;
    const documented = Object.entries(doc.paths as Record<string, any>)
      .flatMap(([p, ops]) => Object.keys(ops).filter((m) => METHODS.includes(m)).map((m) => `${m.toUpperCase()} ${p}`))
      .sort();
    const { server } = createHttpServer(t.app);
    const served = routeTable(server).map((r) => `${r.method.toUpperCase()} ${r.path}`).sort();
    expect(served.filter((r) => !documented.includes(r)), 'served but not documented').to.deep.equal([]);
    expect(documented.filter((r) => !served.includes(r)), 'documented but not served').to.deep.equal([]);
  });

  it('serves the document at /openapi.yaml as application/yaml', async () => {
    const res = await call(t.url, 'GET', '/openapi.yaml');
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^application\/yaml/);
    expect((yaml.load(res.text) as any).info.version).to.equal('1.0.0');
  });

  it('answers /healthz and /readyz', async () => {
    expect((await call(t.url, 'GET', '/healthz')).status).to.equal(200);
    const ready = await call(t.url, 'GET', '/readyz');
    expect(ready.status).to.equal(200);
    expect(ready.body.status).to.equal('ready');
    const apiReady = await call(t.url, 'GET', '/readyz/api');
    expect(apiReady.status).to.equal(200);
    expect(apiReady.body.status).to.equal('ready');
  });

  it('keeps idle connections open for 65 s, longer than a load balancer (Node closes them after 5 s by default)', async () => {
    const res = await fetch(`${t.url}/healthz`);
    await res.text();
    expect(res.headers.get('keep-alive')).to.equal('timeout=65');
  });
});
