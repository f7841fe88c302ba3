import { expect } from 'chai';
import { ensureDatabase, initOrm, type Orm } from '../../src/db/orm';
import type { Em } from '../../src/db/types';
import { newTimeOrderedId } from '../../src/lib/ids';
import { DELETE_SUBMISSION_IN_WINDOW_SQL } from '../../src/domain/submissions/deletion';
import { idWindowParams, OPEN_WINDOW } from '../../src/domain/submissions/partitions';
import { FIND_SUBMISSION_SQL } from '../../src/domain/submissions/read-store';
import { deleteSubmission, findSubmission, listSubmissions } from '../../src/domain/submissions/read-service';
import { dropDatabase, sideDatabaseUrl } from '../support/databases';
import { seed } from '../support/harness';
import { findSyncForAttempt } from '../../src/domain/crm/store';

const MONTH_MS = 30 * 86_400_000;

/** The submissions partitions a plan (EXPLAIN, format json) reads. */
function partitionsIn(plan: unknown): string[] {
  const found = new Set<string>();
  const walk = (node: any): void => {
    if (Array.isArray(node)) { node.forEach(walk); return; }
    if (!node || typeof node !== 'object') return;
    if (typeof node['Relation Name'] === 'string' && node['Relation Name'].startsWith('submissions_p')) found.add(node['Relation Name']);
    Object.values(node).forEach(walk);
  };
  walk(plan);
  return [...found].sort();
}

async function explain(em: Em, sql: string, params: unknown[]): Promise<string[]> {
  const [row] = await em.getConnection().execute(`explain (format json) ${sql}`, params);
  return partitionsIn(row['QUERY PLAN']);
}

/**
 * An Em that runs every statement as given and, for each statement on `submissions`, also records
 * the partitions its plan reads: what the list's own statements touch, on the real database.
 */
function recordingEm(em: Em, plans: Array<{ sql: string; partitions: string[] }>): Em {
  const connection = em.getConnection();
  const recording = {
    async execute(sql: string, params: unknown[] = [], method?: any) {
      if (/from submissions\b/.test(sql)) plans.push({ sql, partitions: await explain(em, sql, params) });
      return connection.execute(sql, params, method);
    },
  };
  return new Proxy(em, { get: (target, key) => (key === 'getConnection' ? () => recording : (target as any)[key]) });
}

/**
 * Reads that name their partition (README "Performance"): on a table of 36 monthly partitions, a
 * submission by id and a list page plan and read one or two months, not all of them.
 */
describe('reads that name their partition', function () {
  this.timeout(60_000);
  const databaseUrl = sideDatabaseUrl('partition_reads');
  let orm: Orm;
  let em: Em;
  let allPartitions: number;
  const ids: Array<{ id: string; at: Date }> = [];

  before(async () => {
    await ensureDatabase(databaseUrl);
    orm = await initOrm(databaseUrl, 2);
    await orm.getMigrator().up();
    em = orm.em.fork();
    const now = Date.now();
    await seed(orm, `select ensure_submission_partitions(now() - interval '33 months', now() + interval '3 months')`);
    await seed(orm, `insert into organizations (id, name, plan) values ('org_r', 'r', 'enterprise'), ('org_x', 'x', 'enterprise')`);
    await seed(orm, `insert into forms (id, organization_id, title, status) values ('form_r', 'org_r', 'R', 'published')`);
    // 20 rows a month over 33 months, ids minted at their own time as the service mints them, in the
    // middle of each day's hours so that no id's window crosses a month's edge unless meant to.
    for (let m = 0; m < 33; m++) {
      for (let i = 0; i < 20; i++) {
        const at = new Date(now - m * MONTH_MS - (i * 86_400_000) / 2);
        ids.push({ id: newTimeOrderedId('sub', at), at });
      }
    }
    await seed(orm, `
      insert into submissions (id, organization_id, form_id, data, source, created_at)
      select id, 'org_r', 'form_r', '{}'::jsonb, 'api', at from jsonb_to_recordset(?::jsonb) as t(id text, at timestamptz)`,
    [JSON.stringify(ids)]);
    // A row stored before ids carried their time (the partitioning migration moved such rows as they were).
    await seed(orm, `insert into submissions (id, organization_id, form_id, data, source, created_at)
      values ('sub_legacyRandom000001', 'org_r', 'form_r', '{}', 'api', now() - interval '20 months')`);
    await seed(orm, `insert into submission_day_counts (organization_id, form_id, day, slot, count)
      select organization_id, form_id, (created_at at time zone 'UTC')::date, 0, count(*) from submissions group by 1, 2, 3`);
    // and their month rows, as the fold keeps them with slot 0
    await seed(orm, `insert into submission_month_counts (organization_id, form_id, month, count)
      select organization_id, form_id, date_trunc('month', day::timestamp)::date, sum(count) from submission_day_counts
       where slot = 0 group by 1, 2, 3`);
    await seed(orm, 'analyze submissions');
    [{ n: allPartitions }] = await em.getConnection().execute(
      `select count(*)::int as n from pg_inherits where inhparent = 'submissions'::regclass`);
  });
  after(async () => {
    await orm?.close();
    await dropDatabase(databaseUrl);
  });

  it('plans a submission by id on its own month, where the statement without the window plans all 36', async () => {
    expect(allPartitions).to.be.at.least(36);
    // An id more than the margin away from its month's edges.
    const { id, at } = ids.slice(200).find((r) => r.at.getUTCDate() > 1 && r.at.getUTCDate() < 28)!;
    const month = `submissions_p${at.getUTCFullYear()}_${String(at.getUTCMonth() + 1).padStart(2, '0')}`;
    expect(await explain(em, FIND_SUBMISSION_SQL, [id, 'org_r', ...idWindowParams(id)])).to.deep.equal([month]);
    expect(await explain(em, DELETE_SUBMISSION_IN_WINDOW_SQL, [id, 'org_r', ...idWindowParams(id)])).to.deep.equal([month]);
    // The same statements over every month: what a read by id cost before.
    expect((await explain(em, FIND_SUBMISSION_SQL, [id, 'org_r', ...OPEN_WINDOW])).length).to.equal(allPartitions);

    const found = await findSubmission(em, 'org_r', id);
    expect(found?.id).to.equal(id);
    expect(found?.createdAt.getTime()).to.equal(at.getTime());
    expect(await findSubmission(em, 'org_x', id), 'another organization').to.equal(null);
  });

  it('touches two months at most for an id minted within the margin of a month\'s edge', async () => {
    const edge = new Date(Date.UTC(2026, 0, 1));
    expect(await explain(em, FIND_SUBMISSION_SQL, ['x', 'org_r', ...idWindowParams(newTimeOrderedId('sub', edge))]))
      .to.deep.equal(['submissions_p2025_12', 'submissions_p2026_01']);
  });

  it('still finds and deletes a row whose id carries no time, over every month', async () => {
    expect((await findSubmission(em, 'org_r', 'sub_legacyRandom000001'))?.id).to.equal('sub_legacyRandom000001');
    expect(await findSubmission(em, 'org_r', 'sub_legacyRandom000002')).to.equal(null);
    const deleted = await deleteSubmission(em, 'org_r', 'sub_legacyRandom000001');
    expect(deleted?.id).to.equal('sub_legacyRandom000001');
    expect(await findSubmission(em, 'org_r', 'sub_legacyRandom000001')).to.equal(null);
    const { id } = ids[300];
    expect((await deleteSubmission(em, 'org_r', id))?.id).to.equal(id);
    expect(await findSubmission(em, 'org_r', id)).to.equal(null);
    ids.splice(300, 1);
  });

  it('reads a CRM sync\'s submission on its own month', async () => {
    const { id, at } = ids.slice(100).find((r) => r.at.getUTCDate() > 1 && r.at.getUTCDate() < 28)!;
    await seed(orm, `update submissions set data = '{"fld_email": "crm@example.com"}', submitter_email = 'crm@example.com' where id = ?`, [id]);
    await seed(orm, `insert into crm_syncs (id, organization_id, form_id, submission_id, integration_index, provider, status)
      values ('crm_r1', 'org_r', 'form_r', ?, 0, 'hubspot', 'pending'), ('crm_r2', 'org_r', 'form_r', 'sub_legacyRandom000009', 1, 'hubspot', 'pending')`, [id]);
    // Every statement the read runs that names submissions, through the Em or its connection, with the partitions it plans.
    const plans: string[][] = [];
    const connection = em.getConnection();
    const record = async (sql: string, params: unknown[]) => { if (/\bsubmissions\b/.test(sql)) plans.push(await explain(em, sql, params)); };
    const recording = new Proxy(em, {
      get: (target, key) => key === 'execute'
        ? async (sql: string, params: unknown[] = [], ...rest: any[]) => { await record(sql, params); return (target as any).execute(sql, params, ...rest); }
        : key === 'getConnection'
          ? () => ({ execute: async (sql: string, params: unknown[] = [], ...rest: any[]) => { await record(sql, params); return connection.execute(sql, params, ...(rest as [])); } })
          : (target as any)[key],
    }) as Em;
    const month = `submissions_p${at.getUTCFullYear()}_${String(at.getUTCMonth() + 1).padStart(2, '0')}`;
    const row = await findSyncForAttempt(recording, 'crm_r1');
    expect(row).to.include({ submission_id: id, submitter_email: 'crm@example.com' });
    expect(row?.data).to.deep.equal({ fld_email: 'crm@example.com' });
    expect(plans).to.deep.equal([[month]]);
    // A submission that is gone: no values (read again over every month, as any miss is).
    const gone = await findSyncForAttempt(em, 'crm_r2');
    expect(gone).to.include({ id: 'crm_r2', data: null, submitter_email: null });
  });

  it('plans the first, a middle and the last page of the list on the months the page spans', async () => {
    const newestFirst = [...ids].sort((a, b) => b.at.getTime() - a.at.getTime() || (b.id < a.id ? -1 : 1));
    for (const offset of [0, 300, newestFirst.length - 5]) {
      const plans: Array<{ sql: string; partitions: string[] }> = [];
      const { items, total } = await listSubmissions(recordingEm(em, plans), 'org_r', 'form_r',
        { from: null, until: null, limit: 10, offset });
      expect(total).to.equal(newestFirst.length);
      expect(items.map((s) => s.id), `offset ${offset}`).to.deep.equal(newestFirst.slice(offset, offset + 10).map((r) => r.id));
      expect(plans.length).to.be.greaterThan(0);
      for (const plan of plans) expect(plan.partitions.length, `offset ${offset}: ${plan.partitions}`).to.be.within(1, 2);
    }
  });

  it('reads a full page again when the counts hold rows that are gone, over the filter\'s own bounds', async () => {
    // Rows leave without their counts (a hand fix): the page the counts place falls short, and is read again.
    const newestFirst = [...ids].sort((a, b) => b.at.getTime() - a.at.getTime() || (b.id < a.id ? -1 : 1));
    const gone = newestFirst.slice(12, 20).map((r) => r.id);
    await seed(orm, 'delete from submissions where id in (select jsonb_array_elements_text(?::jsonb))', [JSON.stringify(gone)]);
    const { items } = await listSubmissions(em, 'org_r', 'form_r', { from: null, until: null, limit: 10, offset: 10 });
    expect(items.map((s) => s.id)).to.deep.equal(newestFirst.filter((r) => !gone.includes(r.id)).slice(10, 20).map((r) => r.id));
  });
});
