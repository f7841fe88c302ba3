import { expect } from 'chai';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { initOrm } from '../../src/db/orm';
import { runMaintenance } from '../../src/domain/maintenance/maintenance';
import { rollupUsage } from '../../src/domain/usage/rollup';
import { walkDayCounts, type FormDrift } from '../../src/domain/maintenance/day-count-repair';
import { quotaMonth } from '../../src/domain/quotas/quota';
import { FOLD_DAY_COUNTS_SQL, foldDayCounts } from '../../src/domain/submissions/day-counts';
import { DELETE_SUBMISSION_SQL } from '../../src/domain/submissions/deletion';
import { createSubmissionPartitions, dropExpiredSubmissionPartitions } from '../../src/domain/submissions/partitions';
import type { SubmissionRow } from '../../src/domain/submissions/storing-statement';
import { newTimeOrderedId } from '../../src/lib/ids';
import { call, createPublishedForm, createTenant, fieldInput, startTestApp, type TestApp, type TestTenant } from '../support/harness';
import { expectDayCountsExact } from '../support/day-counts';
import { DIST_ROOT } from '../support/processes';

const DAY_MS = 86_400_000;
const execFileAsync = promisify(execFile);

/**
 * Day counts that heal (README "Day counts that heal"): the counts are checked and repaired from the
 * rows while creates and deletes go on, the hourly maintenance heals what a previous release wrote
 * without counting, the fold and retention keep every concurrent writer's count, and the list and
 * analytics read the total one way.
 */
describe('day counts that heal', function () {
  this.timeout(60_000);
  let t: TestApp;
  let tenant: TestTenant;
  const clients: Client[] = [];

  before(async () => {
    t = await startTestApp();
    tenant = await createTenant(t.app);
    await createSubmissionPartitions(t.app.orm.em.fork(), new Date(Date.now() - 200 * DAY_MS), 8);
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.end().catch(() => {})));
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
    const outcomes = await Promise.all(rows.map((row) => t.app.submissionWriter.store(row)));
    expect(outcomes.map((o) => o.kind)).to.deep.equal(rows.map(() => 'created'));
  }

  /**
   * The form's days counted in slot 0 alone, as the fold leaves them (and their month rows with
   * them, as the fold keeps them), whatever their age: the state of an archive's days.
   */
  async function countInSlotZero(formId: string): Promise<void> {
    await t.query(
      `with gone as (delete from submission_day_counts where form_id = ? returning organization_id, form_id, day, slot, count),
       moved as (
         insert into submission_day_counts (organization_id, form_id, day, slot, count)
         select organization_id, form_id, day, 0, sum(count) from gone group by 1, 2, 3
         returning organization_id, form_id, day, count
       ), before as (
         select form_id, day, count from gone where slot = 0
       )
       insert into submission_month_counts as m (organization_id, form_id, month, count)
       select n.organization_id, n.form_id, date_trunc('month', n.day::timestamp)::date,
              sum(greatest(n.count, 0) - greatest(coalesce(b.count, 0), 0))
         from moved n left join before b using (form_id, day) group by 1, 2, 3
       on conflict (form_id, month) do update set count = m.count + excluded.count`, [formId]);
  }

  /** A submission stored as the previous release stored it (and as a restore or a hand fix does): its row, no count. */
  async function insertUncounted(formId: string, createdAt: Date, n: number): Promise<string> {
    const id = newTimeOrderedId('sub', createdAt);
    await t.query(
      `insert into submissions (id, organization_id, form_id, data, source, created_at) values (?, ?, ?, ?::jsonb, 'api', ?)`,
      [id, tenant.organizationId, formId, JSON.stringify({ fld_n: `u${n}` }), createdAt.toISOString()]);
    return id;
  }

  /** A deletion as the previous release made it: the row and its change record, no count. */
  async function deleteUncounted(formId: string, id: string): Promise<void> {
    await t.query('delete from submissions where id = ?', [id]);
    await t.query(`insert into submission_changes (organization_id, form_id, submission_id, type) values (?, ?, ?, 'submission.deleted')`,
      [tenant.organizationId, formId, id]);
  }

  /** A connection of its own whose backend pid passes `wanted`. */
  async function clientWithPid(wanted: (pid: number) => boolean): Promise<{ client: Client; pid: number }> {
    for (;;) {
      const client = new Client({ connectionString: process.env.DATABASE_URL });
      await client.connect();
      const { rows: [{ pid }] } = await client.query('select pg_backend_pid() as pid');
      if (wanted(pid)) {
        clients.push(client);
        return { client, pid };
      }
      await client.end();
    }
  }

  /** The service's own deleting statement, run on `client` (its `?` placeholders as $n). */
  async function deleteOn(client: Client, id: string): Promise<void> {
    let n = 0;
    const { rowCount } = await client.query(DELETE_SUBMISSION_SQL.replace(/\?/g, () => `$${++n}`), [id, tenant.organizationId]);
    expect(rowCount).to.equal(1);
  }

  /** Until `backends` other backends running a statement containing `text` wait on a lock. */
  async function waitUntilBlocked(text: string, backends = 1): Promise<void> {
    for (;;) {
      const rows = await t.query(
        `select 1 from pg_stat_activity where wait_event_type = 'Lock' and query like ? and pid <> pg_backend_pid()`, [`%${text}%`]);
      if (rows.length >= backends) return;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  const list = (formId: string, qs: string) => call(t.url, 'GET', `/v1/forms/${formId}/submissions?${qs}`, { key: tenant.key });

  const expectCountsExact = (formId: string) => expectDayCountsExact(t, tenant, formId);

  async function repairForm(formId: string): Promise<FormDrift[]> {
    const found: FormDrift[] = [];
    await walkDayCounts(t.app.orm.em.fork(), { repair: true, formId }, (d) => found.push(d));
    return found;
  }

  async function cli(...args: string[]): Promise<{ code: number; lines: any[]; stderr: string }> {
    try {
      const { stdout, stderr } = await execFileAsync(process.execPath, [path.join(DIST_ROOT, 'src/cli/index.js'), ...args],
        { env: { ...process.env, NODE_NO_WARNINGS: '1' } });
      return { code: 0, lines: stdout.trim().split('\n').map((l) => JSON.parse(l)), stderr };
    } catch (err: any) {
      return { code: err.code, lines: err.stdout.trim() ? err.stdout.trim().split('\n').map((l: string) => JSON.parse(l)) : [], stderr: err.stderr };
    }
  }

  it('keeps the counts exact when a deletion races the create of the same id', async () => {
    const form = await newForm();
    const rows = Array.from({ length: 16 }, (_, i) => rowAt(form, new Date(Date.now() - (i % 3) * DAY_MS - 1000), i));
    await Promise.all(rows.map(async (row) => {
      const stored = t.app.submissionWriter.store(row);
      // deletions of the same id while its create is in flight, and one after it committed
      const early = await Promise.all([0, 1, 2].map(() => call(t.url, 'DELETE', `/v1/submissions/${row.id}`, { key: tenant.key })));
      expect((await stored).kind).to.equal('created');
      const late = await call(t.url, 'DELETE', `/v1/submissions/${row.id}`, { key: tenant.key });
      expect([...early, late].filter((r) => r.status === 204)).to.have.length(1);
    }));
    expect(await t.query('select id from submissions where form_id = ?', [form.id])).to.deep.equal([]);
    expect(await expectCountsExact(form.id)).to.equal(0);
  });

  it('picks the days to fold through the index of unfolded slots, not a scan of the folded archive', async () => {
    // an archive of 40,000 folded form-days (written as the fold writes them, keeping the month rows:
    // none, these forms being read by no test), and a few unfolded slots
    await t.app.orm.em.fork().transactional(async (tx) => {
      await tx.execute(
        `insert into submission_day_counts (organization_id, form_id, day, slot, count)
         select ?, 'form_archive' || (i % 400), current_date - 10 - (i / 400), 0, 3 from generate_series(0, 39999) i`, [tenant.organizationId]);
    });
    await t.query(
      `insert into submission_day_counts (organization_id, form_id, day, slot, count)
       select ?, 'form_archive' || i, current_date - 20, 3, 1 from generate_series(0, 4) i`, [tenant.organizationId]);
    await t.query('analyze submission_day_counts');
    try {
      const [{ 'QUERY PLAN': plan }] = await t.query(`explain (format json) ${FOLD_DAY_COUNTS_SQL.replace('?', '10000')}`);
      const scans: string[] = [];
      const walk = (node: any) => {
        if (node['Relation Name'] === 'submission_day_counts') scans.push(`${node['Node Type']} ${node['Index Name'] ?? ''}`.trim());
        for (const child of node.Plans ?? []) walk(child);
      };
      walk(plan[0].Plan);
      expect(scans.some((s) => s.includes('submission_day_counts_unfolded_idx')), scans.join(', ')).to.equal(true);
      expect(scans.filter((s) => s.startsWith('Seq Scan')), scans.join(', ')).to.deep.equal([]);
      expect(await foldDayCounts(t.app.orm.em.fork())).to.be.at.least(5);
      const [{ n }] = await t.query(`select count(*)::int as n from submission_day_counts where form_id like 'form_archive%' and slot <> 0`);
      expect(n).to.equal(0);
    } finally {
      await t.app.orm.em.fork().transactional(async (tx) => {
        await tx.execute(`delete from submission_day_counts where form_id like 'form_archive%'`);
        await tx.execute(`delete from submission_month_counts where form_id like 'form_archive%'`);
      });
    }
  });

  it('deletes a month\'s counts after its partition is detached: a writer in that month leaves no orphan count', async () => {
    const form = await newForm();
    const now = new Date();
    const old = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 4, 10, 12));
    const rows = Array.from({ length: 3 }, (_, i) => rowAt(form, new Date(old.getTime() + i * 1000), i));
    await storeAll(rows);
    await countInSlotZero(form.id);

    // a deletion in that month, its count in a new slot row, still open when retention starts
    const { client } = await clientWithPid(() => true);
    await client.query('begin');
    await deleteOn(client, rows[0].id);
    const dropping = dropExpiredSubmissionPartitions(t.app.orm.em.fork(), 2, now);
    await waitUntilBlocked('drop_submission_partitions_before');
    await client.query('commit');
    expect(await dropping).to.include(`submissions_p${quotaMonth(old).replace('-', '_')}`);
    expect(await t.query('select day, slot, count from submission_day_counts where form_id = ?', [form.id])).to.deep.equal([]);
    expect(await expectCountsExact(form.id)).to.equal(0);
  });

  it('repairs while creates, deletes and folds go on, losing none of their counts', async () => {
    const form = await newForm();
    const now = Date.now();
    const at = (i: number) => new Date(now - (i % 6) * DAY_MS - (i % 7) * 1000 - 1000);
    const stored = Array.from({ length: 60 }, (_, i) => rowAt(form, at(i), i));
    await storeAll(stored);
    // drift on five days: rows written behind the counts' back, a counted row deleted behind them
    for (let i = 0; i < 10; i++) await insertUncounted(form.id, at(i), i);
    await deleteUncounted(form.id, stored[59].id);
    const drifted = await repairForm(form.id);
    expect(drifted.length).to.be.greaterThan(0);
    expect(await expectCountsExact(form.id)).to.equal(69);

    // a counted deletion open across a whole repair (on a slot the repair does not write: this release's writers never write slot 0)
    await insertUncounted(form.id, at(1), 100);
    const { client } = await clientWithPid(() => true);
    await client.query('begin');
    await deleteOn(client, stored[1].id);
    expect((await repairForm(form.id)).map((d) => ('day' in d ? d.day : d.month))).to.deep.equal([at(1).toISOString().slice(0, 10)]);
    await client.query('commit');
    expect(await expectCountsExact(form.id)).to.equal(69);

    // counted creates and deletes (today and past days) beside repeated repairs and folds, while a
    // previous release goes on storing rows without counting them on the same days
    let writing = true;
    const more = Array.from({ length: 120 }, (_, i) => rowAt(form, at(i + 3), 200 + i));
    const deleting = stored.slice(2, 40);
    let uncounted = 0;
    const writers = Promise.all([
      ...Array.from({ length: 6 }, (_, k) => (async () => {
        for (let i = k; i < more.length; i += 6) await storeAll([more[i]]);
      })()),
      ...Array.from({ length: 30 }, (_, i) => call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data: { fld_n: `api${i}` } } })
        .then((res) => expect(res.status).to.equal(201))),
      ...deleting.map((row) => call(t.url, 'DELETE', `/v1/submissions/${row.id}`, { key: tenant.key })
        .then((res) => expect(res.status).to.equal(204))),
    ]).finally(() => { writing = false; });
    const previousRelease = (async () => {
      while (writing && uncounted < 100) await insertUncounted(form.id, at(uncounted++), 300);
    })();
    // what the repairs add up to must be what was written without counting: a repair that lost a
    // concurrent counted write would leave a drift of its own for a later repair to add
    let repairs = 0;
    let added = 0;
    const addUp = (found: FormDrift[]) => { for (const d of found) added += d.counted - d.stored; };
    // two at a time (the CLI and the maintenance): they must not both add one difference
    const repairing = [0, 1].map(async () => {
      while (writing) {
        addUp(await repairForm(form.id));
        await foldDayCounts(t.app.orm.em.fork());
        repairs++;
      }
    });
    await Promise.all([writers, previousRelease, ...repairing]);
    addUp(await repairForm(form.id));
    expect(repairs).to.be.greaterThan(0);
    expect(uncounted).to.be.greaterThan(0);
    expect(added).to.equal(uncounted);
    expect(await expectCountsExact(form.id)).to.equal(69 + 120 + 30 - deleting.length + uncounted);
  });

  it('adds a drifted day\'s difference once when two repairs of the form run at the same moment', async () => {
    const form = await newForm();
    const day = new Date(Date.now() - 4 * DAY_MS);
    const rows = Array.from({ length: 3 }, (_, i) => rowAt(form, new Date(day.getTime() + i * 1000), i));
    await storeAll(rows);
    await countInSlotZero(form.id);
    await insertUncounted(form.id, new Date(day.getTime() + 5000), 1);
    await insertUncounted(form.id, new Date(day.getTime() + 6000), 2);

    // another transaction holding the day's slot 0 while both repairs run (as the fold or retention holds it)
    const { client } = await clientWithPid(() => true);
    await client.query('begin');
    await client.query('select 1 from submission_day_counts where form_id = $1 and slot = 0 for update', [form.id]);
    const first = repairForm(form.id);
    await waitUntilBlocked('fixed as');
    const second = repairForm(form.id);
    await waitUntilBlocked('', 2);
    await client.query('commit');
    const found = [...await first, ...await second];
    expect(found.reduce((sum, d) => sum + d.counted - d.stored, 0)).to.equal(2);
    expect(await expectCountsExact(form.id)).to.equal(5);
  });

  it('answers every page like count(*)/OFFSET after a drift and its repair, and the list and analytics agree on a drifted day', async () => {
    const form = await newForm();
    const now = Date.now();
    const base = Math.floor(now / DAY_MS) * DAY_MS - 10 * DAY_MS;
    const rows = Array.from({ length: 90 }, (_, i) => rowAt(form, new Date(base + (i % 9) * DAY_MS + (i * 7919 % 80_000) * 1000), i));
    await storeAll(rows);
    // a day counted above its rows: a row stored behind the counts' back, then deleted by this release
    const ghost = await insertUncounted(form.id, new Date(base + 9 * DAY_MS + 5000), 0);
    expect((await call(t.url, 'DELETE', `/v1/submissions/${ghost}`, { key: tenant.key })).status).to.equal(204);
    const listTotal = (await list(form.id, 'limit=1')).body.pagination.total;
    const analyticsTotal = (await call(t.url, 'GET', `/v1/forms/${form.id}/analytics`, { key: tenant.key })).body.submissions;
    expect(analyticsTotal, 'analytics and the list read the total one way').to.equal(listTotal);
    // rows behind the counts' back on three days, and counted rows removed behind them
    for (let i = 0; i < 12; i++) await insertUncounted(form.id, new Date(base + (i % 3) * 2 * DAY_MS + i * 1000 + 500), i);
    for (const row of rows.slice(0, 4)) await t.query('delete from submissions where id = ?', [row.id]);

    async function oldQuery(from: Date | null, offset: number, limit: number) {
      const where = from ? 'form_id = ? and created_at >= ?' : 'form_id = ?';
      const params = from ? [form.id, from.toISOString()] : [form.id];
      const ids = await t.query(`select id from submissions where ${where} order by created_at desc, id desc limit ? offset ?`, [...params, limit, offset]);
      const [{ n }] = await t.query(`select count(*)::int as n from submissions where ${where}`, params);
      return { ids: ids.map((r: any) => r.id), total: n };
    }
    const expectPagesExact = async () => {
      for (const f of [{ qs: '', from: null }, { qs: `startDate=${new Date(base + 3 * DAY_MS).toISOString().slice(0, 10)}`, from: new Date(base + 3 * DAY_MS) }]) {
        const { total } = await oldQuery(f.from, 0, 1);
        for (let offset = 0; offset <= total; offset += 5) {
          const res = await list(form.id, `${f.qs}&limit=5&offset=${offset}`);
          const old = await oldQuery(f.from, offset, 5);
          expect(res.body.pagination.total, `${f.qs} total`).to.equal(old.total);
          expect(res.body.submissions.map((s: any) => s.id), `${f.qs} offset ${offset}`).to.deep.equal(old.ids);
        }
      }
    };
    const { total: before } = await oldQuery(null, 0, 1);
    expect((await list(form.id, 'limit=1')).body.pagination.total, 'the drift shows before the repair').to.not.equal(before);

    expect((await repairForm(form.id)).map((d) => ('day' in d ? d.day : d.month))).to.deep.equal([0, 1, 2, 3, 4, 9].map((d) => new Date(base + d * DAY_MS).toISOString().slice(0, 10)));
    expect(await expectCountsExact(form.id)).to.equal(90 + 12 - 4);
    await expectPagesExact();
  });

  it('rolls up usage as the list reads its total: a day drifted below zero counts as none, not against the other days', async () => {
    const form = await newForm();
    const now = Date.now();
    await storeAll([0, 1].map((i) => rowAt(form, new Date(now - 1000 - i), i)));
    // yesterday: a row stored behind the counts' back, then deleted by this release (the day sums to -1)
    const ghost = await insertUncounted(form.id, new Date(now - DAY_MS), 0);
    expect((await call(t.url, 'DELETE', `/v1/submissions/${ghost}`, { key: tenant.key })).status).to.equal(204);
    const [{ n }] = await t.query('select sum(count)::int as n from submission_day_counts where form_id = ?', [form.id]);
    expect(n, 'the counts drifted below the rows').to.equal(1);
    await rollupUsage(t.app.orm.em.fork(), { full: true });
    const [{ usage }] = await t.query('select coalesce(sum(submissions), 0)::int as usage from usage_rollups where form_id = ?', [form.id]);
    const listTotal = (await list(form.id, 'limit=1')).body.pagination.total;
    expect(listTotal).to.equal(2);
    expect(usage, 'usage and the list read the counts one way').to.equal(listTotal);
    await repairForm(form.id);
    await rollupUsage(t.app.orm.em.fork(), { full: true });
    expect(await expectCountsExact(form.id)).to.equal(2);
  });

  it('rolls up usage after an organization is deleted by hand, its day counts left behind', async () => {
    const gone = await createTenant(t.app);
    const form = await createPublishedForm(t.url, gone.key, [fieldInput('fld_n', 'text', 'N')]);
    const res = await call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: gone.key, body: { data: { fld_n: 'x' } } });
    expect(res.status, res.text).to.equal(201);
    await t.query('delete from organizations where id = ?', [gone.organizationId]);
    const [{ n }] = await t.query('select count(*)::int as n from submission_day_counts where organization_id = ?', [gone.organizationId]);
    expect(n, 'the counts outlive their organization').to.be.greaterThan(0);
    await rollupUsage(t.app.orm.em.fork(), { full: true });
    await rollupUsage(t.app.orm.em.fork());
    expect(await t.query('select 1 from usage_rollups where organization_id = ?', [gone.organizationId])).to.deep.equal([]);
    const report = await runMaintenance(t.app.orm.em.fork());
    expect(report.dayCountsRepairFailed).to.equal(null);
    // and counts repair zeroes what they held
    const repaired: FormDrift[] = [];
    await walkDayCounts(t.app.orm.em.fork(), { repair: true }, (d) => repaired.push(d));
    expect(repaired.map((d) => [d.formId, d.counted, d.stored])).to.deep.equal([[form.id, 0, 1]]);
  });

  it('checks and repairs the counts of a form deleted by hand, whose rows went with it', async () => {
    const form = await newForm();
    const day = new Date(Date.now() - 2 * DAY_MS);
    await storeAll([0, 1, 2].map((i) => rowAt(form, new Date(day.getTime() + i * 1000), i)));
    await t.query('delete from forms where id = ?', [form.id]);
    expect(await t.query('select 1 from submissions where form_id = ?', [form.id]), 'the rows cascade').to.deep.equal([]);
    const found: FormDrift[] = [];
    await walkDayCounts(t.app.orm.em.fork(), { repair: false }, (d) => found.push(d));
    expect(found.filter((d) => d.formId === form.id)).to.deep.equal([{ formId: form.id, day: day.toISOString().slice(0, 10), counted: 0, stored: 3 }]);
    const one: FormDrift[] = [];
    await walkDayCounts(t.app.orm.em.fork(), { repair: true, formId: form.id }, (d) => one.push(d));
    expect(one).to.deep.equal(found);
    const [{ n }] = await t.query('select coalesce(sum(count), 0)::int as n from submission_day_counts where form_id = ?', [form.id]);
    expect(n).to.equal(0);
    const after: FormDrift[] = [];
    await walkDayCounts(t.app.orm.em.fork(), { repair: false, formId: form.id }, (d) => after.push(d));
    expect(after).to.deep.equal([]);
  });

  it('counts check and counts repair: one line per drifted day, a summary, exit 1 on drift', async () => {
    const form = await newForm();
    const now = Date.now();
    await storeAll(Array.from({ length: 6 }, (_, i) => rowAt(form, new Date(now - (i % 2) * DAY_MS - 1000), i)));
    const day = new Date(now - 3 * DAY_MS);
    await insertUncounted(form.id, day, 1);
    await insertUncounted(form.id, day, 2);
    const drift = await cli('counts', 'check', '--form', form.id);
    expect(drift.code, drift.stderr).to.equal(1);
    expect(drift.lines).to.deep.equal([
      { formId: form.id, day: day.toISOString().slice(0, 10), counted: 2, stored: 0 },
      { forms: 1, drifted: 1 },
    ]);

    // --since leaves the days before it
    const sinceToday: FormDrift[] = [];
    await walkDayCounts(t.app.orm.em.fork(), { repair: true, formId: form.id, since: new Date(now).toISOString().slice(0, 10) },
      (d) => sinceToday.push(d));
    expect(sinceToday).to.deep.equal([]);
    const repaired = await cli('counts', 'repair', '--form', form.id, '--since', new Date(now - 5 * DAY_MS).toISOString().slice(0, 10));
    expect(repaired.code, repaired.stderr).to.equal(0);
    expect(repaired.lines).to.deep.equal([
      { formId: form.id, day: day.toISOString().slice(0, 10), counted: 2, stored: 0 },
      { forms: 1, repaired: 1 },
    ]);
    expect(await expectCountsExact(form.id)).to.equal(8);

    // every form clean (the tests before left none drifted), and what the commands refuse
    const [all, badSince, unknown] = await Promise.all([
      cli('counts', 'check'), cli('counts', 'repair', '--since', 'yesterday'), cli('counts', 'check', '--form', 'form_nope'),
    ]);
    expect(all.code, JSON.stringify(all.lines)).to.equal(0);
    expect(all.lines).to.have.length(1);
    expect(all.lines[0].drifted).to.equal(0);
    expect(all.lines[0].forms).to.be.greaterThan(1);
    expect(badSince.code).to.equal(1);
    expect(badSince.stderr).to.include('--since must be a date');
    expect(unknown.code).to.equal(1);
    expect(unknown.stderr).to.include('no form form_nope');
  });

  it('heals on its own in the hourly maintenance what a previous release stored and deleted without counting', async () => {
    const form = await newForm();
    const now = Date.now();
    const rows = Array.from({ length: 8 }, (_, i) => rowAt(form, new Date(now - (i % 4) * 5 * DAY_MS - 1000), i));
    await storeAll(rows);
    await runMaintenance(t.app.orm.em.fork());
    // the previous release, during a rolling deploy: stores rows today, deletes one of 15 days ago
    await insertUncounted(form.id, new Date(now - 60_000), 1);
    await insertUncounted(form.id, new Date(now - 30_000), 2);
    await deleteUncounted(form.id, rows[3].id);
    // and, the maintenance having stopped for five hours, three hours ago (read an hour at a time)
    await insertUncounted(form.id, new Date(now - 3 * 3_600_000), 3);
    // and on other forms, one every 17 minutes of those five hours (each hour read ten minutes a statement: none skipped)
    const others = [];
    for (let k = 1; k <= 16; k++) {
      const other = await newForm();
      await insertUncounted(other.id, new Date(now - k * 17 * 60_000 - 7_000), 10 + k);
      others.push(other.id);
    }
    await t.query(`update system_settings set value = (now() - interval '5 hours')::text where key = 'day_counts_repaired_from'`);
    const [{ n: drifted }] = await t.query(
      `select count(*)::int as n from (select (created_at at time zone 'UTC')::date as day, count(*) from submissions where form_id = ? group by 1
        except select day, sum(count) from submission_day_counts where form_id = ? group by day having sum(count) <> 0) d`, [form.id, form.id]);
    expect(drifted, 'the previous release left the counts drifted').to.be.greaterThan(0);

    const report = await runMaintenance(t.app.orm.em.fork());
    expect(report.dayCountsRepaired).to.be.at.least(2);
    expect(await expectCountsExact(form.id)).to.equal(10);
    for (const other of others) expect(await expectCountsExact(other)).to.equal(1);
    const [{ behind }] = await t.query(
      `select extract(epoch from now() - value::timestamptz)::int as behind from system_settings where key = 'day_counts_repaired_from'`);
    expect(behind).to.be.below(60);
    expect((await runMaintenance(t.app.orm.em.fork())).dayCountsRepaired).to.equal(0);
  });

  it('goes on with the rest of the maintenance when the repair cannot read the rows, and heals at the next run', async () => {
    const form = await newForm();
    await runMaintenance(t.app.orm.em.fork());
    await insertUncounted(form.id, new Date(Date.now() - 60_000), 1);
    const [{ mark: markBefore }] = await t.query(`select value as mark from system_settings where key = 'day_counts_repaired_from'`);
    // a slot of an old day for the fold, which runs after the repair
    await t.query(`insert into submission_day_counts (organization_id, form_id, day, slot, count)
                   values (?, 'form_foldme', current_date - 10, 3, 0)`, [tenant.organizationId]);
    // the submissions locked as retention's DETACH locks them, past the workers' lock_timeout
    const { client } = await clientWithPid(() => true);
    await client.query('begin');
    await client.query('lock table submissions in access exclusive mode');
    let report: Awaited<ReturnType<typeof runMaintenance>>;
    try {
      report = await runMaintenance(t.app.orm.em.fork());
    } finally {
      await client.query('rollback');
    }
    expect(report.dayCountsRepairFailed).to.be.a('string');
    expect(report.dayCountsFolded, 'the fold ran after the failed repair').to.be.at.least(1);
    await t.query(`delete from submission_day_counts where form_id = 'form_foldme'`);
    const [{ mark: markAfter }] = await t.query(`select value as mark from system_settings where key = 'day_counts_repaired_from'`);
    expect(markAfter, 'the mark stays where the failed run found it').to.equal(markBefore);
    const next = await runMaintenance(t.app.orm.em.fork());
    expect(next.dayCountsRepairFailed).to.equal(null);
    expect(next.dayCountsRepaired).to.be.at.least(1);
    expect(await expectCountsExact(form.id)).to.equal(1);
  });

  it('passes over a form whose repair runs past the statement timeout, repairs the others, moves on and names it', async () => {
    const [slow, other] = [await newForm(), await newForm()];
    await runMaintenance(t.app.orm.em.fork());
    await storeAll([rowAt(slow, new Date(Date.now() - 120_000), 0)]);
    await countInSlotZero(slow.id);
    await insertUncounted(slow.id, new Date(Date.now() - 60_000), 1);
    await insertUncounted(other.id, new Date(Date.now() - 60_000), 2);
    // the slow form's day held (as a count of millions of rows would hold the statement) past a
    // statement timeout that comes before any lock timeout
    const orm = await initOrm(process.env.DATABASE_URL!, 2, { timeouts: { statementMs: 700, lockMs: 0, idleInTransactionMs: 0 } });
    const { client } = await clientWithPid(() => true);
    let report: Awaited<ReturnType<typeof runMaintenance>>;
    try {
      await client.query('begin');
      await client.query('select 1 from submission_day_counts where form_id = $1 and slot = 0 for update', [slow.id]);
      report = await runMaintenance(orm.em.fork());
    } finally {
      await client.query('rollback');
      await orm.close();
    }
    expect(report.dayCountsRepairFailed).to.equal(null);
    expect(report.dayCountsRepairSkipped).to.deep.equal([{ formId: slow.id, days: [new Date(Date.now() - 60_000).toISOString().slice(0, 10)] }]);
    expect(await expectCountsExact(other.id)).to.equal(1);
    const [{ behind }] = await t.query(
      `select extract(epoch from now() - value::timestamptz)::int as behind from system_settings where key = 'day_counts_repaired_from'`);
    expect(behind, 'the mark moved on').to.be.below(60);
    // what the warning tells the operator to run
    expect((await repairForm(slow.id)).map((d) => [d.counted, d.stored])).to.deep.equal([[2, 1]]);
    expect(await expectCountsExact(slow.id)).to.equal(2);
  });
});
