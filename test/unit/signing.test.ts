import { createHmac } from 'node:crypto';
import { expect } from 'chai';
import { signPayload, verifySignature } from '../../src/domain/webhooks/signing';

const SECRET = 'whsec_3ZB8Jd0XuPq7r1mKcN5tYw2Ls9Fh4Vg6';
const TIMESTAMP = 1_700_000_000;
const BODY = '{"id":"evt_1","type":"form.submission.created","data":{"name":"Zoë"}}';

function independentSignature(secret: string, timestamp: string, body: string): string {
  const mac = createHmac('sha256', Buffer.from(secret, 'utf8'));
  mac.update(Buffer.from(timestamp + '.' + body, 'utf8'));
  return 'v1=' + mac.digest('hex');
}

describe('webhook signing', () => {
  describe('signPayload', () => {
    it('matches HMAC-SHA256(secret, "<timestamp>.<raw body>") computed independently', () => {
      expect(signPayload(SECRET, TIMESTAMP, BODY)).to.equal(independentSignature(SECRET, String(TIMESTAMP), BODY));
    });

    it('is v1= followed by 64 lowercase hex characters', () => {
      expect(signPayload(SECRET, TIMESTAMP, BODY)).to.match(/^v1=[0-9a-f]{64}$/);
    });

    it('changes with the secret, the timestamp and every byte of the body', () => {
      const base = signPayload(SECRET, TIMESTAMP, BODY);
      expect(signPayload(SECRET + 'x', TIMESTAMP, BODY)).to.not.equal(base);
      expect(signPayload(SECRET, TIMESTAMP + 1, BODY)).to.not.equal(base);
      expect(signPayload(SECRET, TIMESTAMP, BODY + ' ')).to.not.equal(base);
    });
  });

  describe('verifySignature', () => {
    const valid = {
      secret: SECRET,
      signature: signPayload(SECRET, TIMESTAMP, BODY),
      timestamp: String(TIMESTAMP),
      rawBody: BODY,
      nowSeconds: TIMESTAMP,
    };
    const hexOf = (signature: string) => signature.slice(3);

    it('accepts a genuine signature', () => {
      expect(verifySignature(valid)).to.equal(true);
    });

    it('accepts uppercase hex', () => {
      expect(verifySignature({ ...valid, signature: 'v1=' + hexOf(valid.signature).toUpperCase() })).to.equal(true);
    });

    const toleranceCases: Array<[string, number, boolean]> = [
      ['300 s old', TIMESTAMP + 300, true],
      ['301 s old', TIMESTAMP + 301, false],
      ['300 s in the future', TIMESTAMP - 300, true],
      ['301 s in the future', TIMESTAMP - 301, false],
    ];
    for (const [label, nowSeconds, expected] of toleranceCases) {
      it(`${expected ? 'accepts' : 'rejects'} a timestamp ${label}`, () => {
        expect(verifySignature({ ...valid, nowSeconds })).to.equal(expected);
      });
    }

    it('honours a custom tolerance', () => {
      expect(verifySignature({ ...valid, nowSeconds: TIMESTAMP + 11, toleranceSeconds: 10 })).to.equal(false);
      expect(verifySignature({ ...valid, nowSeconds: TIMESTAMP + 10, toleranceSeconds: 10 })).to.equal(true);
    });

    it('uses the current clock by default', () => {
      const now = Math.floor(Date.now() / 1000);
      const fresh = { secret: SECRET, timestamp: String(now), rawBody: BODY };
      expect(verifySignature({ ...fresh, signature: signPayload(SECRET, now, BODY) })).to.equal(true);
      const stale = now - 1000;
      expect(
        verifySignature({ ...fresh, timestamp: String(stale), signature: signPayload(SECRET, stale, BODY) }),
      ).to.equal(false);
    });

    const malformedTimestamps: Array<string | undefined> = [undefined, '', 'abc', '1700000000.5', '-1700000000', ' 1700000000', '1e9'];
    for (const timestamp of malformedTimestamps) {
      it(`rejects timestamp ${JSON.stringify(timestamp)}`, () => {
        expect(verifySignature({ ...valid, timestamp })).to.equal(false);
      });
    }

    const hex = hexOf(signPayload(SECRET, TIMESTAMP, BODY));
    const malformedSignatures: Array<[string, string | undefined]> = [
      ['missing', undefined],
      ['empty', ''],
      ['without prefix', hex],
      ['with another scheme', 'v0=' + hex],
      ['one hex char short', 'v1=' + hex.slice(0, 63)],
      ['one hex char long', 'v1=' + hex + '0'],
      ['non-hex', 'v1=' + 'g' + hex.slice(1)],
      ['with a trailing space', 'v1=' + hex + ' '],
    ];
    for (const [label, signature] of malformedSignatures) {
      it(`rejects a signature ${label}`, () => {
        expect(verifySignature({ ...valid, signature })).to.equal(false);
      });
    }

    it('rejects a signature made with another secret, body or timestamp', () => {
      expect(verifySignature({ ...valid, secret: 'whsec_other' })).to.equal(false);
      expect(verifySignature({ ...valid, rawBody: BODY.replace('Zoë', 'Zoe') })).to.equal(false);
      expect(verifySignature({ ...valid, timestamp: String(TIMESTAMP + 1) })).to.equal(false);
    });
  });
});
