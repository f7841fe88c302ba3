import { Migration } from '@mikro-orm/migrations';

/**
 * Every submission inserts an outbox row, and every index on outbox costs that insert. No read uses
 * outbox_pending_idx: the backlog count and the relay both take outbox_relay_idx, which has the same
 * predicate (processed_at is null), so the count's plan (an index-only scan) does not change.
 */
export class Migration20261123003000_hot_path_indexes extends Migration {
  override async up(): Promise<void> {
    this.addSql('drop index if exists outbox_pending_idx;');
  }

  override async down(): Promise<void> {
    this.addSql('create index if not exists outbox_pending_idx on outbox (created_at) where processed_at is null;');
  }
}
