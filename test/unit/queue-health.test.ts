import { expect } from 'chai';
import { dueSince } from '../../src/ops/queue-health';

describe('dueSince (oldest waiting age)', () => {
  const cases: Array<[string, { timestamp: number; delay?: number; processedOn?: number; attemptsMade: number }, number]> = [
    ['a new job: its creation', { timestamp: 1_000, attemptsMade: 0 }, 1_000],
    ['a delayed job: creation plus delay', { timestamp: 1_000, delay: 500, attemptsMade: 0 }, 1_500],
    ['a job started once but not failed (stalled): its creation', { timestamp: 1_000, processedOn: 9_000, attemptsMade: 0 }, 1_000],
    ['a retry: the start of its previous attempt', { timestamp: 1_000, processedOn: 9_000, attemptsMade: 2 }, 9_000],
  ];
  for (const [label, job, expected] of cases) {
    it(label, () => {
      expect(dueSince({ timestamp: job.timestamp, opts: { delay: job.delay }, processedOn: job.processedOn, attemptsMade: job.attemptsMade })).to.equal(expected);
    });
  }
});
