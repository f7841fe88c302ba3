// Public runtime analytics: daily counters per form, and the totals the API reports (stored
// submissions from the day counts, read as the list reads its total: countSubmissions).
import type { Em } from '../../db/orm';
import { countSubmissions } from '../submissions/read-service';
import { utcDay } from '../submissions/day-windows';
import {
  addAnalyticsCounts, analyticsDays, analyticsTotals, incrementAnalyticsCounter, incrementPageReached, pagesReached,
  type AnalyticsColumn, type DailyCounts, type PageCounts,
} from './store';

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

type Waiter = { resolve: () => void; reject: (err: unknown) => void };

/**
 * The public events endpoint's writer (a group commit): an event joins the counts waiting to be
 * written and its request is answered once they are. One write at a time per process: while it
 * runs, every event that arrives (of any form) is merged into the next one, a row per (form, day)
 * and per (form, day, page). A form's burst of visitors is then a few upserts of its hot rows per
 * process, not one upsert each queueing on the row lock and holding a pooled connection while it
 * waits (which would stall every organization's requests); a quiet form still gets one write per
 * event, at once. Nothing is held in memory past its request: a process that dies loses only
 * events whose requests it never answered.
 */
export class AnalyticsEventWriter {
  private daily = new Map<string, DailyCounts>();
  private pages = new Map<string, PageCounts>();
  private waiters: Waiter[] = [];
  private writing = false;

  constructor(private readonly write: (daily: DailyCounts[], pages: PageCounts[]) => Promise<void>) {}

  static forDatabase(em: () => Em): AnalyticsEventWriter {
    return new AnalyticsEventWriter((daily, pages) => addAnalyticsCounts(em(), daily, pages));
  }

  record(formId: string, event: AnalyticsEvent, opts: { at?: Date; pageId?: string } = {}): Promise<void> {
    const day = utcDay(opts.at ?? new Date());
    if (event === 'page') {
      if (!opts.pageId) return Promise.reject(new Error('a page event names its page'));
      const key = JSON.stringify([formId, day, opts.pageId]);
      const row = this.pages.get(key) ?? { formId, day, pageId: opts.pageId, reached: 0 };
      row.reached += 1;
      this.pages.set(key, row);
    } else {
      const key = JSON.stringify([formId, day]);
      const row = this.daily.get(key) ?? { formId, day, views: 0, starts: 0, completions: 0 };
      row[COLUMN[event]] += 1;
      this.daily.set(key, row);
    }
    return new Promise<void>((resolve, reject) => {
      this.waiters.push({ resolve, reject });
      if (!this.writing) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.writing = true;
    try {
      while (this.waiters.length) {
        const daily = [...this.daily.values()];
        const pages = [...this.pages.values()];
        const waiters = this.waiters;
        this.daily = new Map();
        this.pages = new Map();
        this.waiters = [];
        try {
          await this.write(daily, pages);
          for (const waiter of waiters) waiter.resolve();
        } catch (err) {
          for (const waiter of waiters) waiter.reject(err);
        }
      }
    } finally {
      this.writing = false;
    }
  }
}

/**
 * One event, one upsert on the form's row of the day (or of the day and page), at once: for a
 * single event written outside a request (tests, backfills). The public endpoint merges concurrent
 * events first (AnalyticsEventWriter), so a busy form's row is not one lock queue.
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
