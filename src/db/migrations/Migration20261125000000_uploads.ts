import { Migration } from '@mikro-orm/migrations';

/**
 * Files uploaded for file-upload fields (README "Files"): one row per upload, the bytes in the file
 * store. `status`: pending (announced, its bytes not checked yet), uploaded (bytes arrived and
 * checked), claimed (marked by the hourly sweep once a submission holds it, so the sweep's index
 * keeps only recent and unclaimed uploads), deleting (its bytes are being deleted; the row goes
 * after them). The claim itself is a row of `upload_claims` (CLAIM_KINDS of the storing statement).
 */
export class Migration20261125000000_uploads extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
create table uploads (
  id text primary key,
  organization_id text not null references organizations(id) on delete cascade,
  form_id text not null,
  field_id text not null,
  name text not null,
  type text not null,
  size bigint not null,
  status text not null default 'pending' check (status in ('pending', 'uploaded', 'claimed', 'deleting')),
  etag text,
  checked_at timestamptz,
  created_at timestamptz not null default now()
);
create index uploads_unclaimed_idx on uploads (created_at) where status in ('pending', 'uploaded');
create index uploads_deleting_idx on uploads (created_at) where status = 'deleting';

create table upload_claims (
  upload_id text primary key,
  organization_id text not null references organizations(id) on delete cascade,
  submission_id text not null,
  created_at timestamptz not null default now()
);
create index upload_claims_submission_idx on upload_claims (submission_id);
`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists upload_claims; drop table if exists uploads;');
  }
}
