import { Migration } from '@mikro-orm/migrations';

/**
 * `webhook_delivery_owed` takes a row inserted and deleted per delivery (src/README.md, "Webhook
 * deliveries and HOT updates"): a minute at 200 deliveries a second leaves some 12,000 dead rows
 * beside a few hundred live ones (bench:soak, test/bench/README.md). Autovacuum looks at a table at
 * most once per `autovacuum_naptime` (a minute by default); these settings make each look vacuum it:
 * a fixed threshold of dead rows instead of a share of its live ones (a share of the million rows a
 * paused webhook's backlog once put in it would let hundreds of thousands of dead ones pile up once
 * the backlog drains), and no cost delay (the table is small: vacuuming it is quick, and a slow one
 * lets the next minute's rows pile up behind it). Storage parameters only: SHARE UPDATE EXCLUSIVE,
 * reads and writes go on.
 */
export class Migration20261128000203_delivery_owed_autovacuum extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table webhook_delivery_owed set (
      autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000,
      autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 1000,
      autovacuum_vacuum_cost_delay = 0);`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table webhook_delivery_owed reset (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
      autovacuum_analyze_scale_factor, autovacuum_analyze_threshold, autovacuum_vacuum_cost_delay);`);
  }
}
