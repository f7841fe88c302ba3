// Pure rules of the day counts (day-counts.ts): which days of a date-time filter the counts cannot
// answer, and where a page at some offset starts. The list, analytics and the usage roll-up read
// days, not rows (CONTRACT §23).

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
  const clip = (day: string): PartialDay => {
    const start = dayStart(day);
    const end = new Date(start.getTime() + DAY_MS);
    return { day, from: from && from > start ? from : start, until: until && until < end ? until : end };
  };
  if (from && !isMidnight(from)) windows.set(utcDay(from), clip(utcDay(from)));
  if (until && !isMidnight(until)) windows.set(utcDay(until), clip(utcDay(until)));
  return [...windows.values()];
}

/**
 * Where the row `offset` places from the newest begins, with `days` newest first: the day holding
 * it and how many of that day's newer rows come before it; null when the days hold no more rows.
 */
export function locateOffset(days: DayCount[], offset: number): { day: string; skip: number } | null {
  let before = 0;
  for (const { day, count } of days) {
    if (offset < before + count) return { day, skip: offset - before };
    before += count;
  }
  return null;
}

/** The end (exclusive) of a page that starts on `day`: the day's end, or the bounds' own if earlier. */
export function pageUpperBound(day: string, until: Date | null): Date {
  const end = new Date(dayStart(day).getTime() + DAY_MS);
  return until && until < end ? until : end;
}
