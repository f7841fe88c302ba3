import { expect } from 'chai';
import fc from 'fast-check';
import { daySpan, locateOffset, pageUpperBound, partialDays, utcDay, type DayCount } from '../../src/domain/submissions/day-windows';

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
    expect(locateOffset(days, 0)).to.deep.equal({ day: '2026-03-03', skip: 0 });
    expect(locateOffset(days, 1)).to.deep.equal({ day: '2026-03-03', skip: 1 });
    expect(locateOffset(days, 2)).to.deep.equal({ day: '2026-03-02', skip: 0 });
    expect(locateOffset(days, 6)).to.deep.equal({ day: '2026-03-02', skip: 4 });
    expect(locateOffset(days, 7)).to.deep.equal({ day: '2026-03-01', skip: 0 });
    expect(locateOffset(days, 8)).to.equal(null);
    expect(locateOffset([], 0)).to.equal(null);
  });

  it('locates the same row as counting through every row would', () => {
    fc.assert(fc.property(fc.array(fc.integer({ min: 1, max: 20 }), { maxLength: 30 }), fc.nat(400), (counts, offset) => {
      const days = counts.map((count, i) => ({ day: utcDay(new Date(Date.UTC(2026, 0, 30 - i))), count }));
      const rows = days.flatMap((d) => Array.from({ length: d.count }, (_, k) => ({ day: d.day, k })));
      const row = rows[offset];
      expect(locateOffset(days, offset)).to.deep.equal(row ? { day: row.day, skip: row.k } : null);
    }));
  });

  it('ends a page at its day\'s end, or at the bounds\' own end when that comes first', () => {
    expect(pageUpperBound('2026-03-01', null)).to.deep.equal(at('2026-03-02T00:00:00Z'));
    expect(pageUpperBound('2026-03-01', at('2026-03-01T12:00:00Z'))).to.deep.equal(at('2026-03-01T12:00:00Z'));
    expect(pageUpperBound('2026-03-01', at('2026-03-05T00:00:00Z'))).to.deep.equal(at('2026-03-02T00:00:00Z'));
  });
});
