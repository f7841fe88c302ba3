import { expect } from 'chai';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { Migration20261128000401_month_counts_backfill } from '../../src/db/migrations/Migration20261128000401_month_counts_backfill';
import { runMaintenance } from '../../src/domain/maintenance/maintenance';
import { quotaMonth } from '../../src/domain/quotas/quota';
import { foldDayCounts, formSpansSql } from '../../src/domain/submissions/day-counts';
import { spanParts } from '../../src/domain/submissions/day-windows';
import { createSubmissionPartitions } from '../../src/domain/submissions/partitions';
import type { SubmissionRow } from '../../src/domain/submissions/storing-statement';
import { DELETE_SUBMISSION_SQL } from '../../src/domain/submissions/deletion';
import { rollupUsage } from '../../src/domain/usage/rollup';
import { newTimeOrderedId } from '../../src/lib/ids';
import { call, createPublishedForm, createTenant, fieldInput, startTestApp, type TestApp, type TestTenant } from '../support/harness';
import { expectDayCountsExact, expectMonthCountsExact } from '../support/day-counts';
import { DIST_ROOT } from '../support/processes';

const DAY_MS = 86_400_000;
const execFileAsync = promisify(execFile);

/**
 * Month counts (src/README.md, day counts): a form's total is its month rows plus its unfolded
 * slots, and a page reads the days of the months it lies in. Over an archive of many months, every
 * page and total equals the count(*)/OFFSET query before and after the fold, after deletions of old
 * rows, after a drift and its repair; the month rows stay the sum of their days' slot 0, kept by the
 * fold, the repair and retention themselves.
 */
describe('month counts', function () {
  this.timeout(120_000);
  let t: TestApp;
  let tenant: TestTenant;

  before(async () => {
    t = await startTestApp();
    tenant = await createTenant(t.app);
    await createSubmissionPartitions(t.app.orm.em.fork(), new Date(Date.now() - 460 * DAY_MS), 17);
  });
  after(async () => {
    await t.close();
  });

  async function newForm() {
    const form = await createPublishedForm(t.url, tenant.key, [fieldInput('fld_n', 'text', 'N')]);
    return (await t.app.formCache.get(form.id, true))!;
  }

  function rowAt(form: { id: string; updatedAt: Date }, createdAt: Date, n: number): SubmissionRow {
    return {
      id: newTimeOrderedId('sub', createdAt), organizationId: tenant.organizationId, formId: form.id, formUpdatedAt: form.updatedAt,
      month: quotaMonth(createdAt), data: { fld_n: String(n) }, submitterEmail: null, submitterName: null, source: 'api',
      createdAt, claims: [], idempotency: null,
    };
  }

  async function storeAll(rows: SubmissionRow[]): Promise<void> {
    for (let i = 0; i < rows.length; i += 25) {
      const outcomes = await Promise.all(rows.slice(i, i + 25).map((row) => t.app.submissionWriter.store(row)));
      expect(outcomes.map((o) => o.kind)).to.deep.equal(outcomes.map(() => 'created'));
    }
  }

  /** A row as a restore or a hand fix writes it: no count. */
  async function insertUncounted(formId: string, createdAt: Date, n: number): Promise<string> {
    const id = newTimeOrderedId('sub', createdAt);
    await t.query(
      `insert into submissions (id, organization_id, form_id, data, source, created_at) values (?, ?, ?, ?::jsonb, 'api', ?)`,
      [id, tenant.organizationId, formId, JSON.stringify({ fld_n: `u${n}` }), createdAt.toISOString()]);
    return id;
  }

  const list = (formId: string, qs: string) => call(t.url, 'GET', `/v1/forms/${formId}/submissions?${qs}`, { key: tenant.key });

  async function naive(formId: string, from: Date | null, until: Date | null, offset: number, limit: number) {
    const where = ['form_id = ?'];
    const params: unknown[] = [formId];
    if (from) { where.push('created_at >= ?'); params.push(from.toISOString()); }
    if (until) { where.push('created_at < ?'); params.push(until.toISOString()); }
    const ids = await t.query(`select id from submissions where ${where.join(' and ')} order by created_at desc, id desc limit ? offset ?`,
      [...params, limit, offset]);
    const [{ n }] = await t.query(`select count(*)::int as n from submissions where ${where.join(' and ')}`, params);
    return { ids: ids.map((r: any) => r.id), total: n };
  }

  /** Every filter's total, and its pages at offsets across the archive, against count(*)/OFFSET; the month rows exact. */
  async function expectPagesExact(formId: string, label: string): Promise<void> {
    const day = (daysAgo: number) => new Date(Math.floor(Date.now() / DAY_MS) * DAY_MS - daysAgo * DAY_MS).toISOString().slice(0, 10);
    const filters: Array<{ qs: string; from: Date | null; until: Date | null }> = [
      { qs: '', from: null, until: null },
      // whole months between edge months, and a first day on a month's first
      { qs: `startDate=${day(400)}&endDate=${day(35)}`, from: new Date(`${day(400)}T00:00:00Z`), until: new Date(`${day(34)}T00:00:00Z`) },
      { qs: `startDate=${day(300).slice(0, 8)}01`, from: new Date(`${day(300).slice(0, 8)}01T00:00:00Z`), until: null },
      { qs: `endDate=${day(90)}`, from: null, until: new Date(`${day(89)}T00:00:00Z`) },
      // date-times: partial edge days
      { qs: `startDate=${day(250)}T13:30:00Z&endDate=${day(20)}T06:00:00.000Z`,
        from: new Date(`${day(250)}T13:30:00Z`), until: new Date(Date.parse(`${day(20)}T06:00:00Z`) + 1) },
    ];
    for (const f of filters) {
      const expected = await naive(formId, f.from, f.until, 0, 1);
      const limit = 9;
      const offsets = [...new Set([0, 4, Math.floor(expected.total / 3), Math.floor(expected.total / 2), expected.total - limit - 3,
        expected.total - limit, expected.total - 1, expected.total, expected.total + 2].filter((o) => o >= 0))];
      for (const offset of offsets) {
        const res = await list(formId, `${f.qs}&limit=${limit}&offset=${offset}`);
        expect(res.status, `${label}: ${f.qs} offset ${offset}`).to.equal(200);
        const old = await naive(formId, f.from, f.until, offset, limit);
        expect(res.body.pagination.total, `${label}: ${f.qs} total`).to.equal(old.total);
        expect(res.body.submissions.map((s: any) => s.id), `${label}: ${f.qs} offset ${offset}`).to.deep.equal(old.ids);
      }
    }
    await expectDayCountsExact(t, tenant, formId);
  }

  async function monthRows(formId: string): Promise<Record<string, number>> {
    const rows = await t.query(`select to_char(month, 'YYYY-MM') as month, count::int as n from submission_month_counts where form_id = ? and count <> 0`, [formId]);
    return Object.fromEntries(rows.map((r: any) => [r.month, r.n]));
  }

  /** An archive of 15 months: 3 to 9 rows on one day in three, today's included. */
  async function archive() {
    const form = await newForm();
    const now = Date.now();
    const rows: SubmissionRow[] = [];
    for (let d = 0; d < 455; d += 3) {
      for (let k = 0; k < 3 + ((d * 7) % 7); k++) rows.push(rowAt(form, new Date(now - d * DAY_MS - (k * 3_600_000) % (20 * 3_600_000) - 60_000), rows.length));
    }
    await storeAll(rows);
    return { form, rows };
  }

  it('answers every page and total over an archive of many months as count(*)/OFFSET, before and after the fold, after old rows are deleted', async () => {
    const { form, rows } = await archive();
    expect(await monthRows(form.id), 'nothing folded: no month row yet').to.deep.equal({});
    await expectPagesExact(form.id, 'unfolded');

    while (await foldDayCounts(t.app.orm.em.fork()) > 0);
    expect(Object.keys(await monthRows(form.id)).length, 'a month row per month folded').to.be.at.least(14);
    await expectPagesExact(form.id, 'folded');

    // deletions of old rows (each adds an unfolded slot to its day), read before and after the next fold
    const deleted = rows.filter((_, i) => i % 11 === 5);
    for (const row of deleted) expect((await call(t.url, 'DELETE', `/v1/submissions/${row.id}`, { key: tenant.key })).status).to.equal(204);
    await expectPagesExact(form.id, 'old rows deleted');
    while (await foldDayCounts(t.app.orm.em.fork()) > 0);
    await expectPagesExact(form.id, 'deletions folded');

    // analytics and the usage roll-up read the one way
    const listTotal = (await list(form.id, 'limit=1')).body.pagination.total;
    expect(listTotal).to.equal(rows.length - deleted.length);
    await rollupUsage(t.app.orm.em.fork(), { full: true });
    const usage = await t.query(
      `select month, submissions from usage_rollups where form_id = ? and month >= to_char(now() at time zone 'UTC' - interval '1 month', 'YYYY-MM') order by month`, [form.id]);
    const byMonth = await t.query(
      `select to_char(created_at at time zone 'UTC', 'YYYY-MM') as month, count(*)::int as submissions from submissions
        where form_id = ? and created_at >= date_trunc('month', now() at time zone 'UTC' - interval '1 month') at time zone 'UTC' group by 1 order by 1`, [form.id]);
    expect(usage).to.deep.equal(byMonth);
  });

  it('adds what the fold moves into slot 0 to the month row, in the fold\'s own statement', async () => {
    const form = await newForm();
    const old = new Date(Date.now() - 40 * DAY_MS);
    await storeAll([0, 1, 2].map((i) => rowAt(form, new Date(old.getTime() + i * 1000), i)));
    const month = old.toISOString().slice(0, 7);
    expect(await monthRows(form.id)).to.deep.equal({});
    // as after the trigger of the rollout is dropped: nothing but the fold itself may keep the month row
    await t.query('alter table submission_day_counts disable trigger user');
    try {
      while (await foldDayCounts(t.app.orm.em.fork()) > 0);
      expect(await monthRows(form.id)).to.deep.equal({ [month]: 3 });
      await expectMonthCountsExact(t, form.id);
      expect((await list(form.id, 'limit=1')).body.pagination.total).to.equal(3);
    } finally {
      await t.query('alter table submission_day_counts enable trigger user');
    }
  });

  it('repairs a drifted day into its month row, and a drifted month row (counts check, counts repair, the hourly repair)', async () => {
    const { form, rows } = await archive();
    while (await foldDayCounts(t.app.orm.em.fork()) > 0);
    // rows behind the counts' back on old days, a counted row removed behind them
    await insertUncounted(form.id, new Date(Date.now() - 200 * DAY_MS), 1);
    await insertUncounted(form.id, new Date(Date.now() - 201 * DAY_MS), 2);
    await t.query('delete from submissions where id = ?', [rows[rows.length - 1].id]);
    expect((await list(form.id, 'limit=1')).body.pagination.total, 'the drift shows').to.not.equal(rows.length + 1);
    // and a month row drifted by hand
    const drifted = new Date(Date.now() - 120 * DAY_MS).toISOString().slice(0, 7);
    await t.query('alter table submission_day_counts disable trigger user');
    await t.query(`update submission_month_counts set count = count + 5 where form_id = ? and month = ?::date`, [form.id, `${drifted}-01`]);
    await t.query('alter table submission_day_counts enable trigger user');

    const cli = async (...args: string[]) => {
      try {
        const { stdout } = await execFileAsync(process.execPath, [path.join(DIST_ROOT, 'src/cli/index.js'), ...args], { env: { ...process.env, NODE_NO_WARNINGS: '1' } });
        return { code: 0, lines: stdout.trim().split('\n').map((l) => JSON.parse(l)) };
      } catch (err: any) {
        return { code: err.code as number, lines: err.stdout.trim().split('\n').map((l: string) => JSON.parse(l)) };
      }
    };
    const check = await cli('counts', 'check', '--form', form.id);
    expect(check.code).to.equal(1);
    const month = check.lines.find((l: any) => l.month === drifted);
    expect(month).to.include({ formId: form.id });
    expect(month.stored - month.counted).to.equal(5);
    expect(check.lines.filter((l: any) => l.day).length).to.equal(3);
    const repaired = await cli('counts', 'repair', '--form', form.id);
    expect(repaired.code).to.equal(0);
    expect(repaired.lines[repaired.lines.length - 1]).to.deep.equal({ forms: 1, repaired: 4 });
    await expectPagesExact(form.id, 'repaired');
    expect((await cli('counts', 'check', '--form', form.id)).code).to.equal(0);

    // the hourly repair: a month row drifted by hand in a month whose rows are written meanwhile
    await runMaintenance(t.app.orm.em.fork());
    const recent = new Date(Date.now() - 5 * DAY_MS);
    await t.query('alter table submission_day_counts disable trigger user');
    await t.query(`update submission_month_counts set count = count - 2 where form_id = ? and month = ?::date`, [form.id, `${recent.toISOString().slice(0, 7)}-01`]);
    await t.query('alter table submission_day_counts enable trigger user');
    await storeAll([rowAt(form, new Date(Date.now() - 60_000), 9999)]);
    expect((await runMaintenance(t.app.orm.em.fork())).dayCountsRepaired).to.be.at.least(1);
    await expectPagesExact(form.id, 'hourly repair');
  });

  it('reads a form\'s total from its month rows and, through their index, its unfolded slots: not a row per day', async () => {
    // 200 forms of 150 folded days each, their month rows, and a few unfolded slots of the first
    const em = t.app.orm.em.fork();
    await em.transactional(async (tx) => {
      await tx.execute(
        `insert into submission_day_counts (organization_id, form_id, day, slot, count)
         select ?, 'form_plan' || (i % 200), current_date - 3 - (i / 200), 0, 2 from generate_series(0, 29999) i`, [tenant.organizationId]);
      await tx.execute(
        `insert into submission_month_counts (organization_id, form_id, month, count)
         select organization_id, form_id, date_trunc('month', day::timestamp)::date, sum(count) from submission_day_counts
          where form_id like 'form_plan%' group by 1, 2, 3`);
      await tx.execute(
        `insert into submission_day_counts (organization_id, form_id, day, slot, count)
         select ?, 'form_plan0', current_date - d, 5, 1 from unnest(array[0, 1, 40, 90]) d`, [tenant.organizationId]);
    });
    await t.query('analyze submission_day_counts');
    await t.query('analyze submission_month_counts');
    try {
      const { sql, params } = formSpansSql(tenant.organizationId, 'form_plan0', spanParts({ first: null, last: null }))!;
      const [{ 'QUERY PLAN': plan }] = await t.query(`explain (analyze, format json) ${sql}`, params);
      const read: Record<string, number> = {};
      const scans: string[] = [];
      const walk = (node: any) => {
        const table = node['Relation Name'];
        if (table) {
          read[table] = (read[table] ?? 0) + node['Actual Rows'] * node['Actual Loops'] + (node['Rows Removed by Filter'] ?? 0) * node['Actual Loops'];
          scans.push(`${node['Node Type']} ${node['Index Name'] ?? table}`);
        }
        for (const child of node.Plans ?? []) walk(child);
      };
      walk(plan[0].Plan);
      expect(scans.some((s) => s.includes('submission_day_counts_unfolded_form_idx')), scans.join(', ')).to.equal(true);
      expect(scans.filter((s) => s.startsWith('Seq Scan')), scans.join(', ')).to.deep.equal([]);
      // its 6 month rows, its 4 unfolded slots and their days' slot 0: not its 150 days
      expect(read.submission_day_counts, scans.join(', ')).to.be.at.most(16);
      expect(read.submission_month_counts).to.be.at.most(7);
      const [{ total }] = await t.query(`select sum(count)::int as total from (${sql}) s`, params);
      expect(total).to.equal(150 * 2 + 4);
    } finally {
      await em.transactional(async (tx) => {
        await tx.execute(`delete from submission_day_counts where form_id like 'form_plan%'`);
        await tx.execute(`delete from submission_month_counts where form_id like 'form_plan%'`);
      });
    }
  });

  it('rebuilds the month rows from none by the backfill its migration runs, and adds nothing run again', async () => {
    const { form } = await archive();
    await storeAll([rowAt(form, new Date(Date.now() - 50 * DAY_MS), 3)]);
    while (await foldDayCounts(t.app.orm.em.fork()) > 0);
    await expectPagesExact(form.id, 'folded');

    // the backfill (what the migration runs): from no month row at all, and run again
    const months = await monthRows(form.id);
    await t.query('delete from submission_month_counts where form_id = ?', [form.id]);
    const backfill = async () => {
      const migration = new Migration20261128000401_month_counts_backfill(t.app.orm.em.getDriver(), t.app.orm.config);
      await migration.up();
      for (const sql of migration.getQueries()) if (typeof sql === 'string' && sql.startsWith('insert')) await t.query(sql);
    };
    await backfill();
    expect(await monthRows(form.id)).to.deep.equal(months);
    await backfill();
    expect(await monthRows(form.id)).to.deep.equal(months);
    await expectPagesExact(form.id, 'backfilled');
  });
});
