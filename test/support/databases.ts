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
