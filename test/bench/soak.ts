import { randomBytes } from 'node:crypto';
import { cpus, totalmem } from 'node:os';
import { loadConfig } from '../../config';
import { prepareDatabase } from '../../src/app';
import { ownPostgres, queryOnce, type OwnPostgres } from '../support/postgres-server';
import { freePort, spawnEntry, startEntry, waitUntil, type ServiceProcess } from '../support/processes';
import { ownRedis } from '../support/redis-server';
import { cpuMs, machineCpuMs, processTree } from './cpu';
import { redisUsedMemoryMb, rssMb, tableRows, treePssMb, type TableRows } from './server-stats';
import type { ReceiverMessage } from './soak-receiver';
import { atFixedRate, benchArg, benchEnvironment, benchNumber, loadAgent, percentile, post, seedWebhookBench } from './support';

/**
 * Soak benchmark (issue 34; its goals in test/bench/README.md): a fixed offered rate of authenticated submissions, open
 * loop, for many minutes, each fanned out to one webhook whose receiver (a process of its own,
 * soak-receiver.ts) answers 503 to every 20th attempt, against a PostgreSQL instance and a Redis of
 * the bench's own: initdb/pg_ctl in a temporary directory (autovacuum on, fsync on, shared_buffers
 * sized for the machine), redis-server without persistence, both on free loopback ports, both
 * stopped and removed at the end (also on Ctrl-C or an error). The service runs as its processes:
 * the API (`src/api.js`) and the workers (`workers/all.js`, or `--workers workers/webhooks.js,workers/usage.js`).
 *
 * Per interval: offered and answered (201) rate, p50/p99 of the 201s, the p99 delivery lag (201 →
 * first attempt received by the receiver, same clock), RSS per process (PostgreSQL as the
 * proportional set of all its processes), Redis `used_memory`, and per table the service updates:
 * live/dead rows, updates in the interval and the HOT share of them, autovacuum runs so far, its size
 * with its indexes (webhook_delivery_owed, where it exists: a row inserted and deleted per delivery). At the
 * end: 201s, stored rows, submissions received and delivered (2xx), after up to `--drain` seconds
 * for the retries owed; then the last window against the first (5 minutes, or a third of a shorter
 * run) against the soak's goals.
 *
 * Usage: npm run bench:soak [-- --minutes 30 --interval 60 --rate 600 --drain 60 --retry-delays 1000,2000,5000,10000,20000
 *        --shared-buffers-mb 1024 --keys N --fail-every 20 --workers workers/all.js]
 * e.g. npm run bench:soak -- --minutes 3 --interval 20 --rate 300
 * Logs of the processes (PostgreSQL's with its autovacuum runs) stay in the temp directory, named in the output.
 */
const MINUTES = benchNumber('minutes', 30);
const INTERVAL_S = benchNumber('interval', 60);
/** The soak asks for about 60 % of what the machine takes at the start; without --rate this bench does not measure that. */
const RATE_GIVEN = process.argv.includes('--rate');
const RATE = benchNumber('rate', 600);
const DRAIN_S = benchNumber('drain', 60);
/**
 * Short, so that retried deliveries complete within the run and its drain (38 s in all); five of
 * them, as production retries for days: a delivery that times out while the machine is busy must
 * not count as lost after three quick tries.
 */
const RETRY_DELAYS_MS = benchArg('retry-delays', '1000,2000,5000,10000,20000');
const FAIL_EVERY = benchNumber('fail-every', 20);
// Enterprise keys allow 2,000 requests/min each; spread the load so no key's limit binds.
const KEYS = benchNumber('keys', Math.max(4, Math.ceil((RATE * 60 * 2) / 2000)));
/** 1 GB on a machine of 8 GB or more (the figure of issue 34's 24 GB machine), an eighth of memory below. */
const SHARED_BUFFERS_MB = benchNumber('shared-buffers-mb', Math.min(1024, Math.floor(totalmem() / 1024 / 1024 / 8)));
const WORKER_ENTRIES = benchArg('workers', 'workers/all.js').split(',');
/** The tables the service updates (not only inserts into); `submission_day_counts` when it exists. */
const TABLES: Record<string, string> = {
  webhook_deliveries: 'wd', webhook_delivery_owed: 'wdo', webhooks: 'wh', usage_counter_slots: 'ucs', outbox: 'ob',
  idempotency_keys: 'ik', submission_changes: 'sc', submission_day_counts: 'sdc',
};
const GOAL_P99_RATIO = 1.5;
const GOAL_LAG_P99_MS = 1000;

const body = (i: number) => JSON.stringify({ data: { fld_email: `user${i}@example.com`, fld_topic: 'soak' } });

/** One interval of the load: what was offered and answered in it, and the state sampled at its end. */
interface Interval {
  startMs: number;
  endMs: number;
  offered: number;
  answered: number;
  refusals: Record<string, number>;
  latencies: number[];
  lags: number[];
  rss?: Record<string, number>;
  /** CPU ms used so far: the whole machine, and the bench's processes (the service, PostgreSQL, Redis, the receiver, this one). */
  cpu?: { machine: number; ours: number };
  redisMb?: number;
  tables?: Map<string, TableRows>;
}

const newInterval = (startMs: number): Interval => ({ startMs, endMs: startMs, offered: 0, answered: 0, refusals: {}, latencies: [], lags: [] });

/**
 * Matches the 201s the load got with the attempts the receiver reports: the first attempt's lag
 * (an attempt may arrive before its 201 reaches the load generator), and the submissions still
 * owed a 2xx delivery.
 */
class DeliveryLedger {
  /** 201 (ms since the epoch) of submissions whose first attempt has not arrived. */
  private awaiting = new Map<string, number>();
  /** First attempts that arrived before their 201 reached us. */
  private early = new Map<string, number>();
  /** Every submission the receiver got at least once → whether it answered one of its attempts 2xx. */
  readonly received = new Map<string, boolean>();
  /** 201s not yet delivered (answered 2xx by the receiver). */
  readonly owed = new Set<string>();
  created201 = 0;
  attempts = 0;

  constructor(private readonly onLag: (ms: number) => void) {}

  created(id: string, at: number): void {
    this.created201++;
    const first = this.early.get(id);
    if (first !== undefined) {
      this.early.delete(id);
      this.onLag(Math.max(0, first - at));
    } else {
      this.awaiting.set(id, at);
    }
    if (!this.received.get(id)) this.owed.add(id);
  }

  arrived(id: string, at: number, ok: boolean): void {
    this.attempts++;
    const before = this.received.get(id);
    if (before === undefined) {
      const createdAt = this.awaiting.get(id);
      if (createdAt !== undefined) {
        this.awaiting.delete(id);
        this.onLag(at - createdAt);
      } else {
        this.early.set(id, at);
      }
    }
    if (ok) {
      this.received.set(id, true);
      this.owed.delete(id);
    } else if (before === undefined) {
      this.received.set(id, false);
    }
  }

  delivered(): number {
    let n = 0;
    for (const ok of this.received.values()) if (ok) n++;
    return n;
  }
}

const p = (values: number[], q: number) => percentile([...values].sort((a, b) => a - b), q);
const ms = (v: number) => (Number.isFinite(v) ? (v >= 100 ? v.toFixed(0) : v.toFixed(1)) : '-');
const mb = (v: number | undefined) => (v !== undefined && Number.isFinite(v) ? v.toFixed(0) : '-');
const count = (v: number) => (v >= 10_000 ? `${(v / 1000).toFixed(0)}k` : v >= 1000 ? `${(v / 1000).toFixed(1)}k` : String(Math.round(v)));
const pad = (s: string | number, n: number) => String(s).padStart(n);
const PROCESSES = ['api', 'workers', 'receiver', 'postgres', 'redis'] as const;

function header(): string {
  return [
    `${pad('min', 6)} ${pad('cpu%', 7)} ${pad('offer/s', 7)} ${pad('201/s', 6)} ${pad('other', 5)} ${pad('p50ms', 6)} ${pad('p99ms', 6)} ${pad('lag99', 6)}`,
    `| RSS MB ${PROCESSES.map((name) => pad(name === 'postgres' ? 'pg(PSS)' : name, 9)).join('')} ${pad('redisMem', 8)}`,
    '| table live/dead +updates(HOT%) autovacuums MB(with indexes)',
  ].join(' ');
}

function line(iv: Interval, loadStartMs: number, previous: Interval | undefined, previousCpu: Interval['cpu']): string {
  const seconds = Math.max(0.001, (iv.endMs - iv.startMs) / 1000);
  const refused = Object.values(iv.refusals).reduce((a, b) => a + b, 0);
  const tables = [...(iv.tables ?? [])].map(([name, t]) => {
    const before = previous?.tables?.get(name);
    const updates = t.updates - (before?.updates ?? 0);
    const hot = t.hotUpdates - (before?.hotUpdates ?? 0);
    return `${TABLES[name]} ${count(t.live)}/${count(t.dead)} +${count(updates)}(${updates ? Math.round((100 * hot) / updates) : 0}%) ${t.autovacuums} ${t.megabytes.toFixed(1)}`;
  });
  const capacity = seconds * 1000 * cpus().length;
  const busy = (key: 'machine' | 'ours') => (iv.cpu && previousCpu ? Math.round((100 * (iv.cpu[key] - previousCpu[key])) / capacity) : '-');
  const cpu = `${busy('machine')}/${busy('ours')}`;
  return [
    `${pad(((iv.endMs - loadStartMs) / 60_000).toFixed(2), 6)} ${pad(cpu, 7)} ${pad(Math.round(iv.offered / seconds), 7)} ${pad(Math.round(iv.answered / seconds), 6)}`
      + ` ${pad(refused, 5)} ${pad(ms(p(iv.latencies, 50)), 6)} ${pad(ms(p(iv.latencies, 99)), 6)} ${pad(ms(p(iv.lags, 99)), 6)}`,
    `|        ${PROCESSES.map((name) => pad(mb(iv.rss?.[name]), 9)).join('')} ${pad(iv.redisMb === undefined ? '-' : iv.redisMb.toFixed(1), 8)}`,
    `| ${tables.join('  ')}`,
  ].join(' ');
}

async function main(): Promise<void> {
  // Everything started is stopped in reverse order, once, also on Ctrl-C and on an error.
  const stops: Array<[string, () => Promise<unknown>]> = [];
  let stopping: Promise<void> | undefined;
  const stopAll = () => stopping ??= (async () => {
    loadAgent.destroy();
    for (const [name, stop] of stops.reverse()) await stop().catch((err) => console.error(`stopping ${name}: ${err}`));
  })();
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      console.error(`${signal}: stopping the service, the receiver, Redis and PostgreSQL…`);
      void stopAll().finally(() => process.exit(130));
    });
  }

  try {
    const pgPort = await freePort();
    const redis = await ownRedis();
    const env = benchEnvironment('soak', { adminUrl: `postgres://postgres@127.0.0.1:${pgPort}/postgres`, redisUrl: redis.url });
    const settings = { shared_buffers: `${SHARED_BUFFERS_MB}MB`, max_connections: 100 };
    const pg: OwnPostgres = await ownPostgres({ settings, logFile: env.logFile('postgres'), port: pgPort });
    stops.push(['PostgreSQL', () => pg.stop()]);
    const [{ version }] = await queryOnce(pg.url('postgres'), `select current_setting('server_version') as version`);
    const [conf] = await queryOnce(pg.url('postgres'),
      `select current_setting('shared_buffers') as sb, current_setting('autovacuum') as av, current_setting('fsync') as fsync,
              current_setting('synchronous_commit') as sc, current_setting('max_connections') as mc`);
    console.log(`PostgreSQL ${version} of the bench's own on 127.0.0.1:${pg.port}: shared_buffers ${conf.sb}, autovacuum ${conf.av},`
      + ` fsync ${conf.fsync}, synchronous_commit ${conf.sc}, max_connections ${conf.mc}; log ${pg.logFile}`);
    await redis.start();
    stops.push(['Redis', () => redis.kill()]);
    console.log(`redis-server of the bench's own on ${redis.url} (no persistence)`);

    const receiverProc: ServiceProcess = spawnEntry('test/bench/soak-receiver.js', { SOAK_FAIL_EVERY: String(FAIL_EVERY) }, [], env.logFile('receiver'), true);
    stops.push(['receiver', () => receiverProc.stop()]);
    let onArrivals: (m: ReceiverMessage) => void = () => undefined;
    const receiverUrl = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the receiver did not start within 30 s')), 30_000);
      void receiverProc.exited.then((code) => reject(new Error(`the receiver exited (${code}): ${receiverProc.output()}`)));
      receiverProc.child.on('message', (m: ReceiverMessage) => {
        if ('url' in m) {
          clearTimeout(timer);
          resolve(m.url);
        } else {
          onArrivals(m);
        }
      });
    });

    const encryptionKey = randomBytes(32);
    const common = {
      DATABASE_URL: env.databaseUrl, REDIS_URL: env.redisUrl, QUEUE_PREFIX: env.queuePrefix,
      ENCRYPTION_KEY: encryptionKey.toString('base64'), WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      WEBHOOK_RETRY_DELAYS_MS: RETRY_DELAYS_MS, LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
    };
    await prepareDatabase(loadConfig({ ...process.env, ...common }));
    const seeded = await seedWebhookBench(env.databaseUrl, receiverUrl, encryptionKey, KEYS);
    const api = await startEntry('src/api.js', common, 'PORT', [], env.logFile('api'));
    stops.push(['API', () => api.proc.stop()]);
    const workers: ServiceProcess[] = [];
    for (const entry of WORKER_ENTRIES) {
      const worker = (await startEntry(entry, common, 'METRICS_PORT', [], env.logFile(entry.replace(/\W+/g, '-')))).proc;
      stops.push([entry, () => worker.stop()]);
      workers.push(worker);
    }
    const existing = await tableRows(env.databaseUrl, Object.keys(TABLES));
    console.log(`service: ${['src/api.js', ...WORKER_ENTRIES].join(', ')}; WEBHOOK_RETRY_DELAYS_MS=${RETRY_DELAYS_MS}; the receiver answers 503`
      + ` to every ${FAIL_EVERY}th attempt; logs ${env.logFile('*')}`);
    console.log(`offered: ${RATE}/s for ${MINUTES} min over ${KEYS} keys, `
      + (RATE_GIVEN ? 'as given (--rate)' : 'the default, NOT measured on this machine: the soak asks for about 60 % of what it takes at the start (give --rate)'));
    console.log(`tables: ${Object.entries(TABLES).map(([name, abbr]) => `${abbr} = ${name}${existing.has(name) ? '' : ' (absent)'}`).join(', ')}`);
    console.log(`cpu% = the machine busy/the bench's processes (service, PostgreSQL, Redis, receiver, load), % of its ${cpus().length} CPUs: the difference is other users'`);
    console.log('lag99 = p99 of 201 → first attempt received (ms); RSS of each process at the interval\'s end, PostgreSQL as the PSS of all its processes\n');
    console.log(header());

    // Per interval: the load counts into `current`; at each tick it is closed, sampled and printed.
    const [{ lsn: walAtStart }] = await queryOnce(pg.url('postgres'), 'select pg_current_wal_lsn()::text as lsn');
    const loadStartMs = Date.now();
    const intervals: Interval[] = [];
    let current = newInterval(loadStartMs);
    const ledger = new DeliveryLedger((lag) => current.lags.push(lag));
    onArrivals = (m) => {
      if ('arrivals' in m) for (const [id, at, ok] of m.arrivals) ledger.arrived(id, at, ok);
    };
    const cpuNow = () => ({
      machine: machineCpuMs(),
      ours: [api.proc, ...workers, receiverProc].reduce((sum, proc) => sum + cpuMs(proc.child.pid!), 0) + cpuMs('self')
        + processTree(pg.postmasterPid()).reduce((sum, pid) => sum + cpuMs(pid), 0) + cpuMs(redis.pid()!),
    });
    const startCpu = cpuNow();
    const sample = async (iv: Interval) => {
      iv.rss = {
        api: rssMb(api.proc.child.pid), workers: workers.reduce((sum, w) => sum + rssMb(w.child.pid), 0),
        receiver: rssMb(receiverProc.child.pid), postgres: treePssMb(pg.postmasterPid()), redis: rssMb(redis.pid()),
      };
      iv.redisMb = await redisUsedMemoryMb(redis.url).catch(() => NaN);
      iv.tables = await tableRows(env.databaseUrl, Object.keys(TABLES)).catch(() => undefined);
    };
    let printing = Promise.resolve();
    const closeInterval = () => {
      const iv = current;
      iv.endMs = Date.now();
      iv.cpu = cpuNow();
      current = newInterval(iv.endMs);
      intervals.push(iv);
      const previous = intervals[intervals.length - 2];
      printing = printing.then(async () => {
        await sample(iv);
        console.log(line(iv, loadStartMs, previous, previous?.cpu ?? startCpu));
      });
    };
    // The last interval closes once the load's last answer is in (not at a tick just before it).
    const ticks = Math.ceil((MINUTES * 60) / INTERVAL_S) - 1;
    let ticked = 0;
    const ticker = setInterval(() => {
      if (ticked++ < ticks) closeInterval();
    }, INTERVAL_S * 1000);
    await atFixedRate(RATE, MINUTES * 60, (i) => {
      current.offered++;
      const sentAt = performance.now();
      return post(`${api.url}/v1/forms/${seeded.formId}/submissions`, body(i), seeded.keys[i % seeded.keys.length]).then((res) => {
        const iv = current;
        if (res.status === 201) {
          iv.answered++;
          iv.latencies.push(performance.now() - sentAt);
          ledger.created((JSON.parse(res.text) as { submission: { id: string } }).submission.id, Date.now());
        } else {
          iv.refusals[res.status] = (iv.refusals[res.status] ?? 0) + 1;
        }
      }, (err: Error) => {
        current.refusals[err.message] = (current.refusals[err.message] ?? 0) + 1;
      });
    });
    clearInterval(ticker);
    closeInterval();
    await printing;
    const loadEndMs = Date.now();
    const [{ bytes: walBytes }] = await queryOnce(pg.url('postgres'), 'select pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::float8 as bytes', [walAtStart]);

    // Deliveries owed on retry (delays of RETRY_DELAYS_MS) drain; a lag measured now belongs to no interval.
    const drain = newInterval(loadEndMs);
    current = drain;
    await waitUntil(() => ledger.owed.size === 0, DRAIN_S * 1000, 250).catch(() => undefined);
    const drainS = (Date.now() - loadEndMs) / 1000;
    const [{ stored }] = await queryOnce(env.databaseUrl, 'select count(*)::int as stored from submissions');
    const statuses = await queryOnce(env.databaseUrl, 'select status, count(*)::int as n from webhook_deliveries group by status order by status');
    const delivered = ledger.delivered();
    const offered = intervals.reduce((sum, iv) => sum + iv.offered, 0);
    const refusals: Record<string, number> = {};
    for (const iv of intervals) for (const [why, n] of Object.entries(iv.refusals)) refusals[why] = (refusals[why] ?? 0) + n;

    console.log(`\nafter the load (${((loadEndMs - loadStartMs) / 60_000).toFixed(2)} min) and ${drainS.toFixed(1)} s of drain (up to ${DRAIN_S} s):`);
    console.log(`  offered ${offered}, 201s ${ledger.created201}, refused ${JSON.stringify(refusals)}`);
    console.log(`  stored rows (count(*) from submissions): ${stored}`);
    console.log(`  submissions the receiver got at least once: ${ledger.received.size}; delivered (answered 2xx): ${delivered};`
      + ` attempts received: ${ledger.attempts}; 201s not delivered: ${ledger.owed.size}`);
    console.log(`  webhook_deliveries by status: ${statuses.map((r) => `${r.status} ${r.n}`).join(', ')}`);
    // What PostgreSQL wrote, whatever else the machine did: the cost of the writes that compares across busy runs.
    console.log(`  WAL written during the load: ${(walBytes / 1048576).toFixed(1)} MB, ${(walBytes / 1024 / Math.max(1, ledger.created201)).toFixed(2)} kB per 201`);
    if (drain.lags.length) console.log(`  first attempts received during the drain: ${drain.lags.length}, lag p99 ${ms(p(drain.lags, 99))} ms`);

    // The last window against the first: 5 minutes each, or a third of a shorter run.
    const windowMin = Math.min(5, MINUTES / 3);
    const n = Math.max(1, Math.min(Math.floor(intervals.length / 2), Math.round((windowMin * 60) / INTERVAL_S)));
    const first = intervals.slice(0, n);
    const last = intervals.slice(-n);
    const all = (ivs: Interval[], key: 'latencies' | 'lags') => ivs.flatMap((iv) => iv[key]);
    const firstP99 = p(all(first, 'latencies'), 99);
    const lastP99 = p(all(last, 'latencies'), 99);
    const ratios = intervals.filter((iv) => iv.offered > 0).map((iv) => iv.answered / iv.offered);
    const worstLag = Math.max(...intervals.map((iv) => p(iv.lags, 99)).filter(Number.isFinite));
    const atFirst = first[first.length - 1];
    const atLast = intervals[intervals.length - 1];
    const growth = (a: number | undefined, b: number | undefined) =>
      `${mb(a)} → ${mb(b)} MB (${a && b ? `${b >= a ? '+' : '-'}${Math.abs(Math.round(((b - a) / a) * 100))} %` : '-'})`;
    const verdict = (ok: boolean) => (ok ? 'MET' : 'NOT MET');
    const everyStored = stored >= ledger.created201;
    const everyDelivered = ledger.owed.size === 0;

    console.log(`\nlast ${n} interval(s) against the first ${n} (${((n * INTERVAL_S) / 60).toFixed(2)} min each; the soak's goals):`);
    console.log(`  answered = offered: 201s/offered ${(ledger.created201 / Math.max(1, offered)).toFixed(4)},`
      + ` worst interval ${Math.min(...ratios).toFixed(3)}, refused ${Object.values(refusals).reduce((a, b) => a + b, 0)}`
      + ` — ${verdict(ledger.created201 === offered && Math.min(...ratios) >= 0.95)}`
      + ' (every request answered 201, each interval\'s 201s within 5 % of its offers: answers cross an interval\'s end)');
    console.log(`  p99 ${ms(firstP99)} → ${ms(lastP99)} ms (${(lastP99 / firstP99).toFixed(2)}x; p50 ${ms(p(all(first, 'latencies'), 50))} → ${ms(p(all(last, 'latencies'), 50))} ms)`
      + ` — ${verdict(lastP99 <= GOAL_P99_RATIO * firstP99)} (≤ ${GOAL_P99_RATIO}x)`);
    console.log(`  delivery lag p99: first ${ms(p(all(first, 'lags'), 99))}, last ${ms(p(all(last, 'lags'), 99))}, worst interval ${ms(worstLag)} ms`
      + ` — ${verdict(worstLag <= GOAL_LAG_P99_MS)} (≤ ${GOAL_LAG_P99_MS} ms in every interval)`);
    console.log(`  nothing lost: every 201 stored ${everyStored ? 'yes' : `NO (${ledger.created201 - stored} missing)`},`
      + ` every 201 delivered ${everyDelivered ? 'yes' : `NO (${ledger.owed.size} owed after ${drainS.toFixed(0)} s)`}`
      + ` — ${verdict(everyStored && everyDelivered)}`);
    console.log(`  RSS from the end of the first window to the end (the soak's goal: stops growing after warm-up):`
      + PROCESSES.map((name) => `\n    ${name.padEnd(9)} ${growth(atFirst.rss?.[name], atLast.rss?.[name])}`).join(''));
    console.log(`    redis used_memory ${growth(atFirst.redisMb, atLast.redisMb)}`);
  } finally {
    await stopAll();
  }
}

main().then(() => process.exit(0), (err) => {
  console.error(err);
  process.exit(1);
});
