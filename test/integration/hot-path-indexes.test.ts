import { expect } from 'chai';
import {
  STORE_PLAIN_SUBMISSIONS_SQL, STORE_SUBMISSIONS_SQL, storeSubmissionsValues, type SubmissionRow,
} from '../../src/domain/submissions/storing-statement';
import { startTestApp, type TestApp } from '../support/harness';

describe('indexes on the submission path', () => {
  let t: TestApp;
  before(async () => { t = await startTestApp(); });
  after(async () => t.close());

  it('keeps on outbox only what a read uses: the relay\'s partial index serves the backlog count too', async () => {
    const em = t.app.orm.em.fork();
    const rows = await em.getConnection().execute(`select indexname from pg_indexes where tablename = 'outbox' order by indexname`);
    expect(rows.map((r: any) => r.indexname)).to.deep.equal(['outbox_pkey', 'outbox_processed_idx', 'outbox_relay_idx']);
    const plan = await em.transactional(async (tx) => {
      // A test table is small: forbid the whole-table scan to see which index the count would take.
      await tx.execute('set local enable_seqscan = off');
      return tx.execute('explain select count(*)::int as n from outbox where processed_at is null');
    });
    expect(JSON.stringify(plan)).to.include('outbox_relay_idx');
  });

  it('keeps the storing statements\' cost estimates under jit_above_cost, so no execution pays for JIT compiling', async () => {
    const row = (i: number): SubmissionRow => ({
      id: `sub_jit${i}`, organizationId: 'org_jit', formId: 'form_jit', formUpdatedAt: new Date(), month: '2026-11',
      data: { fld: i }, submitterEmail: null, submitterName: null, source: 'api', createdAt: new Date(),
      claims: [{ kind: 'payment', id: `pi_jit${i}` }], idempotency: { key: `k${i}`, requestHash: 'h', responseBody: {} },
    });
    // The plain statement's rows claim nothing; a single submission's claimed key is theirs to complete.
    const plainRow = (i: number): SubmissionRow => ({
      ...row(i), claims: [], idempotency: { key: `k${i}`, requestHash: 'h', responseBody: {}, claimToken: `t${i}` },
    });
    const statements = [
      { name: 'full', text: STORE_SUBMISSIONS_SQL, claims: true, row },
      { name: 'plain', text: STORE_PLAIN_SUBMISSIONS_SQL, claims: false, row: plainRow },
    ];
    const plans = await t.app.orm.em.fork().transactional(async (tx) => {
      await tx.execute('set local jit = on');
      const [{ jit_above_cost: threshold }] = await tx.execute('select current_setting(\'jit_above_cost\')::float8 as jit_above_cost');
      const costs: number[] = [];
      for (const statement of statements) {
        for (const rows of [[statement.row(0)], Array.from({ length: 64 }, (_, i) => statement.row(i))]) {
          const values = storeSubmissionsValues(rows, { claims: statement.claims });
          const literal = (v: unknown) => (typeof v === 'boolean' ? String(v) : `'${String(v).replace(/'/g, "''")}'`);
          // The generic plan (what a prepared statement runs after its first executions) and the custom one.
          for (const mode of ['force_generic_plan', 'force_custom_plan']) {
            const probe = `jit_probe_${statement.name}_${mode}_${rows.length}`;
            await tx.execute(`set local plan_cache_mode = ${mode}`);
            await tx.execute(`prepare ${probe} as ${statement.text}`);
            const [{ 'QUERY PLAN': [plan] }] = await tx.execute(`explain (format json) execute ${probe}(${values.map(literal).join(', ')})`);
            expect(plan, `${statement.name}, ${mode}, ${rows.length} items`).to.not.have.property('JIT');
            costs.push(plan.Plan['Total Cost']);
          }
        }
      }
      return { threshold, costs };
    });
    expect(plans.threshold).to.equal(100_000);
    expect(plans.costs).to.have.length(8);
    for (const cost of plans.costs) expect(cost).to.be.below(plans.threshold);
  });
});

