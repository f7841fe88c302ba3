import { Migration } from '@mikro-orm/migrations';

/**
 * The payment intents the service created for the hosted page (POST /public/forms/{id}/payments),
 * so that one that succeeded but backs no stored submission can be found and refunded.
 * `state`: open (made, not yet settled), claimed (a submission holds it), refunding (the refund is
 * claimed, its call to Stripe may still be owed), refunded, canceled (never paid, canceled at Stripe).
 */
export class Migration20261124020000_payment_intents extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
create table payment_intents (
  id text primary key,
  organization_id text not null references organizations(id) on delete cascade,
  form_id text not null,
  field_id text not null,
  amount bigint not null,
  currency text not null,
  state text not null default 'open' check (state in ('open', 'claimed', 'refunding', 'refunded', 'canceled')),
  refund_id text,
  refunded_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index payment_intents_unsettled_idx on payment_intents (created_at) where state in ('open', 'refunding');
`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists payment_intents;');
  }
}
