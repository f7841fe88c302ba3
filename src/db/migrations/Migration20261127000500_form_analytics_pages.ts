import { Migration } from '@mikro-orm/migrations';

/**
 * Drop-off (README "Languages", drop-off): how many visitors of the hosted page reached each page of a form,
 * per UTC day, beside the views, starts and completions of `form_analytics_daily`. Counters, one
 * upserted row per (form, day, page), never a row per event; no answer and no address is kept.
 * A new table: the previous release neither reads nor writes it. Its foreign key takes a brief
 * lock on `forms`, bounded by lock_timeout.
 */
export class Migration20261127000500_form_analytics_pages extends Migration {
  override async up(): Promise<void> {
    this.addSql(`set local lock_timeout = '2s';`);
    this.addSql(`create table if not exists form_analytics_pages (
      form_id text not null references forms(id) on delete cascade,
      day date not null,
      page_id text not null,
      reached integer not null default 0,
      primary key (form_id, day, page_id)
    );`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists form_analytics_pages;');
  }
}
