import { expect } from 'chai';
import fc from 'fast-check';
import {
  daySpan, isMarkRank, locateOffset, locateSpan, markedPageStart, markTarget, monthsOfDays, pageDays, pageLowerBound, pageStart, partialDays,
  rankFromOldest, spanParts, utcDay,
  type DayCount, type DayMark, type SpanCount,
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

  describe('months', () => {
    it('reads the months a span covers whole by their counts, and its first and last month by days', () => {
      expect(spanParts({ first: null, last: null })).to.deep.equal({ months: { first: null, last: null }, days: [] });
      expect(spanParts({ first: '2026-03-10', last: null })).to.deep.equal({
        months: { first: '2026-04-01', last: null }, days: [{ first: '2026-03-10', last: '2026-03-31' }],
      });
      expect(spanParts({ first: null, last: '2026-03-10' })).to.deep.equal({
        months: { first: null, last: '2026-02-01' }, days: [{ first: '2026-03-01', last: '2026-03-10' }],
      });
      // a first or last day on the month's edge is still read by days (a partial day is always a day of its own)
      expect(spanParts({ first: '2026-01-01', last: '2026-04-30' })).to.deep.equal({
        months: { first: '2026-02-01', last: '2026-03-01' },
        days: [{ first: '2026-01-01', last: '2026-01-31' }, { first: '2026-04-01', last: '2026-04-30' }],
      });
      expect(spanParts({ first: '2026-01-20', last: '2026-02-03' })).to.deep.equal({
        months: null, days: [{ first: '2026-01-20', last: '2026-01-31' }, { first: '2026-02-01', last: '2026-02-03' }],
      });
      expect(spanParts({ first: '2026-02-03', last: '2026-02-20' })).to.deep.equal({ months: null, days: [{ first: '2026-02-03', last: '2026-02-20' }] });
      expect(spanParts({ first: '2026-02-20', last: '2026-02-03' })).to.deep.equal({ months: null, days: [] });
      expect(spanParts({ first: '2024-02-10', last: '2024-03-01' }).days).to.deep.equal([
        { first: '2024-02-10', last: '2024-02-29' }, { first: '2024-03-01', last: '2024-03-01' },
      ]);
    });

    it('names the months of a span in years 0-99 and in December 9999 as PostgreSQL dates (Date.UTC would put 1900 on the first, +010000 on the second)', () => {
      expect(spanParts({ first: '0050-01-15', last: null })).to.deep.equal({
        months: { first: '0050-02-01', last: null }, days: [{ first: '0050-01-15', last: '0050-01-31' }],
      });
      expect(spanParts({ first: null, last: '0099-12-31' })).to.deep.equal({
        months: { first: null, last: '0099-11-01' }, days: [{ first: '0099-12-01', last: '0099-12-31' }],
      });
      expect(spanParts({ first: '0004-02-03', last: '0004-03-01' }).days).to.deep.equal([
        { first: '0004-02-03', last: '0004-02-29' }, { first: '0004-03-01', last: '0004-03-01' },
      ]);
      // no month before year 1 nor after December 9999 holds a row: none is read whole
      expect(spanParts({ first: null, last: '0001-01-15' })).to.deep.equal({ months: null, days: [{ first: '0001-01-01', last: '0001-01-15' }] });
      expect(spanParts({ first: '9999-12-15', last: null })).to.deep.equal({ months: null, days: [{ first: '9999-12-15', last: '9999-12-31' }] });
      expect(spanParts({ first: '9999-11-15', last: '9999-12-31' })).to.deep.equal({
        months: null, days: [{ first: '9999-11-15', last: '9999-11-30' }, { first: '9999-12-01', last: '9999-12-31' }],
      });
    });

    it('covers every day of a span once, by a month or by a day', () => {
      const day = fc.integer({ min: 0, max: 1500 }).map((n) => utcDay(new Date(Date.UTC(2025, 0, 1) + n * 86_400_000)));
      fc.assert(fc.property(fc.option(day, { nil: null }), fc.option(day, { nil: null }), (first, last) => {
        const parts = spanParts({ first, last });
        const lo = first ?? '2024-06-01';
        const hi = last ?? '2029-06-30';
        for (const d of monthsOfDays('2024-06-01', '2029-06-30').flat()) {
          const byDays = parts.days.filter((r) => r.first <= d && d <= r.last).length;
          const month = `${d.slice(0, 7)}-01`;
          const byMonth = parts.months && (parts.months.first === null || month >= parts.months.first)
            && (parts.months.last === null || month <= parts.months.last) ? 1 : 0;
          expect(byDays + byMonth, d).to.equal(d >= lo && d <= hi ? 1 : 0);
        }
      }), { numRuns: 60 });
    });

    /** A form's days newest first (any count: a drifted day sums below zero), as months and days the way readFormSpans answers. */
    const layout = fc.array(fc.record({ gap: fc.integer({ min: 1, max: 25 }), count: fc.integer({ min: -3, max: 12 }), asDays: fc.boolean() }),
      { maxLength: 60 }).map((entries) => {
      let at = Date.UTC(2026, 5, 30);
      const all = entries.map((e) => {
        at -= e.gap * 86_400_000;
        return { day: utcDay(new Date(at)), count: e.count, asDays: e.asDays };
      });
      // the old reads: every day summing above zero
      const days: DayCount[] = all.filter((d) => d.count > 0).map(({ day, count }) => ({ day, count }));
      // the new: a month whole (its days each at 0 or more) or, as an edge month is, by its days
      const spans: SpanCount[] = [];
      for (const d of all) {
        const month = d.day.slice(0, 7);
        const last = spans[spans.length - 1];
        const whole = all.find((x) => x.day.slice(0, 7) === month)!.asDays === false;
        if (!whole) {
          if (d.count > 0) spans.push({ first: d.day, last: d.day, count: d.count });
        } else if (last && last.first.slice(0, 7) === month && last.first !== last.last) {
          last.count += Math.max(d.count, 0);
        } else {
          const end = utcDay(new Date(Date.UTC(Number(month.slice(0, 4)), Number(month.slice(5, 7)), 0)));
          spans.push({ first: `${month}-01`, last: end, count: Math.max(d.count, 0) });
        }
      }
      return { days, spans: spans.filter((s) => s.count > 0) };
    });

    it('places every page where the day-by-day reads place it, reading the days of at most the two months it lies in', async () => {
      await fc.assert(fc.asyncProperty(layout, fc.nat(400), fc.integer({ min: 1, max: 60 }), fc.boolean(), async ({ days, spans }, offset, limit, bounded) => {
        const reads: SpanCount[][] = [];
        const placed = await pageDays(spans, offset, limit, async (months) => {
          reads.push(months);
          return days.filter((d) => months.some((m) => m.first <= d.day && d.day <= m.last));
        });
        const bounds = { from: bounded && days.length ? new Date(`${days[days.length - 1].day}T06:00:00Z`) : null, until: null };
        expect(locateOffset(placed, offset)).to.deep.equal(locateOffset(days, offset));
        expect(pageLowerBound(placed, offset, limit, bounds)).to.deep.equal(pageLowerBound(days, offset, limit, bounds));
        expect(placed.reduce((n, d) => n + d.count, 0)).to.equal(days.reduce((n, d) => n + d.count, 0));
        expect(reads.length).to.be.at.most(1);
        expect(reads.flat().length).to.be.at.most(2);
      }), { numRuns: 500 });
    });

    it('locates again when a month\'s days no longer sum to its count (rows written between the reads), and ends', async () => {
      const spans: SpanCount[] = [
        { first: '2026-03-01', last: '2026-03-31', count: 5 }, { first: '2026-02-01', last: '2026-02-28', count: 5 },
        { first: '2026-01-01', last: '2026-01-31', count: 5 },
      ];
      expect(locateSpan(spans, 7)).to.deep.equal({ span: spans[1], skip: 2 });
      // February lost three rows since it was counted: the page's last row now lies in January, read next
      const reads: string[][] = [];
      const placed = await pageDays(spans, 6, 2, async (months) => {
        reads.push(months.map((m) => m.first));
        return [{ day: '2026-02-10', count: 2 }, { day: '2026-01-05', count: 5 }];
      });
      expect(reads).to.deep.equal([['2026-02-01'], ['2026-01-01']]);
      expect(locateOffset(placed, 6)).to.deep.equal({ day: { day: '2026-02-10', count: 2 }, skip: 1 });
      expect(locateOffset(placed, 7)).to.deep.equal({ day: { day: '2026-01-05', count: 5 }, skip: 0 });
      // a reader whose months never match their counts: after the rounds, every month is read by days
      let calls = 0;
      const settled = await pageDays(spans, 3, 50, async (months) => {
        calls++;
        return months.map((m) => ({ day: m.first, count: 1 }));
      });
      expect(calls).to.be.at.most(4);
      expect(settled.every((d) => d.day.endsWith('-01'))).to.equal(true);
    });
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
