import type { Em } from '../../db/orm';
import { eventIdForSubmission } from '../webhooks/events';
import { countFormRowsBetween, readFormDays, readFormSpans } from './day-counts';
import { findDayMark, invalidateDayMarksFrom } from './day-marks';
import {
  DEFAULT_DAY_MARK_RULES, daySpan, locateOffset, markedPageStart, markTarget, pageDays, pageLowerBound, pageStart, partialDays, spanParts,
  type DayMarkRules, type SpanCount, type TimeBounds,
} from './day-windows';
import { findSubmissionRow, readSubmissionPage } from './read-store';
import { deleteSubmissionRow, recordSubmissionDeleted, scrubEndedDeliveries } from './deletion';

export interface SubmissionRecord {
  id: string;
  formId: string;
  data: Record<string, unknown>;
  submitterEmail: string | null;
  submitterName: string | null;
  /** The hosted page's language; null for API submissions. */
  language: string | null;
  createdAt: Date;
  /** Null: stored before form versions were recorded (README "Form versions"). */
  formVersion: number | null;
}

/** Which page of a form's submissions a list reads, within which bounds. */
export interface ListFilter extends TimeBounds {
  limit: number;
  offset: number;
}

function toRecord(row: any): SubmissionRecord {
  return {
    id: row.id, formId: row.form_id, data: row.data, submitterEmail: row.submitter_email,
    submitterName: row.submitter_name, language: row.language ?? null, createdAt: new Date(row.created_at),
    formVersion: row.form_version ?? null,
  };
}

/**
 * A page of the form's submissions, newest first, and how many the filter holds, read through the
 * month and day counts: the total sums months (and the days of the filter's first and last month,
 * a partial first or last day counted from its rows), the page skips whole months, reads the days of
 * the one or two months it lies in (pageDays), skips whole days before it walks into one, from
 * whichever end is nearer, or from the day's mark nearest below its start (a busy day's middle;
 * `marks`: which days have them). All of it costs the months spanned, two months' days and the
 * page, not the form's days, submissions nor a day's.
 */
export async function listSubmissions(em: Em, organizationId: string, formId: string, filter: ListFilter,
  marks: DayMarkRules = DEFAULT_DAY_MARK_RULES): Promise<{ items: SubmissionRecord[]; total: number }> {
  const spans = await countSpans(em, organizationId, formId, filter);
  const total = totalOf(spans);
  const days = await pageDays(spans, filter.offset, filter.limit, (months) => readFormDays(em, organizationId, formId, months));
  const located = locateOffset(days, filter.offset);
  if (!located) return { items: [], total };
  const start = pageStart(located, filter);
  // The page's statements name the days it spans (and so their months) by the counts.
  const lower = pageLowerBound(days, filter.offset, filter.limit, filter);
  const wanted = Math.min(filter.limit, totalOf(days) - filter.offset);
  let rows: any[] = [];
  // A busy day's middle: from the nearest mark below the start, when the marks reach it.
  const target = markTarget(located, filter, marks);
  const marked = target === null ? null
    : markedPageStart(located, filter, target, await findDayMark(em, organizationId, formId, located.day.day, target));
  if (marked) rows = await readSubmissionPage(em, organizationId, formId, { lower, start: marked, limit: filter.limit });
  if (rows.length < wanted) rows = await readSubmissionPage(em, organizationId, formId, { lower, start, limit: filter.limit });
  // The days lost rows between their counts and these reads (the walk from the oldest found no start,
  // or the days spanned hold too few): walk from the newest, down to the filter's own bound.
  if (rows.length < wanted) {
    rows = await readSubmissionPage(em, organizationId, formId, {
      lower: filter.from, start: { ...start, skip: located.skip, fromOldest: false }, limit: filter.limit,
    });
  }
  return { items: rows.map(toRecord), total };
}

/**
 * How many submissions of the form the bounds hold (none: all of them), read as the list reads its
 * `pagination.total`: the one way totals are read, so the list and analytics agree even on a day
 * whose count drifted (a day summing below zero counts as none in both, and in the usage roll-up:
 * monthCountsSql in day-counts.ts).
 */
export async function countSubmissions(em: Em, organizationId: string, formId: string, bounds: TimeBounds = { from: null, until: null })
  : Promise<number> {
  return totalOf(await countSpans(em, organizationId, formId, bounds));
}

function totalOf(spans: Array<{ count: number }>): number {
  return spans.reduce((sum, d) => sum + d.count, 0);
}

/**
 * The form's submissions within the bounds, newest first: a span per month the bounds cover whole
 * and per day of their first and last month (spanParts); partial days counted from their rows;
 * spans at or below zero left out.
 */
async function countSpans(em: Em, organizationId: string, formId: string, bounds: TimeBounds): Promise<SpanCount[]> {
  if (bounds.from && bounds.until && bounds.from >= bounds.until) return [];
  const spans = await readFormSpans(em, organizationId, formId, spanParts(daySpan(bounds)));
  const partial = new Map(partialDays(bounds).map((p) => [p.day, p]));
  return (await Promise.all(spans.map(async (s) => {
    const window = s.first === s.last ? partial.get(s.first) : undefined;
    return window ? { ...s, count: await countFormRowsBetween(em, formId, window.from, window.until) } : s;
  }))).filter((s) => s.count > 0);
}

export async function findSubmission(em: Em, organizationId: string, submissionId: string)
  : Promise<(SubmissionRecord & { formTitle: string }) | null> {
  const row = await findSubmissionRow(em, organizationId, submissionId);
  return row ? { ...toRecord(row), formTitle: row.form_title } : null;
}

export interface DeletedSubmission {
  id: string;
  formId: string;
  /** The outbox row of the `submission.deleted` event, for the fan-out after commit. */
  outboxId: string;
}

/** Null when the organization has no such submission. */
export async function deleteSubmission(em: Em, organizationId: string, submissionId: string): Promise<DeletedSubmission | null> {
  return em.transactional(async (tx) => {
    const gone = await deleteSubmissionRow(tx, organizationId, submissionId);
    if (!gone) return null;
    // The rows after it in its day moved a rank down: its day's marks from it up go, in this transaction.
    await invalidateDayMarksFrom(tx, organizationId, gone.form_id, { createdAt: gone.exact_created_at, id: gone.id });

    // The deletion event, in the same transaction: what it says must be read now, while the form row
    // and the submission's facts are at hand.
    const outboxId = await recordSubmissionDeleted(tx, {
      organizationId, submissionId: gone.id, formId: gone.form_id, formTitle: gone.form_title, deletedAt: new Date(),
    });
    await scrubEndedDeliveries(tx, organizationId, eventIdForSubmission(gone.id));
    return { id: gone.id, formId: gone.form_id, outboxId };
  });
}
