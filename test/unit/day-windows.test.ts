import { expect } from 'chai';
import fc from 'fast-check';
import { daySpan, locateOffset, monthsOfDays, pageLowerBound, pageStart, partialDays, utcDay, type DayCount } from '../../src/domain/submissions/day-windows';

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
});
