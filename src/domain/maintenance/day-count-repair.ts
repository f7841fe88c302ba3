import type { Em } from '../../db/orm';
import { timeOfId } from '../../lib/ids';
import {
  checkFormDays, checkFormMonths, databaseNow, formDaySpan, listCountedForms, listFormMonths, listOrphanCountedForms, readDaysWrittenBetween, readRepairMark,
  repairFormDays, repairFormMonths, writeRepairMark,
  type DayDrift, type MonthDrift,
} from '../submissions/day-counts';
import { invalidateDayMarksNotSeeing, type RecordedDeletion } from '../submissions/day-marks';
import { deleteRowsOfDeletedParents } from '../submissions/deletion';
import { monthsOfDays, utcDay } from '../submissions/day-windows';

// The day counts' check and repair (README "Day counts that heal"): through the whole archive, form
// by form and month by month (the CLI's `counts check` and `counts repair`), and of the days written
// since the previous run (the hourly maintenance); each month's row after its days, against their
// slot 0. The statements are in submissions/day-counts.ts.

/** A drifted (form, UTC day): `counted` rows, `stored` in the counts (before a repair). */
export interface FormDayDrift extends DayDrift {
  formId: string;
}

/** A drifted (form, UTC month): `counted` in its days' slot 0, `stored` in its month row (before a repair). */
export interface FormMonthDrift extends MonthDrift {
  formId: string;
}

export type FormDrift = FormDayDrift | FormMonthDrift;

const FORMS_PAGE = 200;

/**
 * Checks (or repairs, `repair`) every day of every form (or of `formId`) from `since` (YYYY-MM-DD)
 * on, a month of one form per statement, then that month's row, handing each drifted day and month
 * to `onDrift` as it is found: the memory held is a page of form ids and a month's days, whatever
 * the archive's size. Answers how many forms were gone through and how many days and months drifted.
 */
export async function walkDayCounts(em: Em, opts: { repair: boolean; formId?: string; since?: string },
  onDrift: (drift: FormDrift) => void): Promise<{ forms: number; drifted: number }> {
  let forms = 0;
  let drifted = 0;
  // the forms, then the counts left behind by forms deleted by hand (their rows went with them)
  for (const list of [listCountedForms, listOrphanCountedForms]) for (let after = ''; ;) {
    const page = await list(em, after, FORMS_PAGE, opts.formId);
    for (const form of page) {
      forms++;
      // rows stored while the form was deleted by hand outlived its delete trigger: they go, and the days count nothing
      if (opts.repair && list === listOrphanCountedForms) await deleteRowsOfDeletedParents(em, [form.id], [form.organizationId]);
      const span = await formDaySpan(em, form.id);
      const walked = new Set<string>();
      const walk = async (days: string[]) => {
        const found: Array<DayDrift | MonthDrift> = opts.repair
          ? await repairFormDays(em, form.organizationId, form.id, days)
          : await checkFormDays(em, form.id, days);
        found.push(...(opts.repair
          ? await repairFormMonths(em, form.organizationId, form.id, days)
          : await checkFormMonths(em, form.id, days)));
        for (const d of found) onDrift({ formId: form.id, ...d });
        drifted += found.length;
        walked.add(`${days[0].slice(0, 7)}-01`);
      };
      const first = span && opts.since && opts.since > span.first ? opts.since : span?.first;
      if (span && first && first <= span.last) for (const days of monthsOfDays(first, span.last)) await walk(days);
      // month rows with neither rows nor day counts in their month (their days' counts deleted by hand)
      for (const month of await listFormMonths(em, form.id, opts.since)) if (!walked.has(month)) await walk([month]);
    }
    if (page.length < FORMS_PAGE) break;
    after = page[page.length - 1].id;
  }
  return { forms, drifted };
}

/** Rows commit a little after their created_at (and a deletion after its change's occurred_at): each run looks this far behind the last. */
const OVERLAP_MS = 10 * 60_000;
/** The first run, and a run after a long stop, looks back at most this far; older days are `counts repair`'s (deploy/README.md). */
const LOOKBACK_MAX_MS = 2 * 86_400_000;
/** The earliest a time-ordered id can name: older times are ids of the random kind, whose day the id does not tell. */
const TIME_ORDERED_IDS_SINCE = Date.UTC(2026, 0, 1);

/** PostgreSQL's lock_timeout. */
const LOCK_TIMEOUT = '55P03';
/** PostgreSQL's statement_timeout. */
const STATEMENT_TIMEOUT = '57014';

/**
 * What a run of the maintenance's repair did: the days it repaired, the forms it passed over (their
 * count of a day's rows ran past the statement timeout), and the submissions it deleted whose form
 * had been deleted by hand while they were stored (deleteRowsOfDeletedParents).
 */
export interface RecentRepair {
  repaired: FormDrift[];
  skipped: Array<{ formId: string; days: string[] }>;
  orphansDeleted: number;
}

/** The writes a run repairs before moving its mark: an hour of them. */
const WINDOW_MS = 3_600_000;
/**
 * The rows one statement reads: ten minutes of them, so it stays inside the workers' statement
 * timeout (DB_STATEMENT_TIMEOUT_MS) on a busy service: an hour of 720,000 rows took 1.3 s to read
 * on a loaded test machine, so an hour per statement stalled the repair at a few hundred a second.
 */
const READ_MS = 10 * 60_000;

/**
 * Repairs the counts of every (form, UTC day) written since the previous run, found from the rows,
 * never from the counts: the days of the submissions created since (also those stored by a release
 * that did not count them), and the days of the submissions deleted since, which the change feed
 * names by their time-ordered ids. An hour of writes at a time (read ten minutes a statement), the mark moving after each, so a
 * run cut short keeps what it did; each day found costs an index-only count of its rows, not the
 * archive. Answers the days repaired and the forms passed over.
 */
export async function repairRecentDayCounts(em: Em, now = new Date()): Promise<RecentRepair> {
  const mark = await readRepairMark(em);
  const floor = now.getTime() - LOOKBACK_MAX_MS;
  const readTo = await databaseNow(em);
  const repaired: FormDrift[] = [];
  const skipped: RecentRepair['skipped'] = [];
  let orphansDeleted = 0;
  for (let from = new Date(Math.max(floor, (mark?.getTime() ?? floor) - OVERLAP_MS)); ;) {
    const last = from.getTime() + WINDOW_MS >= readTo.getTime();
    const until = last ? null : new Date(from.getTime() + WINDOW_MS);
    const forms = new Map<string, { organizationId: string; days: Set<string> }>();
    const deletedDays = new Map<string, { organizationId: string; formId: string; day: string; deletions: RecordedDeletion[] }>();
    const add = (formId: string, organizationId: string, day: string) => {
      const form = forms.get(formId) ?? { organizationId, days: new Set<string>() };
      form.days.add(day);
      forms.set(formId, form);
    };
    for (let at = from.getTime(); ;) {
      const end = at + READ_MS;
      const lastRead = end >= (until ?? readTo).getTime();
      const written = await readDaysWrittenBetween(em, new Date(at), lastRead ? until : new Date(end));
      for (const c of written.created) add(c.formId, c.organizationId, c.day);
      for (const d of written.deleted) {
        const idAt = timeOfId(d.submissionId).getTime();
        if (idAt < TIME_ORDERED_IDS_SINCE || idAt > now.getTime() + 86_400_000) continue;
        const day = utcDay(new Date(idAt));
        add(d.formId, d.organizationId, day);
        const key = `${d.formId}/${day}`;
        const seen = deletedDays.get(key) ?? { organizationId: d.organizationId, formId: d.formId, day, deletions: [] };
        seen.deletions.push({ xid: d.xid, submissionId: d.submissionId });
        deletedDays.set(key, seen);
      }
      if (lastRead) break;
      at = end;
    }
    // A row stored while an operator deleted its form or organization by hand outlived the delete
    // trigger: it was written in this window, so its form is among these. Gone, and then recounted to nothing.
    orphansDeleted += await deleteRowsOfDeletedParents(em, [...forms.keys()], [...new Set([...forms.values()].map((f) => f.organizationId))]);
    for (const [formId, form] of forms) {
      const days = [...form.days].sort();
      try {
        for (const d of await repairFormDays(em, form.organizationId, formId, days)) repaired.push({ formId, ...d });
        // and their months' rows: what a write of slot 0 that did not keep them left (a hand fix)
        for (const m of await repairFormMonths(em, form.organizationId, formId, days)) repaired.push({ formId, ...m });
      } catch (err) {
        const code = (err as { code?: string }).code;
        // a form being repaired meanwhile (`counts repair`) or retention running: the next run takes this hour again
        if (code === LOCK_TIMEOUT) return { repaired, skipped, orphansDeleted };
        // a day of this form too big to count inside the workers' statement timeout: the others go on,
        // the mark moves, and the worker names the form for `counts repair`, which has no such limit
        if (code === STATEMENT_TIMEOUT) {
          skipped.push({ formId, days });
          continue;
        }
        throw err;
      }
    }
    // A deletion by the previous release (a rolling deploy) left its day's marks in place: those
    // above its row whose snapshot may not have seen it go, with every mark above them (this
    // release's deletions deleted them already; the marks built since saw them).
    for (const d of deletedDays.values()) {
      await em.transactional((tx) => invalidateDayMarksNotSeeing(tx, d.organizationId, d.formId, d.day, d.deletions));
    }
    await writeRepairMark(em, until ?? readTo);
    if (!until) return { repaired, skipped, orphansDeleted };
    from = until;
  }
}
