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
  version: number;
}

/** A form that is not deleted (the form cache's load). */
export async function findLiveFormRow(em: Em, formId: string): Promise<FormRow | undefined> {
  const [row] = await em.getConnection().execute<FormRow[]>(
    `select id, organization_id, title, description, status, settings, translations, updated_at, version from forms where id = ? and deleted_at is null`,
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

/** Counts to add to one form's day (`form_analytics_daily`). */
export interface DailyCounts { formId: string; day: string; views: number; starts: number; completions: number }
/** Visitors to add to one page of one form's day (`form_analytics_pages`). */
export interface PageCounts { formId: string; day: string; pageId: string; reached: number }

/**
 * Adds many events' counts at once: one upsert per table, one row per (form, day) or (form, day,
 * page), the rows taken in key order (two writers never wait on each other in opposite orders).
 * Each row must be unique in its list (the caller merges them).
 */
export async function addAnalyticsCounts(em: Em, daily: DailyCounts[], pages: PageCounts[]): Promise<void> {
  const conn = em.getConnection();
  if (daily.length) {
    await conn.execute(
      `insert into form_analytics_daily (form_id, day, views, starts, completions)
       select x.form_id, x.day::date, x.views, x.starts, x.completions
         from jsonb_to_recordset(?::jsonb) as x(form_id text, day text, views int, starts int, completions int)
        order by x.form_id, x.day
       on conflict (form_id, day) do update set views = form_analytics_daily.views + excluded.views,
         starts = form_analytics_daily.starts + excluded.starts, completions = form_analytics_daily.completions + excluded.completions`,
      [JSON.stringify(daily.map((d) => ({ form_id: d.formId, day: d.day, views: d.views, starts: d.starts, completions: d.completions })))], 'run',
    );
  }
  if (pages.length) {
    await conn.execute(
      `insert into form_analytics_pages (form_id, day, page_id, reached)
       select x.form_id, x.day::date, x.page_id, x.reached
         from jsonb_to_recordset(?::jsonb) as x(form_id text, day text, page_id text, reached int)
        order by x.form_id, x.day, x.page_id
       on conflict (form_id, day, page_id) do update set reached = form_analytics_pages.reached + excluded.reached`,
      [JSON.stringify(pages.map((p) => ({ form_id: p.formId, day: p.day, page_id: p.pageId, reached: p.reached })))], 'run',
    );
  }
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

/** One kept version of a form's structure (`form_versions`). */
export interface FormVersionRow {
  version: number;
  created_at: Date | string;
  pages: unknown[];
  fields: unknown[];
}

/** The form's version `version` as kept, or undefined; the form is the caller's to have checked. */
export async function findFormVersion(em: Em, formId: string, version: number): Promise<FormVersionRow | undefined> {
  const [row] = await em.execute<FormVersionRow[]>(
    `select version, created_at, pages, fields from form_versions where form_id = ? and version = ?`, [formId, version],
  );
  return row;
}

/**
 * Keeps a version; a version once kept is never changed (a second insert of it does nothing). In the
 * same statement, its fields become the newest of their ids in the export's columns
 * (`form_version_columns`, fieldsOfAllVersions).
 */
export async function insertFormVersion(em: Em, row: {
  formId: string; organizationId: string; version: number; createdAt: Date; pages: unknown[]; fields: unknown[];
}): Promise<void> {
  await em.execute(
    `with kept as (
       insert into form_versions (form_id, version, organization_id, created_at, pages, fields)
       values (?, ?, ?, ?, ?::jsonb, ?::jsonb) on conflict do nothing
       returning form_id, organization_id, version, fields
     )
     insert into form_version_columns (form_id, field_id, organization_id, label, type, version, position)
     select distinct on (f.value->>'id') k.form_id, f.value->>'id', k.organization_id, f.value->>'label', f.value->>'type',
            k.version, f.ordinality::int
       from kept k, jsonb_array_elements(k.fields) with ordinality f
      where f.value->>'id' is not null
      order by f.value->>'id', f.ordinality
     on conflict (form_id, field_id) do update
        set label = excluded.label, type = excluded.type, version = excluded.version, position = excluded.position
      where form_version_columns.version <= excluded.version`,
    [row.formId, row.version, row.organizationId, row.createdAt.toISOString(), JSON.stringify(row.pages), JSON.stringify(row.fields)], 'run',
  );
}

/** The organization's form's version `version`, or undefined (GET /v1/forms/{id}/versions/{n}). */
export async function findOrganizationFormVersion(em: Em, organizationId: string, formId: string, version: number)
  : Promise<FormVersionRow | undefined> {
  const [row] = await em.execute<FormVersionRow[]>(
    `select version, created_at, pages, fields from form_versions where form_id = ? and version = ? and organization_id = ?`,
    [formId, version, organizationId],
  );
  return row;
}

/** A page of the organization's form's versions, newest first, and how many there are. */
export async function listFormVersions(em: Em, organizationId: string, formId: string, page: { limit: number; offset: number })
  : Promise<{ items: Array<{ version: number; created_at: Date | string; field_count: number }>; total: number }> {
  const [items, [count]] = await Promise.all([
    em.execute<Array<{ version: number; created_at: Date | string; field_count: number }>>(
      `select version, created_at, jsonb_array_length(fields) as field_count from form_versions
        where form_id = ? and organization_id = ? order by version desc limit ? offset ?`,
      [formId, organizationId, page.limit, page.offset],
    ),
    em.execute<Array<{ total: number }>>(`select count(*)::int as total from form_versions where form_id = ? and organization_id = ?`, [formId, organizationId]),
  ]);
  return { items, total: count.total };
}

/**
 * Every field id any version of the form had, once, with the newest version that had it, its label
 * and type there, and its position in that version (the export's columns across versions): read
 * from `form_version_columns`, kept with each version, so one row per distinct field whatever the
 * number of versions.
 */
export async function fieldsOfAllVersions(em: Em, organizationId: string, formId: string)
  : Promise<Array<{ id: string; label: string; type: string; version: number; position: number }>> {
  return em.execute<Array<{ id: string; label: string; type: string; version: number; position: number }>>(
    `select field_id as id, label, type, version, position from form_version_columns
      where form_id = ? and organization_id = ?`,
    [formId, organizationId],
  );
}

/** The form row locked for its structure's change, with its version; undefined when it is gone. */
export async function lockFormVersion(em: Em, formId: string): Promise<{ version: number; organization_id: string } | undefined> {
  const [row] = await em.execute<Array<{ version: number; organization_id: string }>>(
    `select version, organization_id from forms where id = ? for update`, [formId]);
  return row;
}

/** Sets the form's version (its row is locked by the caller). */
export async function setFormVersion(em: Em, formId: string, version: number): Promise<void> {
  await em.execute(`update forms set version = ? where id = ?`, [version, formId], 'run');
}
