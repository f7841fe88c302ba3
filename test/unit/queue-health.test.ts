import { expect } from 'chai';
import { dueOfDelayedScore, dueSince } from '../../src/ops/queue-health';

describe('dueSince (oldest waiting age)', () => {
  const cases: Array<[string, { timestamp: number; delay?: number; processedOn?: number; attemptsMade: number; dueAt?: number }, number]> = [
    ['a new job: its creation', { timestamp: 1_000, attemptsMade: 0 }, 1_000],
    ['a delayed job: creation plus delay', { timestamp: 1_000, delay: 500, attemptsMade: 0 }, 1_500],
    ['a job started once but not failed (stalled): its creation', { timestamp: 1_000, processedOn: 9_000, attemptsMade: 0 }, 1_000],
    ['a retry: the start of its previous attempt', { timestamp: 1_000, processedOn: 9_000, attemptsMade: 2 }, 9_000],
    ['a job held by its processor (throttled): the end of the hold, not its creation', { timestamp: 1_000, processedOn: 2_000, attemptsMade: 0, dueAt: 3_602_000 }, 3_602_000],
    ['a held job that then failed and waits for its retry: the start of that attempt', { timestamp: 1_000, processedOn: 3_700_000, attemptsMade: 1, dueAt: 3_602_000 }, 3_700_000],
  ];
  for (const [label, job, expected] of cases) {
    it(label, () => {
      expect(dueSince({ timestamp: job.timestamp, opts: { delay: job.delay }, processedOn: job.processedOn, attemptsMade: job.attemptsMade, dueAt: job.dueAt })).to.equal(expected);
    });
  }
});

describe('dueOfDelayedScore', () => {
  it('reads the due time BullMQ bakes into a delayed job\'s score (getDelayedScore.lua: ms * 0x1000 + n)', () => {
    expect(dueOfDelayedScore(1_764_000_000_000 * 0x1000 + 17)).to.equal(1_764_000_000_000);
  });
});
