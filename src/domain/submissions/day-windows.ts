// Pure rules of the day counts (day-counts.ts): which days of a date-time filter the counts cannot
// answer, which of its months they answer whole, and where a page at some offset starts. The list,
// analytics and the usage roll-up read months and days, not rows (src/README.md, day counts).

const DAY_MS = 86_400_000;

/** A form's stored submissions on one UTC day (`YYYY-MM-DD`). */
export interface DayCount {
  day: string;
  count: number;
}

/** Part of one UTC day, [from, until): counted from the rows. */
export interface PartialDay {
  day: string;
  from: Date;
  until: Date;
}

/** A list's bounds: `from` inclusive, `until` exclusive; null is open. */
export interface TimeBounds {
  from: Date | null;
  until: Date | null;
}

export function utcDay(at: Date): string {
  return at.toISOString().slice(0, 10);
}

function dayStart(day: string): Date {
  return new Date(`${day}T00:00:00.000Z`);
}

function isMidnight(at: Date): boolean {
  return at.getTime() % DAY_MS === 0;
}

/** The first and last UTC day the bounds touch (null: open); the last is the day before an `until` at midnight. */
export function daySpan({ from, until }: TimeBounds): { first: string | null; last: string | null } {
  return { first: from ? utcDay(from) : null, last: until ? utcDay(new Date(until.getTime() - 1)) : null };
}

/**
 * The days the bounds cover only in part (a date-time rather than a date): at most the first and
 * the last, one window when both fall on the same day, none for empty bounds.
 */
export function partialDays({ from, until }: TimeBounds): PartialDay[] {
  if (from && until && from >= until) return [];
  const windows = new Map<string, PartialDay>();
  const clip = (day: string): PartialDay => ({ day, ...dayWindow(day, { from, until }) });
  if (from && !isMidnight(from)) windows.set(utcDay(from), clip(utcDay(from)));
  if (until && !isMidnight(until)) windows.set(utcDay(until), clip(utcDay(until)));
  return [...windows.values()];
}

/** The part of a UTC day within the bounds, [from, until). */
function dayWindow(day: string, bounds: TimeBounds): { from: Date; until: Date } {
  const start = dayStart(day);
  const end = new Date(start.getTime() + DAY_MS);
  return { from: bounds.from && bounds.from > start ? bounds.from : start, until: bounds.until && bounds.until < end ? bounds.until : end };
}

/**
 * Where the row `offset` places from the newest begins, with `days` newest first: the day holding
 * it (with its count) and how many of that day's newer rows come before it; null when the days hold
 * no more rows.
 */
export function locateOffset(days: DayCount[], offset: number): { day: DayCount; skip: number } | null {
  let before = 0;
  for (const day of days) {
    if (offset < before + day.count) return { day, skip: offset - before };
    before += day.count;
  }
  return null;
}

/**
 * The row a page starts at: the `skip`-th of the window [from, until), counted from its newest row,
 * or from its oldest (`fromOldest`) when that is the shorter walk, so that no page walks past more
 * than half a day's rows and the last page costs what the first does; from its oldest row at or
 * after `after` (a day mark, markedPageStart) when a mark is nearer still.
 */
export interface PageStart {
  from: Date;
  until: Date;
  skip: number;
  fromOldest: boolean;
  after?: { createdAt: string; id: string };
}

/** The start of a page whose first row is the `skip`-th newest of `day` (locateOffset), within the bounds. */
export function pageStart({ day, skip }: { day: DayCount; skip: number }, bounds: TimeBounds): PageStart {
  const fromOldest = skip > (day.count - 1) / 2;
  return { ...dayWindow(day.day, bounds), skip: fromOldest ? day.count - 1 - skip : skip, fromOldest };
}

/**
 * The UTC days from `first` to `last` (YYYY-MM-DD, inclusive), a month at a time: the chunks in
 * which the counts' check and repair go through a form's archive, so no statement spans more than
 * a month of its rows (one partition) and nothing holds more than a month's days.
 */
export function monthsOfDays(first: string, last: string): string[][] {
  const months: string[][] = [];
  for (let at = dayStart(first).getTime(), end = dayStart(last).getTime(); at <= end; at += DAY_MS) {
    const day = utcDay(new Date(at));
    if (!months.length || months[months.length - 1][0].slice(0, 7) !== day.slice(0, 7)) months.push([]);
    months[months.length - 1].push(day);
  }
  return months;
}

/** A form's submissions over the UTC days `first` to `last` (inclusive): a whole month, or one day. */
export interface SpanCount {
  first: string;
  last: string;
  count: number;
}

/**
 * The first day of the month `months` after the month of `day` (YYYY-MM-DD), by arithmetic on its
 * year and month: Date.UTC reads years 0-99 as 1900-1999, and toISOString writes year 10000 as
 * "+010000" (PostgreSQL's dates run from year 1, and a bound may name any of them).
 */
function monthStart(day: string, months = 0): string {
  const [y, m] = day.split('-').map(Number);
  const index = y * 12 + (m - 1) + months;
  return `${String(Math.floor(index / 12)).padStart(4, '0')}-${String((index % 12) + 1).padStart(2, '0')}-01`;
}

/** The last day of the month of `day` (any year from 1 to 9999, leap years by the Gregorian rule). */
function monthEnd(day: string): string {
  const [y, m] = day.split('-').map(Number);
  const leap = (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
  const days = m === 2 ? (leap ? 29 : 28) : [4, 6, 9, 11].includes(m) ? 30 : 31;
  return `${day.slice(0, 8)}${days}`;
}

/** The first day after December 9999: no month from it on holds a row (nor sorts as a date string); none before year 1 does either. */
const PAST_LAST_MONTH = '10000-01-01';

/**
 * How the days `first` to `last` (null: open) are read: the months they cover whole by their month
 * counts (`months`, first and last month's first day, null bound: open; null: none), the months of
 * their first and last day by days (`days`: at most two runs of at most a month). The edge months
 * are read by days whatever they cover, so a partial day (a date-time bound) is always a day of its own.
 */
export function spanParts({ first, last }: { first: string | null; last: string | null })
  : { months: { first: string | null; last: string | null } | null; days: Array<{ first: string; last: string }> } {
  if (first && last && first > last) return { months: null, days: [] };
  const days: Array<{ first: string; last: string }> = [];
  if (first) days.push({ first, last: last && last < monthEnd(first) ? last : monthEnd(first) });
  if (last && !(first && monthStart(first) === monthStart(last))) {
    days.push({ first: first && first > monthStart(last) ? first : monthStart(last), last });
  }
  const months = { first: first ? monthStart(first, 1) : null, last: last ? monthStart(last, -1) : null };
  if (months.first === PAST_LAST_MONTH || months.last?.startsWith('0000-')) return { months: null, days };
  return { months: months.first && months.last && months.first > months.last ? null : months, days };
}

/** The span (`spans` newest first) holding the row `offset` places from the newest, and how many of its newer rows come before it. */
export function locateSpan(spans: SpanCount[], offset: number): { span: SpanCount; skip: number } | null {
  let before = 0;
  for (const span of spans) {
    if (offset < before + span.count) return { span, skip: offset - before };
    before += span.count;
  }
  return null;
}

/**
 * The counts a page of `limit` rows from `offset` is placed by, as days (`spans` newest first, a
 * month's days read by `readDays`, newest first, those at or below zero left out): the months
 * holding the page's first and last rows are read by days, the others stay whole (each as its
 * first day) where neither locateOffset nor pageLowerBound looks. Reads at most two months' days,
 * and more only when a month's days no longer sum to the count it was read with (rows written
 * between the two reads): then it locates again, and after `rounds` reads every month still whole.
 */
export async function pageDays(spans: SpanCount[], offset: number, limit: number,
  readDays: (months: SpanCount[]) => Promise<DayCount[]>, rounds = 3): Promise<DayCount[]> {
  let list = spans;
  for (let round = 0; ; round++) {
    const total = list.reduce((sum, s) => sum + s.count, 0);
    const located = [locateSpan(list, offset), locateSpan(list, Math.min(offset + limit, total) - 1)];
    let wanted = [...new Set(located.flatMap((l) => (l && l.span.first !== l.span.last ? [l.span] : [])))];
    if (wanted.length && round === rounds) wanted = list.filter((s) => s.first !== s.last);
    if (!wanted.length) return list.map((s) => ({ day: s.first, count: s.count }));
    const days = await readDays(wanted);
    list = list.flatMap((s) => (wanted.includes(s)
      ? days.filter((d) => d.day >= s.first && d.day <= s.last && d.count > 0).map((d) => ({ first: d.day, last: d.day, count: d.count }))
      : [s]));
  }
}

/**
 * The oldest instant a page of `limit` rows from `offset` reaches, by the day counts (`days` newest
 * first): the start of the day that holds its last row, or of the oldest day when the page runs to
 * the end, never before the bounds' `from`; null when the days hold no row at `offset`. The page's
 * statements bound `created_at` by it (and by its first day's end), so they plan and probe the
 * months the page spans, not every month of the form's archive.
 */
export function pageLowerBound(days: DayCount[], offset: number, limit: number, bounds: TimeBounds): Date | null {
  const total = days.reduce((sum, d) => sum + d.count, 0);
  const last = locateOffset(days, Math.min(offset + limit, total) - 1);
  if (!last || offset >= total) return null;
  const start = dayStart(last.day.day);
  return bounds.from && bounds.from > start ? bounds.from : start;
}

// Day marks (day-marks.ts): every `every`-th row of a form's busy UTC day, ranked from the day's
// oldest row, so that rows arriving later (at the newest end) never change a mark's rank. A page in
// the middle of a day of millions starts from the nearest mark below it, not from either end.

/** Which days carry marks: those of `minRows` rows or more, a mark every `every` rows. */
export interface DayMarkRules {
  every: number;
  minRows: number;
}

export const DEFAULT_DAY_MARK_RULES: DayMarkRules = { every: 1_000, minRows: 20_000 };

/**
 * A mark: the row (`createdAt`, `id`) of rank `rank` from its day's oldest row (0: the oldest).
 * `createdAt` is the timestamp's exact text, to the microsecond: a Date keeps milliseconds, and a
 * row of the same millisecond before the mark's would move every page started from it.
 */
export interface DayMark {
  rank: number;
  createdAt: string;
  id: string;
}

/** The ranks that carry a mark: every `every`-th from the day's oldest row, the oldest itself not (the day's start is as near). */
export function isMarkRank(rank: number, every: number): boolean {
  return rank > 0 && rank % every === 0;
}

/** The rank from its day's oldest row of the row `skip` places from the newest, in a day of `count` rows. */
export function rankFromOldest(count: number, skip: number): number {
  return count - 1 - skip;
}

/**
 * The rank (from the day's oldest row) of the row a page starts at, when a mark may shorten its
 * walk: the located day is whole within the bounds (a partial day is counted from its rows, and
 * its ranks are not the day's), holds `minRows` rows or more, and both of its ends lie `every` rows
 * or more away. Null otherwise: the walk from the nearer end costs no more than one from a mark.
 */
export function markTarget(located: { day: DayCount; skip: number }, bounds: TimeBounds, rules: DayMarkRules): number | null {
  const { day, skip } = located;
  if (day.count < rules.minRows) return null;
  const start = dayStart(day.day);
  const window = dayWindow(day.day, bounds);
  if (window.from.getTime() !== start.getTime() || window.until.getTime() !== start.getTime() + DAY_MS) return null;
  const target = rankFromOldest(day.count, skip);
  return Math.min(skip, target) < rules.every ? null : target;
}

/**
 * The start of the page whose first row has rank `target` (markTarget), walked forward from `mark`
 * (the day's mark of the largest rank at or below it): null when there is none, or when it is not
 * nearer than either end of the day (the marks do not reach the target yet), and the page starts
 * as pageStart says.
 */
export function markedPageStart(located: { day: DayCount; skip: number }, bounds: TimeBounds, target: number, mark: DayMark | null)
  : PageStart | null {
  if (!mark || mark.rank > target) return null;
  const walk = target - mark.rank;
  if (walk >= Math.min(located.skip, target)) return null;
  return { ...dayWindow(located.day.day, bounds), skip: walk, fromOldest: true, after: { createdAt: mark.createdAt, id: mark.id } };
}
