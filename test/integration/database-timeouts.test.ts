import { expect } from 'chai';
import QueryStream from 'pg-query-stream';
import { DEFAULT_DB_TIMEOUTS, initOrm, withoutReadTimeout, type Orm } from '../../src/db/orm';
import { isDependencyUnavailable } from '../../src/http/errors';

describe('database timeouts', function () {
  this.timeout(20_000);
  let orm: Orm;
  before(async () => {
    orm = await initOrm(process.env.DATABASE_URL!, 2);
  });
  after(async () => orm.close());

  it('ends a statement that runs longer than the statement timeout, as an unavailable dependency', async () => {
    const started = Date.now();
    const err = await orm.em.fork().execute('select pg_sleep(10)').then(() => null, (e) => e);
    expect(Date.now() - started).to.be.below(DEFAULT_DB_TIMEOUTS.statementMs + 1_000);
    expect(isDependencyUnavailable(err), String(err)).to.equal(true);
  });

  it('lets a long streaming read run when it lifts both limits (set local statement_timeout, withoutReadTimeout)', async () => {
    const pool = (orm.em.getConnection().getKnex() as any).client;
    const read = async (lift: boolean) => {
      const connection = await pool.acquireConnection();
      try {
        await connection.query('begin read only; set local statement_timeout = 0');
        const query = new QueryStream(`select pg_sleep(${(DEFAULT_DB_TIMEOUTS.statementMs + 1_000) / 1000}), 1 as one`, []);
        const stream = connection.query(lift ? withoutReadTimeout(query) : query);
        const rows: unknown[] = [];
        await new Promise<void>((resolve, reject) => {
          stream.on('data', (row: unknown) => rows.push(row));
          stream.once('end', resolve);
          stream.once('error', reject);
        });
        await connection.query('commit');
        return rows.length;
      } finally {
        await pool.releaseConnection(connection);
      }
    };
    expect(await read(true)).to.equal(1);
    const err = await read(false).then(() => null, (e) => e);
    expect(String(err)).to.include('Query read timeout');
  });
});
