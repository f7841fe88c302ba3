import type { Em } from '../../db/orm';
import { lockRollupState, markRolledUp, recountAllForms, recountFormsSince } from './store';

/**
 * Submissions per organization, form and UTC month (this month and the last), summed from the
 * forms' day counts. A run recounts only the forms counted on a day since the previous run's, so
 * its cost follows recent traffic and the days of two months rather than the stored rows. `full`
 * recounts every form (the first run, and the hourly maintenance, which also brings in deletions
 * of older days). Runs of several workers take turns on the state row.
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
