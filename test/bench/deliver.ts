import { randomBytes } from 'node:crypto';
import { cpus } from 'node:os';
import IORedis from 'ioredis';
import { loadConfig } from '../../config';
import { prepareDatabase } from '../../src/app';
import { initOrm } from '../../src/db/orm';
import { eventIdForSubmission, FORM_SUBMISSION_CREATED } from '../../src/domain/webhooks/events';
import { owedOfNewDeliveriesSql } from '../../src/domain/webhooks/store';
import { newId } from '../../src/lib/ids';
import { Producer } from '../../src/queues/producer';
import { startReceiver, type Receiver } from '../support/fakes/receiver';
import { waitUntil, type ServiceProcess, startEntry } from '../support/processes';
import { cpuMs, cpuUsed, sampleCpu } from './cpu';
import { bareEchoCost } from './machine';
import { commandsPerSubmission, snapshotCommands, snapshotStatements, topStatements } from './server-stats';
import { atFixedRate, benchArg, benchEnvironment, benchNumber, loadAgent, percentile, post, seedWebhookBench } from './support';

/**
 * Delivery benchmark (issues 4 and 13). Phase 1: for each rate in turn, a steady submission rate
 * against the API process; latency from each 201 to its delivery's arrival at a local receiver,
 * and from the delivery row's commit to its attempt's record. Phase 2: a backlog of deliveries
 * drained by one webhooks worker.
 *
 * Processes, as a deployment runs them (deploy/k8s): one API process (`src/api.js`), one webhooks
 * worker (`workers/webhooks.js`) and one usage worker (`workers/usage.js`: the outbox relay and the
 * sweeps of owed work). The submission statement writes the delivery rows and the API queues their
 * jobs, so the submissions worker (deletions and outbox rows from before that) and the CRM worker
 * have nothing to do in this load and are not started.
 * Usage: npm run bench:deliver [-- --rates 200,1000 --duration 20 --warmup 15 --calibrate 6 --keys 60 --backlog 3000] (`--backlog 0` skips phase 2)
 */
const RATES = benchArg('rates', process.argv.includes('--rate') ? benchArg('rate', '200') : '200,1000').split(',').map(Number);
const DURATION_S = benchNumber('duration', 20);
/**
 * Seconds at the same rate before measuring: connection pools fill, prepared statements and JIT warm
 * up. On two busy cores the optimizing compiler was still a sixth of the webhooks worker's CPU eight
 * seconds in, and the first dozen seconds' p99 stood two to five times above the rest's.
 */
const WARMUP_S = benchNumber('warmup', 15);
// Enterprise keys allow 2,000 requests/min each; spread the load so no key's limit binds.
const KEYS = benchNumber('keys', Math.max(4, Math.ceil((Math.max(...RATES) * 60 * 2) / 2000)));
const BACKLOG = benchNumber('backlog', 3000);
/**
 * Seconds of the machine bench's bare echo at each rate, right before that rate's warm-up (`0`
 * skips it): what a bare request cost this machine at that moment, to read the figures by, as the
 * machine's speed varies several times over from day to day.
 */
const CALIBRATE_S = benchNumber('calibrate', 6);
/**
 * `--profile DIR`: the API and webhooks worker processes write CPU profiles there when they stop;
 * otherwise BENCH_NODE_ARGS are their node flags (e.g. `--perf-basic-prof`, to profile them with perf).
 */
const PROFILE_DIR = benchArg('profile', '');
const nodeArgs = PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`] : (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);

const body = (i: number) => JSON.stringify({ data: { fld_email: `user${i}@example.com`, fld_topic: 'bench' } });

/** Sends `rate` requests/s for `seconds` on a fixed schedule (not closed-loop), recording each 201. */
async function steadyLoad(apiUrl: string, formId: string, keys: string[], rate: number, seconds: number) {
  const created = new Map<string, number>();
  let refused = 0;
  /** Refusals by status (`error` when no answer came). */
  const refusals: Record<string, number> = {};
  const refuse = (why: string) => { refused++; refusals[why] = (refusals[why] ?? 0) + 1; };
  const elapsed = await atFixedRate(rate, seconds, (i) =>
    post(`${apiUrl}/v1/forms/${formId}/submissions`, body(i), keys[i % keys.length]).then((res) => {
      if (res.status === 201) created.set((JSON.parse(res.text) as any).submission.id, Date.now());
      else refuse(String(res.status));
    }, () => refuse('error')));
  return { created, refused, refusals, seconds: elapsed };
}

/** The p99 latency of the submissions created in each second of a load from `first` (ms since the epoch), in order. */
function secondByPercentile99(created: Map<string, number>, arrivals: Map<string, number>, first: number): number[] {
  const seconds: number[][] = [];
  for (const [id, at] of created) {
    if (!arrivals.has(id)) continue;
    (seconds[Math.floor((at - first) / 1000)] ??= []).push(arrivals.get(id)! - at);
  }
  return seconds.map((l) => percentile(l.sort((a, b) => a - b), 99));
}

function arrivalsBySubmission(receiver: Receiver, from = 0): Map<string, number> {
  const out = new Map<string, number>();
  for (const d of receiver.deliveries.slice(from)) {
    const id = JSON.parse(d.rawBody).data?.submission?.id;
    if (id && !out.has(id)) out.set(id, d.receivedAt);
  }
  return out;
}

/**
 * The delivery row's commit (with its submission) → its first attempt recorded, per submission: the
 * queue's and the worker's share of the latency, without the client's and the API's.
 */
async function commitToAttemptMs(databaseUrl: string, submissionIds: string[]): Promise<number[]> {
  const orm = await initOrm(databaseUrl, 1);
  try {
    const rows = await orm.em.getConnection().execute(
      `select extract(epoch from (a.created_at - d.created_at)) * 1000 as ms
         from webhook_deliveries d join delivery_attempts a on a.delivery_id = d.id and a.attempt_no = 1
        where d.event_id = any(string_to_array(?, ',')) order by 1`,
      [submissionIds.map(eventIdForSubmission).join(',')],
    );
    return rows.map((r: any) => Math.round(Number(r.ms)));
  } finally {
    await orm.close();
  }
}

async function enqueueBacklog(env: { databaseUrl: string; redisUrl: string; queuePrefix: string }, webhookId: string, organizationId: string) {
  const orm = await initOrm(env.databaseUrl, 2);
  const payload = JSON.stringify({ id: 'evt_bench', type: FORM_SUBMISSION_CREATED, data: { bench: true } });
  const ids = Array.from({ length: BACKLOG }, () => newId('dlv'));
  try {
    const conn = orm.em.getConnection();
    for (let i = 0; i < ids.length; i += 500) {
      const chunk = ids.slice(i, i + 500);
      await conn.execute(
        // Pending deliveries with their owed rows, as the service's statements write them (src/README.md,
        // "Webhook deliveries and HOT updates"): the success path deletes the owed row.
        `with d as (
           insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, next_attempt_at)
           select id, ?, ?, 'evt_backlog_' || id, ?, ?, 'pending', now() from unnest(string_to_array(?, ',')) as id
           returning id, organization_id, webhook_id, next_attempt_at
         )
         ${owedOfNewDeliveriesSql('d')}`,
        [webhookId, organizationId, FORM_SUBMISSION_CREATED, payload, chunk.join(',')],
      );
    }
  } finally {
    await orm.close();
  }
  const connection = new IORedis(env.redisUrl, { maxRetriesPerRequest: null });
  const producer = new Producer(connection, env.queuePrefix, loadConfig().webhookRetryDelaysMs);
  for (let i = 0; i < ids.length; i += 500) {
    await producer.addBulk('webhooks', ids.slice(i, i + 500).map((deliveryId) => ({ name: 'deliver' as const, data: { deliveryId } })));
  }
  await producer.close();
  connection.disconnect();
}

async function main(): Promise<void> {
  const env = benchEnvironment('deliver');
  const encryptionKey = randomBytes(32);
  const common = {
    DATABASE_URL: env.databaseUrl, REDIS_URL: env.redisUrl, QUEUE_PREFIX: env.queuePrefix,
    ENCRYPTION_KEY: encryptionKey.toString('base64'), WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
  };
  const receiver = await startReceiver();
  const processes: ServiceProcess[] = [];
  try {
    await prepareDatabase(loadConfig({ ...process.env, ...common }));
    const seeded = await seedWebhookBench(env.databaseUrl, receiver.url, encryptionKey, KEYS);

    const api = await startEntry('src/api.js', common, 'PORT', nodeArgs, env.logFile('api'));
    processes.push(api.proc);
    processes.push((await startEntry('workers/usage.js', common, 'METRICS_PORT')).proc);
    const worker = (await startEntry('workers/webhooks.js', common, 'METRICS_PORT', nodeArgs, env.logFile('webhooks'))).proc;
    processes.push(worker);
    const cpu = () => ({ sample: sampleCpu(api.proc.child.pid!), worker: cpuMs(worker.child.pid!), at: performance.now() });
    const serverStats = async () => ({ statements: await snapshotStatements(env.adminUrl, env.databaseName), commands: await snapshotCommands(env.redisUrl) });

    // Phase 1: each rate in turn, 201 → arrival latency, after a warm-up at the same rate.
    const steady: Array<Record<string, unknown>> = [];
    const cpuRows: Array<Record<string, unknown>> = [];
    const serverLines: string[] = [];
    const bySecond: string[] = [];
    let seen = 0;
    for (const rate of RATES) {
      // Waits count what arrived (one delivery per submission unless a receiver error made a retry).
      const arrived = () => receiver.deliveries.length;
      const [bare] = CALIBRATE_S > 0 ? await bareEchoCost([rate], CALIBRATE_S) : [];
      const bareRequestMs = bare && (bare.serverUsPerRequest + bare.clientUsPerRequest) / 1000;
      const warmup = await steadyLoad(api.url, seeded.formId, seeded.keys, rate, WARMUP_S);
      await waitUntil(() => arrived() >= seen + warmup.created.size, 60_000, 100).catch(() => undefined);
      seen = arrived();
      const statsBefore = await serverStats();
      const cpuBefore = cpu();
      const load = await steadyLoad(api.url, seeded.formId, seeded.keys, rate, DURATION_S);
      await waitUntil(() => arrived() >= seen + load.created.size, 120_000, 200).catch(() => undefined);
      const cpuAfter = cpu();
      const statsAfter = await serverStats();
      const arrivals = arrivalsBySubmission(receiver, seen);
      seen = arrived();
      const toAttempt = await commitToAttemptMs(env.databaseUrl, [...load.created.keys()]);
      const latencies = [...load.created].flatMap(([id, at]) => (arrivals.has(id) ? [arrivals.get(id)! - at] : [])).sort((a, b) => a - b);
      const firstCreated = Math.min(...load.created.values());
      bySecond.push(`${rate}/s from ${new Date(firstCreated).toISOString()}: ${secondByPercentile99(load.created, arrivals, firstCreated).join(' ')}`);
      steady.push({
        phase: `steady ${rate}/s for ${DURATION_S}s`, submitted: rate * DURATION_S, created: load.created.size,
        refused: load.refused ? `${load.refused} ${JSON.stringify(load.refusals)}` : 0, achievedRate: Math.round(load.created.size / load.seconds), delivered: latencies.length,
        p50ms: percentile(latencies, 50), p99ms: percentile(latencies, 99), maxMs: latencies[latencies.length - 1],
        commitToAttemptP50ms: percentile(toAttempt, 50), commitToAttemptP99ms: percentile(toAttempt, 99),
      });
      const used = cpuUsed(cpuBefore.sample, cpuAfter.sample, env.databaseName);
      const perDelivered = (ms: number) => Number((ms / Math.max(1, latencies.length)).toFixed(3));
      const machineMs = perDelivered(used.machine);
      cpuRows.push({
        phase: `steady ${rate}/s`,
        // How busy the machine was (all CPUs, from the load's start until its last delivery): near 100 %, every hop queues.
        machineBusyPct: Math.round((100 * used.machine) / ((cpuAfter.at - cpuBefore.at) * cpus().length)),
        // CPU ms per delivered submission: the whole machine, then by process (the API's per submission it created).
        machineMs,
        apiMs: Number((used.node / Math.max(1, load.created.size)).toFixed(3)),
        webhooksWorkerMs: perDelivered(cpuAfter.worker - cpuBefore.worker),
        postgresMs: perDelivered(used.postgres), redisMs: perDelivered(used.redis),
        // The load generator and the receiver share this process: near 100 % its own delays enter the figures.
        benchMs: perDelivered(used.bench), benchCpuPct: Math.round((100 * used.bench) / (load.seconds * 1000)),
        // A bare node:http echo's request (server and client) at this rate just before, and the
        // machine's CPU per delivered submission in such requests: comparable from day to day.
        ...(bareRequestMs ? { bareRequestMs, machineInBareRequests: Number((machineMs / bareRequestMs).toFixed(1)) } : {}),
      });
      // Per delivered submission: its storing, the delivery's read and its attempt's record.
      const statements = topStatements(statsBefore.statements, statsAfter.statements, latencies.length, 5);
      const commands = commandsPerSubmission(statsBefore.commands, statsAfter.commands, latencies.length);
      const scripts = commands.find((c) => c.command === 'evalsha');
      const allCommands = Number(commands.reduce((sum, c) => sum + c.callsPerSub, 0).toFixed(2));
      serverLines.push(`${rate}/s, per delivered submission: `
        + (statements ? `${statements.callsPerSub} PostgreSQL statements, ${statements.execMsPerSub} ms of their execution; ` : `pg_stat_statements not available (${statsAfter.statements.why}); `)
        + `${scripts?.callsPerSub ?? 0} Redis script calls (evalsha) taking ${scripts?.usecPerSub ?? 0} µs of Redis time, ${allCommands} Redis commands with those the scripts ran (every client of this Redis)`);
    }

    console.table(steady);
    console.table(cpuRows);
    console.log(serverLines.join('\n'));
    console.log(`p99 201 → arrival (ms) of each second of the load, in order: a slow second shows a stall, a rising line a queue\n${bySecond.join('\n')}`);
    if (BACKLOG <= 0) return;

    // Phase 2: a backlog drained by the one webhooks worker process (stopped while the backlog is queued).
    await processes.pop()!.stop();
    const before = receiver.deliveries.length;
    await enqueueBacklog(env, seeded.webhookId, seeded.organizationId);
    processes.push((await startEntry('workers/webhooks.js', common, 'METRICS_PORT')).proc);
    await receiver.waitFor(before + BACKLOG, 300_000);
    const drained = receiver.deliveries.slice(before);
    const drainSeconds = (drained[drained.length - 1].receivedAt - drained[0].receivedAt) / 1000;

    console.table([{
      phase: 'backlog drain, 1 webhooks worker', deliveries: BACKLOG,
      concurrency: loadConfig({ ...process.env, ...common }).webhookWorkerConcurrency,
      seconds: Number(drainSeconds.toFixed(2)), deliveriesPerSecond: Math.round((BACKLOG - 1) / drainSeconds),
    }]);
  } finally {
    loadAgent.destroy();
    await Promise.all(processes.map((p) => p.stop()));
    await receiver.close();
    await env.cleanup();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
