import { expect } from 'chai';
import { loadConfig } from '../../config';
import { createAppContext } from '../../src/app';
import { createLogger } from '../../src/lib/logger';
import { maintenance } from '../../workers/processors/usage';
import { ensureDatabase, initOrm, type Orm } from '../../src/db/orm';
import { dropExpiredSubmissionPartitions, ensureSubmissionPartitions, PARTITION_MONTHS_AHEAD } from '../../src/domain/submissions/partitions';
import { dropDatabase, sideDatabaseUrl } from '../support/databases';
import { seed } from '../support/harness';

const BEFORE_PARTITIONS = 'Migration20261123000400_bulk';

async function partitionsOf(orm: Orm): Promise<string[]> {
  const rows = await orm.em.fork().getConnection().execute(
    `select c.relname from pg_inherits i join pg_class c on c.oid = i.inhrelid
      where i.inhparent = 'submissions'::regclass order by c.relname`);
  return rows.map((r: any) => r.relname);
}

/** The day counts' days (summed over slots) against the rows' days: equal when the counts are exact. */
async function expectDayCountsExact(orm: Orm): Promise<void> {
  const conn = orm.em.fork().getConnection();
  const byRows = await conn.execute(`select form_id, to_char(created_at at time zone 'UTC', 'YYYY-MM-DD') as day, count(*)::int as n
    from submissions group by 1, 2 order by 1, 2`);
  const byCounts = await conn.execute(`select form_id, to_char(day, 'YYYY-MM-DD') as day, sum(count)::int as n
    from submission_day_counts group by 1, 2 having sum(count) <> 0 order by 1, 2`);
  expect(byRows.length).to.be.greaterThan(0);
  expect(byCounts).to.deep.equal(byRows);
}

function monthName(d: Date): string {
  return `submissions_p${d.getUTCFullYear()}_${String(d.getUTCMonth() + 1).padStart(2, '0')}`;
}

/** Monthly partitions of submissions: the migration that moves a filled table, partitions ahead, retention by month. */
describe('partitioned submissions', function () {
  this.timeout(120_000);
  const databaseUrl = sideDatabaseUrl('partitions');
  let orm: Orm;

  before(async () => {
    await ensureDatabase(databaseUrl);
    orm = await initOrm(databaseUrl, 2);
  });
  after(async () => {
    await orm?.close();
    await dropDatabase(databaseUrl);
  });

  it('moves a filled unpartitioned table into monthly partitions without losing or changing a row', async () => {
    await orm.getMigrator().up({ to: BEFORE_PARTITIONS });
    const conn = orm.em.fork().getConnection();
    await conn.execute(`insert into organizations (id, name, plan) values ('org_p', 'p', 'enterprise')`);
    await conn.execute(`insert into forms (id, organization_id, title, status) values ('form_p', 'org_p', 'P', 'published')`);
    // 30,000 rows over the last 14 months, some of them on month boundaries.
    await seed(orm, `
      insert into submissions (id, organization_id, form_id, data, submitter_email, source, created_at)
      select 'sub_old' || g, 'org_p', 'form_p', jsonb_build_object('fld_n', g, 'fld_t', repeat('x', g % 50)),
             case when g % 3 = 0 then 'u' || g || '@example.com' end, case when g % 2 = 0 then 'api' else 'public' end,
             case when g % 1000 = 0 then date_trunc('month', now() - (g % 14) * interval '1 month')
                  else now() - ((g * 1201) % 604800) * interval '1 minute' end
        from generate_series(1, 30000) g`);
    const digest = `select count(*)::int as n, md5(string_agg(id || data::text || coalesce(submitter_email, '') || source || created_at::text, ',' order by id)) as sum from submissions`;
    const [before] = await conn.execute(digest);
    const [{ relkind: kindBefore }] = await conn.execute(`select relkind from pg_class where relname = 'submissions'`);
    expect(kindBefore).to.equal('r');

    await orm.getMigrator().up();

    const [after] = await conn.execute(digest);
    expect(after).to.deep.equal(before);
    expect(after.n).to.equal(30000);
    // the day counts' migration counted what was there
    await expectDayCountsExact(orm);
    const [{ relkind }] = await conn.execute(`select relkind from pg_class where relname = 'submissions'`);
    expect(relkind).to.equal('p');
    const partitions = await partitionsOf(orm);
    const now = new Date();
    // From the month of the oldest row (13 or 14 months back, depending on today's date) to the months ahead.
    const [{ oldest: oldestValue }] = await conn.execute(`select min(created_at) as oldest from submissions`);
    const oldest = new Date(oldestValue);
    const monthsBack = (now.getUTCFullYear() - oldest.getUTCFullYear()) * 12 + now.getUTCMonth() - oldest.getUTCMonth();
    expect(monthsBack).to.be.within(13, 14);
    for (let back = monthsBack; back >= -PARTITION_MONTHS_AHEAD; back--) {
      expect(partitions).to.include(monthName(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - back, 1))));
    }
    expect(partitions).to.not.include(monthName(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - monthsBack - 1, 1))));
    // every row sits in the partition of its own month
    const misplaced = await conn.execute(`
      select count(*)::int as n from submissions
       where tableoid::regclass::text <> 'submissions_p' || to_char(created_at at time zone 'UTC', 'YYYY_MM')`);
    expect(misplaced[0].n).to.equal(0);
    const [{ n: oldTable }] = await conn.execute(`select count(*)::int as n from pg_class where relname = 'submissions_unpartitioned'`);
    expect(oldTable).to.equal(0);
  });

  it('keeps months ahead ready, creating only what is missing', async () => {
    const now = new Date();
    const month = (offset: number) => monthName(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + offset, 1)));
    const later = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 2, 15));
    // the migration made months up to +3; two months later, +4 and +5 are missing
    const created = await ensureSubmissionPartitions(orm.em.fork(), later);
    expect(created).to.deep.equal([month(PARTITION_MONTHS_AHEAD + 1), month(PARTITION_MONTHS_AHEAD + 2)]);
    expect(await ensureSubmissionPartitions(orm.em.fork(), later)).to.deep.equal([]);
  });

  it('drops whole months past SUBMISSION_RETENTION_MONTHS and keeps the rest', async () => {
    const conn = orm.em.fork().getConnection();
    const now = new Date();
    const [{ n: total }] = await conn.execute('select count(*)::int as n from submissions');
    const cutoff = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 6, 1));
    const [{ n: kept }] = await conn.execute('select count(*)::int as n from submissions where created_at >= ?', [cutoff.toISOString()]);
    expect(kept).to.be.greaterThan(0).and.lessThan(total);

    const dropped = await dropExpiredSubmissionPartitions(orm.em.fork(), 6, now);
    expect(dropped).to.have.length.greaterThan(0);
    expect(dropped).to.not.include(monthName(cutoff));
    expect(dropped).to.include(monthName(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 7, 1))));
    const [{ n: left }] = await conn.execute('select count(*)::int as n from submissions');
    expect(left).to.equal(kept);
    const [{ n: older }] = await conn.execute('select count(*)::int as n from submissions where created_at < ?', [cutoff.toISOString()]);
    expect(older).to.equal(0);
    await expectDayCountsExact(orm);
  });

  it('is kept by the hourly maintenance: months ahead made, months past SUBMISSION_RETENTION_MONTHS dropped', async () => {
    const app = await createAppContext(
      loadConfig({ ...process.env, DATABASE_URL: databaseUrl, SUBMISSION_RETENTION_MONTHS: '3' }), createLogger('silent'));
    try {
      const now = new Date();
      const report = await maintenance(app);
      expect(report.submissionPartitionsCreated).to.deep.equal([]);
      expect(report.submissionPartitionsDropped).to.include(monthName(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 4, 1))));
      const partitions = await partitionsOf(orm);
      expect(partitions).to.include(monthName(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 3, 1))));
      expect(partitions).to.not.include(monthName(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 4, 1))));
    } finally {
      await app.close();
    }
  });
});
