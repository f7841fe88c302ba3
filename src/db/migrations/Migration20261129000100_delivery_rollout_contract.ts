import { Migration } from '@mikro-orm/migrations';
import { Migration20261128000200_delivery_owed } from './Migration20261128000200_delivery_owed';

/**
 * @contract-of Migration20261128000200_delivery_owed
 *
 * The release before this one writes each delivery's owed and failed rows itself and reads them,
 * never the partial indexes on `status`; so what bridged the rollout from the release before it goes:
 * - the triggers `webhook_deliveries_side_rows_*` and their function, which kept the side tables
 *   exact for a release that wrote deliveries without them;
 * - the partial indexes `webhook_deliveries_owed_idx`, `…_ended_idx` and `…_failed_idx`, which that
 *   release's sweeps, retention and recovery were planned on. Their predicate on `status` is what
 *   kept every status change of a delivery from being a HOT update (src/README.md, "Webhook
 *   deliveries and HOT updates"): with them gone, recording an attempt changes no indexed column.
 * Each index is dropped `concurrently` (outside a transaction: src/README.md, "Writing a migration"),
 * so deliveries are written meanwhile; the triggers go in one statement (a brief lock of the table,
 * within the runner's lock timeout). Run again, it drops nothing more.
 */
export class Migration20261129000100_delivery_rollout_contract extends Migration {
  override isTransactional(): boolean {
    return false;
  }

  override async up(): Promise<void> {
    this.addSql(`drop trigger if exists webhook_deliveries_side_rows_insert on webhook_deliveries;
drop trigger if exists webhook_deliveries_side_rows_update on webhook_deliveries;
drop trigger if exists webhook_deliveries_side_rows_delete on webhook_deliveries;
drop function if exists webhook_deliveries_side_rows();`);
    this.addSql('drop index concurrently if exists webhook_deliveries_owed_idx;');
    this.addSql('drop index concurrently if exists webhook_deliveries_ended_idx;');
    this.addSql('drop index concurrently if exists webhook_deliveries_failed_idx;');
  }

  /**
   * The bridge again, as its expand made it (its statements are idempotent), and the three indexes,
   * each dropped first: one a lock timeout left invalid in an earlier attempt would otherwise stand,
   * unused by the planner, in its place.
   */
  override async down(): Promise<void> {
    const expand = new Migration20261128000200_delivery_owed(this.driver, this.config);
    await expand.up();
    for (const sql of expand.getQueries()) this.addSql(sql);
    const indexes: Array<[string, string]> = [
      ['webhook_deliveries_owed_idx', "(next_attempt_at) where status = 'pending'"],
      ['webhook_deliveries_ended_idx', "(updated_at) where status <> 'pending'"],
      ['webhook_deliveries_failed_idx', "(webhook_id, created_at) where status = 'failed'"],
    ];
    for (const [name, definition] of indexes) {
      this.addSql(`drop index concurrently if exists ${name};`);
      this.addSql(`create index concurrently ${name} on webhook_deliveries ${definition};`);
    }
  }
}
