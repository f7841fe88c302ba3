import { Client } from 'pg';
import { loadConfig } from '../../config';
import type { Plan } from '../../config/plans';
import { createAppContext, type AppContext } from '../../src/app';
import type { Orm } from '../../src/db/orm';
import { createApiKey, createOrganization } from '../../src/domain/auth/admin';
import { startHttp, type RunningHttp } from '../../src/http/start';
import { createLogger, type Logger } from '../../src/lib/logger';

export interface TestApp {
  app: AppContext;
  http: RunningHttp;
  url: string;
  /** A raw SQL statement on the service's database (`?` placeholders), for what a test checks behind the API. */
  query(sql: string, params?: unknown[]): Promise<any[]>;
  close(): Promise<void>;
}

/**
 * A real service on a loopback port, against the run's throwaway database and real Redis.
 * `logger` replaces the default one, e.g. to capture what the service logs.
 */
export async function startTestApp(env: Record<string, string> = {}, opts: { logger?: Logger } = {}): Promise<TestApp> {
  const config = loadConfig({ ...process.env, HOST: '127.0.0.1', PORT: '0', ...env });
  const app = await createAppContext(config, opts.logger ?? createLogger(process.env.TEST_LOG_LEVEL ?? 'silent'));
  const http = await startHttp(app);
  const url = `http://127.0.0.1:${http.port}`;
  return {
    app, http, url,
    query: async (sql, params = []) => app.orm.em.fork().getConnection().execute(sql, params),
    async close() {
      await http.drain();
      await app.close();
    },
  };
}

/**
 * A test's fixture of many rows in one statement (`?` placeholders), without the service's statement
 * timeout: the fixture is not what is under test, and on a slow day 100,000 rows take longer than
 * the few seconds a request's statement is allowed.
 */
/**
 * Runs one seeding statement with no time limit, server-side or client-side: on its own connection
 * (the ORM's pool ends a read after its statement timeout), so a seed of 100,000 rows on a busy
 * machine is slow, not failed.
 */
export async function seed(orm: Orm, sql: string, params: unknown[] = []): Promise<void> {
  const client = new Client({ connectionString: orm.config.get('clientUrl') });
  await client.connect();
  try {
    await client.query('set statement_timeout = 0');
    await client.query(sql.replace(/\?/g, (_, offset: number) => `$${countMarks(sql.slice(0, offset)) + 1}`), params);
  } finally {
    await client.end();
  }
}

/** How many `?` placeholders precede a point of a seeding statement (they are numbered for node-postgres). */
function countMarks(text: string): number {
  return (text.match(/\?/g) ?? []).length;
}

export interface TestTenant {
  organizationId: string;
  key: string;
}

export async function createTenant(app: AppContext, opts: { plan?: Plan; scopes?: string[]; monthlyQuota?: number | null } = {}): Promise<TestTenant> {
  const em = app.orm.em.fork();
  const org = await createOrganization(em, { name: 'test org', plan: opts.plan ?? 'enterprise', monthlyQuota: opts.monthlyQuota ?? null });
  const { key } = await createApiKey(em, { organizationId: org.id, scopes: opts.scopes ?? ['*'] });
  return { organizationId: org.id, key };
}

export async function createKey(app: AppContext, organizationId: string, scopes: string[]): Promise<string> {
  return (await createApiKey(app.orm.em.fork(), { organizationId, scopes })).key;
}

export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

/** A small JSON client; `body` may be a string to send it unparsed. */
export async function call<T = any>(
  baseUrl: string, method: string, path: string,
  opts: { key?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<ApiResponse<T>> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.key) headers.Authorization = `Bearer ${opts.key}`;
  let body: string | undefined;
  if (opts.body !== undefined) {
    headers['Content-Type'] ??= 'application/json';
    body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
  }
  const res = await fetch(`${baseUrl}${path}`, { method, headers, body });
  const text = await res.text();
  let parsed: any = undefined;
  try { parsed = text ? JSON.parse(text) : undefined; } catch { parsed = undefined; }
  return { status: res.status, headers: res.headers, body: parsed, text };
}

/** A published form with the given fields (one page). */
export async function createPublishedForm(baseUrl: string, key: string, fields: unknown[], extra: Record<string, unknown> = {}) {
  const res = await call(baseUrl, 'POST', '/v1/forms', {
    key, body: { title: 'Test form', status: 'published', pages: [], fields, ...extra },
  });
  if (res.status !== 201) throw new Error(`form create failed: ${res.status} ${res.text}`);
  return res.body.form;
}

/** A field as the API takes it, with the defaults of an optional field; `extra` overrides. */
export function fieldInput(id: string, type: string, label: string, extra: Record<string, unknown> = {}) {
  return { id, type, label, required: false, config: {}, validationRules: {}, order: 0, pageId: null, ...extra };
}
