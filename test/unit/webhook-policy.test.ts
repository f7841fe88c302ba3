import { expect } from 'chai';
import { decideCrmSync } from '../../src/domain/crm/policy';
import { excerpt, maxAttempts, parseRetryAfter, type AttemptFacts } from '../../src/domain/outbound/attempt';
import { decideDelivery, MAX_PAUSE_MS, operationalEventsRefusal, pauseAfter } from '../../src/domain/webhooks/policy';

const SCHEDULE = [5_000, 300_000, 1_800_000];
const NOW = new Date('2026-11-10T12:00:00Z');
const DAY = 86_400_000;

function facts(extra: Partial<AttemptFacts> & { failingSince?: Date | null } = {}) {
  return {
    statusCode: 500, retryAfterMs: null, attempt: 1, maxAttempts: maxAttempts(SCHEDULE), schedule: SCHEDULE,
    failingSince: null, now: NOW, ...extra,
  };
}

describe('delivery policy', () => {
  it('allows one attempt more than there are delays', () => {
    expect(maxAttempts(SCHEDULE)).to.equal(4);
    expect(maxAttempts([5e3, 3e5, 18e5, 72e5, 18e6, 36e6, 504e5, 72e6, 864e5])).to.equal(10);
  });

  describe('parseRetryAfter', () => {
    const nowMs = Date.parse('2026-11-10T12:00:00Z');
    const cases: [string | undefined, number | null][] = [
      [undefined, null],
      ['7', 7_000],
      [' 0 ', 0],
      ['Tue, 10 Nov 2026 12:00:30 GMT', 30_000],
      ['Tue, 10 Nov 2026 11:00:00 GMT', 0],
      ['soon', null],
      ['-5', null],
    ];
    for (const [value, expected] of cases) {
      it(`${JSON.stringify(value)} → ${expected}`, () => expect(parseRetryAfter(value, nowMs)).to.equal(expected));
    }
  });

  describe('operationalEventsRefusal', () => {
    it('lets organization-wide webhooks take operational events, and form-tied ones only the submission events', () => {
      expect(operationalEventsRefusal(['endpoint.disabled', 'message.attempt.failing'], null)).to.equal(null);
      expect(operationalEventsRefusal(['submission.created', 'submission.deleted'], 'form_1')).to.equal(null);
      for (const event of ['endpoint.disabled', 'message.attempt.failing', 'message.attempt.exhausted', 'message.attempt.recovered']) {
        expect(operationalEventsRefusal(['submission.created', event], 'form_1')).to.be.a('string').and.include(event);
      }
    });
  });

  describe('pauseAfter', () => {
    it('pauses a webhook only for a 429 that names a Retry-After, at most a day', () => {
      expect(pauseAfter(429, 2_000)).to.equal(2_000);
      expect(pauseAfter(429, 10 * MAX_PAUSE_MS)).to.equal(MAX_PAUSE_MS);
      expect(pauseAfter(429, null)).to.equal(null);
      expect(pauseAfter(429, 0)).to.equal(null);
      expect(pauseAfter(503, 2_000)).to.equal(null);
      expect(pauseAfter(500, 2_000)).to.equal(null);
      expect(pauseAfter(null, null)).to.equal(null);
    });
  });

  describe('decideDelivery', () => {
    const cases: [string, ReturnType<typeof facts>, unknown][] = [
      ['200 succeeds', facts({ statusCode: 200 }), { kind: 'succeeded' }],
      ['299 succeeds', facts({ statusCode: 299 }), { kind: 'succeeded' }],
      ['301 is a failure (redirects are not followed)', facts({ statusCode: 301 }), { kind: 'retry', delayMs: 5_000, retryAfterMs: null }],
      ['no answer is retried on schedule', facts({ statusCode: null, attempt: 2 }), { kind: 'retry', delayMs: 300_000, retryAfterMs: null }],
      ['429 Retry-After above the delay is honoured', facts({ statusCode: 429, retryAfterMs: 8_000 }), { kind: 'retry', delayMs: 8_000, retryAfterMs: 8_000 }],
      ['503 Retry-After is capped at twice the delay', facts({ statusCode: 503, retryAfterMs: 60_000 }), { kind: 'retry', delayMs: 10_000, retryAfterMs: 60_000 }],
      ['503 Retry-After below the delay waits the delay', facts({ statusCode: 503, retryAfterMs: 1_000 }), { kind: 'retry', delayMs: 5_000, retryAfterMs: 1_000 }],
      ['Retry-After on a 500 is ignored', facts({ statusCode: 500, retryAfterMs: 8_000 }), { kind: 'retry', delayMs: 5_000, retryAfterMs: null }],
      ['the last attempt fails for good', facts({ attempt: 4 }), { kind: 'failed' }],
      ['410 disables at once', facts({ statusCode: 410 }), { kind: 'disable', reason: 'gone' }],
      ['failing for just under 5 days keeps retrying', facts({ failingSince: new Date(NOW.getTime() - 5 * DAY + 1) }), { kind: 'retry', delayMs: 5_000, retryAfterMs: null }],
      ['failing for over 5 days disables', facts({ failingSince: new Date(NOW.getTime() - 5 * DAY - 1) }), { kind: 'disable', reason: 'failing_too_long' }],
      ['a success clears any streak', facts({ statusCode: 204, failingSince: new Date(NOW.getTime() - 9 * DAY) }), { kind: 'succeeded' }],
    ];
    for (const [label, input, expected] of cases) {
      it(label, () => expect(decideDelivery(input)).to.deep.equal(expected));
    }
  });

  describe('decideCrmSync', () => {
    const cases: [string, AttemptFacts, unknown][] = [
      ['200 succeeds', facts({ statusCode: 200 }), { kind: 'succeeded' }],
      ['401 fails without retry', facts({ statusCode: 401 }), { kind: 'failed', permanent: true }],
      ['400 fails without retry', facts({ statusCode: 400 }), { kind: 'failed', permanent: true }],
      ['429 retries and pauses the connection as long', facts({ statusCode: 429, retryAfterMs: 7_000 }), { kind: 'retry', delayMs: 7_000, retryAfterMs: 7_000, pauseMs: 7_000 }],
      ['500 retries without a pause', facts({ statusCode: 500 }), { kind: 'retry', delayMs: 5_000, retryAfterMs: null, pauseMs: null }],
      ['the last attempt fails for good', facts({ statusCode: 502, attempt: 4 }), { kind: 'failed', permanent: false }],
    ];
    for (const [label, input, expected] of cases) {
      it(label, () => expect(decideCrmSync(input)).to.deep.equal(expected));
    }
  });

  describe('excerpt', () => {
    it('keeps short bodies and drops empty ones', () => {
      expect(excerpt('ok')).to.equal('ok');
      expect(excerpt('')).to.equal(null);
    });

    it('cuts at 1 KB without splitting a character', () => {
      const cut = excerpt('a' + 'é'.repeat(1000))!;
      expect(Buffer.byteLength(cut)).to.be.at.most(1024);
      expect(cut).to.equal('a' + 'é'.repeat(511));
    });
  });
});
