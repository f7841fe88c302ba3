import { randomBytes } from 'node:crypto';
import { Queue } from 'bullmq';
import { loadConfig } from '../../config';
import { blockingRedis } from '../../config/redis';
import { prepareDatabase } from '../../src/app';
import { startReceiver, type Delivery, type Receiver } from '../support/fakes/receiver';
import { startPgBouncer } from '../support/pgbouncer';
import { waitUntil, type ServiceProcess, startEntry } from '../support/processes';
import { startRedisCluster } from '../support/redis-cluster';
import { benchArg, benchEnvironment, percentile, seedWebhookBench } from './support';

/**
 * Horizontal scaling benchmark (issue 6): two API processes, one submissions (fan-out) worker, one
 * usage worker (outbox relay), and 1, 2, 4 webhooks worker processes delivering to one local
 * receiver that answers in RECEIVER_MS. Per worker count:
 *   drain   — a batch is submitted while webhooks workers are stopped; once fanned out, the workers
 *             start together and the time from the first to the last arrival gives deliveries/s;
 *   latency — the same batch submitted with the workers running: 201 → arrival at the receiver.
 * Every delivery must arrive once: distinct X-Service-Delivery ids == deliveries received.
 * Topologies, each measured in the same run and printed side by side:
 *   single    — the processes talk to PostgreSQL directly and to one Redis node;
 *   pooled    — through a PgBouncer in transaction mode (DB_PREPARED_STATEMENTS=false) and on a
 *               three-master Redis Cluster (REDIS_CLUSTER_NODES), both started on loopback.
 * Usage: npm run bench:scaling [-- --submissions 3000 --workers 1,2,4 --concurrency 10 --receiver-ms 50 --clients 32 --keys 40 --topologies single,pooled]
 */
const SUBMISSIONS = Number(benchArg('submissions', '3000'));
const WORKER_COUNTS = benchArg('workers', '1,2,4').split(',').map(Number);
const CONCURRENCY = Number(benchArg('concurrency', '10'));
const RECEIVER_MS = Number(benchArg('receiver-ms', '50'));
const CLIENTS = Number(benchArg('clients', '32'));
const KEYS = Number(benchArg('keys', '40'));
const TOPOLOGIES = benchArg('topologies', 'single,pooled').split(',');
const ARRIVAL_TIMEOUT_MS = 600_000;

type Env = Record<string, string>;

/** SUBMISSIONS requests from CLIENTS concurrent clients, alternating APIs and keys; the time of each 201. */
async function submitBatch(apiUrls: string[], formId: string, keys: string[], round: string) {
  const created = new Map<string, number>();
  let refused = 0;
  let next = 0;
  const started = performance.now();
  const client = async () => {
    for (let i = next++; i < SUBMISSIONS; i = next++) {
      const res = await fetch(`${apiUrls[i % apiUrls.length]}/v1/forms/${formId}/submissions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${keys[i % keys.length]}` },
        body: JSON.stringify({ data: { fld_email: `user${i}@example.com`, fld_topic: round } }),
      }).catch(() => null);
      const json: any = await res?.json().catch(() => null);
      if (res?.status === 201) created.set(json.submission.id, Date.now());
      else refused++;
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, client));
  return { created, refused, ingestPerSecond: Math.round(created.size / ((performance.now() - started) / 1000)) };
}

const submissionOf = (d: Delivery): string => JSON.parse(d.rawBody).data.submission.id;

/** Waits until every created submission has arrived, then a moment more so a late duplicate shows. */
async function arrivalsOf(receiver: Receiver, from: number, created: Map<string, number>): Promise<Delivery[]> {
  const arrived = () => new Set(receiver.deliveries.slice(from).map(submissionOf).filter((id) => created.has(id)));
  await waitUntil(() => arrived().size >= created.size, ARRIVAL_TIMEOUT_MS, 200);
  await new Promise((r) => setTimeout(r, 1_000));
  return receiver.deliveries.slice(from);
}

function summarize(deliveries: Delivery[], created: Map<string, number>) {
  const distinctDeliveryIds = new Set(deliveries.map((d) => d.headers['x-service-delivery'])).size;
  const latencies = deliveries.map((d) => d.receivedAt - created.get(submissionOf(d))!).sort((a, b) => a - b);
  const arrivals = deliveries.map((d) => d.receivedAt).sort((a, b) => a - b);
  const seconds = (arrivals[arrivals.length - 1] - arrivals[0]) / 1000;
  return {
    received: deliveries.length,
    duplicates: deliveries.length - distinctDeliveryIds,
    perSecond: Math.round((deliveries.length - 1) / seconds),
    p50ms: percentile(latencies, 50),
    p99ms: percentile(latencies, 99),
  };
}

interface Topology {
  /** What the service's processes get on top of the common settings. */
  env: Env;
  stop(): Promise<void>;
}

async function startTopology(name: string, databaseUrl: string): Promise<Topology> {
  if (name === 'single') return { env: {}, stop: async () => {} };
  if (name !== 'pooled') throw new Error(`unknown topology ${name}: single or pooled`);
  const bouncer = await startPgBouncer(databaseUrl, 10);
  const cluster = await startRedisCluster();
  return {
    env: { DATABASE_URL: bouncer.url, DB_PREPARED_STATEMENTS: 'false', REDIS_CLUSTER_NODES: cluster.nodes },
    async stop() {
      await bouncer.stop();
      await cluster.stop();
    },
  };
}

async function measure(topologyName: string): Promise<Record<string, unknown>[]> {
  const env = benchEnvironment('scaling');
  const encryptionKey = randomBytes(32);
  const base: Env = {
    DATABASE_URL: env.databaseUrl, REDIS_URL: env.redisUrl, QUEUE_PREFIX: env.queuePrefix,
    ENCRYPTION_KEY: encryptionKey.toString('base64'), WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    WORKER_CONCURRENCY: String(CONCURRENCY), LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
  };
  const receiver = await startReceiver({ respond: () => ({ status: 200, delayMs: RECEIVER_MS }) });
  await prepareDatabase(loadConfig({ ...process.env, ...base }));
  const topology = await startTopology(topologyName, env.databaseUrl);
  const common: Env = { ...base, ...topology.env };
  const config = loadConfig({ ...process.env, ...common });
  const connection = blockingRedis(config);
  const webhooksQueue = new Queue('webhooks', { connection, prefix: config.queuePrefix });
  const resident: ServiceProcess[] = [];
  const rows: Record<string, unknown>[] = [];
  try {
    const { formId, keys } = await seedWebhookBench(env.databaseUrl, receiver.url, encryptionKey, KEYS);
    const apis = await Promise.all([0, 1].map(() => startEntry('src/api.js', common, 'PORT')));
    const helpers = await Promise.all(['workers/submissions.js', 'workers/usage.js'].map((e) => startEntry(e, common, 'METRICS_PORT')));
    resident.push(...apis.map((a) => a.proc), ...helpers.map((h) => h.proc));
    const apiUrls = apis.map((a) => a.url);

    for (const count of WORKER_COUNTS) {
      // drain: the fan-out fills the webhooks queue while it is paused and its workers start.
      await webhooksQueue.pause();
      let from = receiver.deliveries.length;
      const backlog = await submitBatch(apiUrls, formId, keys, `drain-${count}`);
      await waitUntil(async () => {
        // Asking for 'waiting' counts the 'paused' list too.
        const counts = await webhooksQueue.getJobCounts('waiting');
        return counts.waiting + counts.paused >= backlog.created.size;
      }, 120_000, 200);
      const workers = await Promise.all(Array.from({ length: count }, () => startEntry('workers/webhooks.js', common, 'METRICS_PORT')));
      await webhooksQueue.resume();
      const drain = summarize(await arrivalsOf(receiver, from, backlog.created), backlog.created);

      // latency: the same batch with the workers already running.
      from = receiver.deliveries.length;
      const live = await submitBatch(apiUrls, formId, keys, `live-${count}`);
      const latency = summarize(await arrivalsOf(receiver, from, live.created), live.created);
      await Promise.all(workers.map((w) => w.proc.stop()));

      rows.push({
        topology: topologyName, webhookWorkers: count, concurrencyEach: CONCURRENCY,
        drainDeliveriesPerSec: drain.perSecond, liveDeliveriesPerSec: latency.perSecond,
        ingestPerSec: live.ingestPerSecond, p50ms: latency.p50ms, p99ms: latency.p99ms,
        delivered: drain.received + latency.received, expected: backlog.created.size + live.created.size,
        duplicates: drain.duplicates + latency.duplicates, refused: backlog.refused + live.refused,
      });
      console.log(`done: ${topologyName}, ${count} webhooks worker(s)`);
    }
    return rows;
  } finally {
    await Promise.all(resident.map((p) => p.stop()));
    await webhooksQueue.close();
    connection.disconnect();
    await receiver.close();
    await topology.stop();
    await env.cleanup();
  }
}

async function main(): Promise<void> {
  const rows: Record<string, unknown>[] = [];
  for (const topology of TOPOLOGIES) rows.push(...(await measure(topology)));
  console.log(`\n${SUBMISSIONS} submissions per phase over 2 APIs and ${KEYS} keys, ${CLIENTS} concurrent clients; receiver answers in ${RECEIVER_MS} ms; WORKER_CONCURRENCY=${CONCURRENCY}`);
  console.log('single: PostgreSQL direct, one Redis node; pooled: PgBouncer (transaction mode) and a three-master Redis Cluster');
  console.table(rows);
  const duplicates = rows.reduce((sum, r) => sum + Number(r.duplicates), 0);
  console.log(duplicates ? `FAIL: ${duplicates} deliveries arrived more than once` : 'OK: every delivery arrived exactly once');
  if (duplicates) process.exitCode = 1;
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
