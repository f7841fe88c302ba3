import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { ensureDatabase, initOrm, type Orm } from '../../src/db/orm';
import type { Em } from '../../src/db/types';
import { newTimeOrderedId } from '../../src/lib/ids';
import { repairRecentDayCounts } from '../../src/domain/maintenance/day-count-repair';
import { repairFormDays } from '../../src/domain/submissions/day-counts';
import { buildDayMarks, invalidateDayMarks, invalidateDayMarksFrom } from '../../src/domain/submissions/day-marks';
import { DELETE_SUBMISSION_SQL, deleteSubmissionRow } from '../../src/domain/submissions/deletion';
import { deleteSubmission, listSubmissions } from '../../src/domain/submissions/read-service';
import { utcDay } from '../../src/domain/submissions/day-windows';
import { dropDatabase, sideDatabaseUrl } from '../support/databases';
import { seed } from '../support/harness';
import { DIST_ROOT } from '../support/processes';

const execFileAsync = promisify(execFile);
const DAY_MS = 86_400_000;
/** Small rules, so a few hundred rows make a busy day with many marks. */
const RULES = { every: 7, minRows: 50 };
const BUILD = { ...RULES, marginMs: 0 };
const LIMIT = 5;
const ORG = 'org_m';
const FORM = 'form_m';

/** The statements one call ran, by an Em that passes each through. */
function tracingEm(em: Em, statements: string[]): Em {
  const connection = em.getConnection();
  const tracing = {
    execute(sql: string, params: unknown[] = [], method?: any) {
      statements.push(sql);
      return connection.execute(sql, params, method);
    },
  };
  return new Proxy(em, { get: (target, key) => (key === 'getConnection' ? () => tracing : (target as any)[key]) });
}

/** The index entries and rows a plan's scans of `submissions` returned (EXPLAIN ANALYZE, format json). */
function submissionRowsRead(plan: unknown): number {
  let rows = 0;
  const walk = (node: any): void => {
    if (Array.isArray(node)) { node.forEach(walk); return; }
    if (!node || typeof node !== 'object') return;
    if (typeof node['Relation Name'] === 'string' && node['Relation Name'].startsWith('submissions_p')) {
      rows += (node['Actual Rows'] ?? 0) * (node['Actual Loops'] ?? 1);
    }
    Object.values(node).forEach(walk);
  };
  walk(plan);
  return rows;
}

/**
 * Day marks (src/README.md, day counts): a page in the middle of a busy day starts from the mark
 * nearest below it, and every page is the page `order by created_at desc, id desc offset n` gives,
 * with marks built, after a deletion took them, when built again, and when a builder races a
 * deletion.
 */
describe('day marks', function () {
  this.timeout(120_000);
  const databaseUrl = sideDatabaseUrl('day_marks');
  let orm: Orm;
  let em: Em;
  const today = utcDay(new Date());
  const yesterday = utcDay(new Date(Date.now() - DAY_MS));
  const threeDaysAgo = utcDay(new Date(Date.now() - 3 * DAY_MS));

  /** `n` rows on `day`, three to a created_at (the id breaks the tie), stored as the service stores them. */
  async function addRows(day: string, n: number, firstSecond = 3600, form = FORM): Promise<string[]> {
    const rows = Array.from({ length: n }, (_, i) => {
      const at = new Date(new Date(`${day}T00:00:00Z`).getTime() + (firstSecond + Math.floor(i / 3)) * 1000);
      return { id: newTimeOrderedId('sub', at), at };
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
    return rows.map((r) => r.id);
  }

  async function naiveOrder(): Promise<string[]> {
    const rows = await em.getConnection().execute<Array<{ id: string }>>(
      'select id from submissions where organization_id = ? and form_id = ? order by created_at desc, id desc', [ORG, FORM]);
    return rows.map((r) => r.id);
  }

  async function marksOf(day: string): Promise<Array<{ rank: number; id: string }>> {
    const rows = await em.getConnection().execute<Array<{ rank: string; id: string }>>(
      'select rank, id from submission_day_marks where form_id = ? and day = ?::date order by rank', [FORM, day]);
    return rows.map((r) => ({ rank: Number(r.rank), id: r.id }));
  }

  /** Every offset's page against the naive order; answers how many pages started from a mark. */
  async function expectEveryPageRight(label: string): Promise<number> {
    const order = await naiveOrder();
    let fromMarks = 0;
    for (let offset = 0; offset < order.length; offset++) {
      const statements: string[] = [];
      const { items, total } = await listSubmissions(tracingEm(em, statements), ORG, FORM,
        { from: null, until: null, limit: LIMIT, offset }, RULES);
      expect(total, `${label}: total`).to.equal(order.length);
      expect(items.map((s) => s.id), `${label}: offset ${offset}`).to.deep.equal(order.slice(offset, offset + LIMIT));
      if (statements.some((sql) => sql.includes('(created_at, id) >= ('))) fromMarks++;
    }
    return fromMarks;
  }

  /** The day's rows oldest first (a row's index is its rank), with their created_at to the microsecond. */
  async function dayRows(day: string): Promise<Array<{ id: string; createdAt: string }>> {
    const rows = await em.getConnection().execute<Array<{ id: string; created_at: string }>>(
      `select id, to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as created_at from submissions
        where form_id = ? and created_at >= ?::date and created_at < ?::date + 1 order by created_at, id`,
      [FORM, day, day]);
    return rows.map((r) => ({ id: r.id, createdAt: r.created_at }));
  }

  /** The ranks from the oldest row of the day's rows, oldest first, as marks should hold them. */
  async function expectMarksRight(day: string): Promise<void> {
    const rows = await dayRows(day);
    const marks = await marksOf(day);
    expect(marks.length, `marks of ${day}`).to.be.greaterThan(0);
    for (const mark of marks) expect(rows[mark.rank]?.id, `the mark of rank ${mark.rank} on ${day}`).to.equal(mark.id);
  }

  before(async () => {
    await ensureDatabase(databaseUrl);
    orm = await initOrm(databaseUrl, 4);
    await orm.getMigrator().up();
    em = orm.em.fork();
    await seed(orm, `select ensure_submission_partitions(now() - interval '2 months', now() + interval '1 month')`);
    await seed(orm, `insert into organizations (id, name, plan) values (?, 'm', 'enterprise')`, [ORG]);
    await seed(orm, `insert into forms (id, organization_id, title, status) values (?, ?, 'M', 'published')`, [FORM, ORG]);
    await addRows(threeDaysAgo, 80);
    await addRows(yesterday, 300);
    await addRows(today, 10, 0);
  });
  after(async () => {
    await orm?.close();
    await dropDatabase(databaseUrl);
  });

  it('marks every K-th row of the busy days by its rank from the day\'s oldest row, and serves every page through them', async () => {
    expect(await marksOf(yesterday)).to.deep.equal([]);
    const run = await buildDayMarks(em, { ...BUILD, since: threeDaysAgo });
    expect(run).to.include({ days: 2, caughtUp: true });
    // ranks 7, 14, ... below the day's count: 42 in 300 rows, 11 in 80; the quiet day has none
    expect((await marksOf(yesterday)).map((m) => m.rank)).to.deep.equal(Array.from({ length: 42 }, (_, i) => 7 * (i + 1)));
    expect((await marksOf(threeDaysAgo)).length).to.equal(11);
    expect(await marksOf(today)).to.deep.equal([]);
    await expectMarksRight(yesterday);
    await expectMarksRight(threeDaysAgo);

    // a second run finds nothing more to mark
    expect(await buildDayMarks(em, { ...BUILD, since: threeDaysAgo })).to.include({ added: 0, caughtUp: true });
    const fromMarks = await expectEveryPageRight('marked');
    // every offset whose both ends of its day lie 7 rows or more away: 286 of yesterday's, 66 of the older day's
    expect(fromMarks).to.equal(286 + 66);
  });

  it('keeps its marks right when rows arrive at the newest end of the day', async () => {
    const before = await marksOf(yesterday);
    await addRows(yesterday, 6, 80_000);
    expect(await marksOf(yesterday)).to.deep.equal(before);
    await expectMarksRight(yesterday);
    await expectEveryPageRight('after newer rows');
    await buildDayMarks(em, { ...BUILD, since: threeDaysAgo });
    await expectMarksRight(yesterday);
  });

  it('drops the marks at and above a deletion in the day\'s middle, keeps those below it, pages staying right, and builds them again', async () => {
    const before = await marksOf(yesterday);
    const rows = await dayRows(yesterday);
    const rank = 150;
    expect((await deleteSubmission(em, ORG, rows[rank].id))?.id).to.equal(rows[rank].id);
    const kept = await marksOf(yesterday);
    expect(kept, 'the marks below the deleted row').to.deep.equal(before.filter((m) => m.rank < rank));
    expect(kept).to.have.length(21);
    expect((await marksOf(threeDaysAgo)).length).to.equal(11);
    await expectMarksRight(yesterday);
    expect(await expectEveryPageRight('after the deletion')).to.be.greaterThan(66 + 100);

    await buildDayMarks(em, { ...BUILD, since: threeDaysAgo });
    await expectMarksRight(yesterday);
    expect((await marksOf(yesterday)).slice(0, 21), 'the marks below the deleted row, after the build').to.deep.equal(kept);
    expect(await expectEveryPageRight('built again')).to.be.greaterThan(66 + 250);
  });

  it('keeps every mark below a deletion low in the day, every page staying exact', async () => {
    const before = await marksOf(yesterday);
    const rows = await dayRows(yesterday);
    const rank = 40;
    await deleteSubmission(em, ORG, rows[rank].id);
    expect(await marksOf(yesterday), 'the marks of ranks 7 to 35').to.deep.equal(before.filter((m) => m.rank < rank));
    expect((await marksOf(yesterday)).map((m) => m.rank)).to.deep.equal([7, 14, 21, 28, 35]);
    await expectMarksRight(yesterday);
    await expectEveryPageRight('after a deletion low in the day');
    await buildDayMarks(em, { ...BUILD, since: threeDaysAgo });
    await expectMarksRight(yesterday);
    await expectEveryPageRight('built again');
  });

  it('deletes the marks of a day whose counts the repair found drifted (rows written without counting)', async () => {
    // a hand fix inserts rows into the day's past without its counts
    const at = new Date(new Date(`${yesterday}T00:00:00Z`).getTime() + 1800_000);
    await seed(orm, `insert into submissions (id, organization_id, form_id, data, source, created_at) values (?, ?, ?, '{}', 'api', ?)`,
      [newTimeOrderedId('sub', at), ORG, FORM, at.toISOString()]);
    expect((await marksOf(yesterday)).length).to.be.greaterThan(0);
    const drift = await repairFormDays(em, ORG, FORM, [threeDaysAgo, yesterday, today]);
    expect(drift.map((d) => d.day)).to.deep.equal([yesterday]);
    await expectEveryPageRight('after the repair');
    expect(await marksOf(yesterday)).to.deep.equal([]);
    expect((await marksOf(threeDaysAgo)).length).to.equal(11);
    await buildDayMarks(em, { ...BUILD, since: threeDaysAgo });
    await expectMarksRight(yesterday);
  });

  it('drops, in the hourly repair, the marks a deletion by the previous release left behind, from the deleted row\'s time up', async () => {
    // the previous release deletes (and counts) without knowing the marks
    const before = await marksOf(yesterday);
    const rows = await dayRows(yesterday);
    const victim = rows[rows.length - 100];
    await seed(orm, DELETE_SUBMISSION_SQL, [victim.id, ORG]);
    expect(await marksOf(yesterday)).to.deep.equal(before);
    await repairRecentDayCounts(em);
    await expectEveryPageRight('after the hourly repair');
    // the change feed names the row by its id, which tells its created_at to the millisecond: the
    // marks of the rows before that stay
    const kept = before.filter((m) => rows[m.rank].createdAt < victim.createdAt);
    expect(kept.length).to.be.greaterThan(20);
    expect(await marksOf(yesterday)).to.deep.equal(kept);
    await expectMarksRight(yesterday);
    // marks built after that deletion stay through the next repair
    await buildDayMarks(em, { ...BUILD, since: threeDaysAgo });
    const built = await marksOf(yesterday);
    await repairRecentDayCounts(em);
    expect(await marksOf(yesterday)).to.deep.equal(built);
  });

  it('never leaves a wrong mark when a builder runs while a deletion is uncommitted', async () => {
    // no marks on yesterday; a deletion in its middle holds its transaction open past its invalidation
    await orm.em.fork().transactional((tx) => invalidateDayMarks(tx, ORG, FORM, [yesterday]));
    const victim = (await naiveOrder())[10 + 6 + 120];
    let release!: () => void;
    const held = new Promise<void>((resolve) => { release = resolve; });
    let inside!: () => void;
    const invalidated = new Promise<void>((resolve) => { inside = resolve; });
    const deletion = orm.em.fork().transactional(async (tx) => {
      const gone = await deleteSubmissionRow(tx, ORG, victim);
      await invalidateDayMarksFrom(tx, ORG, FORM, { createdAt: gone!.exact_created_at, id: gone!.id });
      inside();
      await held;
    });
    await invalidated;
    // the builder, on its own connection: done, or waiting on the day's lock
    let built = false;
    const builder = buildDayMarks(orm.em.fork(), { ...BUILD, since: yesterday }).then(() => { built = true; });
    for (;;) {
      const [{ waiting }] = await em.getConnection().execute(
        `select count(*)::int as waiting from pg_locks
          where locktype = 'advisory' and not granted and database = (select oid from pg_database where datname = current_database())`);
      if (waiting > 0 || built) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    release();
    await deletion;
    await builder;
    await expectMarksRight(yesterday);
    await expectEveryPageRight('after the race');
  });

  it('never leaves a wrong mark when a builder commits between a deletion\'s row and its marks', async () => {
    // no marks on yesterday; a deletion in its middle has deleted its row, not yet taken the marks' lock
    await orm.em.fork().transactional((tx) => invalidateDayMarks(tx, ORG, FORM, [yesterday]));
    const rows = await dayRows(yesterday);
    const rank = 100;
    let release!: () => void;
    const held = new Promise<void>((resolve) => { release = resolve; });
    let inside!: () => void;
    const deleted = new Promise<void>((resolve) => { inside = resolve; });
    const deletion = orm.em.fork().transactional(async (tx) => {
      const gone = await deleteSubmissionRow(tx, ORG, rows[rank].id);
      inside();
      await held;
      await invalidateDayMarksFrom(tx, ORG, FORM, { createdAt: gone!.exact_created_at, id: gone!.id });
    });
    await deleted;
    // the builder sees the row (its deletion is uncommitted) and ranks the marks above it with it
    await buildDayMarks(orm.em.fork(), { ...BUILD, since: yesterday });
    expect((await marksOf(yesterday)).length).to.be.greaterThan(30);
    release();
    await deletion;
    expect((await marksOf(yesterday)).map((m) => m.rank)).to.deep.equal([7, 14, 21, 28, 35, 42, 49, 56, 63, 70, 77, 84, 91, 98]);
    await expectMarksRight(yesterday);
    await expectEveryPageRight('after the race');
    await buildDayMarks(em, { ...BUILD, since: threeDaysAgo });
    await expectMarksRight(yesterday);
    await expectEveryPageRight('built again');
  });

  it('drops, on its next run, the marks above a row committed later than the margin below them', async () => {
    await buildDayMarks(em, { ...BUILD, since: threeDaysAgo });
    await expectMarksRight(yesterday);
    // a storing transaction that outlives the margin: its row's created_at lies in the day's middle
    const at = new Date(new Date(`${yesterday}T00:00:00Z`).getTime() + 3600_000 + 40_500);
    let release!: () => void;
    const held = new Promise<void>((resolve) => { release = resolve; });
    let inside!: () => void;
    const stored = new Promise<void>((resolve) => { inside = resolve; });
    const storing = orm.em.fork().transactional(async (tx) => {
      await tx.execute(`
        with ins as (
          insert into submissions (id, organization_id, form_id, data, source, created_at) values (?, ?, ?, '{}', 'api', ?)
          returning id, organization_id, form_id, created_at
        ), changed as (
          insert into submission_changes (organization_id, form_id, submission_id, type, occurred_at)
          select organization_id, form_id, id, 'submission.created', created_at from ins
        )
        insert into submission_day_counts as c (organization_id, form_id, day, slot, count)
        select organization_id, form_id, (created_at at time zone 'UTC')::date, 1, 1 from ins
        on conflict (form_id, day, slot) do update set count = c.count + 1`,
      [newTimeOrderedId('sub', at), ORG, FORM, at.toISOString()]);
      inside();
      await held;
    });
    await stored;
    // a run while it is in flight sees nothing of it
    expect(await buildDayMarks(em, { ...BUILD, since: threeDaysAgo })).to.include({ dropped: 0 });
    release();
    await storing;
    const run = await buildDayMarks(em, { ...BUILD, since: threeDaysAgo });
    await expectEveryPageRight('after a late row');
    await expectMarksRight(yesterday);
    expect(run.dropped).to.be.greaterThan(0);
    // and a run after it drops nothing
    expect(await buildDayMarks(em, { ...BUILD, since: threeDaysAgo })).to.include({ dropped: 0, added: 0 });
  });

  it('counts marks: builds the marks of busy days older than the job\'s two', async () => {
    await orm.em.fork().transactional((tx) => invalidateDayMarks(tx, ORG, FORM, [threeDaysAgo]));
    const { stdout } = await execFileAsync(process.execPath, [path.join(DIST_ROOT, 'src/cli/index.js'), 'counts', 'marks', '--form', FORM,
      '--since', threeDaysAgo], {
      env: { ...process.env, NODE_NO_WARNINGS: '1', DATABASE_URL: databaseUrl, DAY_MARK_EVERY: '7', DAY_MARK_MIN_ROWS: '50', DAY_MARKS_MARGIN_MS: '0' },
    });
    expect(JSON.parse(stdout)).to.include({ days: 2, added: 11 });
    await expectMarksRight(threeDaysAgo);
  });

  it('reads a bounded number of index entries for a middle page of a marked day, not half the day', async () => {
    const BIG = 'form_big';
    await seed(orm, `insert into forms (id, organization_id, title, status) values (?, ?, 'Big', 'published')`, [BIG, ORG]);
    await addRows(yesterday, 20_000, 0, BIG);
    await seed(orm, 'analyze submissions');
    const rules = { every: 100, minRows: 1_000 };
    const read = async () => {
      let rows = 0;
      const connection = em.getConnection();
      const explaining = {
        async execute(sql: string, params: unknown[] = [], method?: any) {
          if (/from submissions\b/.test(sql)) {
            const [plan] = await connection.execute(`explain (analyze, format json) ${sql}`, params);
            rows += submissionRowsRead(plan['QUERY PLAN']);
          }
          return connection.execute(sql, params, method);
        },
      };
      const traced = new Proxy(em, { get: (target, key) => (key === 'getConnection' ? () => explaining : (target as any)[key]) }) as Em;
      const { items } = await listSubmissions(traced, ORG, BIG, { from: null, until: null, limit: 50, offset: 10_000 }, rules);
      expect(items).to.have.length(50);
      return rows;
    };
    // before the marks: the walk from the nearer end passes half the day's entries
    expect(await read()).to.be.greaterThan(10_000);
    await buildDayMarks(em, { ...rules, marginMs: 0, since: yesterday, formId: BIG });
    // from the mark: fewer than `every` entries to the start, then the page
    expect(await read()).to.be.below(100 + 2 * 50 + 2);
  });
});
