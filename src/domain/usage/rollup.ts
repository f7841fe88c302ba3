import type { Em } from '../../db/orm';
import { lockRollupState, markRolledUp, recountAllForms, recountFormsSince } from './store';

/**
 * Submissions per organization, form and UTC month (this month and the last). A run recounts only
 * the forms that received submissions since the previous run, found through the created_at index
 * and counted through the per-form index, so its cost follows recent traffic rather than the size
 * of the table. `full` recounts every form (the first run, and the hourly maintenance, which also
 * brings deletions in). Runs of several workers take turns on the state row.
 */
export async function rollupUsage(em: Em, opts: { full?: boolean } = {}): Promise<void> {
  await em.transactional(async (tx) => {
    const from = await lockRollupState(tx);
    if (opts.full || !from) {
      await recountAllForms(tx);
    } else {
      await recountFormsSince(tx, from);
    }
    await markRolledUp(tx);
  });
}
