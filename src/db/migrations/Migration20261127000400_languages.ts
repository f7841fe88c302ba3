import { Migration } from '@mikro-orm/migrations';

/**
 * Languages (README.md "Languages"): `forms.translations` holds a form's translations of its own
 * texts per BCP 47 tag, `submissions.language` the language the hosted page was in when the
 * submission was made (null for API submissions). Expand only: both nullable without a default, so
 * adding them rewrites no row and the previous release's statements still insert as they did.
 * `lock_timeout` keeps the ALTERs from queueing behind long transactions on these busy tables (the
 * migration fails and is retried rather than stalling every submission behind it).
 */
export class Migration20261127000400_languages extends Migration {
  override async up(): Promise<void> {
    this.addSql(`set local lock_timeout = '2s';`);
    this.addSql('alter table forms add column if not exists translations jsonb;');
    this.addSql('alter table submissions add column if not exists language text;');
  }

  override async down(): Promise<void> {
    this.addSql('alter table submissions drop column if exists language;');
    this.addSql('alter table forms drop column if exists translations;');
  }
}
