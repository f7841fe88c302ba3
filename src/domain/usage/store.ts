import type { Em } from '../../db/orm';
import { monthCountsSql } from '../submissions/day-counts';

// The statements of the monthly usage roll-up: its state row (when the last run started) and the
// recount of submissions per organization, form and UTC month, from the forms' month counts
// (submissions/day-counts.ts): a recount costs two month rows a form and the unfolded slots, not
// the days of two months nor their rows.

const ROLLUP_STATE_KEY = 'usage_rollup_from';
/** Submissions commit a little after their created_at, so each run also looks this far behind the last one. */
const ROLLUP_OVERLAP = `interval '5 minutes'`;

// Read as the list reads its total (monthCountsSql in submissions/day-counts.ts, the one way): a
// month row and the unfolded slots of its days, a day summing below zero (a deletion counted of a
// row stored without counting, until the maintenance repairs it) counting as none, never against the
// month's other days. The counts of an organization deleted by hand outlive it (they have no
// foreign key): they are left out, or the insert would break the roll-up for every organization.
const SINCE_LAST_MONTH = `(date_trunc('month', now() at time zone 'UTC') - interval '1 month')::date`;
const RECOUNT = (formFilter: (alias: string) => string) => `
  insert into usage_rollups as r (organization_id, form_id, month, submissions, updated_at)
  select organization_id, form_id, to_char(month, 'YYYY-MM'), count, now()
    from (${monthCountsSql({
    months: `m.month >= ${SINCE_LAST_MONTH} ${formFilter('m')}`,
    unfolded: `u.day >= ${SINCE_LAST_MONTH} ${formFilter('u')}`,
  })}) d
   where exists (select from organizations o where o.id = d.organization_id)
  on conflict (organization_id, form_id, month)
  do update set submissions = excluded.submissions, updated_at = now()
   where r.submissions <> excluded.submissions`;

/** Locks the roll-up's state row (created if missing), so runs of several workers take turns; answers when the last run started ('' for never). */
export async function lockRollupState(tx: Em): Promise<string> {
  await tx.execute(`insert into system_settings (key, value) values (?, '') on conflict (key) do nothing`, [ROLLUP_STATE_KEY]);
  const [state] = await tx.execute('select value from system_settings where key = ? for update', [ROLLUP_STATE_KEY]);
  return state.value;
}

/** Recounts this month and the last for every form. */
export async function recountAllForms(tx: Em): Promise<void> {
  await tx.execute(RECOUNT(() => ''));
}

/** Recounts this month and the last for the forms whose submissions were counted since the day of `since` (less the overlap). */
export async function recountFormsSince(tx: Em, since: string): Promise<void> {
  const counted = `select form_id from submission_day_counts where day >= ((?::timestamptz - ${ROLLUP_OVERLAP}) at time zone 'UTC')::date`;
  await tx.execute(RECOUNT((alias) => `and ${alias}.form_id in (${counted})`), [since, since]);
}

/** The next run recounts from now. */
export async function markRolledUp(tx: Em): Promise<void> {
  await tx.execute('update system_settings set value = now()::text where key = ?', [ROLLUP_STATE_KEY]);
}
