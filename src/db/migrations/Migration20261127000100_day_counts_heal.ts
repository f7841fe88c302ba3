import { Migration } from '@mikro-orm/migrations';

/**
 * Day counts that heal (src/domain/submissions/day-counts.ts):
 * - `submission_day_counts_unfolded_idx` holds only the slots not yet folded (slot <> 0: the last
 *   days' slots and those a deletion of an old submission adds), so the hourly fold picks its
 *   form-days without reading the folded archive. A plain build inside the migration's
 *   transaction (the migrations run as one, which CREATE INDEX CONCURRENTLY cannot join): it reads
 *   the table once and sorts only the unfolded rows; the table holds a row per form and day, far
 *   smaller than the submissions, and lock_timeout keeps a busy moment from queueing writers behind it.
 * - The maintenance's repair of recently written days starts from the moment of this migration, so
 *   what the previous release stores or deletes without counting during the rolling deploy is
 *   healed by the first hourly run after it (deploy/README.md, "Upgrading").
 * Expand only: the previous release neither reads nor writes either.
 */
export class Migration20261127000100_day_counts_heal extends Migration {
  override async up(): Promise<void> {
    this.addSql(`set local lock_timeout = '2s';`);
    this.addSql(`create index if not exists submission_day_counts_unfolded_idx on submission_day_counts (day, form_id) where slot <> 0;`);
    this.addSql(`insert into system_settings (key, value) values ('day_counts_repaired_from', now()::text) on conflict (key) do nothing;`);
  }

  override async down(): Promise<void> {
    this.addSql('drop index if exists submission_day_counts_unfolded_idx;');
    this.addSql(`delete from system_settings where key = 'day_counts_repaired_from';`);
  }
}
