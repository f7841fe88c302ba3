import { expect } from 'chai';
import { ADMIN_DB_TIMEOUTS, ensureDatabase, initOrm, type Orm } from '../../src/db/orm';
import { dropDatabase, sideDatabaseUrl } from '../support/databases';

const PARTIAL_INDEXES = ['webhook_deliveries_owed_idx', 'webhook_deliveries_ended_idx', 'webhook_deliveries_failed_idx'];

/**
 * The contract steps of the rollouts (Migration20261129000100_delivery_rollout_contract,
 * Migration20261129000200_month_counts_rollout_contract): down puts the bridge back as its expand
 * made it, valid indexes included, and up takes it away again.
 */
describe('rollout contract migrations', function () {
  this.timeout(120_000);
  const databaseUrl = sideDatabaseUrl('contract');
  let orm: Orm;

  before(async () => {
    await ensureDatabase(databaseUrl);
    orm = await initOrm(databaseUrl, 1, { timeouts: ADMIN_DB_TIMEOUTS });
    await orm.getMigrator().up();
  });
  after(async () => {
    await orm?.close();
    await dropDatabase(databaseUrl);
  });

  const query = (sql: string) => orm.em.getConnection().execute(sql);
  const indexes = async () => (await query(`select c.relname as name, i.indisvalid as valid from pg_index i join pg_class c on c.oid = i.indexrelid
    where c.relname in (${PARTIAL_INDEXES.map((n) => `'${n}'`).join(', ')}) order by c.relname`)) as Array<{ name: string; valid: boolean }>;
  const triggers = async () => (await query(`select tgname from pg_trigger where not tgisinternal
    and tgrelid in ('webhook_deliveries'::regclass, 'submission_day_counts'::regclass) order by tgname`)).map((r: any) => r.tgname as string);

  it('rolled back after a down that built an index and gave up before it was valid, has the three indexes valid and the triggers; up drops them again', async () => {
    expect(await indexes()).to.deep.equal([]);
    expect(await triggers()).to.deep.equal([]);
    // What a lock timeout in `create index concurrently` leaves behind: the index, marked invalid.
    await query(`create index webhook_deliveries_owed_idx on webhook_deliveries (next_attempt_at) where status = 'pending'`);
    await query(`update pg_index set indisvalid = false where indexrelid = 'webhook_deliveries_owed_idx'::regclass`);

    // down to the release before the contract steps (through the migrations after them, whatever they are)
    await orm.getMigrator().down({ to: 'Migration20261128000401_month_counts_backfill' });
    expect(await indexes()).to.deep.equal(PARTIAL_INDEXES.map((name) => ({ name, valid: true })).sort((a, b) => a.name.localeCompare(b.name)));
    expect(await triggers()).to.include.members([
      'submission_month_counts_follow_delete', 'submission_month_counts_follow_insert', 'submission_month_counts_follow_update',
      'webhook_deliveries_side_rows_delete', 'webhook_deliveries_side_rows_insert', 'webhook_deliveries_side_rows_update',
    ]);

    await orm.getMigrator().up();
    expect(await indexes()).to.deep.equal([]);
    expect(await triggers()).to.deep.equal([]);
  });
});
