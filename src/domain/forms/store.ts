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
