import { Migration } from '@mikro-orm/migrations';
import { Migration20261128000400_submission_month_counts } from './Migration20261128000400_submission_month_counts';

/**
 * @contract-of Migration20261128000400_submission_month_counts
 *
 * The release before this one keeps the month rows in every statement that writes a day's slot 0
 * and writes no slot 0 elsewhere; so the trigger that followed the writes of the release before it
 * into the month rows during that rollout goes, with its function. Run again, it drops nothing more.
 */
export class Migration20261129000200_month_counts_rollout_contract extends Migration {
  override async up(): Promise<void> {
    this.addSql(`drop trigger if exists submission_month_counts_follow_insert on submission_day_counts;
drop trigger if exists submission_month_counts_follow_update on submission_day_counts;
drop trigger if exists submission_month_counts_follow_delete on submission_day_counts;
drop function if exists submission_month_counts_follow();`);
  }

  /** The trigger again, as its expand made it (its statements are idempotent). */
  override async down(): Promise<void> {
    const expand = new Migration20261128000400_submission_month_counts(this.driver, this.config);
    await expand.up();
    for (const sql of expand.getQueries()) this.addSql(sql);
  }
}
