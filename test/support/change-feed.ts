import { Client } from 'pg';

/**
 * Waits until every transaction that had an id when called has ended (in any database of the
 * cluster): from then on the change feed lists every change committed before the call. The feed
 * holds back changes while an older transaction is still open (readChanges), and tests share the
 * cluster with worker transactions and other runs.
 */
export async function feedSettled(databaseUrl = process.env.DATABASE_URL!): Promise<void> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows: [{ next }] } = await client.query('select pg_snapshot_xmax(pg_current_snapshot())::text as next');
    for (;;) {
      const { rows: [{ settled }] } = await client.query(
        'select pg_snapshot_xmin(pg_current_snapshot()) >= $1::xid8 as settled', [next]);
      if (settled) return;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  } finally {
    await client.end();
  }
}
