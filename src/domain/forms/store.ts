import type { Em } from '../../db/orm';
import type { FormStatus } from './entities';

// The raw statements of forms: a form as the submission path caches it, and the public runtime's
// daily analytics counters with their totals. Forms, pages and fields are otherwise read and
// written through the ORM's entities (form-service.ts).

export interface FormRow {
  id: string;
  organization_id: string;
  title: string;
  description: string | null;
  status: FormStatus;
  settings: Record<string, any>;
  translations: Record<string, any> | null;
  updated_at: Date | string;
}

/** A form that is not deleted (the form cache's load). */
export async function findLiveFormRow(em: Em, formId: string): Promise<FormRow | undefined> {
  const [row] = await em.getConnection().execute<FormRow[]>(
    `select id, organization_id, title, description, status, settings, translations, updated_at from forms where id = ? and deleted_at is null`,
    [formId],
  );
  return row;
}

export type AnalyticsColumn = 'views' | 'starts' | 'completions';

/** One atomic upsert, so concurrent events of the same day never lose a count. */
export async function incrementAnalyticsCounter(em: Em, formId: string, column: AnalyticsColumn, day: string): Promise<void> {
  await em.getConnection().execute(
    `insert into form_analytics_daily (form_id, day, ${column}) values (?, ?, 1)
     on conflict (form_id, day) do update set ${column} = form_analytics_daily.${column} + 1`,
    [formId, day], 'run',
  );
}

/** One atomic upsert per event, as for the daily counters (see recordAnalyticsEvent). */
export async function incrementPageReached(em: Em, formId: string, pageId: string, day: string): Promise<void> {
  await em.getConnection().execute(
    `insert into form_analytics_pages (form_id, day, page_id, reached) values (?, ?, ?, 1)
     on conflict (form_id, day, page_id) do update set reached = form_analytics_pages.reached + 1`,
    [formId, day, pageId], 'run',
  );
}

export interface AnalyticsDayRow {
  day: string;
  views: number;
  starts: number;
  completions: number;
}

/** The daily counters of the form's days from `fromDay` (YYYY-MM-DD) on, oldest first. */
export async function analyticsDays(em: Em, formId: string, fromDay: string): Promise<AnalyticsDayRow[]> {
  const rows = await em.getConnection().execute(
    `select to_char(day, 'YYYY-MM-DD') as day, views, starts, completions
       from form_analytics_daily where form_id = ? and day >= ?::date order by day`,
    [formId, fromDay],
  );
  return (rows as AnalyticsDayRow[]).map((r) => ({ day: r.day, views: r.views, starts: r.starts, completions: r.completions }));
}

/** Pages reached: per page over every day, and per (day, page) from `fromDay` on. */
export async function pagesReached(em: Em, formId: string, fromDay: string): Promise<{
  total: Array<{ pageId: string; reached: number }>;
  days: Array<{ day: string; pageId: string; reached: number }>;
}> {
  const conn = em.getConnection();
  const [total, days] = await Promise.all([
    conn.execute(
      `select page_id as "pageId", sum(reached)::int as reached
         from form_analytics_pages where form_id = ? group by page_id`,
      [formId],
    ),
    conn.execute(
      `select to_char(day, 'YYYY-MM-DD') as day, page_id as "pageId", reached
         from form_analytics_pages where form_id = ? and day >= ?::date order by day, page_id`,
      [formId, fromDay],
    ),
  ]);
  return {
    total: total as Array<{ pageId: string; reached: number }>,
    days: days as Array<{ day: string; pageId: string; reached: number }>,
  };
}

/** The form's counters summed over every day. */
export async function analyticsTotals(em: Em, formId: string): Promise<{ views: number; starts: number; completions: number }> {
  const [events] = await em.getConnection().execute(
    `select coalesce(sum(views), 0)::int as views, coalesce(sum(starts), 0)::int as starts,
            coalesce(sum(completions), 0)::int as completions
       from form_analytics_daily where form_id = ?`,
    [formId],
  );
  return { views: events.views, starts: events.starts, completions: events.completions };
}
