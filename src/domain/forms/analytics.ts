// Public runtime analytics: daily counters per form, and the totals the API reports (stored
// submissions from the day counts, read as the list reads its total: countSubmissions).
import type { Em } from '../../db/orm';
import { countSubmissions } from '../submissions/read-service';
import { utcDay } from '../submissions/day-windows';
import { analyticsTotals, incrementAnalyticsCounter, type AnalyticsColumn } from './store';

export const ANALYTICS_EVENTS = ['view', 'start', 'complete'] as const;
export type AnalyticsEvent = (typeof ANALYTICS_EVENTS)[number];

/** The counter column each event increments; a fixed map, never text from the request. */
const COLUMN: Record<AnalyticsEvent, AnalyticsColumn> = {
  view: 'views',
  start: 'starts',
  complete: 'completions',
};

export interface FormAnalytics {
  views: number;
  starts: number;
  completions: number;
  submissions: number;
  completionRate: number | null;
}

export function isAnalyticsEvent(value: unknown): value is AnalyticsEvent {
  return typeof value === 'string' && (ANALYTICS_EVENTS as readonly string[]).includes(value);
}

export async function recordAnalyticsEvent(em: Em, formId: string, event: AnalyticsEvent, at = new Date()): Promise<void> {
  await incrementAnalyticsCounter(em, formId, COLUMN[event], utcDay(at));
}

/**
 * completions / starts, to four decimals; null without starts. A visitor can complete without a
 * start event (nothing to change on an all-optional form), so the rate is capped at 1.
 */
export function completionRate(completions: number, starts: number): number | null {
  return starts === 0 ? null : Math.min(1, Math.round((completions / starts) * 10_000) / 10_000);
}

/** Totals for a form the caller has already found in its organization. */
export async function formAnalytics(em: Em, organizationId: string, formId: string): Promise<FormAnalytics> {
  const [events, submissions] = await Promise.all([analyticsTotals(em, formId), countSubmissions(em, organizationId, formId)]);
  return { ...events, submissions, completionRate: completionRate(events.completions, events.starts) };
}
