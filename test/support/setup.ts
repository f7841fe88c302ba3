import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../config';
import { prepareDatabase } from '../../src/app';
import { dropDatabase } from './databases';

/**
 * Root hooks: every test run gets a throwaway database and its own queue prefix on the real
 * PostgreSQL and Redis, and drops the database at the end.
 */
const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
const adminUrl = process.env.TEST_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const dbName = `formservice_test_${runId}`;
const dbUrl = new URL(adminUrl);
dbUrl.pathname = `/${dbName}`;

process.env.DATABASE_URL = dbUrl.toString();
process.env.QUEUE_PREFIX = `fstest${runId}`;
process.env.LOG_LEVEL = process.env.TEST_LOG_LEVEL ?? 'silent';
process.env.ENCRYPTION_KEY ??= randomBytes(32).toString('base64');
process.env.WEBHOOK_ALLOW_PRIVATE_TARGETS = 'true';

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(60_000);
    await prepareDatabase(loadConfig());
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(30_000);
    if (process.env.KEEP_TEST_DB) return;
    await dropDatabase(dbUrl.toString());
  },
};
