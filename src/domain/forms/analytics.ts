// Public runtime analytics: daily counters per form, and the totals the API reports (stored
// submissions from the day counts, read as the list reads its total: countSubmissions).
import type { Em } from '../../db/orm';
import { countSubmissions } from '../submissions/read-service';
import { utcDay } from '../submissions/day-windows';
import { analyticsDays, analyticsTotals, incrementAnalyticsCounter, incrementPageReached, pagesReached, type AnalyticsColumn } from './store';

export const ANALYTICS_EVENTS = ['view', 'start', 'complete', 'page'] as const;
export type AnalyticsEvent = (typeof ANALYTICS_EVENTS)[number];

/** How many days `days` covers by default, and at most. */
export const ANALYTICS_DAYS_DEFAULT = 30;
export const ANALYTICS_DAYS_MAX = 366;

/** The counter column each event increments; a fixed map, never text from the request. */
const COLUMN: Record<Exclude<AnalyticsEvent, 'page'>, AnalyticsColumn> = {
  view: 'views',
  start: 'starts',
  complete: 'completions',
};

/** Visitors who reached each page, by page id (drop-off). */
export type PagesReached = Record<string, number>;

export interface AnalyticsDay {
  day: string;
  views: number;
  starts: number;
  completions: number;
  reached: PagesReached;
}

export interface FormAnalytics {
  views: number;
  starts: number;
  completions: number;
  submissions: number;
  completionRate: number | null;
  reached: PagesReached;
  /** The last `days` UTC days that have any event, oldest first. */
  days: AnalyticsDay[];
}

export function isAnalyticsEvent(value: unknown): value is AnalyticsEvent {
  return typeof value === 'string' && (ANALYTICS_EVENTS as readonly string[]).includes(value);
}

/**
 * One upsert per event on the form's row of the day (or of the day and page): a form's events
 * share that row, but they are few beside its submissions (a view, a start and a page or two per
 * visitor, each request rate-limited per address like the rest of the public runtime) and the
 * update is one index probe held for microseconds. A form with thousands of visitors a second
 * would want slots like the submissions' day counts.
 */
export async function recordAnalyticsEvent(em: Em, formId: string, event: AnalyticsEvent, opts: { at?: Date; pageId?: string } = {}): Promise<void> {
  const day = utcDay(opts.at ?? new Date());
  if (event === 'page') {
    if (!opts.pageId) throw new Error('a page event names its page');
    await incrementPageReached(em, formId, opts.pageId, day);
    return;
  }
  await incrementAnalyticsCounter(em, formId, COLUMN[event], day);
}

/**
 * completions / starts, to four decimals; null without starts. A visitor can complete without a
 * start event (nothing to change on an all-optional form), so the rate is capped at 1.
 */
export function completionRate(completions: number, starts: number): number | null {
  return starts === 0 ? null : Math.min(1, Math.round((completions / starts) * 10_000) / 10_000);
}

/** Totals for a form the caller has already found in its organization. */
export async function formAnalytics(
  em: Em, organizationId: string, formId: string, opts: { days?: number; now?: Date } = {},
): Promise<FormAnalytics> {
  const now = opts.now ?? new Date();
  const fromDay = utcDay(new Date(now.getTime() - ((opts.days ?? ANALYTICS_DAYS_DEFAULT) - 1) * 86_400_000));
  const [events, submissions, daily, pages] = await Promise.all([
    analyticsTotals(em, formId), countSubmissions(em, organizationId, formId), analyticsDays(em, formId, fromDay), pagesReached(em, formId, fromDay),
  ]);
  const byDay = new Map<string, AnalyticsDay>(daily.map((d) => [d.day, { ...d, reached: {} }]));
  for (const { day, pageId, reached } of pages.days) {
    const entry = byDay.get(day) ?? { day, views: 0, starts: 0, completions: 0, reached: {} };
    entry.reached[pageId] = reached;
    byDay.set(day, entry);
  }
  return {
    ...events, submissions, completionRate: completionRate(events.completions, events.starts),
    reached: Object.fromEntries(pages.total.map((p) => [p.pageId, p.reached])),
    days: [...byDay.values()].sort((a, b) => a.day.localeCompare(b.day)),
  };
}
