import { expect } from 'chai';
import { loadConfig } from '../../config';
import { prepareDatabase } from '../../src/app';
import type { DeliveryDecision } from '../../src/domain/webhooks/policy';
import type { SendResult } from '../../src/domain/webhooks/sender';
import { SIDE_ROWS_SOURCE_COLUMNS, sideRowsCtes } from '../../src/domain/webhooks/store';
import { dropDatabase, sideDatabaseUrl } from './databases';
import { call, createPublishedForm, createTenant, fieldInput, startTestApp, type TestApp, type TestTenant } from './harness';
import { freshQueuePrefix } from './worker-stack';

/** A statement runner of a test (`?` placeholders): `stack.api.query`, `(sql, params) => em.execute(sql, params)`. */
type Query = (sql: string, params?: unknown[]) => Promise<any>;

/**
 * Deliveries a test writes or changes by hand, in SQL, get the rows the service's statements keep
 * beside them (src/README.md, "Webhook deliveries and HOT updates"), as they are now: an owed row
 * due when the delivery is for each pending one, a failed row for each failed one, neither for the
 * others. `where` selects the deliveries in `webhook_deliveries` (with its `?` parameters). (On a
 * live service, `deliveries repair` does it under each delivery's row lock.)
 */
export async function keepSideRows(query: Query, where: string, params: unknown[] = []): Promise<void> {
  await query(`with d as materialized (
      select ${SIDE_ROWS_SOURCE_COLUMNS} from webhook_deliveries where ${where}
    ), ${sideRowsCtes('d')}
    select count(*) from d`, params);
}

/**
 * The side tables against what the deliveries say (organization, webhook and time of each row), in
 * one snapshot, by a statement of the test's own rather than the service's rule.
 */
export async function expectSideRowsExact(query: Query, after: string): Promise<void> {
  const [{ owed, pending, failed, failedRows }] = await query(`select
    (select coalesce(json_agg(x order by x), '[]') from (select delivery_id || ' ' || organization_id || ' ' || webhook_id || ' ' || next_attempt_at::text as x
       from webhook_delivery_owed) o) as owed,
    (select coalesce(json_agg(x order by x), '[]') from (select id || ' ' || organization_id || ' ' || webhook_id || ' ' || coalesce(next_attempt_at, created_at)::text as x
       from webhook_deliveries where status = 'pending') d) as pending,
    (select coalesce(json_agg(x order by x), '[]') from (select delivery_id || ' ' || organization_id || ' ' || webhook_id || ' ' || created_at::text as x
       from webhook_delivery_failed) f) as "failedRows",
    (select coalesce(json_agg(x order by x), '[]') from (select id || ' ' || organization_id || ' ' || webhook_id || ' ' || created_at::text as x
       from webhook_deliveries where status = 'failed') d) as failed`);
  expect(owed, `owed rows after ${after}`).to.deep.equal(pending);
  expect(failedRows, `failed rows after ${after}`).to.deep.equal(failed);
}

/** An attempt's send result and decision as a worker has them: 200 and a success, or 500 and a failure for good or a retry due at once. */
export function attemptResult(outcome: 'succeeded' | 'failed' | 'retry'): { result: SendResult; decision: DeliveryDecision } {
  const statusCode = outcome === 'succeeded' ? 200 : 500;
  const result = {
    statusCode, retryAfterMs: null, error: statusCode === 200 ? null : `Unexpected status ${statusCode}`, durationMs: 5, responseExcerpt: null,
  } as SendResult;
  const decision: DeliveryDecision = outcome === 'succeeded' ? { kind: 'succeeded' }
    : outcome === 'failed' ? { kind: 'failed' } : { kind: 'retry', delayMs: 0, retryAfterMs: null };
  return { result, decision };
}

/**
 * The stage of the tests of deliveries' side rows: an API on a database of its own
 * (`sideDatabaseUrl(name)`, migrated), a tenant, and one published form with an email field.
 */
export interface DeliveriesStage {
  databaseUrl: string;
  api: TestApp;
  tenant: TestTenant;
  formId: string;
  /** A webhook of the form (`ofForm`) or of the organization, hearing `events`, to a port where nothing listens. */
  createWebhook(ofForm: boolean, events?: string[]): Promise<string>;
  /** Stops the API and drops the database. */
  close(): Promise<void>;
}

export async function startDeliveriesStage(name: string): Promise<DeliveriesStage> {
  const databaseUrl = sideDatabaseUrl(name);
  const env = { DATABASE_URL: databaseUrl, QUEUE_PREFIX: freshQueuePrefix() };
  await prepareDatabase(loadConfig({ ...process.env, ...env }));
  const api = await startTestApp(env);
  const tenant = await createTenant(api.app);
  const formId = (await createPublishedForm(api.url, tenant.key, [fieldInput('fld_email', 'email', 'Email')])).id;
  return {
    databaseUrl, api, tenant, formId,
    async createWebhook(ofForm, events = ['submission.created']) {
      const res = await call(api.url, 'POST', '/v1/webhooks', {
        key: tenant.key, body: { name: 'hook', url: 'http://127.0.0.1:9/hook', ...(ofForm ? { formId } : {}), events },
      });
      expect(res.status, res.text).to.equal(201);
      return res.body.webhook.id;
    },
    async close() {
      await api.close();
      await dropDatabase(databaseUrl);
    },
  };
}
