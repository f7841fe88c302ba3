import IORedis from 'ioredis';
import { Client } from 'pg';

/** The run's database URL with a suffix on the name: a database of a test's own. */
export function sideDatabaseUrl(suffix: string): string {
  const url = new URL(process.env.DATABASE_URL!);
  url.pathname = `${url.pathname}_${suffix}`;
  return url.toString();
}

/** Drops the database a URL names, connections and all (through the server's `postgres` database). */
export async function dropDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  url.pathname = '/postgres';
  const client = new Client({ connectionString: url.toString() });
  await client.connect();
  try {
    await client.query(`drop database if exists "${name.replace(/"/g, '""')}" with (force)`);
  } finally {
    await client.end();
  }
}

/** Deletes every Redis key under a queue prefix (a test's or benchmark's own). */
export async function deleteQueueKeys(prefix: string, redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'): Promise<void> {
  const redis = new IORedis(redisUrl);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      if (keys.length) await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}
