import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { initOrm } from '../../src/db/orm';
import { createApiKey, createOrganization } from '../../src/domain/auth/admin';
import { createForm } from '../../src/domain/forms/form-service';
import { normalizeStructure } from '../../src/domain/forms/structure';
import { createWebhook } from '../../src/domain/webhooks/webhook-service';
import { newId } from '../../src/lib/ids';
import { deleteQueueKeys, dropDatabase } from '../support/databases';

/**
 * Prints the Node.js a bench runs on (its processes inherit it), and says so when it is not the
 * pinned one: `node dist/test/bench/…` takes the machine's own node, which may be an older line
 * whose figures differ (Node 20's AsyncLocalStorage runs on promise hooks, for one).
 */
export function announceRuntime(): void {
  const { devDependencies } = JSON.parse(readFileSync(path.join(__dirname, '../../../package.json'), 'utf8')) as { devDependencies: Record<string, string> };
  const pinned = devDependencies.node;
  const running = process.version.slice(1);
  console.log(running === pinned
    ? `Node.js ${running} (the pinned version)`
    : `Node.js ${running}, NOT the pinned ${pinned}: run the bench through npm (npm run bench:…) or node_modules/.bin/node`);
}

/**
 * A throwaway database and queue prefix for one benchmark run, removed afterwards: on the machine's
 * PostgreSQL and Redis (BENCH_PG_ADMIN_URL, REDIS_URL), or on `servers` of the bench's own.
 */
export function benchEnvironment(label: string, servers?: { adminUrl: string; redisUrl: string }) {
  announceRuntime();
  const runId = `${label}${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
  const adminUrl = servers?.adminUrl ?? process.env.BENCH_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const dbUrl = new URL(adminUrl);
  dbUrl.pathname = `/formservice_bench_${runId}`;
  const redisUrl = servers?.redisUrl ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  return {
    adminUrl,
    databaseName: `formservice_bench_${runId}`,
    databaseUrl: dbUrl.toString(),
    redisUrl,
    queuePrefix: `fsbench${runId}`,
    /** Where a process of the run writes its output (kept after the run), as an operator's log file. */
    logFile(name: string): string {
      return path.join(tmpdir(), `formservice_bench_${runId}-${name}.log`);
    },
    async cleanup() {
      await dropDatabase(dbUrl.toString());
      await deleteQueueKeys(`fsbench${runId}`, redisUrl);
    },
  };
}

export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/**
 * Calls `send(i)` for i below rate × seconds on a fixed schedule, open loop (a slow answer does not
 * delay the next call), and waits for every call to settle. The seconds it took, answers included.
 * Only the calls in flight are held (a long run's settled ones are let go); the first failure of a
 * call is thrown once all have settled.
 */
export async function atFixedRate(rate: number, seconds: number, send: (i: number) => Promise<void>): Promise<number> {
  const start = performance.now();
  const inflight = new Set<Promise<void>>();
  let failure: { error: unknown } | undefined;
  for (let i = 0; i < rate * seconds; i++) {
    const wait = start + (i * 1000) / rate - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    const call: Promise<void> = send(i).catch((error: unknown) => { failure ??= { error }; }).finally(() => inflight.delete(call));
    inflight.add(call);
  }
  await Promise.all(inflight);
  if (failure) throw failure.error;
  return (performance.now() - start) / 1000;
}

/**
 * The load generator shares the machine with what it measures: node:http on a keep-alive agent
 * costs a fraction of fetch's CPU per request, which otherwise took half a core at 1,000/s.
 */
export const loadAgent = new http.Agent({ keepAlive: true, maxSockets: 256 });

/** One request on the load agent: its status and its text. */
export function request(method: string, url: string, key: string, payload?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { authorization: `Bearer ${key}` };
    if (payload !== undefined) Object.assign(headers, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) });
    const req = http.request(url, { method, agent: loadAgent, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => { text += chunk; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(payload);
  });
}

export function post(url: string, payload: string, key: string): Promise<{ status: number; text: string }> {
  return request('POST', url, key, payload);
}

/** `--name value` from the command line, or the fallback. */
export function benchArg(name: string, fallback: string): string {
  const args = process.argv.slice(2);
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : fallback;
}

export function benchNumber(name: string, fallback: number): number {
  return Number(benchArg(name, String(fallback)));
}

export interface FormBench {
  organizationId: string;
  formId: string;
  /** The webhook to the receiver, when the bench has one. */
  webhookId: string | null;
  keys: string[];
}

export type WebhookBench = FormBench & { webhookId: string };

/**
 * One enterprise organization with a two-field published form, `keyCount` keys with `keyScopes`,
 * and a webhook to `receiverUrl` when given.
 */
export async function seedFormBench(databaseUrl: string, encryptionKey: Buffer,
  opts: { keyCount: number; keyScopes?: string[]; receiverUrl?: string | null }): Promise<FormBench> {
  const orm = await initOrm(databaseUrl, 2);
  try {
    const em = orm.em.fork();
    const { structure } = normalizeStructure({
      pages: [],
      fields: [
        { id: 'fld_email', type: 'email', label: 'Email', required: true, config: {}, validationRules: {}, order: 0 },
        { id: 'fld_topic', type: 'text', label: 'Topic', required: false, config: {}, validationRules: {}, order: 1 },
      ],
    }, (p) => newId(p));
    const org = await createOrganization(em, { name: 'bench', plan: 'enterprise', monthlyQuota: 100_000_000 });
    const form = await createForm(em, org.id, { title: 'Bench', status: 'published' }, structure!, encryptionKey);
    const webhook = opts.receiverUrl
      ? (await createWebhook(em, org.id, { name: 'bench', url: opts.receiverUrl, events: ['submission.created'] },
        { allowPrivate: true, encryptionKey })).webhook
      : null;
    const keys: string[] = [];
    for (let i = 0; i < opts.keyCount; i++) {
      keys.push((await createApiKey(em, { organizationId: org.id, scopes: opts.keyScopes ?? ['submissions:write'] })).key);
    }
    return { organizationId: org.id, formId: form.form.id, webhookId: webhook?.id ?? null, keys };
  } finally {
    await orm.close();
  }
}

/** seedFormBench with one webhook to the receiver. */
export async function seedWebhookBench(databaseUrl: string, receiverUrl: string, encryptionKey: Buffer, keyCount: number): Promise<WebhookBench> {
  const seeded = await seedFormBench(databaseUrl, encryptionKey, { keyCount, receiverUrl });
  return { ...seeded, webhookId: seeded.webhookId! };
}
