import { Migration } from '@mikro-orm/migrations';

/**
 * `webhooks.last_success_at`: when the webhook's deliveries last succeeded, written at most every
 * SUCCESS_MARK_MS by the statements that record attempts (webhooks/store.ts), so that a failure
 * between successes does not start a failure streak and the webhook row is written a few times a
 * minute rather than twice per failed attempt (webhooks/policy.ts says when the streak starts and
 * ends). Nullable, no default: the previous release's statements neither read nor write it.
 */
export class Migration20261127000300_webhook_last_success extends Migration {
  override async up(): Promise<void> {
    this.addSql(`set local lock_timeout = '2s'`);
    this.addSql('alter table webhooks add column if not exists last_success_at timestamptz;');
  }

  override async down(): Promise<void> {
    this.addSql('alter table webhooks drop column if exists last_success_at;');
  }
}
