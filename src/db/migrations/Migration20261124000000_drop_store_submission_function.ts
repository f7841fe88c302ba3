import { Migration } from '@mikro-orm/migrations';
import { Migration20261123004000_store_submission_function as Previous } from './Migration20261123004000_store_submission_function';

/**
 * Storing a submission is one set-based statement for 1..N submissions, owned by
 * src/domain/submissions/store.ts (STORE_SUBMISSIONS_SQL): no copy of its rules stays in the
 * database. Down restores the function as Migration20261123004000_store_submission_function wrote it.
 */
export class Migration20261124000000_drop_store_submission_function extends Migration {
  override async up(): Promise<void> {
    this.addSql(`drop function if exists store_submission(text, text, timestamptz, text, text, jsonb, text, text, text, timestamptz,
  text, text, text, jsonb, text, text, text, text[], jsonb, boolean, jsonb);`);
  }

  override async down(): Promise<void> {
    const previous = new Previous(this.driver, this.config);
    await previous.up();
    for (const sql of previous.getQueries()) this.addSql(sql);
  }
}
