import restify from 'restify';
import { Pool } from 'pg';
import { randomBytes } from 'node:crypto';

/**
 * The floor the ingest benchmark compares with: restify parses a JSON body and one INSERT runs on
 * the same database with the same pool size. Nothing else.
 */
async function main(): Promise<void> {
  const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.DB_POOL_MAX ?? 10) });
  await pool.query('create table if not exists bench_baseline (id text primary key, data jsonb not null, created_at timestamptz not null default now())');
  const server = restify.createServer();
  server.use(restify.plugins.bodyParser({ maxBodySize: 1024 * 1024 }));
  server.get('/healthz', async (_req, res) => { res.send(200, { ok: true }); });
  server.post('/ingest', async (req, res) => {
    const id = `sub_${randomBytes(12).toString('hex')}`;
    await pool.query('insert into bench_baseline (id, data) values ($1, $2)', [id, JSON.stringify(req.body?.data ?? {})]);
    res.send(201, { submission: { id } });
  });
  server.listen(Number(process.env.PORT), '127.0.0.1');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
