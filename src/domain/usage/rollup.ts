import type { Em } from '../../db/orm';

const ROLLUP_STATE_KEY = 'usage_rollup_from';
/** Submissions commit a little after their created_at, so each run also looks this far behind the last one. */
const ROLLUP_OVERLAP = `interval '5 minutes'`;

const RECOUNT = (formFilter: string) => `
  insert into usage_rollups as r (organization_id, form_id, month, submissions, updated_at)
  select organization_id, form_id, to_char(created_at at time zone 'UTC', 'YYYY-MM'), count(*), now()
    from submissions
   where created_at >= date_trunc('month', now() at time zone 'UTC') at time zone 'UTC' - interval '1 month' ${formFilter}
   group by 1, 2, 3
  on conflict (organization_id, form_id, month)
  do update set submissions = excluded.submissions, updated_at = now()
   where r.submissions <> excluded.submissions`;

/**
 * Submissions per organization, form and UTC month (this month and the last). A run recounts only
 * the forms that received submissions since the previous run, found through the created_at index
 * and counted through the per-form index, so its cost follows recent traffic rather than the size
 * of the table. `full` recounts every form (the first run, and the hourly maintenance, which also
 * brings deletions in). Runs of several workers take turns on the state row.
 */
export async function rollupUsage(em: Em, opts: { full?: boolean } = {}): Promise<void> {
  await em.transactional(async (tx) => {
    await tx.execute(`insert into system_settings (key, value) values (?, '') on conflict (key) do nothing`, [ROLLUP_STATE_KEY]);
    const [state] = await tx.execute('select value from system_settings where key = ? for update', [ROLLUP_STATE_KEY]);
    if (opts.full || !state.value) {
      await tx.execute(RECOUNT(''));
    } else {
      await tx.execute(RECOUNT(`and form_id in (
        select distinct form_id from submissions where created_at >= ?::timestamptz - ${ROLLUP_OVERLAP})`), [state.value]);
    }
    await tx.execute('update system_settings set value = now()::text where key = ?', [ROLLUP_STATE_KEY]);
  });
}
