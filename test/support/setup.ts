import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { loadConfig } from '../../config';
import { prepareDatabase } from '../../src/app';
import { dropDatabase } from './databases';

/**
 * Root hooks: every test run gets a throwaway database and its own queue prefix on the real
 * PostgreSQL and Redis, and drops the database at the end.
 *
 * In parallel mode (`npm test`, mocha `--parallel`) mocha loads this file in its main
 * process and again in each worker process, and runs the root hooks once per file: each worker
 * process gets a database and queue prefix of its own (named after the run, `FS_TEST_RUN`, which
 * the main process sets and the workers inherit), prepared once by its first file and kept for the
 * worker's next files; the main process's global teardown drops them all.
 */
const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
const parentRun = process.env.FS_TEST_RUN;
/** A worker process of a parallel run (the main process set FS_TEST_RUN before the workers started). */
const inWorker = parentRun !== undefined && process.env.MOCHA_WORKER_ID !== undefined;
if (parentRun === undefined) process.env.FS_TEST_RUN = runId;
const adminUrl = process.env.TEST_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const dbName = inWorker ? `formservice_test_${parentRun}_w${process.env.MOCHA_WORKER_ID}_${runId}` : `formservice_test_${runId}`;
const dbUrl = new URL(adminUrl);
dbUrl.pathname = `/${dbName}`;

process.env.DATABASE_URL = dbUrl.toString();
process.env.QUEUE_PREFIX = `fstest${runId}`;
process.env.LOG_LEVEL = process.env.TEST_LOG_LEVEL ?? 'silent';
process.env.ENCRYPTION_KEY ??= randomBytes(32).toString('base64');
process.env.WEBHOOK_ALLOW_PRIVATE_TARGETS = 'true';

let prepared: Promise<unknown> | undefined;

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(60_000);
    await (prepared ??= prepareDatabase(loadConfig()));
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(30_000);
    // A worker's next file uses the same database; the global teardown drops it.
    if (process.env.KEEP_TEST_DB || inWorker) return;
    await dropDatabase(dbUrl.toString());
  },
};

/** Runs once, in mocha's main process: drops the databases of this run's worker processes. */
export async function mochaGlobalTeardown(): Promise<void> {
  if (process.env.KEEP_TEST_DB) return;
  const client = new Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ datname: string }>('select datname from pg_database where datname like $1',
      [`formservice_test_${process.env.FS_TEST_RUN}_w%`]);
    for (const { datname } of rows) await client.query(`drop database if exists "${datname}" with (force)`);
  } finally {
    await client.end();
  }
}
