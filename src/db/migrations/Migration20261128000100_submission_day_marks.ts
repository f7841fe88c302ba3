import { Migration } from '@mikro-orm/migrations';

/**
 * Day marks (src/domain/submissions/day-marks.ts): every K-th submission of a busy form's UTC day,
 * with its rank counted from the day's oldest row, so a page in the middle of a day of millions
 * starts from the nearest mark, not from either end of the day. A new table only: the previous
 * release neither reads nor writes it. The foreign key takes a form's marks with it when the form
 * row is deleted (by hand: the API only marks forms deleted), in the deleting transaction, as its
 * submissions go. `built_snapshot` (the snapshot the mark was ranked from) lets the builder and the
 * hourly repair find the marks a deletion by the previous release (which does not know them) left
 * behind during a rolling deploy: those whose snapshot does not see it; `built_at` is for people. A (form, day)'s
 * `checked_snapshot` is the builder's previous snapshot: its next look through the change feed for
 * rows committed late below its marks reads the changes that snapshot did not see.
 */
export class Migration20261128000100_submission_day_marks extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
create table if not exists submission_day_marks (
  organization_id text not null,
  form_id text not null references forms(id) on delete cascade,
  day date not null,
  rank bigint not null,
  created_at timestamptz not null,
  id text not null,
  built_at timestamptz not null default statement_timestamp(),
  built_snapshot pg_snapshot not null,
  primary key (form_id, day, rank)
);
create table if not exists submission_day_mark_checks (
  organization_id text not null,
  form_id text not null references forms(id) on delete cascade,
  day date not null,
  checked_snapshot pg_snapshot not null,
  primary key (form_id, day)
);`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists submission_day_mark_checks; drop table if exists submission_day_marks;');
  }
}
