import { Migration } from '@mikro-orm/migrations';

/**
 * Day counts that heal (src/domain/submissions/day-counts.ts):
 * - `submission_day_counts_unfolded_idx` holds only the slots not yet folded (slot <> 0: the last
 *   days' slots and those a deletion of an old submission adds), so the hourly fold picks its
 *   form-days without reading the folded archive. Built `concurrently` (this migration runs outside
 *   a transaction: src/README.md, "Writing a migration"), so the storing statements' writes to the
 *   counts never wait on the build; a build a lock timeout ended leaves an invalid index behind,
 *   which the retry drops before building again.
 * - The maintenance's repair of recently written days starts from the moment of this migration, so
 *   what the previous release stores or deletes without counting during the rolling deploy is
 *   healed by the first hourly run after it (deploy/README.md, "Upgrading").
 * Expand only: the previous release neither reads nor writes either.
 */
export class Migration20261127000100_day_counts_heal extends Migration {
  override isTransactional(): boolean {
    return false;
  }

  override async up(): Promise<void> {
    this.addSql('drop index concurrently if exists submission_day_counts_unfolded_idx;');
    this.addSql(`create index concurrently submission_day_counts_unfolded_idx on submission_day_counts (day, form_id) where slot <> 0;`);
    this.addSql(`insert into system_settings (key, value) values ('day_counts_repaired_from', now()::text) on conflict (key) do nothing;`);
  }

  override async down(): Promise<void> {
    this.addSql('drop index concurrently if exists submission_day_counts_unfolded_idx;');
    this.addSql(`delete from system_settings where key = 'day_counts_repaired_from';`);
  }
}
