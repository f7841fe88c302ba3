import autocannon from 'autocannon';
import { readdirSync, readFileSync } from 'node:fs';
import { loadConfig } from '../../config';
import { prepareDatabase } from '../../src/app';
import { initOrm, type Orm } from '../../src/db/orm';
import { createApiKey, createOrganization } from '../../src/domain/auth/admin';
import { createForm } from '../../src/domain/forms/form-service';
import { normalizeStructure } from '../../src/domain/forms/structure';
import { newId } from '../../src/lib/ids';
import { startEntry, type StartedEntry } from '../support/processes';
import { benchEnvironment, benchNumber } from './support';

/**
 * Ingest benchmark (issue 3): authenticated submission creation under 32 connections with many keys,
 * against a baseline of "restify parses the body + one INSERT" on the same database, same run.
 * Usage: npm run bench:ingest [-- --duration 15 --connections 32 --keys 200 --orgs 1 --api-only]
 * (--api-only runs the API without the workers, to tell the request path's cost from the workers'.)
 *
 * Batch mode (issue 15): `--batch 100` compares single posts with batches of that many items on the
 * same service instead (no baseline): submissions per second and CPU per submission of the service
 * process, the PostgreSQL backends of the bench database and redis-server (shared with whatever
 * else runs on the machine), read from /proc before and after each measured phase.
 * e.g. npm run bench:ingest -- --batch 100 --duration 5 --warmup 1 --connections 16 --api-only
 */
const DURATION = benchNumber('duration', 15);
const CONNECTIONS = benchNumber('connections', 32);
const KEYS = benchNumber('keys', 200);
const ORGS = benchNumber('orgs', 1);
const ENTRY = process.argv.includes('--api-only') ? 'src/api.js' : 'src/main.js';
const BATCH = benchNumber('batch', 0);
const WARMUP = benchNumber('warmup', 3);

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

const CLOCK_TICKS_PER_SECOND = 100;

/** CPU time (ms) a process has used so far, or 0 once it is gone. */
function cpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND; // utime + stime
  } catch {
    return 0;
  }
}

function pidsNamed(name: string): number[] {
  return readdirSync('/proc').filter((d) => /^\d+$/.test(d)).map(Number).filter((pid) => {
    try { return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === name; } catch { return false; }
  });
}

interface CpuSample { node: number; postgres: Map<number, number>; redis: number }

async function sampleCpu(orm: Orm, servicePid: number): Promise<CpuSample> {
  const backends = await orm.em.fork().getConnection().execute('select pid from pg_stat_activity where datname = current_database()');
  return {
    node: cpuMs(servicePid),
    postgres: new Map(backends.map((b: any) => [b.pid, cpuMs(b.pid)])),
    redis: pidsNamed('redis-server').reduce((sum, pid) => sum + cpuMs(pid), 0),
  };
}

/** CPU ms per submission between two samples; a backend that appeared meanwhile started from zero. */
function cpuPerSubmission(before: CpuSample, after: CpuSample, submissions: number) {
  let postgres = 0;
  for (const [pid, ms] of after.postgres) postgres += ms - (before.postgres.get(pid) ?? 0);
  const per = (ms: number) => Number((ms / submissions).toFixed(3));
  return { nodeCpuMsPerSub: per(after.node - before.node), pgCpuMsPerSub: per(postgres), redisCpuMsPerSub: per(after.redis - before.redis) };
}

async function countSubmissions(orm: Orm): Promise<number> {
  const [row] = await orm.em.fork().getConnection().execute('select count(*)::int as n from submissions');
  return row.n;
}

/** Single posts, then batches of BATCH items, against one service: submissions/s and CPU per submission. */
async function compareBatches(service: StartedEntry, targets: Array<{ key: string; path: string }>, orm: Orm): Promise<void> {
  const item = JSON.parse(body);
  const batchBody = JSON.stringify({ submissions: Array.from({ length: BATCH }, () => item) });
  const phase = async (name: string, suffix: string, payload: string) => {
    let n = 0;
    const request = {
      method: 'POST' as const, path: targets[0].path + suffix, body: payload,
      setupRequest: (req: any) => {
        const target = targets[n++ % targets.length];
        return { ...req, path: target.path + suffix, headers: { 'content-type': 'application/json', authorization: `Bearer ${target.key}` } };
      },
    };
    if (WARMUP > 0) await load({ url: service.url, requests: [request], connections: CONNECTIONS, duration: WARMUP });
    const [countBefore, cpuBefore] = [await countSubmissions(orm), await sampleCpu(orm, service.proc.child.pid!)];
    const result = await load({ url: service.url, requests: [request], connections: CONNECTIONS, duration: DURATION });
    const [countAfter, cpuAfter] = [await countSubmissions(orm), await sampleCpu(orm, service.proc.child.pid!)];
    const submissions = countAfter - countBefore;
    const [backlog] = await orm.em.fork().getConnection().execute('select count(*)::int as n from outbox where processed_at is null');
    return {
      name, requests: result.requests.total, non2xx: result.non2xx, errors: result.errors,
      reqPerSec: Math.round(result['2xx'] / result.duration), subsPerSec: Math.round(submissions / result.duration),
      p50ms: result.latency.p50, p99ms: result.latency.p99, ...cpuPerSubmission(cpuBefore, cpuAfter, submissions),
      // Fan-out work still queued is not in the CPU figures: compare CPU with --api-only.
      fanoutBacklog: ENTRY === 'src/api.js' ? '-' : backlog.n,
    };
  };
  const singles = await phase('single posts', '', body);
  const batches = await phase(`batches of ${BATCH}`, '/batch', batchBody);
  console.table([singles, batches]);
  console.log(`batch/single submissions per second: ${(batches.subsPerSec / singles.subsPerSec).toFixed(1)}x  (goal ≥ 5x)`);
}

async function main(): Promise<void> {
  const env = benchEnvironment('ingest');
  const common = { DATABASE_URL: env.databaseUrl, REDIS_URL: env.redisUrl, QUEUE_PREFIX: env.queuePrefix, NODE_NO_WARNINGS: '1' };
  try {
    await prepareDatabase(loadConfig({ ...process.env, ...common }));

    // Baseline
    let baseResult: autocannon.Result | null = null;
    if (!BATCH) {
      const baseline = await startEntry('test/bench/baseline-server.js', common);
      await load({ url: `${baseline.url}/ingest`, method: 'POST', body, headers: { 'content-type': 'application/json' }, connections: CONNECTIONS, duration: 3 });
      baseResult = await load({
        url: `${baseline.url}/ingest`, method: 'POST', body, headers: { 'content-type': 'application/json' },
        connections: CONNECTIONS, duration: DURATION,
      });
      await baseline.proc.stop();
    }

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

    const service = await startEntry(ENTRY, { ...common, LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info' }, 'PORT',
      // e.g. BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" to profile the service
      (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean));
    if (BATCH) {
      try {
        await compareBatches(service, targets, orm);
      } finally {
        await service.proc.stop();
        await orm.close();
      }
      return;
    }
    await orm.close();
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

    const base = summary('baseline (parse + 1 INSERT)', baseResult!);
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
