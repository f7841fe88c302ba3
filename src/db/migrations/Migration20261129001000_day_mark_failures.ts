import { Migration } from '@mikro-orm/migrations';

/**
 * Day marks whose build failed (src/domain/submissions/day-marks.ts): a (form, day)'s `failed_at`
 * says its last build failed (a statement or lock timeout, a row that breaks it), and the builder
 * gives it its turn after every other busy day until a build of it succeeds; a day that failed
 * before any build succeeded has a check row without `checked_snapshot`. Expand only, on a table of
 * a row per busy day. The previous release reads and writes it beside this one: it names the
 * columns it inserts, takes a day without `checked_snapshot` for one never built (it has no marks),
 * and its successful build leaves `failed_at` as it was (the day keeps its late turn until this
 * release builds it).
 */
export class Migration20261129001000_day_mark_failures extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
alter table submission_day_mark_checks add column if not exists failed_at timestamptz;
alter table submission_day_mark_checks alter column checked_snapshot drop not null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`
delete from submission_day_mark_checks where checked_snapshot is null;
alter table submission_day_mark_checks alter column checked_snapshot set not null;
alter table submission_day_mark_checks drop column if exists failed_at;`);
  }
}
