import { Migration } from '@mikro-orm/migrations';

/**
 * Per-webhook throttling (README "Webhooks"): `throttle_rate` is the most deliveries a second the
 * webhook takes (null: unlimited), enforced across worker processes in Redis; `paused_until` is
 * when a receiver's `429` with `Retry-After` lets its deliveries go again, read with every attempt.
 */
export class Migration20261126100000_webhook_throttle extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table webhooks
      add column if not exists throttle_rate integer check (throttle_rate between 1 and 10000),
      add column if not exists paused_until timestamptz;`);
  }

  override async down(): Promise<void> {
    this.addSql('alter table webhooks drop column if exists paused_until, drop column if exists throttle_rate;');
  }
}
