import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Queue } from 'bullmq';
import IORedis from 'ioredis';
import { dump, load } from 'js-yaml';
import { loadConfig } from '../../config';
import { createAppContext, prepareDatabase, type AppContext } from '../../src/app';
import { createLogger } from '../../src/lib/logger';
import { startReceiver, type Receiver, type ReceiverReply } from '../support/fakes/receiver';
import { deleteQueueKeys, dropDatabase, sideDatabaseUrl } from '../support/databases';
import { call, createPublishedForm, createTenant, fieldInput, type TestTenant } from '../support/harness';
import { freePort, startEntry, waitUntil, type StartedEntry } from '../support/processes';
import { FAST_RETRIES, freshQueuePrefix } from '../support/worker-stack';

/**
 * A real Prometheus (Debian's package) scrapes two API processes and every worker kind as separate
 * processes, with deploy/prometheus's scrape job and alerting rules: the rules' `for:` durations
 * read as half-seconds instead of minutes (scrapes every second, rules every half second),
 * everything else as shipped. Targets are the static job's, rewritten and reloaded (SIGHUP) as the
 * test goes: that is how it removes a component's targets as discovery would. On its own database, so that the
 * counters can be checked against every stored row and no other test file's leftovers are relayed.
 */
const PROMETHEUS_BIN = process.env.PROMETHEUS_BIN ?? '/usr/bin/prometheus';
const REPO_ROOT = path.resolve(__dirname, '../../..');
const PROMETHEUS_DIR = path.join(REPO_ROOT, 'deploy', 'prometheus');
const DASHBOARD = path.join(REPO_ROOT, 'deploy', 'grafana', 'form-service-dashboard.json');
const WORKER_KINDS = ['submissions', 'crm', 'usage'] as const;
const RATE_INTERVAL = '1m';
/**
 * Dashboard queries that may return nothing after healthy traffic, and why. Every other query must
 * return data. (Refunds need none: their counter is exported at 0.)
 */
const MAY_BE_EMPTY: Record<string, string> = {
  'sum by (route) (rate(formservice_http_request_duration_seconds_count{status=~"5.."}[$__rate_interval]))':
    'server errors by route: a healthy run answers no 5xx (the ratio beside it reads 0)',
};
const FIELDS = [fieldInput('fld_email', 'email', 'Email', { required: true })];

interface Sample { metric: Record<string, string>; value: [number, string] }
interface RuleFile { groups: Array<{ rules: Array<{ alert?: string; for?: string }> }> }
interface ScrapeJob { job_name: string; static_configs?: unknown; dns_sd_configs?: unknown; kubernetes_sd_configs?: unknown }

/** What a minute of a rule's `for:` lasts here. */
const MINUTE_MS = 500;

/** `5m` → `2500ms`: the rule's wait, a minute read as MINUTE_MS. */
function minutesAsShort(duration: string): number {
  const match = /^(\d+)([smh])$/.exec(duration);
  if (!match) throw new Error(`unexpected for: ${duration}`);
  const seconds = Number(match[1]) * { s: 1, m: 60, h: 3600 }[match[2] as 's' | 'm' | 'h'];
  return Math.max(MINUTE_MS, Math.round((seconds / 60) * MINUTE_MS));
}

/** alerts.yaml with every `for:` shortened; the longest one, in ms. */
function writeShortRules(file: string): number {
  const rules = load(fs.readFileSync(path.join(PROMETHEUS_DIR, 'alerts.yaml'), 'utf8')) as RuleFile;
  let longest = 0;
  for (const rule of rules.groups.flatMap((g) => g.rules)) {
    if (!rule.for) continue;
    const ms = minutesAsShort(rule.for);
    rule.for = `${ms}ms`;
    longest = Math.max(longest, ms);
  }
  fs.writeFileSync(file, dump(rules));
  return longest;
}

/** prometheus.yml's static job, its targets replaced by the processes of this test, scraped every second. */
function writeConfig(file: string, targets: Record<string, string[]>): void {
  const shipped = load(fs.readFileSync(path.join(PROMETHEUS_DIR, 'prometheus.yml'), 'utf8')) as { scrape_configs: ScrapeJob[] };
  const job = shipped.scrape_configs.find((j) => j.job_name === 'form-service');
  if (!job) throw new Error('prometheus.yml has no form-service job');
  delete job.dns_sd_configs;
  job.static_configs = Object.entries(targets).map(([component, hosts]) => ({ targets: hosts, labels: { component } }));
  const config = {
    global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: `${MINUTE_MS}ms` },
    rule_files: ['alerts.yaml'],
    scrape_configs: [job],
  };
  fs.writeFileSync(file, dump(config));
}

interface Prometheus {
  url: string;
  query(expr: string): Promise<Sample[]>;
  firing(): Promise<string[]>;
  /** Rereads prometheus.yml (SIGHUP), as after a change of what discovery returns. */
  reload(): void;
  stop(): Promise<void>;
}

async function startPrometheus(dir: string): Promise<Prometheus> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  let output = '';
  const child: ChildProcess = spawn(PROMETHEUS_BIN, [
    `--config.file=${path.join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(dir, 'data')}`,
    `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn',
  ], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.on('data', (chunk) => { output += chunk; });
  child.stderr?.on('data', (chunk) => { output += chunk; });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const query = async (expr: string): Promise<Sample[]> => {
    const res = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(expr)}`);
    const body = await res.json() as { status: string; error?: string; data: { result: Sample[] } };
    if (body.status !== 'success') throw new Error(`${expr}: ${body.error}`);
    return body.data.result;
  };
  try {
    await waitUntil(async () => (await fetch(`${url}/-/ready`)).ok, 30_000, 200);
  } catch {
    child.kill('SIGKILL');
    throw new Error(`prometheus did not start:\n${output}`);
  }
  return {
    url,
    query,
    async firing() {
      const alerts = await query('ALERTS{alertstate="firing"}');
      return alerts.map(({ metric }) => describeAlert(metric)).sort();
    },
    reload() {
      child.kill('SIGHUP');
    },
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

function describeAlert(metric: Record<string, string>): string {
  const details = ['component', 'queue', 'instance', 'reason'].filter((l) => metric[l]).map((l) => `${l}=${metric[l]}`);
  return `${metric.alertname}${details.length ? `{${details.join(',')}}` : ''}`;
}

const numberOf = (samples: Sample[]) => (samples.length ? Number(samples[0].value[1]) : NaN);
const log = (line: string) => console.log(`      ${line}`);

describe('Prometheus against the running processes (live)', function () {
  this.timeout(240_000);
  const databaseUrl = sideDatabaseUrl('prom');
  const prefix = freshQueuePrefix();
  const env = {
    DATABASE_URL: databaseUrl, QUEUE_PREFIX: prefix, WEBHOOK_RETRY_DELAYS_MS: FAST_RETRIES,
    QUEUE_SAMPLE_INTERVAL_MS: '500', LOG_LEVEL: 'warn',
  };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fs-prometheus-'));
  let replyStatus = 200;
  let receiver: Receiver;
  let app: AppContext;
  let apis: StartedEntry[] = [];
  let webhookWorkers: StartedEntry[] = [];
  let otherWorkers: StartedEntry[] = [];
  let running: StartedEntry[] = [];
  let prometheus: Prometheus;
  let longestFor = 0;
  let targets: Record<string, string[]> = {};
  let webhooksQueue: Queue;
  let tenant: TestTenant;
  let formId = '';
  let submitted = 0;

  const submit = async (count: number) => {
    for (let i = 0; i < count; i++) {
      const api = apis[submitted++ % apis.length];
      const res = await call(api.url, 'POST', `/v1/forms/${formId}/submissions`, { key: tenant.key, body: { data: { fld_email: `p${submitted}@example.com` } } });
      expect(res.status, res.text).to.equal(201);
    }
  };
  const waitForAlert = async (alertname: string, labels: Record<string, string> = {}) => {
    const selector = Object.entries({ alertname, alertstate: 'firing', ...labels }).map(([k, v]) => `${k}="${v}"`).join(',');
    await waitUntil(async () => (await prometheus.query(`ALERTS{${selector}}`)).length > 0, 60_000, 500);
  };
  /**
   * How many series of a query hold a number, waiting a few scrapes for one: a series born with the
   * last requests (the 429 of the traffic) needs two samples before rate() has a value.
   */
  const hasData = async (expr: string, patienceMs: number): Promise<number> => {
    let series = 0;
    await waitUntil(async () => {
      series = (await prometheus.query(expr)).filter((s) => !Number.isNaN(Number(s.value[1]))).length;
      return series > 0;
    }, patienceMs, 500).catch(() => undefined);
    return series;
  };
  const attemptsRecorded = async () => {
    const [row] = await app.orm.em.fork().execute('select coalesce(sum(attempts), 0)::int as n from webhook_deliveries');
    return row.n as number;
  };

  before(async function () {
    // No silent skip: .ci/run installs Debian's prometheus; a run without it has not checked the alerts.
    if (!fs.existsSync(PROMETHEUS_BIN)) throw new Error(`${PROMETHEUS_BIN} not found: apt-get install prometheus (Debian), or set PROMETHEUS_BIN`);
    const started = Date.now();
    const seconds = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
    const config = loadConfig({ ...process.env, ...env });
    await prepareDatabase(config);
    const migrated = seconds();
    app = await createAppContext(config, createLogger('silent'));
    // Not the service's fail-fast client: CLIENT LIST may take a while on a busy machine.
    webhooksQueue = new Queue('webhooks', { connection: new IORedis(config.redisUrl, { maxRetriesPerRequest: null }), prefix: config.queuePrefix });
    receiver = await startReceiver({ respond: (): ReceiverReply => ({ status: replyStatus }) });
    // Prometheus boots while the processes do, with no target yet; they are added by a reload.
    longestFor = writeShortRules(path.join(dir, 'alerts.yaml'));
    writeConfig(path.join(dir, 'prometheus.yml'), {});
    const booting = startPrometheus(dir);
    // Settled one by one, so that when one fails to start, the others are still stopped after.
    const starting = [
      startEntry('src/api.js', env), startEntry('src/api.js', env),
      ...['webhooks', 'webhooks', ...WORKER_KINDS].map((kind) => startEntry(`workers/${kind}.js`, env, 'METRICS_PORT')),
    ];
    const [booted, ...settled] = await Promise.allSettled([booting, ...starting]) as [PromiseSettledResult<Prometheus>, ...PromiseSettledResult<StartedEntry>[]];
    if (booted.status === 'fulfilled') prometheus = booted.value;
    running = settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const failed = [booted, ...settled].find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
    [apis, webhookWorkers, otherWorkers] = [running.slice(0, 2), running.slice(2, 4), running.slice(4)];
    const spawned = seconds();
    const host = (entry: StartedEntry) => new URL(entry.url).host;
    targets = {
      api: apis.map(host),
      'worker-webhooks': webhookWorkers.map(host),
      ...Object.fromEntries(WORKER_KINDS.map((kind, i) => [`worker-${kind}`, [host(otherWorkers[i])]])),
    };
    writeConfig(path.join(dir, 'prometheus.yml'), targets);
    prometheus.reload();
    await waitUntil(async () => numberOf(await prometheus.query('count(up{job="form-service"} == 1)')) === 7, 30_000, 250);
    // Before the reload no target existed: FormServiceComponentAbsent fired for each component,
    // as it should. The healthy run starts once every one of them has resolved.
    await waitUntil(async () => (await prometheus.firing()).length === 0, 30_000, 250);
    log(`setup: database migrated at ${migrated}, 7 processes healthy at ${spawned}, every target up and no alert firing at ${seconds()}`);
  });

  after(async () => {
    await prometheus?.stop();
    await Promise.all(running.map((p) => p.proc.stop()));
    await receiver?.close();
    await webhooksQueue?.close();
    await app?.close();
    await dropDatabase(databaseUrl);
    await deleteQueueKeys(prefix);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  describe('a healthy run', () => {
    let healthyFrom = 0;

    before(async () => {
      healthyFrom = Date.now();
      tenant = await createTenant(app);
      formId = (await createPublishedForm(apis[0].url, tenant.key, FIELDS)).id;
      const hook = await call(apis[1].url, 'POST', '/v1/webhooks', { key: tenant.key, body: { name: 'live', url: receiver.url, events: ['submission.created'] } });
      expect(hook.status, hook.text).to.equal(201);
      await submit(20);
      for (const api of apis) {
        expect((await call(api.url, 'GET', '/v1/forms', { key: tenant.key })).status).to.equal(200);
        expect((await call(api.url, 'GET', '/v1/forms/form_missing', { key: tenant.key })).status).to.equal(404);
      }
      // A free plan's per-minute limit, for the 429 panel; a window may turn over while trying.
      const free = await createTenant(app, { plan: 'free' });
      let limited = false;
      for (let i = 0; i < 40 && !limited; i++) limited = (await call(apis[i % 2].url, 'GET', '/v1/forms', { key: free.key })).status === 429;
      expect(limited, 'no request was rate limited').to.equal(true);
      await receiver.waitFor(20, 30_000);
    });

    it('counts every stored submission once, summed over the API processes that stored them', async () => {
      const [{ n: stored }] = await app.orm.em.fork().execute('select count(*)::int as n from submissions');
      expect(stored).to.equal(20);
      await waitUntil(async () => numberOf(await prometheus.query('sum(formservice_submissions_total)')) === stored, 15_000, 250);
      // Every process exports the counter at 0; the two API processes stored every submission.
      const perProcess = await prometheus.query('formservice_submissions_total{source="api"} > 0');
      expect(perProcess.map((s) => Number(s.value[1])).sort()).to.deep.equal([10, 10]);
      log(`submissions: ${stored} stored; sum(formservice_submissions_total) = ${stored} (10 + 10 over the two API processes)`);
    });

    it('counts every delivery attempt once, summed over the webhook workers', async () => {
      await waitUntil(async () => (await attemptsRecorded()) === 20, 15_000, 250);
      await waitUntil(async () => numberOf(await prometheus.query('sum(formservice_webhook_deliveries_total)')) === 20, 15_000, 250);
      expect(numberOf(await prometheus.query('sum(formservice_webhook_deliveries_total{result="succeeded"})'))).to.equal(receiver.deliveries.length);
      log(`attempts: ${await attemptsRecorded()} recorded, ${receiver.deliveries.length} received, sum(formservice_webhook_deliveries_total) = 20`);
    });

    it('returns data for every dashboard query (but the documented may-be-empty ones)', async () => {
      const dashboard = JSON.parse(fs.readFileSync(DASHBOARD, 'utf8')) as { panels: Array<{ type: string; title: string; targets?: Array<{ expr: string }> }> };
      const missing: string[] = [];
      for (const panel of dashboard.panels.filter((p) => p.type !== 'row')) {
        const results = await Promise.all((panel.targets ?? []).map(async ({ expr }) => {
          const data = await hasData(expr.replace(/\$__rate_interval/g, RATE_INTERVAL).replace(/\$queue/g, '.*'), MAY_BE_EMPTY[expr] ? 0 : 5_000);
          if (!data && !MAY_BE_EMPTY[expr]) missing.push(`${panel.title}: ${expr}`);
          return data ? `${data} series` : `empty (${MAY_BE_EMPTY[expr] ?? 'NOT ALLOWED'})`;
        }));
        log(`panel "${panel.title}": ${results.join('; ')}`);
      }
      expect(missing).to.deep.equal([]);
    });

    it('fires no alert', async () => {
      // Long enough for any rule to have passed its (shortened) for: since the traffic began.
      const waitMs = healthyFrom + longestFor + 3000 - Date.now();
      if (waitMs > 0) await new Promise((r) => setTimeout(r, waitMs));
      // In ms, not rounded up to a second: a window reaching back before healthyFrom could hold the
      // last evaluation of the FormServiceComponentAbsent alerts that fired before the targets existed.
      const window = `${Date.now() - healthyFrom}ms`;
      const fired = await prometheus.query(`max_over_time(ALERTS{alertstate="firing"}[${window}])`);
      const pending = await prometheus.query(`max_over_time(ALERTS{alertstate="pending"}[${window}])`);
      log(`healthy run (${window}): firing ${JSON.stringify(fired.map((s) => describeAlert(s.metric)))}, pending at some point ${JSON.stringify(pending.map((s) => describeAlert(s.metric)))}`);
      expect(fired.map((s) => describeAlert(s.metric))).to.deep.equal([]);
    });
  });

  describe('a receiver answering 503', () => {
    before(async () => {
      replyStatus = 503;
      await submit(12);
    });

    it('fires FormServiceWebhookDeliveriesFailing, and the counters still match every attempt', async () => {
      await waitForAlert('FormServiceWebhookDeliveriesFailing');
      log(`receiver 503: firing ${JSON.stringify(await prometheus.firing())}`);
      // Each delivery gives up after its last fast retry; only then are the attempts final.
      await waitUntil(async () => {
        const [{ n }] = await app.orm.em.fork().execute(`select count(*)::int as n from webhook_deliveries where status = 'failed'`);
        return n === 12;
      }, 30_000, 250);
      const attempts = await attemptsRecorded();
      await waitUntil(async () => numberOf(await prometheus.query('sum(formservice_webhook_deliveries_total)')) === attempts, 15_000, 250);
      expect(receiver.deliveries.length).to.equal(attempts);
      const failing = numberOf(await prometheus.query('sum(formservice_webhook_deliveries_total{result!="succeeded"})'));
      expect(failing).to.equal(attempts - 20);
      log(`attempts: ${attempts} recorded and received, ${failing} of them failing; the counters' sum matches`);
    });
  });

  describe('the webhook workers stopped', () => {
    let workersBefore = 0;

    before(async () => {
      replyStatus = 200;
      workersBefore = await webhooksQueue.getWorkersCount();
      await waitUntil(async () => numberOf(await prometheus.query('max(formservice_queue_workers{queue="webhooks"})')) === workersBefore, 10_000, 250);
      await Promise.all(webhookWorkers.map((w) => w.proc.stop()));
      await submit(3);
    });

    it('fires FormServiceQueueStalled for the webhooks queue', async () => {
      await waitForAlert('FormServiceQueueStalled', { queue: 'webhooks' });
      log(`webhook workers stopped: firing ${JSON.stringify(await prometheus.firing())}`);
    });

    it('exports the queue gauges once per process, so max reads the truth and sum would not', async () => {
      const { waiting } = await webhooksQueue.getJobCounts('waiting');
      expect(waiting).to.be.at.least(1);
      await waitUntil(async () => numberOf(await prometheus.query('max(formservice_queue_jobs{queue="webhooks", state="waiting"})')) === waiting, 10_000, 250);
      const exporters = numberOf(await prometheus.query('count(up{job="form-service"} == 1)'));
      expect(exporters).to.equal(5);
      const summed = numberOf(await prometheus.query('sum(formservice_queue_jobs{queue="webhooks", state="waiting"})'));
      expect(summed).to.equal(waiting * exporters);
      expect(numberOf(await prometheus.query('max(formservice_queue_workers{queue="webhooks"})'))).to.equal(0);
      expect(await webhooksQueue.getWorkersCount()).to.equal(0);
      log(`gauges: ${waiting} waiting in Redis = max over processes; sum over the ${exporters} processes would read ${summed}; workers ${workersBefore} before the stop, 0 after`);
    });
  });

  // What Compose does with a stopped service's name, and Kubernetes with Pending or Failed pods:
  // discovery stops returning the targets, so no up series is left for up == 0 to catch.
  describe('the webhook workers\' targets removed from discovery', () => {
    before(async () => {
      await waitForAlert('FormServiceComponentDown', { component: 'worker-webhooks' });
      const { 'worker-webhooks': _removed, ...rest } = targets;
      writeConfig(path.join(dir, 'prometheus.yml'), rest);
      prometheus.reload();
      await waitUntil(async () => (await prometheus.query('up{component="worker-webhooks"}')).length === 0, 15_000, 250);
    });

    it('fires FormServiceComponentAbsent for worker-webhooks, where FormServiceComponentDown goes silent', async () => {
      await waitForAlert('FormServiceComponentAbsent', { component: 'worker-webhooks' });
      const firing = await prometheus.firing();
      log(`webhook workers' targets removed: firing ${JSON.stringify(firing)}`);
      expect(firing).to.include('FormServiceComponentAbsent{component=worker-webhooks}');
      expect(firing.filter((a) => a.startsWith('FormServiceComponentAbsent'))).to.deep.equal(['FormServiceComponentAbsent{component=worker-webhooks}']);
      await waitUntil(async () => !(await prometheus.firing()).some((a) => a.startsWith('FormServiceComponentDown')), 15_000, 250);
    });
  });
});
