import { expect } from 'chai';
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
});
