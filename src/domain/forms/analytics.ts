// Public runtime analytics: daily counters per form, and the totals the API reports.
import type { Em } from '../../db/orm';

export const ANALYTICS_EVENTS = ['view', 'start', 'complete'] as const;
export type AnalyticsEvent = (typeof ANALYTICS_EVENTS)[number];

/** The counter column each event increments; a fixed map, never text from the request. */
const COLUMN: Record<AnalyticsEvent, 'views' | 'starts' | 'completions'> = {
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

export function utcDay(at: Date): string {
  return at.toISOString().slice(0, 10);
}

/** One atomic upsert, so concurrent events of the same day never lose a count. */
export async function recordAnalyticsEvent(em: Em, formId: string, event: AnalyticsEvent, at = new Date()): Promise<void> {
  const column = COLUMN[event];
  await em.getConnection().execute(
    `insert into form_analytics_daily (form_id, day, ${column}) values (?, ?, 1)
     on conflict (form_id, day) do update set ${column} = form_analytics_daily.${column} + 1`,
    [formId, utcDay(at)], 'run',
  );
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
  const conn = em.getConnection();
  const [[events], [stored]] = await Promise.all([
    conn.execute(
      `select coalesce(sum(views), 0)::int as views, coalesce(sum(starts), 0)::int as starts,
              coalesce(sum(completions), 0)::int as completions
         from form_analytics_daily where form_id = ?`,
      [formId],
    ),
    conn.execute(
      'select count(*)::int as submissions from submissions where form_id = ? and organization_id = ?',
      [formId, organizationId],
    ),
  ]);
  return {
    views: events.views,
    starts: events.starts,
    completions: events.completions,
    submissions: stored.submissions,
    completionRate: completionRate(events.completions, events.starts),
  };
}
