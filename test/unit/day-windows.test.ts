import { expect } from 'chai';
import fc from 'fast-check';
import {
  daySpan, isMarkRank, locateOffset, markedPageStart, markTarget, monthsOfDays, pageLowerBound, pageStart, partialDays, rankFromOldest, utcDay,
  type DayCount, type DayMark,
} from '../../src/domain/submissions/day-windows';

const at = (iso: string) => new Date(iso);

describe('day windows (pure)', () => {
  it('spans from the first day touched to the last, an until at midnight ending the day before', () => {
    expect(daySpan({ from: null, until: null })).to.deep.equal({ first: null, last: null });
    expect(daySpan({ from: at('2026-03-01T00:00:00Z'), until: at('2026-03-04T00:00:00Z') }))
      .to.deep.equal({ first: '2026-03-01', last: '2026-03-03' });
    expect(daySpan({ from: at('2026-03-01T13:00:00Z'), until: at('2026-03-04T00:00:00.001Z') }))
      .to.deep.equal({ first: '2026-03-01', last: '2026-03-04' });
  });

  it('finds no partial day in whole-day bounds, and clips the first and last day of date-time bounds', () => {
    expect(partialDays({ from: at('2026-03-01T00:00:00Z'), until: at('2026-03-02T00:00:00Z') })).to.deep.equal([]);
    expect(partialDays({ from: null, until: null })).to.deep.equal([]);
    expect(partialDays({ from: at('2026-03-01T10:00:00Z'), until: at('2026-03-03T06:30:00Z') })).to.deep.equal([
      { day: '2026-03-01', from: at('2026-03-01T10:00:00Z'), until: at('2026-03-02T00:00:00Z') },
      { day: '2026-03-03', from: at('2026-03-03T00:00:00Z'), until: at('2026-03-03T06:30:00Z') },
    ]);
    // both bounds inside one day: one window
    expect(partialDays({ from: at('2026-03-01T10:00:00Z'), until: at('2026-03-01T11:00:00Z') })).to.deep.equal([
      { day: '2026-03-01', from: at('2026-03-01T10:00:00Z'), until: at('2026-03-01T11:00:00Z') },
    ]);
    expect(partialDays({ from: null, until: at('2026-03-01T11:00:00Z') })).to.deep.equal([
      { day: '2026-03-01', from: at('2026-03-01T00:00:00Z'), until: at('2026-03-01T11:00:00Z') },
    ]);
    expect(partialDays({ from: at('2026-03-02T10:00:00Z'), until: at('2026-03-01T11:00:00Z') })).to.deep.equal([]);
  });

  it('locates an offset in the day that holds it, skipping whole days', () => {
    const days: DayCount[] = [{ day: '2026-03-03', count: 2 }, { day: '2026-03-02', count: 5 }, { day: '2026-03-01', count: 1 }];
    expect(locateOffset(days, 0)).to.deep.equal({ day: days[0], skip: 0 });
    expect(locateOffset(days, 1)).to.deep.equal({ day: days[0], skip: 1 });
    expect(locateOffset(days, 2)).to.deep.equal({ day: days[1], skip: 0 });
    expect(locateOffset(days, 6)).to.deep.equal({ day: days[1], skip: 4 });
    expect(locateOffset(days, 7)).to.deep.equal({ day: days[2], skip: 0 });
    expect(locateOffset(days, 8)).to.equal(null);
    expect(locateOffset([], 0)).to.equal(null);
  });

  it('locates the same row as counting through every row would', () => {
    fc.assert(fc.property(fc.array(fc.integer({ min: 1, max: 20 }), { maxLength: 30 }), fc.nat(400), (counts, offset) => {
      const days = counts.map((count, i) => ({ day: utcDay(new Date(Date.UTC(2026, 0, 30 - i))), count }));
      const rows = days.flatMap((d) => Array.from({ length: d.count }, (_, k) => ({ day: d, k })));
      const row = rows[offset];
      expect(locateOffset(days, offset)).to.deep.equal(row ? { day: row.day, skip: row.k } : null);
    }));
  });

  it('starts a page from the nearer end of its day, within the bounds', () => {
    const day = { day: '2026-03-01', count: 10 };
    expect(pageStart({ day, skip: 0 }, { from: null, until: null })).to.deep.equal(
      { from: at('2026-03-01T00:00:00Z'), until: at('2026-03-02T00:00:00Z'), skip: 0, fromOldest: false });
    expect(pageStart({ day, skip: 4 }, { from: null, until: null })).to.include({ skip: 4, fromOldest: false });
    expect(pageStart({ day, skip: 5 }, { from: null, until: null })).to.include({ skip: 4, fromOldest: true });
    expect(pageStart({ day, skip: 9 }, { from: null, until: null })).to.include({ skip: 0, fromOldest: true });
    expect(pageStart({ day, skip: 2 }, { from: at('2026-03-01T06:00:00Z'), until: at('2026-03-01T18:00:00Z') })).to.deep.equal(
      { from: at('2026-03-01T06:00:00Z'), until: at('2026-03-01T18:00:00Z'), skip: 2, fromOldest: false });
    expect(pageStart({ day, skip: 2 }, { from: at('2026-02-20T00:00:00Z'), until: at('2026-03-05T00:00:00Z') })).to.include(
      { skip: 2, fromOldest: false });
  });

  it('names the same row from either end: the skip-th newest is the (count - 1 - skip)-th oldest', () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 1000 }), fc.nat(999), (count, k) => {
      const skip = k % count;
      const start = pageStart({ day: { day: '2026-03-01', count }, skip }, { from: null, until: null });
      expect(start.skip).to.be.at.most(Math.floor(count / 2));
      expect(start.fromOldest ? count - 1 - start.skip : start.skip).to.equal(skip);
    }));
  });
  it('goes through the days from first to last a month at a time, every day once', () => {
    expect(monthsOfDays('2026-01-30', '2026-03-02')).to.deep.equal([
      ['2026-01-30', '2026-01-31'],
      Array.from({ length: 28 }, (_, i) => `2026-02-${String(i + 1).padStart(2, '0')}`),
      ['2026-03-01', '2026-03-02'],
    ]);
    expect(monthsOfDays('2024-02-29', '2024-02-29')).to.deep.equal([['2024-02-29']]);
    expect(monthsOfDays('2026-05-02', '2026-05-01')).to.deep.equal([]);
    fc.assert(fc.property(fc.integer({ min: 0, max: 20_000 }), fc.integer({ min: 0, max: 800 }), (start, length) => {
      const first = utcDay(new Date(start * 86_400_000));
      const last = utcDay(new Date((start + length) * 86_400_000));
      const months = monthsOfDays(first, last);
      const days = months.flat();
      expect(days).to.have.length(length + 1);
      expect(days[0]).to.equal(first);
      expect(days[days.length - 1]).to.equal(last);
      for (const month of months) expect(new Set(month.map((d) => d.slice(0, 7))).size).to.equal(1);
      expect(new Set(months.map((m) => m[0].slice(0, 7))).size).to.equal(months.length);
    }));
  });

  it('bounds a page by the oldest day it spans: the day of its last row, the oldest day at the end, never before from', () => {
    const days: DayCount[] = [{ day: '2026-03-05', count: 10 }, { day: '2026-03-03', count: 5 }, { day: '2026-01-20', count: 40 }];
    const open = { from: null, until: null };
    expect(pageLowerBound(days, 0, 10, open)).to.deep.equal(at('2026-03-05T00:00:00Z'));
    expect(pageLowerBound(days, 0, 11, open)).to.deep.equal(at('2026-03-03T00:00:00Z'));
    expect(pageLowerBound(days, 9, 6, open)).to.deep.equal(at('2026-03-03T00:00:00Z'));
    expect(pageLowerBound(days, 9, 7, open)).to.deep.equal(at('2026-01-20T00:00:00Z'));
    expect(pageLowerBound(days, 50, 100, open)).to.deep.equal(at('2026-01-20T00:00:00Z'));
    expect(pageLowerBound(days, 55, 10, open)).to.equal(null);
    expect(pageLowerBound([], 0, 10, open)).to.equal(null);
    expect(pageLowerBound(days, 20, 50, { from: at('2026-01-20T10:00:00Z'), until: null })).to.deep.equal(at('2026-01-20T10:00:00Z'));
  });

  it('bounds every page so that the rows counting through every row would put on it lie within', () => {
    fc.assert(fc.property(
      fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 8 }), fc.nat(40), fc.integer({ min: 1, max: 10 }),
      (counts, offset, limit) => {
        const days = counts.map((count, i) => ({ day: utcDay(new Date(Date.UTC(2026, 0, 31 - i * 3))), count }));
        const rows = days.flatMap((d) => Array.from({ length: d.count }, () => d.day));
        const page = rows.slice(offset, offset + limit);
        const lower = pageLowerBound(days, offset, limit, { from: null, until: null });
        if (!page.length) return lower === null;
        return lower !== null && page.every((day) => new Date(`${day}T00:00:00Z`) >= lower)
          && utcDay(lower) === page[page.length - 1];
      }));
  });

  describe('day marks', () => {
    const whole = { from: null, until: null };
    const rules = { every: 10, minRows: 100 };
    const day = (count: number): DayCount => ({ day: '2026-03-02', count });
    const mark = (rank: number): DayMark => ({ rank, createdAt: '2026-03-02T10:00:00.000000Z', id: `sub_${rank}` });

    it('marks every K-th rank from the oldest row, the oldest itself not', () => {
      expect([0, 1, 9, 10, 11, 20, 25, 30].filter((r) => isMarkRank(r, 10))).to.deep.equal([10, 20, 30]);
      expect(rankFromOldest(100, 0)).to.equal(99);
      expect(rankFromOldest(100, 99)).to.equal(0);
    });

    it('looks for a mark only on a whole busy day whose both ends lie K rows or more away', () => {
      expect(markTarget({ day: day(1000), skip: 500 }, whole, rules)).to.equal(499);
      // a quiet day: never
      expect(markTarget({ day: day(99), skip: 50 }, whole, rules)).to.equal(null);
      // near either end the walk from that end is as short
      expect(markTarget({ day: day(1000), skip: 9 }, whole, rules)).to.equal(null);
      expect(markTarget({ day: day(1000), skip: 990 }, whole, rules)).to.equal(null);
      expect(markTarget({ day: day(1000), skip: 989 }, whole, rules)).to.equal(10);
      // a day the bounds cover in part: its ranks are not the day's
      expect(markTarget({ day: day(1000), skip: 500 }, { from: at('2026-03-02T06:00:00Z'), until: null }, rules)).to.equal(null);
      expect(markTarget({ day: day(1000), skip: 500 }, { from: null, until: at('2026-03-02T23:00:00Z') }, rules)).to.equal(null);
      // bounds of whole days around it
      expect(markTarget({ day: day(1000), skip: 500 }, { from: at('2026-03-02T00:00:00Z'), until: at('2026-03-03T00:00:00Z') }, rules))
        .to.equal(499);
    });

    it('walks forward from the mark, within the day, and not from a mark past the target or farther than an end', () => {
      const located = { day: day(1000), skip: 500 };
      expect(markedPageStart(located, whole, 499, mark(490))).to.deep.equal({
        from: at('2026-03-02T00:00:00Z'), until: at('2026-03-03T00:00:00Z'), skip: 9, fromOldest: true,
        after: { createdAt: '2026-03-02T10:00:00.000000Z', id: 'sub_490' },
      });
      expect(markedPageStart(located, whole, 499, null)).to.equal(null);
      expect(markedPageStart(located, whole, 499, mark(500))).to.equal(null);
      // the marks stop short of the target (not built that far yet): the nearer end is as near
      expect(markedPageStart(located, whole, 499, mark(0))).to.equal(null);
      expect(markedPageStart(located, whole, 499, mark(1))?.skip).to.equal(498);
    });

    it('lands on the target from the mark the store would choose, in fewer than K entries, whatever the day and offset', () => {
      fc.assert(fc.property(fc.integer({ min: 2, max: 50 }), fc.integer({ min: 2, max: 5000 }), fc.nat(4999), fc.nat(5000),
        (every, count, skipAt, builtUpTo) => {
          const skip = skipAt % count;
          const located = { day: day(count), skip };
          const target = markTarget(located, whole, { every, minRows: 2 });
          if (target === null) return Math.min(skip, rankFromOldest(count, skip)) < every;
          // the marks built so far: every K-th rank up to builtUpTo; the store answers the largest at or below the target
          const built = Array.from({ length: count }, (_, r) => r).filter((r) => isMarkRank(r, every) && r <= builtUpTo);
          const chosen = built.filter((r) => r <= target).pop();
          const start = markedPageStart(located, whole, target, chosen === undefined ? null : mark(chosen));
          if (!start) return chosen === undefined || target - chosen >= Math.min(skip, target);
          return chosen! + start.skip === target && start.fromOldest && start.skip < Math.min(skip, target)
            && (builtUpTo < target || start.skip < every);
        }));
    });
  });
});
