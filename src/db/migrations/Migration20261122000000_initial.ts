import { Migration } from '@mikro-orm/migrations';

export class Migration20261122000000_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
create table system_settings (
  key text primary key,
  value text not null,
  created_at timestamptz not null default now()
);

create table organizations (
  id text primary key,
  name text not null,
  plan text not null check (plan in ('free','pro','business','enterprise')),
  monthly_quota integer check (monthly_quota >= 0),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

create table api_keys (
  id text primary key,
  organization_id text not null references organizations(id) on delete cascade,
  name text not null,
  key_hash text not null unique,
  prefix text not null,
  last4 text not null,
  scopes jsonb not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz,
  last_used_at timestamptz,
  revoked_at timestamptz
);
create index api_keys_org_idx on api_keys (organization_id);

create table forms (
  id text primary key,
  organization_id text not null references organizations(id) on delete cascade,
  title text not null,
  description text,
  slug text,
  status text not null check (status in ('draft','published','archived')),
  settings jsonb not null default '{}',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  deleted_at timestamptz
);
create index forms_org_updated_idx on forms (organization_id, updated_at desc) where deleted_at is null;
create unique index forms_org_slug_live_uniq on forms (organization_id, slug) where deleted_at is null and slug is not null;

create table form_pages (
  pk bigserial primary key,
  form_id text not null references forms(id) on delete cascade,
  page_id text not null,
  title text not null,
  description text,
  position integer not null,
  conditional_logic jsonb,
  unique (form_id, page_id)
);

create table form_fields (
  pk bigserial primary key,
  form_id text not null references forms(id) on delete cascade,
  field_id text not null,
  page_id text,
  type text not null,
  label text not null,
  placeholder text,
  description text,
  required boolean not null default false,
  config jsonb not null default '{}',
  validation_rules jsonb not null default '{}',
  position integer not null,
  conditional_logic jsonb,
  hidden boolean not null default false,
  prefill_param text,
  unique (form_id, field_id)
);

create table form_analytics_daily (
  form_id text not null references forms(id) on delete cascade,
  day date not null,
  views integer not null default 0,
  starts integer not null default 0,
  completions integer not null default 0,
  primary key (form_id, day)
);

create table submissions (
  id text primary key,
  organization_id text not null references organizations(id) on delete cascade,
  form_id text not null references forms(id) on delete cascade,
  data jsonb not null,
  submitter_email text,
  submitter_name text,
  source text not null check (source in ('api','public')),
  created_at timestamptz not null default now()
);
create index submissions_form_created_idx on submissions (form_id, created_at desc, id desc);

create table usage_counters (
  organization_id text not null references organizations(id) on delete cascade,
  month text not null,
  used integer not null default 0 check (used >= 0),
  primary key (organization_id, month)
);

create table usage_rollups (
  organization_id text not null references organizations(id) on delete cascade,
  form_id text not null,
  month text not null,
  submissions integer not null default 0,
  updated_at timestamptz not null default now(),
  primary key (organization_id, form_id, month)
);

create table payment_claims (
  payment_intent_id text primary key,
  organization_id text not null references organizations(id) on delete cascade,
  submission_id text not null,
  created_at timestamptz not null default now()
);

create table idempotency_keys (
  organization_id text not null references organizations(id) on delete cascade,
  key text not null,
  request_hash text not null,
  response_status integer not null,
  response_body jsonb not null,
  created_at timestamptz not null default now(),
  primary key (organization_id, key)
);
create index idempotency_keys_created_idx on idempotency_keys (created_at);

create table outbox (
  id bigserial primary key,
  topic text not null,
  payload jsonb not null,
  created_at timestamptz not null default now(),
  processed_at timestamptz
);
create index outbox_pending_idx on outbox (created_at) where processed_at is null;

create table webhooks (
  id text primary key,
  organization_id text not null references organizations(id) on delete cascade,
  form_id text references forms(id) on delete cascade,
  name text not null,
  url text not null,
  events jsonb not null,
  enabled boolean not null default true,
  secret_sealed text not null,
  failing_since timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index webhooks_org_idx on webhooks (organization_id);

create table webhook_deliveries (
  id text primary key,
  webhook_id text not null references webhooks(id) on delete cascade,
  organization_id text not null,
  event_id text not null,
  event_type text not null,
  payload text not null,
  status text not null check (status in ('pending','succeeded','failed')),
  attempts integer not null default 0,
  last_status_code integer,
  last_error text,
  next_attempt_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (event_id, webhook_id)
);
create index webhook_deliveries_webhook_idx on webhook_deliveries (webhook_id, created_at desc);

create table delivery_attempts (
  id bigserial primary key,
  delivery_id text not null references webhook_deliveries(id) on delete cascade,
  attempt_no integer not null,
  status_code integer,
  error text,
  duration_ms integer not null,
  response_excerpt text,
  created_at timestamptz not null default now()
);
create index delivery_attempts_delivery_idx on delivery_attempts (delivery_id);

create table crm_syncs (
  id text primary key,
  organization_id text not null,
  form_id text not null,
  submission_id text not null,
  integration_index integer not null,
  provider text not null,
  status text not null check (status in ('pending','succeeded','failed')),
  attempts integer not null default 0,
  last_status_code integer,
  last_error text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (submission_id, integration_index)
);
`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists crm_syncs, delivery_attempts, webhook_deliveries, webhooks, outbox,
      idempotency_keys, payment_claims, usage_rollups, usage_counters, submissions, form_analytics_daily,
      form_fields, form_pages, forms, api_keys, organizations, system_settings cascade;`);
  }
}
