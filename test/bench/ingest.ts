import { tmpdir } from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { loadConfig } from '../../config';
import { prepareDatabase } from '../../src/app';
import { initOrm, type Orm } from '../../src/db/orm';
import { createApiKey, createOrganization } from '../../src/domain/auth/admin';
import { createForm } from '../../src/domain/forms/form-service';
import { normalizeStructure } from '../../src/domain/forms/structure';
import { newId } from '../../src/lib/ids';
import { startOtlpReceiver, type OtlpReceiver } from '../support/fakes/otlp-receiver';
import { ownPostgres, queryOnce } from '../support/postgres-server';
import { startEntry, type StartedEntry } from '../support/processes';
import { cpuUsed, perSubmission, sampleCpu, type CpuUse } from './cpu';
import {
  commandsPerSubmission, gcDuring, sampleWaits, snapshotCommands, snapshotGc, snapshotGroups, snapshotStatements, snapshotTransactions, topStatements,
} from './server-stats';
import { benchEnvironment, benchNumber } from './support';

/**
 * Ingest benchmark (issues 3 and 13): authenticated submission creation under 32 connections with
 * many keys, against the bare stack (test/bench/baseline-server.ts: restify parses the body, one
 * pooled INSERT) on the same database, in the same run. For each it prints req/s, p50, p99 and
 * non-2xx answers, then the CPU per accepted submission (2xx), read from /proc before and after the
 * measured phase: the whole machine (all CPUs, non-idle) and by process: the process under test,
 * PostgreSQL (the bench database's backends plus the background processes, each listed: they also
 * serve other databases), redis-server (shared), the bench process itself (autocannon runs in it),
 * backends of other databases and what is left unaccounted (other users of the machine), with the
 * ratio service/bare stack (goals, issue 22: ≤ 1.0× CPU with one organization, ≥ 0.9× throughput,
 * p99 ≤ 1.5×). For the service phase it also prints its garbage collections, the top statements
 * from pg_stat_statements (when loaded: shared_preload_libraries and the extension created in the
 * admin database) and Redis INFO commandstats (every client's commands), per submission; for both
 * phases, the bench database's backends by state (sampleWaits: running, flushing WAL, waiting for
 * another's flush, waiting for their client).
 *
 * Usage: npm run bench:ingest [-- --duration 15 --connections 32 --keys 200 --orgs 1 --warmup 3 --api-only]
 * (--api-only runs the API without the workers, to tell the request path's cost from the workers'.)
 * e.g. npm run bench:ingest -- --duration 10 --orgs 20
 * Profile the service: BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" node dist/test/bench/ingest.js …
 * The machine is shared: figures vary from run to run; CPU per submission varies less than req/s.
 *
 * Batch mode (issue 15): `--batch 100` compares single posts with batches of that many items on the
 * same service instead (no baseline): submissions per second and CPU per submission of the service
 * process, PostgreSQL (as above) and redis-server.
 * e.g. npm run bench:ingest -- --batch 100 --duration 5 --warmup 1 --connections 16 --api-only
 *
 * Rounds: `--rounds 5` measures the bare stack and the service that many times, alternating, the
 * service first in every other round (both processes stay up; the one not measured idles), and
 * then prints each round's throughput, p99 and CPU ratios with their medians. On a shared machine
 * one pair of phases varies by ±10 % in req/s; the median of alternating rounds is the figure to
 * compare with a goal. The detailed tables (CPU by process, garbage collection, statements, Redis
 * commands, backend states) are the first round's.
 * e.g. npm run bench:ingest -- --rounds 5 --duration 8
 *
 * Own PostgreSQL: `--own-postgres` runs both on a PostgreSQL of the bench's own with
 * pg_stat_statements loaded (the machine's shared one does not load it), so the statement table
 * prints; its settings are the development machine's.
 * e.g. npm run bench:ingest -- --orgs 20 --own-postgres
 *
 * Tracing (issue 25): `--trace` runs the service with OpenTelemetry on, exporting (OTLP/HTTP, the
 * default protobuf protocol, every trace sampled unless OTEL_TRACES_SAMPLER says otherwise) to a
 * receiver on loopback inside the bench process; compare with a run without it.
 * e.g. npm run bench:ingest -- --duration 10 --orgs 20 --trace
 */
const DURATION = benchNumber('duration', 15);
const CONNECTIONS = benchNumber('connections', 32);
const KEYS = benchNumber('keys', 200);
const ORGS = benchNumber('orgs', 1);
const ENTRY = process.argv.includes('--api-only') ? 'src/api.js' : 'src/main.js';
const BATCH = benchNumber('batch', 0);
const WARMUP = benchNumber('warmup', 3);
const TRACE = process.argv.includes('--trace');
const ROUNDS = benchNumber('rounds', 1);
/**
 * An experiment, not a configuration: `--drop-constraints webhook_deliveries.webhook_deliveries_webhook_id_fkey,…`
 * drops those constraints (table.name) from the bench database before the service starts, e.g. a
 * foreign key the storing statement's inserts still check: each check locks its parent row FOR KEY
 * SHARE, a row lock per parent of a statement (those of organizations and forms are gone:
 * Migration20261129000300_storing_without_foreign_keys).
 */
const DROP_CONSTRAINTS = process.argv.includes('--drop-constraints')
  ? process.argv[process.argv.indexOf('--drop-constraints') + 1].split(',').map((c) => c.split('.') as [string, string])
  : [];

const body = JSON.stringify({
  data: { fld_name: 'Ada Lovelace', fld_email: 'ada@example.com', fld_count: 3, fld_plan: 'pro' },
  submitterEmail: 'ada@example.com',
});

function load(opts: autocannon.Options): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    autocannon(opts, (err, result) => (err ? reject(err) : resolve(result)));
  });
}

/** One measured load against a process: autocannon's result and the CPU used meanwhile. */
async function measured(pid: number, database: string, opts: autocannon.Options): Promise<{ result: autocannon.Result; cpu: CpuUse }> {
  const before = sampleCpu(pid);
  const result = await load(opts);
  return { result, cpu: cpuUsed(before, sampleCpu(pid), database) };
}

function summary(name: string, r: autocannon.Result) {
  return {
    name, requests: r.requests.total, accepted: r['2xx'], non2xx: r.non2xx, errors: r.errors, timeouts: r.timeouts,
    reqPerSec: Math.round(r['2xx'] / r.duration), p50ms: r.latency.p50, p99ms: r.latency.p99, maxMs: r.latency.max,
  };
}

/** CPU ms per accepted submission, bare stack beside the service, by line. */
function cpuTable(bare: CpuUse, bareSubs: number, service: CpuUse, serviceSubs: number) {
  const line = (name: string, a: number, b: number) => {
    const bareMs = perSubmission(a, bareSubs);
    const serviceMs = perSubmission(b, serviceSubs);
    return { 'CPU ms per accepted submission': name, bare: bareMs, service: serviceMs, 'service/bare': bareMs > 0 ? `${(serviceMs / bareMs).toFixed(2)}x` : '-' };
  };
  const background = [...new Set([...Object.keys(bare.postgresBackground), ...Object.keys(service.postgresBackground)])].sort();
  return [
    line('whole machine (all CPUs, non-idle)', bare.machine, service.machine),
    line('node (the process under test)', bare.node, service.node),
    line('  node: in the kernel (system calls)', bare.nodeSystem, service.nodeSystem),
    line('postgres (bench database + background)', bare.postgres, service.postgres),
    line('  postgres: bench database backends', bare.postgresBackends, service.postgresBackends),
    ...background.map((role) => line(`  postgres: ${role}`, bare.postgresBackground[role] ?? 0, service.postgresBackground[role] ?? 0)),
    line('redis-server (shared)', bare.redis, service.redis),
    line('node + postgres + redis', bare.node + bare.postgres + bare.redis, service.node + service.postgres + service.redis),
    line('bench process (autocannon)', bare.bench, service.bench),
    line('postgres: other databases (not ours)', bare.postgresOtherDatabases, service.postgresOtherDatabases),
    line('unaccounted (other users, kernel)', bare.unaccounted, service.unaccounted),
  ];
}

async function countSubmissions(orm: Orm): Promise<number> {
  const [row] = await orm.em.fork().getConnection().execute('select count(*)::int as n from submissions');
  return row.n;
}

/** Single posts, then batches of BATCH items, against one service: submissions/s and CPU per submission. */
async function compareBatches(service: StartedEntry, targets: Array<{ key: string; path: string }>, orm: Orm, database: string): Promise<void> {
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
    const countBefore = await countSubmissions(orm);
    const { result, cpu } = await measured(service.proc.child.pid!, database,
      { url: service.url, requests: [request], connections: CONNECTIONS, duration: DURATION });
    const submissions = (await countSubmissions(orm)) - countBefore;
    const [backlog] = await orm.em.fork().getConnection().execute('select count(*)::int as n from outbox where processed_at is null');
    return {
      name, requests: result.requests.total, non2xx: result.non2xx, errors: result.errors,
      reqPerSec: Math.round(result['2xx'] / result.duration), subsPerSec: Math.round(submissions / result.duration),
      p50ms: result.latency.p50, p99ms: result.latency.p99,
      nodeCpuMsPerSub: perSubmission(cpu.node, submissions), pgCpuMsPerSub: perSubmission(cpu.postgres, submissions),
      redisCpuMsPerSub: perSubmission(cpu.redis, submissions),
      // Fan-out work still queued is not in the CPU figures: compare CPU with --api-only.
      fanoutBacklog: ENTRY === 'src/api.js' ? '-' : backlog.n,
    };
  };
  const singles = await phase('single posts', '', body);
  const batches = await phase(`batches of ${BATCH}`, '/batch', batchBody);
  console.table([singles, batches]);
  console.log(`batch/single submissions per second: ${(batches.subsPerSec / singles.subsPerSec).toFixed(1)}x  (goal ≥ 5x)`);
}

/** The two phases' backend states side by side. */
function waitsTable(bare: Array<{ state: string; backends: number }>, service: Array<{ state: string; backends: number }>) {
  const states = [...new Set([...service, ...bare].map((w) => w.state))];
  const of = (list: Array<{ state: string; backends: number }>, state: string) => list.find((w) => w.state === state)?.backends ?? 0;
  return states.map((state) => ({ state, bare: of(bare, state), service: of(service, state) }))
    .filter((row) => row.bare >= 0.005 || row.service >= 0.005)
    .sort((a, b) => (b.bare + b.service) - (a.bare + a.service));
}

/** Each round's service/bare ratios and their medians: the figures a goal is compared with on a noisy machine. */
function printRounds(rounds: Array<{ bare: { result: autocannon.Result; cpu: CpuUse }; service: { result: autocannon.Result; cpu: CpuUse } }>): void {
  const rows = rounds.map(({ bare, service }, i) => {
    const bareSubs = bare.result['2xx'];
    const serviceSubs = service.result['2xx'];
    return {
      round: i + 1,
      bareReqPerSec: Math.round(bareSubs / bare.result.duration),
      serviceReqPerSec: Math.round(serviceSubs / service.result.duration),
      throughput: (serviceSubs / service.result.duration) / (bareSubs / bare.result.duration),
      p99: service.result.latency.p99 / bare.result.latency.p99,
      machineCpu: (service.cpu.machine / serviceSubs) / (bare.cpu.machine / bareSubs),
      nodeCpu: (service.cpu.node / serviceSubs) / (bare.cpu.node / bareSubs),
    };
  });
  const median = (values: number[]) => {
    const sorted = [...values].sort((a, b) => a - b);
    const mid = Math.floor(sorted.length / 2);
    return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  };
  console.log(`${rounds.length} alternating rounds (${DURATION} s each phase; round 1 and every odd round bare stack first, even rounds the service first):`);
  console.table(rows.map((r) => ({
    ...r, throughput: `${(r.throughput * 100).toFixed(1)}%`, p99: `${r.p99.toFixed(2)}x`, machineCpu: `${r.machineCpu.toFixed(2)}x`,
    nodeCpu: `${r.nodeCpu.toFixed(2)}x`,
  })));
  console.log(`medians over the rounds: throughput ${(median(rows.map((r) => r.throughput)) * 100).toFixed(1)}% of the bare stack's (goal ≥ 90%), `
    + `p99 ${median(rows.map((r) => r.p99)).toFixed(2)}x (goal ≤ 1.5x), whole-machine CPU per submission ${median(rows.map((r) => r.machineCpu)).toFixed(2)}x (goal ≤ 1.0x with 1 org), `
    + `the process under test's CPU per submission ${median(rows.map((r) => r.nodeCpu)).toFixed(2)}x`);
}

async function main(): Promise<void> {
  // --own-postgres: a PostgreSQL of the bench's own (initdb on a free port) with pg_stat_statements
  // loaded, for the statement table where the machine's PostgreSQL does not load it, and away from
  // the other databases of a shared one (its CPU still shares the machine). Settings as the
  // development machine's: autovacuum off, 128 MB of shared buffers.
  const own = process.argv.includes('--own-postgres')
    ? await ownPostgres({
      settings: { shared_preload_libraries: "'pg_stat_statements'", autovacuum: 'off', shared_buffers: '128MB', max_connections: 100 },
      logFile: path.join(tmpdir(), `formservice_bench_ingest_pg_${process.pid}.log`),
    })
    : null;
  if (own) await queryOnce(own.url('postgres'), 'create extension if not exists pg_stat_statements');
  const env = benchEnvironment('ingest', own ? { adminUrl: own.url('postgres'), redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' } : undefined);
  let otlp: OtlpReceiver | null = null;
  const common = { DATABASE_URL: env.databaseUrl, REDIS_URL: env.redisUrl, QUEUE_PREFIX: env.queuePrefix, NODE_NO_WARNINGS: '1' };
  try {
    await prepareDatabase(loadConfig({ ...process.env, ...common }));
    if (DROP_CONSTRAINTS.length) {
      const orm = await initOrm(env.databaseUrl, 1);
      for (const [table, constraint] of DROP_CONSTRAINTS) {
        await orm.em.fork().getConnection().execute(`alter table ${table} drop constraint ${constraint}`);
      }
      await orm.close();
    }

    // The bare stack, measured first in the same run.
    let bare: { result: autocannon.Result; cpu: CpuUse } | null = null;
    let measureBare: (() => Promise<{ result: autocannon.Result; cpu: CpuUse }>) | null = null;
    let bareWaits: Array<{ state: string; backends: number }> = [];
    let stopBare = async () => {};
    if (!BATCH) {
      // BENCH_BARE_NODE_ARGS: node flags for the bare stack's process (e.g. its own --cpu-prof).
      const baseline = await startEntry('test/bench/baseline-server.js', common, 'PORT',
        (process.env.BENCH_BARE_NODE_ARGS ?? '').split(' ').filter(Boolean), env.logFile('bare'));
      const opts = { url: `${baseline.url}/ingest`, method: 'POST' as const, body, headers: { 'content-type': 'application/json' }, connections: CONNECTIONS };
      if (WARMUP > 0) await load({ ...opts, duration: WARMUP });
      measureBare = () => measured(baseline.proc.child.pid!, env.databaseName, { ...opts, duration: DURATION });
      stopBare = async () => { await baseline.proc.stop(); };
      const waits = await sampleWaits(env.adminUrl, env.databaseName);
      bare = await measureBare();
      bareWaits = await waits.stop();
      if (ROUNDS <= 1) await stopBare();
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

    otlp = TRACE ? await startOtlpReceiver() : null;
    const tracing: Record<string, string> = otlp ? { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.endpoint, OTEL_SERVICE_NAME: 'form-service-bench' } : {};
    const service = await startEntry(ENTRY, { ...common, ...tracing, LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info' }, 'PORT',
      // e.g. BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" to profile the service
      (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean), env.logFile('service'));
    console.log(`the service's output: ${env.logFile('service')}`);
    if (BATCH) {
      try {
        await compareBatches(service, targets, orm, env.databaseName);
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
    if (WARMUP > 0) await load({ url: service.url, requests: [request], connections: CONNECTIONS, duration: WARMUP });
    const [statementsBefore, commandsBefore, gcBefore, xactsBefore] = [
      await snapshotStatements(env.adminUrl, env.databaseName), await snapshotCommands(env.redisUrl), await snapshotGc(service.url),
      await snapshotTransactions(env.adminUrl, env.databaseName)];
    const groupsBefore = await snapshotGroups(service.url);
    const measureService = () => measured(service.proc.child.pid!, env.databaseName, { url: service.url, requests: [request], connections: CONNECTIONS, duration: DURATION });
    const waits = await sampleWaits(env.adminUrl, env.databaseName);
    const full = await measureService();
    const serviceWaits = await waits.stop();
    const [statementsAfter, commandsAfter, gcAfter, xactsAfter] = [
      await snapshotStatements(env.adminUrl, env.databaseName), await snapshotCommands(env.redisUrl), await snapshotGc(service.url),
      await snapshotTransactions(env.adminUrl, env.databaseName)];
    const groupsAfter = await snapshotGroups(service.url);
    const rounds = [{ bare: bare!, service: full }];
    // Every other round measures the service first: whichever phase follows the other may find the
    // database in a different state (its WAL, its checkpoints), and the order should not favour one.
    for (let r = 1; r < ROUNDS; r++) {
      if (r % 2 === 1) {
        const service = await measureService();
        rounds.push({ bare: await measureBare!(), service });
      } else {
        rounds.push({ bare: await measureBare!(), service: await measureService() });
      }
    }
    await service.proc.stop();
    await stopBare();

    const bareRow = summary('bare stack (parse + 1 INSERT)', bare!.result);
    const fullRow = summary(`service (${ENTRY === 'src/api.js' ? 'API only' : 'API + workers'}, ${ORGS} org${ORGS === 1 ? '' : 's'}, tracing ${otlp ? 'on' : 'off'})`, full.result);
    console.table([bareRow, fullRow]);
    console.table(cpuTable(bare!.cpu, bareRow.accepted, full.cpu, fullRow.accepted));
    const serving = (c: CpuUse) => c.node + c.postgres + c.redis;
    const ratio = (a: number, b: number) => `${((b / fullRow.accepted) / (a / bareRow.accepted)).toFixed(2)}x`;
    console.log(`service/bare CPU per submission: whole machine ${ratio(bare!.cpu.machine, full.cpu.machine)} (goal ≤ 1.0x with 1 org), `
      + `node + postgres + redis ${ratio(serving(bare!.cpu), serving(full.cpu))}`);
    console.log(`service throughput ${(fullRow.reqPerSec / bareRow.reqPerSec * 100).toFixed(1)}% of the bare stack's (goal ≥ 90%); `
      + `p99 ${fullRow.p99ms} ms, ${(fullRow.p99ms / bareRow.p99ms).toFixed(2)}x the bare stack's (goal ≤ 1.5x); non-2xx ${fullRow.non2xx} (goal 0)`);
    if (ROUNDS > 1) printRounds(rounds);
    if (gcBefore && gcAfter) {
      console.log('the service\'s garbage collection, measured phase (a young collection pauses every request in flight):');
      console.table(gcDuring(gcBefore, gcAfter, fullRow.accepted));
    }

    const statements = topStatements(statementsBefore, statementsAfter, fullRow.accepted);
    if (!statements) {
      console.log(`pg_stat_statements: not available (${statementsAfter.why ?? statementsBefore.why}); `
        + 'load it with shared_preload_libraries and `create extension pg_stat_statements` in the admin database to see statements');
    } else {
      console.log(`PostgreSQL, service phase: ${statements.callsPerSub} statements and ${statements.execMsPerSub} ms of execution per submission; top by total execution time:`);
      console.table(statements.top);
    }
    console.log(`PostgreSQL, service phase: ${((xactsAfter - xactsBefore) / fullRow.accepted).toFixed(3)} transactions per submission `
      + '(pg_stat_database of the bench database: committed and rolled back, the bench\'s own few included)');
    if (groupsBefore && groupsAfter) {
      const statements = groupsAfter.statements - groupsBefore.statements;
      console.log(`the group commit, service phase: ${(statements / fullRow.accepted).toFixed(3)} storing statements per submission, `
        + `${((groupsAfter.submissions - groupsBefore.submissions) / Math.max(statements, 1)).toFixed(1)} submissions each`);
    }
    console.log('PostgreSQL backends of the bench database by state, mean over the first round\'s phases '
      + '(pg_stat_activity every 3 ms; cpu = running, IO:WALSync = flushing WAL, LWLock:WALWrite = waiting for another\'s flush, '
      + '"idle ClientRead" = waiting for the process under test, idle pool connections included):');
    console.table(waitsTable(bareWaits, serviceWaits));
    console.log('Redis INFO commandstats, service phase, per submission (every client of this Redis, not only the bench):');
    console.table(commandsPerSubmission(commandsBefore, commandsAfter, fullRow.accepted).slice(0, 15));
    if (otlp) {
      const bytes = otlp.rawBodies.reduce((sum, b) => sum + b.length, 0);
      console.log(`tracing: ${otlp.rawBodies.length} OTLP export requests (${[...new Set(otlp.contentTypes)].join(', ')}), `
        + `${(bytes / 1024).toFixed(0)} KiB received since the service started (warm-up included)`);
    }
  } finally {
    await otlp?.close();
    await env.cleanup();
    await own?.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
