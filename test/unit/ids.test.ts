import { expect } from 'chai';
import { ID_TIME_MARGIN_MS, newId, newTimeOrderedId, randomBase62, timeOfId, timeWindowOfId } from '../../src/lib/ids';
import { retentionCutoff } from '../../src/domain/submissions/partitions';

describe('ids', () => {
  it('makes time-ordered ids of the same shape as random ones, sortable by creation time', () => {
    const start = Date.UTC(2026, 10, 22, 23, 0, 0);
    const times = [0, 1, 2, 61, 3_844, 999_999, 86_400_000, 31_536_000_000].map((ms) => new Date(start + ms));
    const ids = times.map((t) => newTimeOrderedId('sub', t));
    for (const id of ids) expect(id).to.match(/^sub_[0-9A-Za-z]{20}$/).and.have.length(newId('sub').length);
    expect([...ids].sort()).to.deep.equal(ids);
    expect(ids.map(timeOfId)).to.deep.equal(times);
  });

  it('keeps ids made in the same millisecond apart', () => {
    const at = new Date();
    const ids = new Set(Array.from({ length: 1000 }, () => newTimeOrderedId('sub', at)));
    expect(ids.size).to.equal(1000);
  });

  it('draws every character uniformly from the base62 alphabet, across refills of the random pool', () => {
    const counts = new Map<string, number>();
    // 20,000 ids of 20 characters use ~100 refills of the 4 KiB pool.
    for (let i = 0; i < 20_000; i++) for (const c of randomBase62(20)) counts.set(c, (counts.get(c) ?? 0) + 1);
    expect(counts.size).to.equal(62);
    const expected = (20_000 * 20) / 62;
    for (const n of counts.values()) expect(Math.abs(n - expected) / expected).to.be.lessThan(0.1);
    expect(new Set(Array.from({ length: 10_000 }, () => newId('sub'))).size).to.equal(10_000);
  });

  it('keeps the current month and the retention months before it', () => {
    expect(retentionCutoff(6, new Date('2026-11-22T10:00:00Z')).toISOString()).to.equal('2026-05-01T00:00:00.000Z');
    expect(retentionCutoff(1, new Date('2026-01-31T23:59:59Z')).toISOString()).to.equal('2025-12-01T00:00:00.000Z');
    expect(retentionCutoff(12, new Date('2026-03-01T00:00:00Z')).toISOString()).to.equal('2025-03-01T00:00:00.000Z');
  });

  it('bounds the created_at of a time-ordered id by its time and the margin, and nothing else', () => {
    const at = new Date('2026-11-15T12:34:56.789Z');
    const window = timeWindowOfId(newTimeOrderedId('sub', at));
    expect(window).to.deep.equal({ from: new Date(at.getTime() - ID_TIME_MARGIN_MS), until: new Date(at.getTime() + ID_TIME_MARGIN_MS + 1) });
    expect(timeWindowOfId(newTimeOrderedId('sub', at), 0)).to.deep.equal({ from: at, until: new Date(at.getTime() + 1) });
    for (const notAnId of ['sub_short', 'sub_old123', 'sub_' + 'x'.repeat(21), 'sub_' + '-'.repeat(20), '', 'nounderscore12345678901']) {
      expect(timeWindowOfId(notAnId), notAnId).to.equal(null);
    }
  });
});
