import autocannon from 'autocannon';
import { loadConfig } from '../../config';
import { prepareDatabase } from '../../src/app';
import { initOrm } from '../../src/db/orm';
import { createApiKey, createOrganization } from '../../src/domain/auth/admin';
import { createForm } from '../../src/domain/forms/form-service';
import { normalizeStructure } from '../../src/domain/forms/structure';
import { newId } from '../../src/lib/ids';
import { startEntry } from '../support/processes';
import { benchEnvironment, benchNumber } from './support';

/**
 * Ingest benchmark (issue 3): authenticated submission creation under 32 connections with many keys,
 * against a baseline of "restify parses the body + one INSERT" on the same database, same run.
 * Usage: npm run bench:ingest [-- --duration 15 --connections 32 --keys 200 --orgs 1 --api-only]
 * (--api-only runs the API without the workers, to tell the request path's cost from the workers'.)
 */
const DURATION = benchNumber('duration', 15);
const CONNECTIONS = benchNumber('connections', 32);
const KEYS = benchNumber('keys', 200);
const ORGS = benchNumber('orgs', 1);
const ENTRY = process.argv.includes('--api-only') ? 'src/api.js' : 'src/main.js';

const body = JSON.stringify({
  data: { fld_name: 'Ada Lovelace', fld_email: 'ada@example.com', fld_count: 3, fld_plan: 'pro' },
  submitterEmail: 'ada@example.com',
});

function load(opts: autocannon.Options): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    autocannon(opts, (err, result) => (err ? reject(err) : resolve(result)));
  });
}

function summary(name: string, r: autocannon.Result) {
  const ok = r['2xx'];
  return {
    name, requests: r.requests.total, created: ok, non2xx: r.non2xx, errors: r.errors, timeouts: r.timeouts,
    reqPerSec: Math.round(ok / r.duration), p50ms: r.latency.p50, p99ms: r.latency.p99, maxMs: r.latency.max,
  };
}

async function main(): Promise<void> {
  const env = benchEnvironment('ingest');
  const common = { DATABASE_URL: env.databaseUrl, REDIS_URL: env.redisUrl, QUEUE_PREFIX: env.queuePrefix, NODE_NO_WARNINGS: '1' };
  try {
    await prepareDatabase(loadConfig({ ...process.env, ...common }));

    // Baseline
    const baseline = await startEntry('test/bench/baseline-server.js', common);
    await load({ url: `${baseline.url}/ingest`, method: 'POST', body, headers: { 'content-type': 'application/json' }, connections: CONNECTIONS, duration: 3 });
    const baseResult = await load({
      url: `${baseline.url}/ingest`, method: 'POST', body, headers: { 'content-type': 'application/json' },
      connections: CONNECTIONS, duration: DURATION,
    });
    await baseline.proc.stop();

    // Full path: API + public runtime + all workers in one process (npm start's entry).
    const orm = await initOrm(env.databaseUrl, 4);
    const em = orm.em.fork();
    const { structure } = normalizeStructure({
      pages: [],
      fields: [
        { id: 'fld_name', type: 'text', label: 'Name', required: true, config: {}, validationRules: { maxLength: 200 }, order: 0 },
        { id: 'fld_email', type: 'email', label: 'Email', required: true, config: {}, validationRules: {}, order: 1 },
        { id: 'fld_count', type: 'number', label: 'Count', required: false, config: {}, validationRules: { min: 0, max: 10 }, order: 2 },
        { id: 'fld_plan', type: 'select', label: 'Plan', required: false, config: { options: [{ label: 'Pro', value: 'pro' }, { label: 'Free', value: 'free' }] }, validationRules: {}, order: 3 },
      ],
    }, (p) => newId(p));
    // Keys (and their forms) are spread over ORGS organizations; each key posts to its org's form.
    const targets: Array<{ key: string; path: string }> = [];
    for (let o = 0; o < ORGS; o++) {
      const org = await createOrganization(em, { name: `bench ${o}`, plan: 'enterprise', monthlyQuota: 100_000_000 });
      const form = await createForm(em, org.id, { title: 'Bench', status: 'published' }, structure!, Buffer.alloc(32));
      for (let i = o; i < KEYS; i += ORGS) {
        const { key } = await createApiKey(em, { organizationId: org.id, scopes: ['submissions:write'] });
        targets[i] = { key, path: `/v1/forms/${form.form.id}/submissions` };
      }
    }
    // targets[i] belongs to organization i % ORGS, so consecutive requests go to different organizations.
    await orm.close();

    const service = await startEntry(ENTRY, { ...common, LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info' }, 'PORT',
      // e.g. BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" to profile the service
      (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean));
    let n = 0;
    const request = {
      method: 'POST' as const,
      path: targets[0].path,
      body,
      setupRequest: (req: any) => {
        const target = targets[n++ % targets.length];
        return { ...req, path: target.path, headers: { 'content-type': 'application/json', authorization: `Bearer ${target.key}` } };
      },
    };
    await load({ url: service.url, requests: [request], connections: CONNECTIONS, duration: 3 });
    const fullResult = await load({ url: service.url, requests: [request], connections: CONNECTIONS, duration: DURATION });
    await service.proc.stop();

    const base = summary('baseline (parse + 1 INSERT)', baseResult);
    const full = summary('full submission path', fullResult);
    console.table([base, full]);
    console.log(`ratio full/baseline throughput: ${(full.reqPerSec / base.reqPerSec * 100).toFixed(1)}%  (goal ≥ 50%)`);
    console.log(`full path p99: ${full.p99ms} ms  (goal < 50 ms)`);
    if (full.non2xx) console.log(`note: ${full.non2xx} non-2xx answers in the full path`);
  } finally {
    await env.cleanup();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
