import { expect } from 'chai';
import { Client } from 'pg';
import { ADMIN_DB_TIMEOUTS, ensureDatabase, initOrm, migrate, MIGRATION_LOCK_TIMEOUT_MS, type Orm } from '../../src/db/orm';
import { dropDatabase, sideDatabaseUrl } from '../support/databases';

/**
 * The migration runner (src/db/orm.ts `migrate`, src/README.md "Writing a migration"): every
 * migration waits at most MIGRATION_LOCK_TIMEOUT_MS for a lock, so a live service's requests never
 * queue behind it for longer, and a migration that gave up is rolled back and run again.
 */
describe('migration runner', function () {
  this.timeout(60_000);
  const databaseUrl = sideDatabaseUrl('migrator');
  let orm: Orm;

  before(async () => {
    await ensureDatabase(databaseUrl);
    orm = await initOrm(databaseUrl, 1, { timeouts: ADMIN_DB_TIMEOUTS });
  });
  after(async () => {
    await orm?.close();
    await dropDatabase(databaseUrl);
  });

  it('gives up on a lock held by a long transaction, letting the readers queued behind it go, and retries until it applies', async () => {
    // Everything before the migration that alters `webhooks`, so that one is pending.
    await orm.getMigrator().up({ to: 'Migration20261126000000_submission_day_counts' });
    const holder = new Client({ connectionString: databaseUrl });
    const reader = new Client({ connectionString: databaseUrl });
    await Promise.all([holder.connect(), reader.connect()]);
    try {
      // A long transaction holding a weak lock (a slow read): the ALTER TABLE waits behind it, and
      // every read of `webhooks` queues behind the ALTER until it gives up.
      await holder.query('begin; select count(*) from webhooks;');
      const lines: string[] = [];
      const migrating = migrate(orm, (line) => lines.push(line));
      await new Promise((r) => setTimeout(r, 300));
      // Answers once the ALTER gave up (not after the holder's transaction: that ends below). Its
      // own statement_timeout, five times the bound, fails the test if the migration held it longer.
      await reader.query("set statement_timeout = '10s'");
      await reader.query('select count(*) from webhooks');
      await new Promise((r) => setTimeout(r, MIGRATION_LOCK_TIMEOUT_MS));
      await holder.query('commit');
      const applied = await migrating;

      const throttle = applied.find((m) => m.name === 'Migration20261126100000_webhook_throttle');
      expect(throttle, JSON.stringify(applied)).to.exist;
      expect(throttle!.attempts).to.be.greaterThan(1);
      expect(lines.join('\n')).to.match(/webhook_throttle: a statement waited 2000 ms for a lock/);
      const columns = await reader.query("select column_name from information_schema.columns where table_name = 'webhooks' and column_name = 'throttle_rate'");
      expect(columns.rowCount).to.equal(1);
      expect(await orm.getMigrator().getPendingMigrations()).to.deep.equal([]);
    } finally {
      await holder.query('rollback').catch(() => {});
      await Promise.all([holder.end(), reader.end()]);
    }
  });

  it('runs again a migration that lost a deadlock', async () => {
    const url = sideDatabaseUrl('migrator_deadlock');
    await ensureDatabase(url);
    const own = await initOrm(url, 1, { timeouts: ADMIN_DB_TIMEOUTS });
    const reader = new Client({ connectionString: url });
    const observer = new Client({ connectionString: url });
    try {
      // Everything before the one that drops the storing statement's foreign keys.
      await own.getMigrator().up({ to: 'Migration20261128000401_month_counts_backfill' });
      await Promise.all([reader.connect(), observer.connect()]);
      // A transaction that reads `submissions`, then `forms`: the migration locks `forms` and waits
      // for `submissions`; the read of `forms` waits for it, and PostgreSQL cancels the one that
      // waited first, the migration.
      await reader.query('begin; select count(*) from submissions;');
      const lines: string[] = [];
      const migrating = migrate(own, (line) => lines.push(line));
      for (let waited = 0; ; waited += 20) {
        const { rows } = await observer.query(`select 1 from pg_stat_activity
          where wait_event_type = 'Lock' and query like '%drop constraint if exists submissions_form_id_fkey1%'`);
        if (rows.length) break;
        if (waited > 10_000) throw new Error('the migration never waited for the reader');
        await new Promise((r) => setTimeout(r, 20));
      }
      await reader.query('select count(*) from forms');
      await reader.query('commit');
      const applied = await migrating;
      const dropped = applied.find((m) => m.name === 'Migration20261129000300_storing_without_foreign_keys');
      expect(dropped, JSON.stringify(applied)).to.exist;
      expect(dropped!.attempts).to.be.greaterThan(1);
      expect(lines.join('\n')).to.match(/storing_without_foreign_keys: a statement lost a deadlock/);
    } finally {
      await reader.query('rollback').catch(() => {});
      await Promise.all([reader.end().catch(() => {}), observer.end().catch(() => {})]);
      await own.close();
      await dropDatabase(url);
    }
  });
});
