import { Migration } from '@mikro-orm/migrations';

export class Migration20261123000300_webhooks extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
alter table webhooks
  add column previous_secret_sealed text,
  add column previous_secret_expires_at timestamptz;

-- Recovery walks the failed deliveries of one webhook over a time window; succeeded ones, the vast
-- majority, stay out of the index.
create index webhook_deliveries_failed_idx on webhook_deliveries (webhook_id, created_at) where status = 'failed';
`);
  }

  override async down(): Promise<void> {
    this.addSql(`
drop index if exists webhook_deliveries_failed_idx;
alter table webhooks drop column if exists previous_secret_sealed, drop column if exists previous_secret_expires_at;
`);
  }
}
