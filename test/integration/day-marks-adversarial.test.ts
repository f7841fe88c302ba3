import { expect } from 'chai';
import type { AppContext } from '../../src/app';
import { ensureDatabase, initOrm, type Orm } from '../../src/db/orm';
import type { Em } from '../../src/db/types';
import { newTimeOrderedId } from '../../src/lib/ids';
import { createLogger } from '../../src/lib/logger';
import { metrics } from '../../src/lib/metrics';
import { repairRecentDayCounts } from '../../src/domain/maintenance/day-count-repair';
import { buildDayMarks, listBusyDays, lockDayMarks } from '../../src/domain/submissions/day-marks';
import { DELETE_SUBMISSION_SQL } from '../../src/domain/submissions/deletion';
import { deleteSubmission, listSubmissions } from '../../src/domain/submissions/read-service';
import { utcDay } from '../../src/domain/submissions/day-windows';
import { dropDatabase, sideDatabaseUrl } from '../support/databases';
import { seed } from '../support/harness';
import { markDays } from '../../workers/processors/usage';

const DAY_MS = 86_400_000;
const RULES = { every: 7, minRows: 50 };
const BUILD = { ...RULES, marginMs: 0 };
const LIMIT = 5;
const ORG = 'org_ma';

/**
 * Day marks against what runs beside them: the previous release's deletions (which do not know the
 * marks) before and while a builder runs, rows whose created_at carries microseconds, and one
 * form's backlog against another's marks. Each form is its own, so the cases do not share state.
 */
describe('day marks, adversarial', function () {
  this.timeout(120_000);
  const databaseUrl = sideDatabaseUrl('day_marks_adv');
  let orm: Orm;
  let em: Em;
  const yesterday = utcDay(new Date(Date.now() - DAY_MS));

  async function addForm(form: string): Promise<void> {
    await seed(orm, `insert into forms (id, organization_id, title, status) values (?, ?, 'M', 'published')`, [form, ORG]);
  }

  /** `n` rows on `day` from `firstSecond`, three to a second, `micros` microseconds into it (counted as the service counts them). */
  async function addRows(form: string, day: string, n: number, firstSecond = 3600, micros = (_i: number) => 0): Promise<void> {
    const rows = Array.from({ length: n }, (_, i) => {
      const at = new Date(new Date(`${day}T00:00:00Z`).getTime() + (firstSecond + Math.floor(i / 3)) * 1000);
      const text = `${at.toISOString().slice(0, 19)}.${String(micros(i)).padStart(6, '0')}Z`;
      return { id: newTimeOrderedId('sub', at), at: text };
    });
    await seed(orm, `
      with ins as (
        insert into submissions (id, organization_id, form_id, data, source, created_at)
        select id, ?, ?, '{}'::jsonb, 'api', at from jsonb_to_recordset(?::jsonb) as t(id text, at timestamptz)
        returning organization_id, form_id, created_at)
      insert into submission_day_counts as c (organization_id, form_id, day, slot, count)
      select organization_id, form_id, (created_at at time zone 'UTC')::date, 1, count(*) from ins group by 1, 2, 3
      on conflict (form_id, day, slot) do update set count = c.count + excluded.count`,
    [ORG, form, JSON.stringify(rows)]);
  }

  async function naiveOrder(form: string): Promise<string[]> {
    const rows = await em.getConnection().execute<Array<{ id: string }>>(
      'select id from submissions where organization_id = ? and form_id = ? order by created_at desc, id desc', [ORG, form]);
    return rows.map((r) => r.id);
  }

  async function marksOf(form: string, day: string): Promise<Array<{ rank: number; id: string }>> {
    const rows = await em.getConnection().execute<Array<{ rank: string; id: string }>>(
      'select rank, id from submission_day_marks where form_id = ? and day = ?::date order by rank', [form, day]);
    return rows.map((r) => ({ rank: Number(r.rank), id: r.id }));
  }

  /** Every mark holds the row of its rank from the day's oldest row. */
  async function expectMarksRight(form: string, day: string): Promise<void> {
    const rows = await em.getConnection().execute<Array<{ id: string }>>(
      `select id from submissions where form_id = ? and created_at >= ?::date and created_at < ?::date + 1 order by created_at, id`,
      [form, day, day]);
    for (const mark of await marksOf(form, day)) expect(rows[mark.rank]?.id, `the mark of rank ${mark.rank} on ${day}`).to.equal(mark.id);
  }

  async function expectEveryPageRight(form: string, label: string): Promise<void> {
    const order = await naiveOrder(form);
    for (let offset = 0; offset < order.length; offset++) {
      const { items } = await listSubmissions(em, ORG, form, { from: null, until: null, limit: LIMIT, offset }, RULES);
      expect(items.map((s) => s.id), `${label}: offset ${offset}`).to.deep.equal(order.slice(offset, offset + LIMIT));
    }
  }

  before(async () => {
    await ensureDatabase(databaseUrl);
    orm = await initOrm(databaseUrl, 4);
    await orm.getMigrator().up();
    em = orm.em.fork();
    await seed(orm, `select ensure_submission_partitions(now() - interval '2 months', now() + interval '1 month')`);
    await seed(orm, `insert into organizations (id, name, plan) values (?, 'm', 'enterprise')`, [ORG]);
  });
  after(async () => {
    await orm?.close();
    await dropDatabase(databaseUrl);
  });

  it('drops, in the hourly repair, the marks built after a previous release\'s deletion on top of marks built before it', async () => {
    const FORM = 'form_prev_extend';
    await addForm(FORM);
    await addRows(FORM, yesterday, 200);
    await buildDayMarks(em, { ...BUILD, since: yesterday, formId: FORM });
    // the previous release deletes a row low in the day, without touching the marks
    const order = await naiveOrder(FORM);
    await seed(orm, DELETE_SUBMISSION_SQL, [order[order.length - 30], ORG]);
    // rows arrive at the newest end, and the builder extends from its newest (now wrong) mark
    await addRows(FORM, yesterday, 60, 80_000);
    await buildDayMarks(em, { ...BUILD, since: yesterday, formId: FORM });
    await repairRecentDayCounts(em);
    await expectMarksRight(FORM, yesterday);
    await expectEveryPageRight(FORM, 'after the hourly repair');
  });

  it('drops, in the hourly repair, the marks a builder wrote while a previous release\'s deletion was uncommitted', async () => {
    const FORM = 'form_prev_race';
    await addForm(FORM);
    await addRows(FORM, yesterday, 200);
    const order = await naiveOrder(FORM);
    let release!: () => void;
    const held = new Promise<void>((resolve) => { release = resolve; });
    let inside!: () => void;
    const deleted = new Promise<void>((resolve) => { inside = resolve; });
    // the previous release's deletion: its change's occurred_at is its transaction's start, it takes no marks lock
    const deletion = orm.em.fork().transactional(async (tx) => {
      await tx.execute(DELETE_SUBMISSION_SQL, [order[order.length - 30], ORG]);
      inside();
      await held;
    });
    await deleted;
    await new Promise((r) => setTimeout(r, 20)); // the builder's statements start after the deletion's transaction did
    await buildDayMarks(orm.em.fork(), { ...BUILD, since: yesterday, formId: FORM });
    expect((await marksOf(FORM, yesterday)).length).to.be.greaterThan(0);
    release();
    await deletion;
    await repairRecentDayCounts(em);
    await expectMarksRight(FORM, yesterday);
    await expectEveryPageRight(FORM, 'after the hourly repair');
  });

  it('drops, on the builder\'s next run, the marks a previous release\'s deletion left wrong', async () => {
    const FORM = 'form_prev_builder';
    await addForm(FORM);
    await addRows(FORM, yesterday, 200);
    await buildDayMarks(em, { ...BUILD, since: yesterday, formId: FORM });
    const order = await naiveOrder(FORM);
    const victim = order[order.length - 30];
    const before = await marksOf(FORM, yesterday);
    const [{ rank }] = await em.getConnection().execute<Array<{ rank: number }>>(
      `select count(*)::int as rank from submissions s, submissions v
        where v.id = ? and s.form_id = v.form_id and s.created_at >= ?::date and s.created_at < v.created_at`, [victim, yesterday]);
    await seed(orm, DELETE_SUBMISSION_SQL, [victim, ORG]);
    await addRows(FORM, yesterday, 60, 80_000);
    const run = await buildDayMarks(em, { ...BUILD, since: yesterday, formId: FORM });
    // the marks from the deleted row's time up, not the day's: those of the rows created before it stay
    expect(run.dropped).to.equal(before.filter((m) => m.rank >= rank).length);
    expect(run.dropped).to.be.greaterThan(0).and.below(before.length);
    await expectMarksRight(FORM, yesterday);
    await expectEveryPageRight(FORM, 'after the builder\'s run');
    // and this release's deletions, which deleted the marks themselves, cost the rebuilt marks nothing
    await deleteSubmission(em, ORG, order[order.length - 60]);
    await buildDayMarks(em, { ...BUILD, since: yesterday, formId: FORM });
    const built = await marksOf(FORM, yesterday);
    expect(await buildDayMarks(em, { ...BUILD, since: yesterday, formId: FORM })).to.include({ dropped: 0, added: 0 });
    expect(await marksOf(FORM, yesterday)).to.deep.equal(built);
    await expectMarksRight(FORM, yesterday);
  });

  it('drops no marks for rows committed in time while a long transaction elsewhere holds the cluster\'s xmin down', async () => {
    const FORM = 'form_long_txn';
    await addForm(FORM);
    // any transaction of the cluster with a transaction id, open across the runs (a pg_dump, a report)
    let release!: () => void;
    const held = new Promise<void>((resolve) => { release = resolve; });
    let inside!: () => void;
    const opened = new Promise<void>((resolve) => { inside = resolve; });
    const long = orm.em.fork().transactional(async (tx) => {
      await tx.execute('select pg_current_xact_id()');
      inside();
      await held;
    });
    await opened;
    try {
      // rows stored as the service stores them, each committed at once, with their change records
      const store = async (n: number, firstSecond: number) => {
        await addRows(FORM, yesterday, n, firstSecond);
        await seed(orm, `insert into submission_changes (organization_id, form_id, submission_id, type, occurred_at)
          select organization_id, form_id, id, 'submission.created', created_at from submissions s
           where form_id = ? and not exists (select 1 from submission_changes c where c.submission_id = s.id)`, [FORM]);
      };
      await store(100, 3600);
      await buildDayMarks(em, { ...BUILD, since: yesterday, formId: FORM });
      await store(100, 7200);
      const run = await buildDayMarks(em, { ...BUILD, since: yesterday, formId: FORM });
      expect(run.dropped, 'marks dropped for rows committed before the previous run').to.equal(0);
      expect(await buildDayMarks(em, { ...BUILD, since: yesterday, formId: FORM })).to.include({ dropped: 0, walked: 3 });
      await expectMarksRight(FORM, yesterday);
    } finally {
      release();
      await long;
    }
  });

  it('serves the right pages and builds the right marks when created_at carries microseconds', async () => {
    const FORM = 'form_micros';
    await addForm(FORM);
    // five rows to a millisecond, their microseconds in the opposite order of their ids
    await addRows(FORM, yesterday, 150, 3600, (i) => 900 - (i % 5) * 100);
    // built in one transaction, the marks are right: the pages start from them
    await buildDayMarks(em, { ...BUILD, since: yesterday, formId: FORM });
    await expectMarksRight(FORM, yesterday);
    await expectEveryPageRight(FORM, 'microseconds');
    // built in many, each goes on from the newest mark
    await seed(orm, 'delete from submission_day_marks where form_id = ?', [FORM]);
    await buildDayMarks(em, { ...BUILD, since: yesterday, formId: FORM, perTransaction: 10 });
    expect((await marksOf(FORM, yesterday)).length).to.equal(21);
    await expectMarksRight(FORM, yesterday);
  });

  it('keeps the marks below a deletion exact through ties, a mark\'s own row, midnight and two deletions at once', async () => {
    const FORM = 'form_ties_midnight';
    await addForm(FORM);
    const today = utcDay(new Date(new Date(`${yesterday}T00:00:00Z`).getTime() + DAY_MS));
    // yesterday's last 30 seconds, three rows to each created_at (23:59:59.999999 for the last three), then today's first rows
    await addRows(FORM, yesterday, 90, 86_370, () => 999_999);
    await addRows(FORM, today, 20, 0);
    await buildDayMarks(em, { ...BUILD, since: yesterday, formId: FORM });
    const rows = async () => (await em.getConnection().execute<Array<{ id: string }>>(
      `select id from submissions where form_id = ? and created_at >= ?::date and created_at < ?::date + 1 order by created_at, id`,
      [FORM, yesterday, yesterday])).map((r) => r.id);
    const before = await marksOf(FORM, yesterday);
    expect(before.map((m) => m.rank)).to.deep.equal([7, 14, 21, 28, 35, 42, 49, 56, 63, 70, 77, 84]);
    // the row that is the last mark (23:59:58.999999), tied with the two rows after it
    let day = await rows();
    expect((await deleteSubmission(em, ORG, day[84]))?.id).to.equal(day[84]);
    expect(await marksOf(FORM, yesterday)).to.deep.equal(before.filter((m) => m.rank < 84));
    await expectMarksRight(FORM, yesterday);
    await expectEveryPageRight(FORM, 'after deleting a mark\'s row at midnight');
    // the row tied with a mark and below it by its id: that mark moved a rank down
    day = await rows();
    await deleteSubmission(em, ORG, day[48]);
    expect((await marksOf(FORM, yesterday)).map((m) => m.rank)).to.deep.equal([7, 14, 21, 28, 35, 42]);
    await expectMarksRight(FORM, yesterday);
    await expectEveryPageRight(FORM, 'after deleting a row tied with a mark');
    // two deletions at once, with a builder beside them
    await buildDayMarks(em, { ...BUILD, since: yesterday, formId: FORM });
    day = await rows();
    await Promise.all([
      deleteSubmission(orm.em.fork(), ORG, day[30]),
      buildDayMarks(orm.em.fork(), { ...BUILD, since: yesterday, formId: FORM }),
      deleteSubmission(orm.em.fork(), ORG, day[60]),
    ]);
    await expectMarksRight(FORM, yesterday);
    await expectEveryPageRight(FORM, 'after two deletions at once');
    // a row below the lowest mark: no mark stays
    day = await rows();
    await deleteSubmission(em, ORG, day[2]);
    expect(await marksOf(FORM, yesterday)).to.deep.equal([]);
    await buildDayMarks(em, { ...BUILD, since: yesterday, formId: FORM });
    await expectMarksRight(FORM, yesterday);
    await expectEveryPageRight(FORM, 'built again');
  });

  it('builds the other days\' marks when one day\'s build fails, logs and counts it, and gives that day its turn after them', async () => {
    const [POISON, OTHER] = ['form_poison', 'form_poison_other'];
    await addForm(POISON);
    await addForm(OTHER);
    await addRows(POISON, yesterday, 100);
    await addRows(OTHER, yesterday, 100);
    // a transaction holds the poison day's marks lock past the builder's lock timeout: its build fails, run after run
    let release!: () => void;
    const held = new Promise<void>((resolve) => { release = resolve; });
    let inside!: () => void;
    const locked = new Promise<void>((resolve) => { inside = resolve; });
    const holder = orm.em.fork().transactional(async (tx) => {
      await lockDayMarks(tx, POISON, [yesterday]);
      inside();
      await held;
    });
    await locked;
    const failures = async () => (await metrics.dayMarkFailures.get()).values[0]?.value ?? 0;
    try {
      const run = await buildDayMarks(em, { ...BUILD, since: yesterday });
      expect(run.failed.map(({ formId, day, code }) => ({ formId, day, code }))).to.deep.equal([{ formId: POISON, day: yesterday, code: '55P03' }]);
      expect(run.failed[0].message).to.match(/lock timeout/);
      expect(await marksOf(OTHER, yesterday)).to.have.length(14);
      await expectMarksRight(OTHER, yesterday);
      expect(await marksOf(POISON, yesterday)).to.deep.equal([]);
      // never built, it would come first (never visited); failed, it comes after every other busy day
      const turns = await listBusyDays(em, yesterday, RULES.minRows);
      expect(turns.length).to.be.greaterThan(2);
      expect(turns[turns.length - 1]).to.deep.equal({ organizationId: ORG, formId: POISON, day: yesterday });

      // the usage worker's job: a warning naming the form and the day, and the failures' counter
      const lines: string[] = [];
      const logger = createLogger('info', { write: (line: string) => { lines.push(line); } });
      const counted = await failures();
      await markDays({ orm, logger, config: { dayMarks: BUILD } } as unknown as AppContext);
      expect(await failures()).to.equal(counted + 1);
      const logged = lines.map((line) => JSON.parse(line)).filter((line) => line.formId === POISON);
      expect(logged).to.have.length(1);
      expect(logged[0]).to.include({ level: 40, formId: POISON, day: yesterday, code: '55P03' });
    } finally {
      release();
      await holder;
    }
    // once it builds, it has its marks and its failure is forgotten
    const run = await buildDayMarks(em, { ...BUILD, since: yesterday });
    expect(run.failed).to.deep.equal([]);
    expect(await marksOf(POISON, yesterday)).to.have.length(14);
    await expectMarksRight(POISON, yesterday);
    const [check] = await em.getConnection().execute(
      'select failed_at from submission_day_mark_checks where form_id = ? and day = ?::date', [POISON, yesterday]);
    expect(check.failed_at).to.equal(null);
  });

  it('gives every busy day its turn in a run, whatever one form\'s backlog', async () => {
    const [A, B] = ['form_fair_a', 'form_fair_b'];
    await addForm(A);
    await addForm(B);
    await addRows(A, yesterday, 600);
    await addRows(B, yesterday, 100);
    // A's backlog alone exceeds the run's bound
    const first = await buildDayMarks(em, { ...BUILD, since: yesterday, perTransaction: 20, perRun: 100 });
    expect(first.caughtUp).to.equal(false);
    expect((await marksOf(B, yesterday)).length, 'B\'s marks after one run').to.be.greaterThan(0);
    // and the next run starts with the day visited longest ago
    await seed(orm, `delete from submission_day_marks where form_id in (?, ?)`, [A, B]);
    await seed(orm, `delete from submission_day_mark_checks where form_id in (?, ?)`, [A, B]);
    await buildDayMarks(em, { ...BUILD, since: yesterday, perTransaction: 100, perRun: 100 });
    await buildDayMarks(em, { ...BUILD, since: yesterday, perTransaction: 100, perRun: 100 });
    expect((await marksOf(A, yesterday)).length, 'A\'s marks after two runs').to.be.greaterThan(0);
    expect((await marksOf(B, yesterday)).length, 'B\'s marks after two runs').to.be.greaterThan(0);
    for (let i = 0; i < 10 && !(await buildDayMarks(em, { ...BUILD, since: yesterday, perTransaction: 20, perRun: 100 })).caughtUp; i++);
    await expectMarksRight(A, yesterday);
    await expectMarksRight(B, yesterday);
  });
});
