import { Migration } from '@mikro-orm/migrations';

/**
 * Month counts, second step (the table and the trigger that follows the previous release's writes
 * are Migration20261128000400_submission_month_counts, committed before this runs):
 * - `submission_day_counts_unfolded_form_idx`: a form's unfolded slots (slot <> 0) by form and day,
 *   which a form's total reads beside its month rows; the fold's index (day, form_id) would scan
 *   every form's unfolded slots for one form's. Built `concurrently` (outside a transaction), a
 *   build a lock timeout left invalid dropped first.
 * - The month rows of the slot-0 rows already there, one statement per month (the months between
 *   the oldest and newest day counted), each in a transaction of its own: it adds to each form's
 *   month row the difference between the sum of its days' slot 0 (each at 0 or more) and the month
 *   row, both read in the statement's one snapshot, as the counts' repair does. What a writer
 *   commits after that snapshot reached the month row through the trigger, and is not in the
 *   difference; run again, it adds nothing. A month's statement holds its month rows only from its
 *   upserts to its commit: a previous release's write of slot 0 waits that long at most.
 * Expand only: the previous release neither reads nor writes the month rows (the trigger does for it).
 */
export class Migration20261128000401_month_counts_backfill extends Migration {
  override isTransactional(): boolean {
    return false;
  }

  override async up(): Promise<void> {
    this.addSql('drop index concurrently if exists submission_day_counts_unfolded_form_idx;');
    this.addSql('create index concurrently submission_day_counts_unfolded_form_idx on submission_day_counts (form_id, day) where slot <> 0;');
    const [span] = await this.execute(
      `select to_char(date_trunc('month', min(day)::timestamp), 'YYYY-MM-DD') as first,
              to_char(date_trunc('month', max(day)::timestamp), 'YYYY-MM-DD') as last from submission_day_counts`);
    if (!span?.first) return;
    for (let month = span.first; month <= span.last; month = nextMonth(month)) {
      this.addSql(`insert into submission_month_counts as m (organization_id, form_id, month, count)
select d.organization_id, d.form_id, '${month}'::date, d.counted - coalesce(s.count, 0)
  from (select organization_id, form_id, sum(greatest(count, 0)) as counted from submission_day_counts
         where slot = 0 and day >= '${month}'::date and day < '${nextMonth(month)}'::date group by 1, 2) d
  left join submission_month_counts s on s.form_id = d.form_id and s.month = '${month}'::date
 where d.counted <> coalesce(s.count, 0)
 order by d.form_id
on conflict (form_id, month) do update set count = m.count + excluded.count;`);
    }
  }

  override async down(): Promise<void> {
    this.addSql('drop index concurrently if exists submission_day_counts_unfolded_form_idx;');
  }
}

/** The first day of the month after `month` (YYYY-MM-01). */
function nextMonth(month: string): string {
  const [y, m] = month.split('-').map(Number);
  return new Date(Date.UTC(y, m, 1)).toISOString().slice(0, 10);
}
