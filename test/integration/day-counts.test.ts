import { expect } from 'chai';
import { quotaMonth } from '../../src/domain/quotas/quota';
import { createSubmissionPartitions, dropExpiredSubmissionPartitions } from '../../src/domain/submissions/partitions';
import type { SubmissionRow } from '../../src/domain/submissions/storing-statement';
import { rollupUsage } from '../../src/domain/usage/rollup';
import { FOLD_AFTER_DAYS, foldDayCounts } from '../../src/domain/submissions/day-counts';
import { newId } from '../../src/lib/ids';
import { call, createPublishedForm, createTenant, fieldInput, startTestApp, type TestApp, type TestTenant } from '../support/harness';
import { expectDayCountsExact } from '../support/day-counts';

const DAY_MS = 86_400_000;

/**
 * Totals, offsets, analytics and the usage roll-up read the forms' day counts (src/README.md, day counts): they
 * must say what count(*) and OFFSET over the rows say, after concurrent creates and deletes and
 * after partition retention.
 */
describe('submissions counted per form and day', function () {
  this.timeout(60_000);
  let t: TestApp;
  let tenant: TestTenant;

  before(async () => {
    t = await startTestApp();
    tenant = await createTenant(t.app);
    // Months of partitions behind the current one, for submissions stored with past dates.
    await createSubmissionPartitions(t.app.orm.em.fork(), new Date(Date.now() - 200 * DAY_MS), 8);
  });
  after(async () => t.close());

  async function newForm() {
    const form = await createPublishedForm(t.url, tenant.key, [fieldInput('fld_n', 'text', 'N')]);
    return (await t.app.formCache.get(form.id, true))!;
  }

  /** A submission stored through the storing statement (the group commit) as if it came in at `createdAt`. */
  function rowAt(form: { id: string; updatedAt: Date }, createdAt: Date, n: number): SubmissionRow {
    return {
      id: newId('sub'), organizationId: tenant.organizationId, formId: form.id, formUpdatedAt: form.updatedAt,
      month: quotaMonth(createdAt), data: { fld_n: String(n) }, submitterEmail: null, submitterName: null, source: 'api',
      createdAt, claims: [], idempotency: null,
    };
  }

  async function storeAll(rows: SubmissionRow[]): Promise<void> {
    const outcomes = await Promise.all(rows.map((row) => t.app.submissionWriter.store(row)));
    expect(outcomes.map((o) => o.kind)).to.deep.equal(rows.map(() => 'created'));
  }

  const list = (formId: string, qs: string) => call(t.url, 'GET', `/v1/forms/${formId}/submissions?${qs}`, { key: tenant.key });

  const expectCountsExact = (formId: string) => expectDayCountsExact(t, tenant, formId);

  it('stays exact under concurrent creates and deletes on many days, through the API and the group commit', async () => {
    const form = await newForm();
    const now = Date.now();
    // 240 submissions over the last 50 days, stored 8 at a time side by side
    const past = Array.from({ length: 240 }, (_, i) => rowAt(form, new Date(now - ((i * 7919) % (50 * DAY_MS / 1000)) * 1000 - 60_000), i));
    await storeAll(past.slice(0, 80));
    const deleting = past.slice(0, 80).filter((_, i) => i % 3 === 0);

    // while more are stored (past days and today, through the API) and others deleted
    await Promise.all([
      storeAll(past.slice(80)),
      ...Array.from({ length: 40 }, (_, i) => call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data: { fld_n: `api${i}` } } })
        .then((res) => expect(res.status).to.equal(201))),
      ...deleting.map((row) => call(t.url, 'DELETE', `/v1/submissions/${row.id}`, { key: tenant.key })
        .then((res) => expect(res.status).to.equal(204))),
      // a second delete of the same submission changes no count
      ...deleting.slice(0, 5).map((row) => call(t.url, 'DELETE', `/v1/submissions/${row.id}`, { key: tenant.key })
        .then((res) => expect(res.status).to.be.oneOf([204, 404]))),
    ]);

    expect(await expectCountsExact(form.id)).to.equal(240 + 40 - deleting.length);
  });

  it('answers every page and filter with the rows and total the count(*) and OFFSET query gives', async () => {
    const form = await newForm();
    const now = Date.now();
    // several submissions sharing a created_at, to exercise the id tie-break across a day's edge
    const base = new Date(Math.floor(now / DAY_MS) * DAY_MS - 20 * DAY_MS);
    const rows = [
      ...Array.from({ length: 150 }, (_, i) => rowAt(form, new Date(now - ((i * 104729) % (30 * DAY_MS / 1000)) * 1000 - 1000), i)),
      ...Array.from({ length: 6 }, (_, i) => rowAt(form, base, 1000 + i)),
      ...Array.from({ length: 3 }, (_, i) => rowAt(form, new Date(base.getTime() - 1), 2000 + i)),
    ];
    for (let i = 0; i < rows.length; i += 20) await storeAll(rows.slice(i, i + 20));
    const total = await expectCountsExact(form.id);

    async function oldQuery(from: Date | null, until: Date | null, offset: number, limit: number) {
      const where = ['form_id = ?'];
      const params: unknown[] = [form.id];
      if (from) { where.push('created_at >= ?'); params.push(from.toISOString()); }
      if (until) { where.push('created_at < ?'); params.push(until.toISOString()); }
      const ids = await t.query(`select id from submissions where ${where.join(' and ')} order by created_at desc, id desc limit ? offset ?`,
        [...params, limit, offset]);
      const [{ n }] = await t.query(`select count(*)::int as n from submissions where ${where.join(' and ')}`, params);
      return { ids: ids.map((r: any) => r.id), total: n };
    }

    const day = (offsetDays: number) => new Date(base.getTime() + offsetDays * DAY_MS).toISOString().slice(0, 10);
    const filters: Array<{ qs: string; from: Date | null; until: Date | null }> = [
      { qs: '', from: null, until: null },
      { qs: `startDate=${day(-5)}`, from: new Date(`${day(-5)}T00:00:00Z`), until: null },
      { qs: `endDate=${day(3)}`, from: null, until: new Date(`${day(4)}T00:00:00Z`) },
      { qs: `startDate=${day(0)}&endDate=${day(0)}`, from: base, until: new Date(base.getTime() + DAY_MS) },
      { qs: `startDate=${day(-1)}&endDate=${day(-1)}`, from: new Date(base.getTime() - DAY_MS), until: base },
      // date-times: partial first and last days, counted from the rows
      { qs: `startDate=${day(-7)}T13:30:00Z&endDate=${day(2)}T06:00:00.000Z`,
        from: new Date(`${day(-7)}T13:30:00Z`), until: new Date(Date.parse(`${day(2)}T06:00:00Z`) + 1) },
      { qs: `startDate=${day(-1)}T23:59:59.999Z&endDate=${day(0)}T00:00:00.000Z`,
        from: new Date(base.getTime() - 1), until: new Date(base.getTime() + 1) },
      { qs: `startDate=${day(4)}T08:00:00Z&endDate=${day(4)}T20:00:00Z`,
        from: new Date(`${day(4)}T08:00:00Z`), until: new Date(Date.parse(`${day(4)}T20:00:00Z`) + 1) },
      { qs: `startDate=${day(3)}&endDate=${day(1)}`, from: new Date(`${day(3)}T00:00:00Z`), until: new Date(`${day(2)}T00:00:00Z`) },
    ];
    for (const f of filters) {
      const expectedTotal = (await oldQuery(f.from, f.until, 0, 1)).total;
      const limit = 7;
      const offsets = [...new Set([0, 1, 5, Math.floor(expectedTotal / 2), expectedTotal - limit, expectedTotal - 1, expectedTotal, expectedTotal + 3]
        .filter((o) => o >= 0))];
      for (const offset of offsets) {
        const res = await list(form.id, `${f.qs}&limit=${limit}&offset=${offset}`);
        expect(res.status, `${f.qs} offset ${offset}`).to.equal(200);
        const old = await oldQuery(f.from, f.until, offset, limit);
        expect(res.body.pagination.total, `${f.qs} total`).to.equal(old.total);
        expect(res.body.submissions.map((s: any) => s.id), `${f.qs} offset ${offset}`).to.deep.equal(old.ids);
      }
    }
    // the whole form, page by page, is every row once in the old order
    const all: string[] = [];
    for (let offset = 0; offset < total; offset += 100) {
      all.push(...(await list(form.id, `limit=100&offset=${offset}`)).body.submissions.map((s: any) => s.id));
    }
    expect(all).to.deep.equal((await oldQuery(null, null, 0, total)).ids);
  });

  it('folds the slots of past days into one row each, keeping every total and page', async () => {
    const form = await newForm();
    const now = Date.now();
    const rows = Array.from({ length: 160 }, (_, i) => rowAt(form, new Date(now - (i % 8) * DAY_MS - (i % 5) * 1000 - 1000), i));
    for (let i = 0; i < rows.length; i += 40) await storeAll(rows.slice(i, i + 40));
    // as if other connections had stored some of each day: 3 of every day's count moved to other slots
    // (1–15, as the storing statements write: slot 0 is the fold's, which keeps the month rows with it)
    await t.query(
      `with moved as (
         update submission_day_counts c set count = c.count - 3 from (
           select distinct on (day) day, slot from submission_day_counts where form_id = ? order by day, slot) x
          where c.form_id = ? and c.day = x.day and c.slot = x.slot
         returning c.organization_id, c.form_id, c.day, c.slot
       )
       insert into submission_day_counts (organization_id, form_id, day, slot, count)
       select organization_id, form_id, day, 1 + (slot + k) % 15, 1 from moved, generate_series(0, 2) k
       on conflict (form_id, day, slot) do update set count = submission_day_counts.count + 1`,
      [form.id, form.id]);
    expect(await expectCountsExact(form.id)).to.equal(160);
    const slotsPerDay = async () => t.query(
      `select to_char(day, 'YYYY-MM-DD') as day, count(*)::int as slots from submission_day_counts where form_id = ? group by day order by day`,
      [form.id]);
    expect((await slotsPerDay()).some((d: any) => d.slots > 1), 'several slots on some day before the fold').to.equal(true);
    const pageBefore = (await list(form.id, 'limit=100&offset=30')).body.submissions.map((s: any) => s.id);

    expect(await foldDayCounts(t.app.orm.em.fork())).to.be.greaterThan(0);
    const foldedBefore = new Date(now - FOLD_AFTER_DAYS * DAY_MS).toISOString().slice(0, 10);
    for (const { day, slots } of await slotsPerDay()) if (day < foldedBefore) expect(slots, day).to.equal(1);
    expect(await expectCountsExact(form.id)).to.equal(160);
    expect((await list(form.id, 'limit=100&offset=30')).body.submissions.map((s: any) => s.id)).to.deep.equal(pageBefore);

    // a deletion on a folded day counts in a slot of its own again; the next fold takes it in
    expect((await call(t.url, 'DELETE', `/v1/submissions/${rows[7].id}`, { key: tenant.key })).status).to.equal(204);
    expect(await expectCountsExact(form.id)).to.equal(159);
    await foldDayCounts(t.app.orm.em.fork());
    expect(await expectCountsExact(form.id)).to.equal(159);
  });

  it('stays exact when retention drops old months, and the usage roll-up sums the days', async () => {
    const form = await newForm();
    const now = new Date();
    const monthsAgo = (m: number, dayOfMonth: number) =>
      new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - m, dayOfMonth, 12));
    const rows = [
      ...Array.from({ length: 12 }, (_, i) => rowAt(form, monthsAgo(4, 1 + i), i)),
      ...Array.from({ length: 9 }, (_, i) => rowAt(form, monthsAgo(1, 2 + i), 100 + i)),
      ...Array.from({ length: 5 }, (_, i) => rowAt(form, new Date(now.getTime() - i * 1000), 200 + i)),
    ];
    await storeAll(rows);
    expect(await expectCountsExact(form.id)).to.equal(26);

    await rollupUsage(t.app.orm.em.fork(), { full: true });
    const usage = await t.query('select month, submissions from usage_rollups where form_id = ? order by month', [form.id]);
    expect(usage).to.deep.equal([
      { month: quotaMonth(monthsAgo(1, 1)), submissions: 9 },
      { month: quotaMonth(now), submissions: 5 },
    ]);

    // keep the current month and the two before it: the month four back goes, with its days
    const dropped = await dropExpiredSubmissionPartitions(t.app.orm.em.fork(), 2, now);
    expect(dropped).to.include(`submissions_p${quotaMonth(monthsAgo(4, 1)).replace('-', '_')}`);
    expect(await expectCountsExact(form.id)).to.equal(14);
    const [{ n: olderDays }] = await t.query('select count(*)::int as n from submission_day_counts where day < ?::date',
      [monthsAgo(2, 1).toISOString().slice(0, 10)]);
    expect(olderDays).to.equal(0);
  });
});
