import { expect } from 'chai';
import { createHmac, randomBytes } from 'node:crypto';
import { analyticsTokenKey, ANALYTICS_TOKEN_TTL_MS, issueAnalyticsToken, verifyAnalyticsToken } from '../../src/domain/public/analytics-token';
import { completionRate, isAnalyticsEvent } from '../../src/domain/forms/analytics';
import { utcDay } from '../../src/domain/submissions/day-windows';

describe('analytics token', () => {
  const encryptionKey = randomBytes(32);
  const key = analyticsTokenKey(encryptionKey);
  const now = Date.parse('2026-11-22T10:00:00Z');
  const token = issueAnalyticsToken(key, 'form_abc', now);

  it('derives a key of its own from the encryption key', () => {
    expect(key.equals(encryptionKey)).to.equal(false);
    expect(analyticsTokenKey(encryptionKey).equals(key)).to.equal(true);
  });

  it('is base64url payload and signature naming the form and its expiry', () => {
    expect(token).to.match(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    const payload = JSON.parse(Buffer.from(token.split('.')[0], 'base64url').toString());
    expect(payload).to.deep.equal({ f: 'form_abc', e: (now + ANALYTICS_TOKEN_TTL_MS) / 1000 });
  });

  it('verifies for its form until it expires', () => {
    expect(verifyAnalyticsToken(key, token, 'form_abc', now)).to.equal(true);
    expect(verifyAnalyticsToken(key, token, 'form_abc', now + ANALYTICS_TOKEN_TTL_MS - 1000)).to.equal(true);
    expect(verifyAnalyticsToken(key, token, 'form_abc', now + ANALYTICS_TOKEN_TTL_MS)).to.equal(false);
  });

  const [payload, signature] = token.split('.');
  function signed(text: string): string {
    const encoded = Buffer.from(text).toString('base64url');
    return `${encoded}.${createHmac('sha256', key).update(encoded).digest('base64url')}`;
  }
  const forgedPayload = Buffer.from(JSON.stringify({ f: 'form_other', e: 9999999999 })).toString('base64url');
  const rejected: [string, unknown, string?][] = [
    ['another form', token, 'form_other'],
    ['a key from another encryption key', issueAnalyticsToken(analyticsTokenKey(randomBytes(32)), 'form_abc', now)],
    ['a payload swapped under the signature', `${forgedPayload}.${signature}`],
    ['a truncated signature', `${payload}.${signature.slice(0, -2)}`],
    ['no signature', payload],
    ['an extra segment', `${token}.x`],
    ['an empty string', ''],
    ['a non-string', 42],
    ['a correctly signed payload that is not JSON', signed('not json')],
    ['a correctly signed payload without an expiry', signed(JSON.stringify({ f: 'form_abc' }))],
    ['a huge token', `${'a'.repeat(600)}.${signature}`],
  ];
  for (const [name, candidate, formId] of rejected) {
    it(`refuses ${name}`, () => expect(verifyAnalyticsToken(key, candidate, formId ?? 'form_abc', now)).to.equal(false));
  }
});

describe('analytics counters', () => {
  const rates: [number, number, number | null][] = [[0, 0, null], [5, 0, null], [1, 3, 0.3333], [3, 4, 0.75], [4, 4, 1], [6, 4, 1]];
  for (const [completions, starts, expected] of rates) {
    it(`completionRate(${completions}, ${starts}) = ${expected}`, () => expect(completionRate(completions, starts)).to.equal(expected));
  }

  it('accepts only view, start and complete', () => {
    expect(['view', 'start', 'complete'].every(isAnalyticsEvent)).to.equal(true);
    expect(['views', 'submit', '', null, 1].some(isAnalyticsEvent)).to.equal(false);
  });

  it('counts a day in UTC', () => {
    expect(utcDay(new Date('2026-11-22T23:59:59-05:00'))).to.equal('2026-11-23');
  });
});
