import { expect } from 'chai';
import type { OutboundRequest, OutboundResponse } from '../../src/lib/outbound';
import { OutboundError } from '../../src/lib/outbound';
import { interpretSiteverify, tokenProblem, verifyCaptcha, type SiteverifyOutcome } from '../../src/domain/public/turnstile';

const answer = (body: unknown) => JSON.stringify(body);

describe('turnstile: token shape', () => {
  const cases: [unknown, string | null][] = [
    [undefined, 'captcha_required'], [null, 'captcha_required'], ['', 'captcha_required'],
    ['1234567', 'captcha_invalid'], [12345678, 'captcha_invalid'], ['x'.repeat(4097), 'captcha_invalid'],
    ['12345678', null], ['x'.repeat(4096), null],
  ];
  for (const [token, expected] of cases) {
    it(`${typeof token === 'string' ? `${token.length} chars` : String(token)} → ${expected}`, () => expect(tokenProblem(token)).to.equal(expected));
  }
});

describe('turnstile: siteverify answers', () => {
  const cases: [string, number, string, SiteverifyOutcome][] = [
    ['success', 200, answer({ success: true, 'error-codes': [] }), 'pass'],
    ['refused token', 200, answer({ success: false, 'error-codes': ['invalid-input-response'] }), 'fail'],
    ['spent token', 200, answer({ success: false, 'error-codes': ['timeout-or-duplicate'] }), 'fail'],
    ['internal error', 200, answer({ success: false, 'error-codes': ['internal-error'] }), 'retry'],
    ['wrong secret (our fault)', 200, answer({ success: false, 'error-codes': ['invalid-input-secret'] }), 'unavailable'],
    ['missing secret (our fault)', 200, answer({ success: false, 'error-codes': ['missing-input-secret'] }), 'unavailable'],
    ['HTTP 500', 500, '<html>500</html>', 'unavailable'],
    ['HTTP 503 with JSON', 503, answer({ success: true }), 'unavailable'],
    ['HTTP 400', 400, answer({ success: false, 'error-codes': ['bad-request'] }), 'unavailable'],
    ['not JSON', 200, 'hello', 'unavailable'],
    ['no success flag', 200, answer({ 'error-codes': [] }), 'unavailable'],
    ['success on a non-200', 204, answer({ success: true }), 'unavailable'],
  ];
  for (const [name, status, body, outcome] of cases) {
    it(`${name} → ${outcome}`, () => expect(interpretSiteverify(status, body).outcome).to.equal(outcome));
  }
});

describe('turnstile: verifyCaptcha', () => {
  const settings = { secretKey: 'secret', verifyUrl: 'https://verify.example/siteverify' };
  const reply = (status: number, body: unknown): OutboundResponse =>
    ({ status, headers: {}, body: typeof body === 'string' ? body : answer(body), truncated: false, durationMs: 1 });

  function fakeFetcher(responses: Array<OutboundResponse | Error>) {
    const calls: Array<{ url: string; req: OutboundRequest; form: URLSearchParams }> = [];
    const fetcher = async (url: string, req: OutboundRequest) => {
      calls.push({ url, req, form: new URLSearchParams(req.body) });
      const next = responses.shift();
      if (!next) throw new Error('unexpected call');
      if (next instanceof Error) throw next;
      return next;
    };
    return { calls, fetcher };
  }

  it('posts the secret, the token, the client address and an idempotency key as a form', async () => {
    const { calls, fetcher } = fakeFetcher([reply(200, { success: true })]);
    expect(await verifyCaptcha(settings, 'token-123', '203.0.113.9', fetcher)).to.deep.equal({ ok: true });
    expect(calls).to.have.length(1);
    expect(calls[0].url).to.equal(settings.verifyUrl);
    expect(calls[0].req).to.include({ method: 'POST', allowPrivate: true });
    expect(calls[0].req.headers?.['Content-Type']).to.equal('application/x-www-form-urlencoded');
    expect(calls[0].req.timeoutMs).to.be.within(1000, 5000);
    expect(calls[0].form.get('secret')).to.equal('secret');
    expect(calls[0].form.get('response')).to.equal('token-123');
    expect(calls[0].form.get('remoteip')).to.equal('203.0.113.9');
    expect(calls[0].form.get('idempotency_key')).to.match(/^[0-9a-f-]{36}$/);
  });

  it('retries once after an internal error, with the same idempotency key', async () => {
    const { calls, fetcher } = fakeFetcher([reply(200, { success: false, 'error-codes': ['internal-error'] }), reply(200, { success: true })]);
    expect(await verifyCaptcha(settings, 'token-123', null, fetcher)).to.deep.equal({ ok: true });
    expect(calls).to.have.length(2);
    expect(calls[1].form.get('idempotency_key')).to.equal(calls[0].form.get('idempotency_key'));
    expect(calls[0].form.has('remoteip')).to.equal(false);
  });

  it('gives up after a second internal error', async () => {
    const internal = () => reply(200, { success: false, 'error-codes': ['internal-error'] });
    const { calls, fetcher } = fakeFetcher([internal(), internal()]);
    expect(await verifyCaptcha(settings, 'token-123', null, fetcher)).to.include({ ok: false, refusal: 'verification_unavailable' });
    expect(calls).to.have.length(2);
  });

  const single: [string, OutboundResponse | Error, string][] = [
    ['a refused token', reply(200, { success: false, 'error-codes': ['invalid-input-response'] }), 'captcha_failed'],
    ['a 5xx', reply(502, 'bad gateway'), 'verification_unavailable'],
    ['a timeout', new OutboundError('timeout', 'timed out'), 'verification_unavailable'],
    ['a connection error', new OutboundError('connection', 'refused'), 'verification_unavailable'],
  ];
  for (const [name, response, refusal] of single) {
    it(`answers ${refusal} to ${name} without a retry`, async () => {
      const { calls, fetcher } = fakeFetcher([response]);
      expect(await verifyCaptcha(settings, 'token-123', null, fetcher)).to.include({ ok: false, refusal });
      expect(calls).to.have.length(1);
    });
  }

  it('refuses a missing or malformed token without asking the backend', async () => {
    const { calls, fetcher } = fakeFetcher([]);
    expect(await verifyCaptcha(settings, undefined, null, fetcher)).to.deep.equal({ ok: false, refusal: 'captcha_required' });
    expect(await verifyCaptcha(settings, 'short', null, fetcher)).to.deep.equal({ ok: false, refusal: 'captcha_invalid' });
    expect(calls).to.have.length(0);
  });

  it('fails closed without a secret key', async () => {
    const { calls, fetcher } = fakeFetcher([]);
    expect(await verifyCaptcha({ ...settings, secretKey: null }, 'token-123', null, fetcher))
      .to.include({ ok: false, refusal: 'verification_unavailable' });
    expect(calls).to.have.length(0);
  });
});
