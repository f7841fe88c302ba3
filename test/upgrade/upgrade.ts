import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { deleteQueueKeys, dropDatabase } from '../support/databases';
import { startReceiver, type Receiver } from '../support/fakes/receiver';
import { freePort, waitUntil } from '../support/processes';
import { eventIdForSubmission } from '../../src/domain/webhooks/events';
import { git, previousRelease, releaseUses, SOURCE_ROOT } from './release';

/**
 * `npm run test:upgrade` (deploy/README.md, "Upgrading" and "Rolling back"): the rolling upgrade an
 * operator runs, proven from the release this tree replaces.
 *
 * 1. Builds the previous release (`UPGRADE_FROM`, default: the newest commit whose
 *    `src/db/migrations` differs from this tree's) from `git archive` in a temp directory kept for
 *    the next run (its node_modules: ours when its package-lock.json equals ours, else `npm ci`
 *    there), and runs its
 *    migrations on a throwaway database.
 * 2. Runs its API and workers (`src/api.js`, `workers/all.js`) behind a round-robin TCP proxy under
 *    steady traffic: submissions (one webhook, to a receiver here that answers 503 to the first
 *    attempt of every 5th delivery, so retries are owed across each switch), the change feed read.
 *    Before migrating, with both releases running and after the rollback, it also writes pending
 *    deliveries whose enqueue was lost (rows as the previous release writes them: with their owed
 *    row when its code writes `webhook_delivery_owed`; no job), due a few seconds later: only a
 *    sweep of owed work can deliver them, whichever release runs it.
 * 3. Applies this release's migrations (`npm run cli -- migrate`) while the traffic flows, starts
 *    this release's API and workers beside the old ones, takes the old ones out of the proxy and stops
 *    them; then rolls back: the old release again on the migrated schema, this one stopped.
 * 4. Checks: no 5xx and no refused connection at any moment; every 201 stored once; every
 *    submission's event (and every lost enqueue's) delivered (answered 2xx) with the event id its
 *    delivery row holds, and no delivery left pending; where the schema has them, the owed and
 *    failed rows beside the deliveries agree with them exactly; no month row drifted (`counts check`
 *    before any repair); the day counts agree
 *    with the rows (`counts check`, when this tree has the command, after `counts repair`); no
 *    request waited on a lock for more than 2 s while migrating.
 * Prints each step, its longest request and longest lock wait, and the commit it upgraded from.
 */
/** Submissions and change-feed reads a second, spread over two keys (an enterprise key takes 2,000 a minute). */
const RATE = Number(process.env.UPGRADE_RATE ?? 20);
const STEP_MS = Number(process.env.UPGRADE_STEP_MS ?? 6_000);
const MAX_BLOCK_MS = 2_000;
const ADMIN_URL = process.env.TEST_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

interface Release {
  name: string;
  root: string;
}

interface Running {
  name: string;
  child: ChildProcess;
  port: number;
  output: () => string;
}

function log(line: string): void {
  console.log(`[${new Date().toISOString().slice(11, 23)}] ${line}`);
}

function run(cmd: string, args: string[], cwd: string, env: Record<string, string> = {}): string {
  return execFileSync(cmd, args, { cwd, env: { ...process.env, ...env }, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, stdio: ['ignore', 'pipe', 'pipe'] });
}

/**
 * The previous release's sources from git, built, with node_modules, in a directory named after its
 * commit under the temp directory: a later run reuses it (`npm ci` alone takes minutes).
 */
function buildRelease(commit: string): Release {
  const root = path.join(tmpdir(), `form-service-release-${commit}`);
  if (existsSync(path.join(root, 'dist/src/api.js')) && existsSync(path.join(root, 'node_modules'))) {
    log(`reusing the build of ${commit.slice(0, 10)} in ${root}`);
    return { name: commit.slice(0, 10), root };
  }
  rmSync(root, { recursive: true, force: true });
  execFileSync('bash', ['-c', `mkdir -p "${root}" && git archive ${commit} | tar -x -C "${root}"`], { cwd: SOURCE_ROOT });
  const sameLock = readFileSync(path.join(root, 'package-lock.json'), 'utf8') === readFileSync(path.join(SOURCE_ROOT, 'package-lock.json'), 'utf8');
  if (sameLock) {
    symlinkSync(realpathSync(path.join(SOURCE_ROOT, 'node_modules')), path.join(root, 'node_modules'));
    log('its package-lock.json equals ours: node_modules is a link to ours');
  } else {
    log('its package-lock.json differs from ours: npm ci there');
    run('npm', ['ci', '--no-audit', '--no-fund'], root, { PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD: '1' });
  }
  run('npm', ['run', '--silent', 'build'], root);
  return { name: commit.slice(0, 10), root };
}

/**
 * A TCP round-robin proxy: one address in front of the API processes, as a load balancer would be,
 * with its deregistration delay: a backend taken out of rotation is stopped once the connections it
 * has (requests queued in it on a busy machine) are done (`drained`).
 */
class Proxy {
  backends: number[] = [];
  private next = 0;
  private active = new Map<number, number>();
  private server = net.createServer((client) => {
    const port = this.backends[this.next++ % Math.max(1, this.backends.length)];
    const upstream = net.connect(port, '127.0.0.1');
    this.active.set(port, (this.active.get(port) ?? 0) + 1);
    upstream.once('close', () => this.active.set(port, this.active.get(port)! - 1));
    client.pipe(upstream).pipe(client);
    const close = () => { client.destroy(); upstream.destroy(); };
    upstream.on('error', close);
    client.on('error', close);
  });
  port = 0;

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as net.AddressInfo).port;
  }

  /** Resolves once no connection to the backend on `port` is open (at most 60 s). */
  async drained(port: number): Promise<void> {
    await waitUntil(() => !this.active.get(port), 60_000, 50).catch(() => undefined);
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

interface Sample {
  at: number;
  step: string;
  what: string;
  status: number | string;
  ms: number;
}

/** One request on a fresh connection (the proxy picks a backend per connection). */
function request(port: number, method: string, pathname: string, key: string, body?: unknown): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request({
      host: '127.0.0.1', port, method, path: pathname, agent: false,
      headers: { authorization: `Bearer ${key}`, connection: 'close', ...(payload ? { 'content-type': 'application/json' } : {}) },
      timeout: 15_000,
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => { text += chunk; });
      res.on('end', () => {
        let parsed: unknown = text;
        try { parsed = JSON.parse(text); } catch { /* not JSON */ }
        resolve({ status: res.statusCode ?? 0, body: parsed });
      });
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(payload);
  });
}

async function main(): Promise<void> {
  const from = previousRelease();
  const here = git(['rev-parse', 'HEAD']);
  const dirty = git(['status', '--porcelain', '--', 'src', 'workers', 'config']) !== '';
  log(`upgrading from ${from} (${git(['log', '-1', '--format=%s', from]).slice(0, 90)})`);
  log(`to this tree: ${here}${dirty ? ' with uncommitted changes' : ''}`);
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const dbUrl = new URL(ADMIN_URL);
  dbUrl.pathname = `/formservice_upgrade_${runId}`;
  const databaseUrl = dbUrl.toString();
  const queuePrefix = `fsupgrade${runId}`;
  const env = {
    DATABASE_URL: databaseUrl, REDIS_URL, QUEUE_PREFIX: queuePrefix, ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', WEBHOOK_RETRY_DELAYS_MS: '200,500,1000,2000', LOG_LEVEL: 'warn', NODE_NO_WARNINGS: '1',
  };
  const running = new Set<Running>();
  const failures: string[] = [];
  let receiver: Receiver | null = null;
  const proxy = new Proxy();
  const current: Release = { name: 'this tree', root: SOURCE_ROOT };

  async function start(release: Release, entry: string, role: string): Promise<Running> {
    const port = await freePort();
    const portVar = entry.startsWith('workers/') ? 'METRICS_PORT' : 'PORT';
    const child = spawn(process.execPath, [path.join(release.root, 'dist', entry)], {
      cwd: release.root, env: { ...process.env, ...env, HOST: '127.0.0.1', [portVar]: String(port), PGAPPNAME: `upgrade-${role}` },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (c) => { output += c; });
    child.stderr!.on('data', (c) => { output += c; });
    const proc: Running = { name: `${release.name} ${entry}`, child, port, output: () => output };
    running.add(proc);
    await waitUntil(async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).ok, 60_000, 100)
      .catch(() => { throw new Error(`${proc.name} did not start:\n${output}`); });
    log(`started ${proc.name} on :${port}`);
    return proc;
  }

  async function stop(proc: Running): Promise<void> {
    if (proc.child.exitCode === null && proc.child.signalCode === null) {
      const exited = new Promise((r) => proc.child.once('exit', r));
      proc.child.kill('SIGTERM');
      await exited;
    }
    running.delete(proc);
    log(`stopped ${proc.name}`);
  }

  function cli(release: Release, args: string[]): string {
    return run(process.execPath, [path.join(release.root, 'dist/src/cli/index.js'), ...args], release.root, { ...env, PGAPPNAME: 'upgrade-migrate' });
  }

  try {
    const old = buildRelease(from);
    log(`built ${from.slice(0, 10)} in ${old.root}`);
    log(`old release migrates a fresh database: ${cli(old, ['migrate']).trim()}`);

    // The first attempt of every 5th delivery fails: its retry is owed by whichever release runs then.
    const seenDeliveries = new Set<string>();
    const deliveredIds = new Set<string>();
    receiver = await startReceiver({
      keep: true,
      respond: (_n, req) => {
        const id = req.headers['x-service-delivery'];
        const first = !seenDeliveries.has(id);
        seenDeliveries.add(id);
        return { status: first && seenDeliveries.size % 5 === 0 ? 503 : 200 };
      },
      onDelivery: (req, status) => { if (status < 300) deliveredIds.add(JSON.parse(req.rawBody).id); },
    });
    await proxy.start();
    const org = JSON.parse(cli(old, ['orgs', 'create', '--name', 'upgrade', '--plan', 'enterprise']));
    const scopes = 'forms:write,forms:read,submissions:write,submissions:read,webhooks:write,webhooks:read';
    const keys: string[] = [0, 1].map(() => JSON.parse(cli(old, ['keys', 'create', '--org', org.id, '--scopes', scopes])).key);
    const key = keys[0];

    let oldApi = await start(old, 'src/api.js', 'old-api');
    let oldWorkers = await start(old, 'workers/all.js', 'old-workers');
    proxy.backends = [oldApi.port];
    const form = await request(proxy.port, 'POST', '/v1/forms', key, {
      title: 'Upgrade', status: 'published', pages: [],
      fields: [{ id: 'fld_email', type: 'email', label: 'Email', required: true, config: {}, validationRules: {}, order: 0, pageId: null }],
    });
    if (form.status !== 201) throw new Error(`form: ${form.status} ${JSON.stringify(form.body)}`);
    const formId: string = form.body.form.id;
    const hook = await request(proxy.port, 'POST', '/v1/webhooks', key, { name: 'upgrade', url: receiver.url, events: ['submission.created'] });
    if (hook.status !== 201) throw new Error(`webhook: ${hook.status} ${JSON.stringify(hook.body)}`);

    // Steady traffic through the proxy, never pausing: submissions at RATE/s, the change feed every 10th.
    const samples: Sample[] = [];
    const created: string[] = [];
    let step = 'old release';
    let sending = true;
    let i = 0;
    const inFlight = new Set<Promise<void>>();
    const traffic = (async () => {
      const started = Date.now();
      while (sending) {
        const n = i++;
        const what = n % 10 === 9 ? 'change feed' : 'submission';
        const sentAt = Date.now();
        const stepAtSend = step;
        const p = (what === 'submission'
          ? request(proxy.port, 'POST', `/v1/forms/${formId}/submissions`, keys[n % 2], { data: { fld_email: `u${n}@example.com` } })
          : request(proxy.port, 'GET', `/v1/submissions/changes?formId=${formId}&limit=50`, keys[n % 2]))
          .then((res) => {
            samples.push({ at: sentAt, step: stepAtSend, what, status: res.status, ms: Date.now() - sentAt });
            if (what === 'submission' && res.status === 201) created.push(res.body.submission.id);
          }, (err: Error & { code?: string }) => {
            samples.push({ at: sentAt, step: stepAtSend, what, status: err.code ?? err.message, ms: Date.now() - sentAt });
          })
          .finally(() => inFlight.delete(p));
        inFlight.add(p);
        const due = started + (i * 1000) / RATE;
        await new Promise((r) => setTimeout(r, Math.max(0, due - Date.now())));
      }
      await Promise.all(inFlight);
    })();

    // Lock waits of the service's connections (not the migration's own), sampled every 100 ms.
    const lockWaits = new Map<string, number>();
    const watcher = new Client({ connectionString: databaseUrl });
    watcher.on('error', () => undefined);
    await watcher.connect();
    let watching = true;
    const watch = (async () => {
      while (watching) {
        const { rows } = await watcher.query<{ ms: number }>(`select coalesce(max(extract(epoch from clock_timestamp() - query_start) * 1000), 0)::float8 as ms
            from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and application_name like 'upgrade-%'
             and application_name <> 'upgrade-migrate'`);
        lockWaits.set(step, Math.max(lockWaits.get(step) ?? 0, rows[0].ms));
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

    // Pending deliveries whose enqueue was lost: written as the previous release writes them (no
    // job; an owed row only if its code writes them), due in 8 s; a sweep of owed work must find them.
    const lost: string[] = [];
    const previousWritesOwed = releaseUses(from, 'webhook_delivery_owed');
    const writeLost = async (tag: string) => {
      const db = new Client({ connectionString: databaseUrl });
      await db.connect();
      try {
        const ids = Array.from({ length: 5 }, (_, k) => `evt_lost${tag}${k}`);
        await db.query(`with d as (
            insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, next_attempt_at)
            select 'dlv_' || substr(e, 5), $1, $2, e, 'form.submission.created', json_build_object('id', e, 'type', 'form.submission.created')::text,
                   'pending', now() + interval '8 seconds' from unnest($3::text[]) e
            returning id, organization_id, webhook_id, next_attempt_at)
          ${previousWritesOwed ? `insert into webhook_delivery_owed (delivery_id, organization_id, webhook_id, next_attempt_at)
            select id, organization_id, webhook_id, next_attempt_at from d on conflict (delivery_id) do nothing` : 'select 1'}`,
        [hook.body.webhook.id, org.id, ids]);
        lost.push(...ids);
      } finally {
        await db.end();
      }
    };

    await pause(STEP_MS);
    await writeLost('old');
    step = 'migrate';
    log(`applying this tree's migrations under traffic: npm run cli -- migrate`);
    const migrated = JSON.parse(await new Promise<string>((resolve, reject) => {
      const child = spawn(process.execPath, [path.join(SOURCE_ROOT, 'dist/src/cli/index.js'), 'migrate'], {
        cwd: SOURCE_ROOT, env: { ...process.env, ...env, PGAPPNAME: 'upgrade-migrate' }, stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout.on('data', (c) => { out += c; });
      child.stderr.on('data', (c) => { err += c; });
      child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`migrate exited ${code}: ${err}`))));
    }));
    for (const m of migrated.applied ?? []) log(`  applied ${m.name} in ${m.ms} ms (${m.attempts} attempt${m.attempts > 1 ? 's' : ''})`);
    await pause(1_000);

    step = 'both releases';
    const newApi = await start(current, 'src/api.js', 'new-api');
    const newWorkers = await start(current, 'workers/all.js', 'new-workers');
    proxy.backends = [oldApi.port, newApi.port];
    await writeLost('both');
    await pause(STEP_MS);

    step = 'new release';
    proxy.backends = [newApi.port];
    await proxy.drained(oldApi.port);
    await Promise.all([stop(oldApi), stop(oldWorkers)]);
    await pause(STEP_MS);

    step = 'rollback';
    log('rolling back: the previous release on the migrated schema');
    oldApi = await start(old, 'src/api.js', 'old-api');
    oldWorkers = await start(old, 'workers/all.js', 'old-workers');
    proxy.backends = [newApi.port, oldApi.port];
    await pause(1_000);
    proxy.backends = [oldApi.port];
    await proxy.drained(newApi.port);
    await Promise.all([stop(newApi), stop(newWorkers)]);
    await writeLost('rollback');
    await pause(STEP_MS);

    sending = false;
    await traffic;
    watching = false;
    await watch;

    // Every submission's event arrives (retries of the rolled-back workers included).
    const db = new Client({ connectionString: databaseUrl });
    db.on('error', () => undefined);
    await db.connect();
    const { rows: deliveries } = await db.query<{ event_id: string }>(
      'select event_id from webhook_deliveries where webhook_id = $1', [hook.body.webhook.id]);
    const eventIds = new Set(deliveries.map((d) => d.event_id));
    const receivedIds = () => receiver!.deliveries.map((d) => JSON.parse(d.rawBody).id as string);
    await waitUntil(() => deliveredIds.size >= created.length + lost.length, 90_000, 250).catch(() => undefined);

    // Checks.
    const bad = samples.filter((s) => typeof s.status !== 'number' || s.status >= 500);
    if (bad.length) failures.push(`${bad.length} requests failed or answered 5xx: ${JSON.stringify(bad.slice(0, 5))}`);
    const others = samples.filter((s) => typeof s.status === 'number' && s.status < 500 && s.status !== 201 && s.status !== 200);
    if (others.length) failures.push(`${others.length} requests answered neither 200 nor 201: ${JSON.stringify(others.slice(0, 5))}`);
    const { rows: [stored] } = await db.query<{ n: number; distinct_ids: number }>(
      'select count(*)::int as n, count(distinct id)::int as distinct_ids from submissions where form_id = $1', [formId]);
    const createdSet = new Set(created);
    if (stored.n !== created.length || createdSet.size !== created.length) failures.push(`201s ${created.length}, stored rows ${stored.n}`);
    const received = new Map<string, number>();
    for (const id of receivedIds()) received.set(id, (received.get(id) ?? 0) + 1);
    // The event id a submission's delivery row holds, and the one the receiver got, are the same.
    const undelivered = created.filter((id) => !eventIds.has(eventIdForSubmission(id)) || !deliveredIds.has(eventIdForSubmission(id)));
    if (undelivered.length) failures.push(`${undelivered.length} submissions' events not delivered: ${undelivered.slice(0, 5).join(', ')}`);
    const lostUndelivered = lost.filter((id) => !deliveredIds.has(id));
    if (lostUndelivered.length) failures.push(`${lostUndelivered.length} of ${lost.length} lost enqueues never delivered: ${lostUndelivered.slice(0, 5).join(', ')}`);
    // An attempt a stopped worker sent but never recorded is the sweeps' to make again (at least once).
    const pendingNow = async () => (await db.query<{ pending: number }>(`select count(*)::int as pending from webhook_deliveries where status = 'pending'`)).rows[0].pending;
    await waitUntil(async () => (await pendingNow()) === 0, 90_000, 500).catch(() => undefined);
    const pending = await pendingNow();
    if (pending) failures.push(`${pending} deliveries still pending 90 s after the last was delivered`);
    // Where the schema keeps owed and failed rows beside the deliveries, they say what the deliveries say.
    const { rows: [side] } = await db.query(`select to_regclass('webhook_delivery_owed') is not null as present`);
    let sideRows = 'none in this schema';
    if (side.present) {
      const { rows: [gap] } = await db.query<{ owed: number; failed: number }>(`select
        (select count(*) from ((select delivery_id, next_attempt_at from webhook_delivery_owed
                                except select id, coalesce(next_attempt_at, created_at) from webhook_deliveries where status = 'pending')
                               union all (select id, coalesce(next_attempt_at, created_at) from webhook_deliveries where status = 'pending'
                                except select delivery_id, next_attempt_at from webhook_delivery_owed)) x)::int as owed,
        (select count(*) from ((select delivery_id from webhook_delivery_failed except select id from webhook_deliveries where status = 'failed')
                               union all (select id from webhook_deliveries where status = 'failed' except select delivery_id from webhook_delivery_failed)) x)::int as failed`);
      sideRows = `owed rows off by ${gap.owed}, failed rows off by ${gap.failed}`;
      if (gap.owed || gap.failed) failures.push(`the rows beside the deliveries disagree with them: ${sideRows}`);
    }
    const strangers = [...received.keys()].filter((id) => !eventIds.has(id));
    if (strangers.length) failures.push(`${strangers.length} events received that no delivery row names: ${strangers.slice(0, 5).join(', ')}`);
    const twice = [...received.entries()].filter(([, n]) => n > 1);

    let counts = 'skipped: this tree has no `counts check` command';
    const cliSource = readFileSync(path.join(SOURCE_ROOT, 'src/cli/index.ts'), 'utf8');
    if (cliSource.includes("'counts check'")) {
      // Month rows (when this tree has them) are kept through the rollout, by this release and, for
      // the previous release's writes of slot 0, by the trigger: none may drift before any repair.
      let before = '';
      try {
        before = cli(current, ['counts', 'check']);
      } catch (err) {
        before = (err as { stdout?: string }).stdout ?? '';
      }
      const months = before.split('\n').filter((line) => line.includes('"month"'));
      if (months.length) failures.push(`month rows drifted during the rollout: ${months.slice(0, 5).join(' ')}`);
      cli(current, ['counts', 'repair']);
      try {
        counts = `clean: ${cli(current, ['counts', 'check']).trim()}`;
      } catch (err) {
        failures.push(`counts check after counts repair: ${(err as { stdout?: string }).stdout ?? err}`);
        counts = 'NOT clean';
      }
    } else {
      // The day counts' sum against the rows, as `counts check` would.
      const { rows: [day] } = await db.query<{ counted: number }>(
        "select coalesce(sum(count), 0)::int as counted from submission_day_counts where form_id = $1", [formId]).catch(() => ({ rows: [{ counted: -1 }] }));
      counts += `; day counts hold ${day.counted} of ${stored.n} rows${day.counted === stored.n ? '' : ' (the previous release stores rows without counting them until `counts repair`)'}`;
    }
    await db.end();
    await watcher.end();

    console.log('');
    console.log(`upgraded from ${from} to ${here}${dirty ? ' (+ uncommitted changes)' : ''}`);
    console.log('step            requests  201/200  other  5xx/refused  longest request  longest lock wait');
    for (const name of ['old release', 'migrate', 'both releases', 'new release', 'rollback']) {
      const ss = samples.filter((s) => s.step === name);
      const ok = ss.filter((s) => s.status === 200 || s.status === 201).length;
      const fail = ss.filter((s) => typeof s.status !== 'number' || s.status >= 500).length;
      const longest = Math.max(0, ...ss.map((s) => s.ms));
      const lock = lockWaits.get(name) ?? 0;
      console.log(`${name.padEnd(15)} ${String(ss.length).padStart(8)} ${String(ok).padStart(8)} ${String(ss.length - ok - fail).padStart(6)}`
        + ` ${String(fail).padStart(12)} ${`${longest} ms`.padStart(16)} ${`${Math.round(lock)} ms`.padStart(18)}`);
      if (lock > MAX_BLOCK_MS) failures.push(`during "${name}" a request waited ${Math.round(lock)} ms on a lock (over ${MAX_BLOCK_MS} ms)`);
    }
    console.log(`migrations applied: ${(migrated.applied ?? []).map((m: { name: string; ms: number; attempts: number }) => `${m.name} ${m.ms} ms/${m.attempts}`).join(', ') || 'none'}`);
    console.log(`submissions: 201s ${created.length}, stored ${stored.n} (distinct ids ${stored.distinct_ids})`);
    console.log(`deliveries: events received ${received.size} of ${created.length}, undelivered ${undelivered.length}, received twice ${twice.length} (at-least-once: a worker stopped mid-attempt, or a first attempt answered 503)`);
    console.log(`lost enqueues: ${lost.length - lostUndelivered.length} of ${lost.length} delivered by a sweep; pending at the end: ${pending}; side rows: ${sideRows}`);
    console.log(`counts: ${counts}`);
    console.log(failures.length ? `\nFAILED:\n- ${failures.join('\n- ')}` : '\nPASSED: no 5xx, no refused connection, every 201 stored once and delivered, no lock wait over 2 s');
    if (failures.length) process.exitCode = 1;
  } catch (err) {
    console.error(err);
    for (const proc of running) console.error(`--- ${proc.name}:\n${proc.output().slice(-3000)}`);
    process.exitCode = 1;
  } finally {
    for (const proc of [...running]) await stop(proc).catch(() => undefined);
    await receiver?.close();
    await proxy.close().catch(() => undefined);
    await dropDatabase(databaseUrl).catch(() => undefined);
    await deleteQueueKeys(queuePrefix).catch(() => undefined);
  }
}

main().then(() => process.exit(process.exitCode ?? 0), (err) => {
  console.error(err);
  process.exit(1);
});
