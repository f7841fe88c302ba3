import { expect } from 'chai';
import { decide, leaseSize } from '../../src/domain/quotas/rate-limiter';
import { hasScope } from '../../src/domain/auth/scopes';
import { extractApiKey, generateApiKey, hashApiKey, looksLikeApiKey } from '../../src/domain/auth/api-keys';

describe('rate decision', () => {
  it('allows up to the limit and reports what remains', () => {
    expect(decide(1, 10, 60_000, 0)).to.deep.equal({ allowed: true, limit: 10, remaining: 9, resetAt: 60, retryAfter: 60 });
    expect(decide(10, 10, 60_000, 59_500)).to.include({ allowed: true, remaining: 0, retryAfter: 1 });
    expect(decide(11, 10, 60_000, 30_000)).to.include({ allowed: false, remaining: 0, retryAfter: 30 });
  });
});

describe('lease size', () => {
  it('reserves a 64th of what is left, at most 64, and one hit alone when little is left', () => {
    expect(leaseSize(2000, 0)).to.equal(31);
    expect(leaseSize(10_000, 0)).to.equal(64);
    expect(leaseSize(2000, 1900)).to.equal(1);
    expect(leaseSize(500, 0)).to.equal(7);
    expect(leaseSize(100, 0)).to.equal(1);
    expect(leaseSize(20, 0)).to.equal(1);
    expect(leaseSize(2000, 2500)).to.equal(1);
  });
});

describe('scopes', () => {
  const table: Array<[string[], string, boolean]> = [
    [['*'], 'webhooks:write', true],
    [['forms:*'], 'forms:read', true],
    [['forms:*'], 'forms:write', true],
    [['forms:*'], 'submissions:read', false],
    [['forms:read'], 'forms:write', false],
    [['submissions:write'], 'submissions:write', true],
    [['submissions:read', 'webhooks:*'], 'webhooks:read', true],
    [[], 'forms:read', false],
  ];
  for (const [granted, required, expected] of table) {
    it(`${JSON.stringify(granted)} ${expected ? 'grants' : 'does not grant'} ${required}`, () => {
      expect(hasScope(granted, required as any)).to.equal(expected);
    });
  }
});

describe('API keys', () => {
  it('are fs_live_ plus 40 base62 characters, hashed for storage', () => {
    const k = generateApiKey();
    expect(k.key).to.match(/^fs_live_[0-9A-Za-z]{40}$/);
    expect(k.keyHash).to.equal(hashApiKey(k.key)).and.to.match(/^[0-9a-f]{64}$/);
    expect(k.last4).to.equal(k.key.slice(-4));
    expect(looksLikeApiKey(k.key)).to.equal(true);
    expect(looksLikeApiKey('fs_live_short')).to.equal(false);
    expect(generateApiKey().key).to.not.equal(k.key);
  });

  it('are read from a bearer token or X-API-Key', () => {
    expect(extractApiKey({ authorization: 'Bearer abc' })).to.equal('abc');
    expect(extractApiKey({ authorization: 'bearer  abc ' })).to.equal('abc');
    expect(extractApiKey({ 'x-api-key': 'xyz' })).to.equal('xyz');
    expect(extractApiKey({ authorization: 'Basic abc' })).to.equal(null);
    expect(extractApiKey({})).to.equal(null);
  });
});
