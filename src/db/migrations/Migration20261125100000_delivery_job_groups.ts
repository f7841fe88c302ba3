import { Migration } from '@mikro-orm/migrations';

/**
 * The deliveries one storing statement creates go to the webhooks worker as one job
 * (`deliver-group-<job_group>`, src/queues/catalogue.ts). The column names that job, so the sweeps
 * of owed work and a manual retry can tell a delivery still waiting in a live group job from one
 * nobody queued. Null for deliveries queued on their own (fan-out jobs, older rows).
 */
export class Migration20261125100000_delivery_job_groups extends Migration {
  override async up(): Promise<void> {
    this.addSql('alter table webhook_deliveries add column if not exists job_group text;');
  }

  override async down(): Promise<void> {
    this.addSql('alter table webhook_deliveries drop column if exists job_group;');
  }
}
