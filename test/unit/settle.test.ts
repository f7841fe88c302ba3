import { UnrecoverableError } from 'bullmq';
import { expect } from 'chai';
import { RetryLaterError } from '../../workers/backoff';
import { attemptEnd, settle } from '../../workers/settle';

type Decision = { kind: 'succeeded' } | { kind: 'retry'; delayMs: number } | { kind: 'exhausted'; attempts: number } | { kind: 'disabled' };

const giveUp = (decision: { kind: 'exhausted'; attempts: number } | { kind: 'disabled' }, reason: string) =>
  (decision.kind === 'exhausted' ? `gave up after ${decision.attempts} attempts: ${reason}` : `webhook disabled: ${reason}`);

const run = (decision: Decision, statusCode: number | null = null, error: string | null = null) => ({ decision, result: { statusCode, error } });

describe('what an attempt\'s decision means for its work (attemptEnd, settle)', () => {
  it('a success ends with the response status', () => {
    expect(attemptEnd(run({ kind: 'succeeded' }, 204), giveUp)).to.deep.equal({ kind: 'succeeded', statusCode: 204 });
    expect(settle(run({ kind: 'succeeded' }, 204), giveUp)).to.deep.equal({ statusCode: 204 });
  });

  it('a retry carries the delay the row recorded and the reason', () => {
    expect(attemptEnd(run({ kind: 'retry', delayMs: 30_000 }, 503, 'HTTP 503'), giveUp))
      .to.deep.equal({ kind: 'retry', delayMs: 30_000, reason: 'HTTP 503' });
    const thrown = (() => { try { settle(run({ kind: 'retry', delayMs: 30_000 }, 503, 'HTTP 503'), giveUp); } catch (err) { return err; } return null; })();
    expect(thrown).to.be.instanceOf(RetryLaterError);
    expect((thrown as RetryLaterError).delayMs).to.equal(30_000);
    expect((thrown as Error).message).to.equal('HTTP 503');
  });

  it('any other decision gives up with the caller\'s message, which a job of its own ends without a retry', () => {
    expect(attemptEnd(run({ kind: 'exhausted', attempts: 8 }, null, 'timeout'), giveUp))
      .to.deep.equal({ kind: 'gave_up', message: 'gave up after 8 attempts: timeout' });
    expect(attemptEnd(run({ kind: 'disabled' }), giveUp)).to.deep.equal({ kind: 'gave_up', message: 'webhook disabled: ' });
    expect(() => settle(run({ kind: 'exhausted', attempts: 8 }, null, 'timeout'), giveUp))
      .to.throw(UnrecoverableError, 'gave up after 8 attempts: timeout');
  });
});
