import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { assertSafeTarget, OutboundError, outboundFetch, type OutboundErrorKind } from '../../src/lib/outbound';
import { type LoopbackServer, readRawBody, sendJson, startLoopbackServer } from '../support/fakes/http-server';

const PRIVATE = { allowPrivate: true };
const PUBLIC_ONLY = { allowPrivate: false };

async function expectOutboundError(promise: Promise<unknown>, kind: OutboundErrorKind): Promise<OutboundError> {
  try {
    await promise;
  } catch (err) {
    expect(err).to.be.instanceOf(OutboundError);
    expect((err as OutboundError).kind, (err as Error).message).to.equal(kind);
    return err as OutboundError;
  }
  throw new Error(`expected OutboundError(${kind}), but the call succeeded`);
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('outbound', () => {
  let server: LoopbackServer;
  let hits: string[];
  let base: string;
  let port: string;

  before(async () => {
    server = await startLoopbackServer(async (req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      hits.push(url.pathname);
      const body = await readRawBody(req);
      switch (url.pathname) {
        case '/echo':
          return sendJson(res, 200, { method: req.method, headers: req.headers, body }, { 'X-Reply': 'yes' });
        case '/redirect':
          res.writeHead(302, { Location: '/echo' });
          return void res.end();
        case '/slow-headers':
          return void setTimeout(() => !res.destroyed && sendJson(res, 200, {}), 2_000).unref();
        case '/slow-body':
          res.writeHead(200, { 'Content-Type': 'text/plain' });
          return void res.write('partial');
        case '/bytes': {
          res.writeHead(200, { 'Content-Type': 'text/plain' });
          const total = Number(url.searchParams.get('n'));
          const chunk = Buffer.alloc(16 * 1024, 'a');
          for (let sent = 0; sent < total; sent += chunk.length) {
            res.write(chunk.subarray(0, Math.min(chunk.length, total - sent)));
          }
          return void res.end();
        }
        default:
          return sendJson(res, 404, {});
      }
    });
    base = server.origin;
    port = new URL(base).port;
  });

  beforeEach(() => {
    hits = [];
  });

  after(() => server.close());

  describe('outboundFetch', () => {
    it('sends method, headers and body and returns status, headers and body', async () => {
      const res = await outboundFetch(`${base}/echo`, {
        ...PRIVATE,
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Custom': 'abc' },
        body: '{"a":"ä"}',
        timeoutMs: 2_000,
      });
      expect(res.status).to.equal(200);
      expect(res.truncated).to.equal(false);
      expect(res.headers['x-reply']).to.equal('yes');
      expect(res.durationMs).to.be.a('number').and.at.least(0);
      const echoed = JSON.parse(res.body);
      expect(echoed).to.include({ method: 'POST', body: '{"a":"ä"}' });
      expect(echoed.headers).to.include({ 'content-type': 'application/json', 'x-custom': 'abc' });
    });

    it('refuses a loopback IP literal when private targets are not allowed, without connecting', async () => {
      await expectOutboundError(outboundFetch(`https://127.0.0.1:${port}/echo`, { ...PUBLIC_ONLY, timeoutMs: 2_000 }), 'forbidden');
      await expectOutboundError(outboundFetch(`https://[::1]:${port}/echo`, { ...PUBLIC_ONLY, timeoutMs: 2_000 }), 'forbidden');
      expect(hits).to.deep.equal([]);
    });

    it('refuses a hostname resolving to loopback at connect time (the lookup check)', async () => {
      await expectOutboundError(outboundFetch(`https://localhost:${port}/echo`, { ...PUBLIC_ONLY, timeoutMs: 2_000 }), 'forbidden');
      expect(hits).to.deep.equal([]);
    });

    it('reaches a hostname resolving to loopback when private targets are allowed', async () => {
      const res = await outboundFetch(`http://localhost:${port}/echo`, { ...PRIVATE, timeoutMs: 2_000 });
      expect(res.status).to.equal(200);
      expect(hits).to.deep.equal(['/echo']);
    });

    const metadataTargets = ['http://169.254.169.254/latest/meta-data/', 'http://[::ffff:169.254.169.254]/', 'http://[fd00:ec2::254]/', 'http://[fe80::1]/'];
    for (const target of metadataTargets) {
      it(`refuses ${target} even when private targets are allowed`, async () => {
        await expectOutboundError(outboundFetch(target, { ...PRIVATE, timeoutMs: 2_000 }), 'forbidden');
      });
    }

    it('returns a redirect as-is instead of following it', async () => {
      const res = await outboundFetch(`${base}/redirect`, { ...PRIVATE, timeoutMs: 2_000 });
      expect(res.status).to.equal(302);
      expect(res.headers.location).to.match(/\/echo$/);
      expect(hits).to.deep.equal(['/redirect']);
    });

    it('times out while waiting for the response headers', async () => {
      const started = Date.now();
      await expectOutboundError(outboundFetch(`${base}/slow-headers`, { ...PRIVATE, timeoutMs: 200 }), 'timeout');
      expect(Date.now() - started).to.be.below(1_500);
    });

    it('times out while reading a body that never ends', async () => {
      const started = Date.now();
      await expectOutboundError(outboundFetch(`${base}/slow-body`, { ...PRIVATE, timeoutMs: 300 }), 'timeout');
      expect(Date.now() - started).to.be.below(1_500);
    });

    it('stops reading a huge body at maxResponseBytes and marks it truncated', async () => {
      const res = await outboundFetch(`${base}/bytes?n=${8 * 1024 * 1024}`, {
        ...PRIVATE,
        timeoutMs: 5_000,
        maxResponseBytes: 1_000,
      });
      expect(res.status).to.equal(200);
      expect(res.truncated).to.equal(true);
      expect(res.body).to.equal('a'.repeat(1_000));
    });

    it('caps at 64 KiB by default', async () => {
      const res = await outboundFetch(`${base}/bytes?n=${200 * 1024}`, { ...PRIVATE, timeoutMs: 5_000 });
      expect(res.truncated).to.equal(true);
      expect(res.body.length).to.equal(64 * 1024);
    });

    it('does not mark a body of exactly maxResponseBytes as truncated', async () => {
      const res = await outboundFetch(`${base}/bytes?n=1000`, { ...PRIVATE, timeoutMs: 2_000, maxResponseBytes: 1_000 });
      expect(res.truncated).to.equal(false);
      expect(res.body.length).to.equal(1_000);
    });

    it('still works after a truncated exchange (the aborted socket is not reused)', async () => {
      await outboundFetch(`${base}/bytes?n=${1024 * 1024}`, { ...PRIVATE, timeoutMs: 5_000, maxResponseBytes: 10 });
      const res = await outboundFetch(`${base}/echo`, { ...PRIVATE, timeoutMs: 2_000 });
      expect(res.status).to.equal(200);
    });

    it('reports a refused connection as kind connection', async () => {
      const port = await closedPort();
      await expectOutboundError(outboundFetch(`http://127.0.0.1:${port}/`, { ...PRIVATE, timeoutMs: 2_000 }), 'connection');
    });

    const invalid: Array<[string, boolean]> = [
      ['not a url', true],
      ['ftp://127.0.0.1/file', true],
      ['file:///etc/passwd', true],
      ['http://example.com/hook', false],
    ];
    for (const [target, allowPrivate] of invalid) {
      it(`rejects ${target} (allowPrivate ${allowPrivate}) as invalid_url`, async () => {
        await expectOutboundError(outboundFetch(target, { allowPrivate, timeoutMs: 2_000 }), 'invalid_url');
      });
    }
  });

  describe('assertSafeTarget', () => {
    const cases: Array<[string, boolean, OutboundErrorKind | 'ok']> = [
      ['https://127.0.0.1/hook', false, 'forbidden'],
      ['https://localhost/hook', false, 'forbidden'],
      ['https://[::1]/hook', false, 'forbidden'],
      ['https://10.0.0.5/hook', false, 'forbidden'],
      ['https://2130706433/hook', false, 'forbidden'], // 127.0.0.1 in decimal, normalised by the URL parser
      ['https://127.0.0.1/hook', true, 'ok'],
      ['http://localhost/hook', true, 'ok'],
      ['https://93.184.215.14/hook', false, 'ok'],
      ['https://169.254.169.254/hook', true, 'forbidden'],
      ['https://[fd00:ec2::254]/hook', true, 'forbidden'],
      ['http://93.184.215.14/hook', false, 'invalid_url'],
      ['javascript:alert(1)', true, 'invalid_url'],
      ['', true, 'invalid_url'],
    ];
    for (const [target, allowPrivate, outcome] of cases) {
      it(`${JSON.stringify(target)} with allowPrivate ${allowPrivate}: ${outcome}`, async () => {
        const check = assertSafeTarget(target, { allowPrivate });
        if (outcome === 'ok') await check;
        else await expectOutboundError(check, outcome);
      });
    }
  });
});
