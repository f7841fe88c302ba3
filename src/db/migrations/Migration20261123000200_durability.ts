import { Migration } from '@mikro-orm/migrations';

/**
 * What durability needs from the schema: every owed delivery and sync carries its next attempt time
 * (the sweep judges "overdue" from the row, not from Redis), the outbox relay backs off per row,
 * idempotency keys can be held while their first request runs, and retention and the usage roll-up
 * have indexes to work from.
 */
export class Migration20261123000200_durability extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
alter table webhook_deliveries add column retry_base integer not null default 0;
update webhook_deliveries set next_attempt_at = coalesce(next_attempt_at, created_at) where status = 'pending';
create index webhook_deliveries_owed_idx on webhook_deliveries (next_attempt_at) where status = 'pending';
create index webhook_deliveries_ended_idx on webhook_deliveries (updated_at) where status <> 'pending';

alter table crm_syncs add column next_attempt_at timestamptz;
update crm_syncs set next_attempt_at = created_at where status = 'pending';
create index crm_syncs_owed_idx on crm_syncs (next_attempt_at) where status = 'pending';
create index crm_syncs_ended_idx on crm_syncs (updated_at) where status <> 'pending';

alter table outbox add column relay_attempts integer not null default 0;
alter table outbox add column next_relay_at timestamptz not null default now() + interval '5 seconds';
create index outbox_relay_idx on outbox (next_relay_at) where processed_at is null;
create index outbox_processed_idx on outbox (processed_at) where processed_at is not null;

alter table idempotency_keys alter column response_status drop not null;
alter table idempotency_keys alter column response_body drop not null;
alter table idempotency_keys add column claim_token text;
alter table idempotency_keys add column lease_expires_at timestamptz;

create index submissions_created_idx on submissions (created_at);
`);
  }

  override async down(): Promise<void> {
    this.addSql(`
drop index if exists submissions_created_idx;
delete from idempotency_keys where response_status is null;
alter table idempotency_keys drop column lease_expires_at, drop column claim_token;
alter table idempotency_keys alter column response_status set not null, alter column response_body set not null;
drop index if exists outbox_processed_idx;
drop index if exists outbox_relay_idx;
alter table outbox drop column next_relay_at, drop column relay_attempts;
drop index if exists crm_syncs_ended_idx;
drop index if exists crm_syncs_owed_idx;
alter table crm_syncs drop column next_attempt_at;
drop index if exists webhook_deliveries_ended_idx;
drop index if exists webhook_deliveries_owed_idx;
alter table webhook_deliveries drop column retry_base;
`);
  }
}
