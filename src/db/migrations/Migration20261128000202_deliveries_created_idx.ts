import { Migration } from '@mikro-orm/migrations';

/**
 * Retention finds ended deliveries by `created_at` (never updated; with `id`, the order its pages
 * walk in) rather than through the partial index on `updated_at` that the next release drops
 * (maintenance/store.ts, deleteEndedDeliveries).
 * Built `concurrently` (outside a transaction: src/README.md, "Writing a migration"), so deliveries
 * are written meanwhile; an index a lock timeout left invalid is dropped before building again.
 * Expand only: the previous release does not read it.
 */
export class Migration20261128000202_deliveries_created_idx extends Migration {
  override isTransactional(): boolean {
    return false;
  }

  override async up(): Promise<void> {
    this.addSql(`drop index concurrently if exists webhook_deliveries_created_idx;`);
    this.addSql('create index concurrently webhook_deliveries_created_idx on webhook_deliveries (created_at, id);');
  }

  override async down(): Promise<void> {
    this.addSql('drop index concurrently if exists webhook_deliveries_created_idx;');
  }
}
