import { expect } from 'chai';
import { isoTimestamp } from '../../src/lib/logger';

describe('isoTimestamp (the log lines\' time)', () => {
  const asPino = (ms: number) => `,"time":"${new Date(ms).toISOString()}"`;

  it('writes what pino\'s isoTime writes, within a second, across seconds and going back in time', () => {
    const start = Date.UTC(2026, 10, 26, 23, 59, 58, 990);
    const instants = [
      ...Array.from({ length: 3000 }, (_, i) => start + i), // through midnight, a month's and a day's end
      start, start - 1, start + 1500, Date.UTC(2024, 1, 29, 12), Date.UTC(1999, 11, 31, 23, 59, 59, 999), 0, 1, 999, 1000,
      Date.UTC(9999, 11, 31, 23, 59, 59, 999), -1, -1001, 253_402_300_800_000, Date.now(),
    ];
    for (const ms of instants) expect(isoTimestamp(ms), String(ms)).to.equal(asPino(ms));
  });

  it('reads the clock when given no instant', () => {
    const before = Date.now();
    const written = Date.parse(isoTimestamp().slice(9, -1));
    expect(written).to.be.within(before, Date.now());
  });
});
