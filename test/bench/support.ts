import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import IORedis from 'ioredis';

/** A throwaway database and queue prefix for one benchmark run, removed afterwards. */
export function benchEnvironment(label: string) {
  const runId = `${label}${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
  const adminUrl = process.env.BENCH_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const dbUrl = new URL(adminUrl);
  dbUrl.pathname = `/formservice_bench_${runId}`;
  const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  return {
    databaseUrl: dbUrl.toString(),
    redisUrl,
    queuePrefix: `fsbench${runId}`,
    async cleanup() {
      const client = new Client({ connectionString: adminUrl });
      await client.connect();
      await client.query(`drop database if exists "formservice_bench_${runId}" with (force)`);
      await client.end();
      const redis = new IORedis(redisUrl);
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `fsbench${runId}:*`, 'COUNT', 1000);
        if (keys.length) await redis.del(...keys);
        cursor = next;
      } while (cursor !== '0');
      redis.disconnect();
    },
  };
}

export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}
