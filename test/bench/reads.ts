import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import http from 'node:http';
import { loadConfig } from '../../config';
import { prepareDatabase } from '../../src/app';
import { createApiKey } from '../../src/domain/auth/admin';
import { ADMIN_DB_TIMEOUTS, initOrm } from '../../src/db/orm';
import { buildDayMarks } from '../../src/domain/submissions/day-marks';
import { foldDayCounts } from '../../src/domain/submissions/day-counts';
import { queryOnce } from '../support/postgres-server';
import { startEntry, type StartedEntry } from '../support/processes';
import { mapAtMost } from '../../src/lib/map-at-most';
import { benchEnvironment, benchNumber, loadAgent, percentile, post, request, seedFormBench } from './support';

/**
 * bench:reads: the archive's reads as one form grows (src/README.md, day counts). Loads `--rows` submissions
 * (default 5,000,000) into one form through the batch endpoint, and at 10,000, 1,000,000 and
 * `--rows` stored prints p50/p99 of the list's first, middle and last page, a one-day filter,
 * analytics, one submission by id, a change-feed page and the export's rate.
 *
 * A form's archive spans many days, and the day counts skip whole days: loading 5 million rows in
 * minutes would put them all on today. So the loading API runs under libfaketime (Debian's
 * `faketime` package), its clock starting in the past and running a day per real second: a day
 * holds what the service stores in a second (batches of 100, `--concurrency` at a time), through the
 * service's own storing statement, and the bench prints how many days that made. The reads are
 * measured against an API on the real clock, after the day counts' fold (the usage worker's hourly
 * maintenance folds every day older than two days into slot 0 and its month row; the loading APIs
 * run no worker) and VACUUM ANALYZE (as an operator's autovacuum would leave the tables).
 *
 * `--one-day N` loads N rows instead on the real clock, with no faketime: they all land in today
 * (a bulk import within minutes; a load across UTC midnight splits in two days, which the bench
 * prints). At 10,000 and at N, after VACUUM ANALYZE, the day marks' builder (buildDayMarks, the
 * usage worker's job) runs until it has caught up, with no margin (the load is over: no storing
 * transaction is left in flight), and the bench prints how long it took, the marks it made and its
 * cost per 100,000 rows walked, then the same table, with the middle page also read by an API that
 * never looks for a mark (the walk from the day's nearer end) for comparison. `--mark-every` and `--mark-min` (default
 * 1,000 and 20,000, DAY_MARK_EVERY and DAY_MARK_MIN_ROWS of both the builder and the measured API)
 * make a small load's day busy enough to carry marks.
 */

/** Rows loaded into one day on the real clock (`--one-day N`); 0: the spread load of `--rows`. */
const ONE_DAY = benchNumber('one-day', 0);
const ROWS = ONE_DAY || benchNumber('rows', 5_000_000);
const MARK_EVERY = benchNumber('mark-every', 1_000);
const MARK_MIN = benchNumber('mark-min', 20_000);
const CONCURRENCY = benchNumber('concurrency', 4);
const CALLS = benchNumber('calls', 30);
const BATCH = 100;
const LIMIT = 50;
const KEYS = 8;
/** Rows loaded by one API process (one run of its fake clock). */
const CHUNK = 250_000;
/** The fewest rows a second the partitions made ahead of a chunk allow for. */
const MIN_RATE = 1_000;
/**
 * Days the loading API's clock runs a real second (`--days-per-second`, default 1): more spreads a
 * smaller load over many months (at 2,000 rows a second, 200,000 rows span some 500 days at 5 and
 * 40 months at 15), for the reads that a table's partitions, not its rows, make dear.
 */
const DAYS_PER_SECOND = benchNumber('days-per-second', 1);
const DAY_MS = 86_400_000;
const CHECKPOINTS = [...new Set([10_000, ...(ONE_DAY ? [] : [1_000_000]), ROWS].filter((n) => n <= ROWS))].sort((a, b) => a - b);
const LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';

type Common = Record<string, string>;
type Measured = Record<string, { p50: number; p99: number } | { rowsPerSecond: number }>;

/** `@YYYY-MM-DD hh:mm:ss`, libfaketime's absolute start. */
function fakeStart(at: Date): string {
  return `@${at.toISOString().slice(0, 19).replace('T', ' ')}`;
}

function batchPayload(size: number): string {
  return JSON.stringify({
    submissions: Array.from({ length: size }, (_, i) => ({
      data: { fld_email: `reader${i}@example.com`, fld_topic: `an archived submission, item ${i} of its batch` },
      submitterName: 'Bench Reader',
    })),
  });
}

/** Posts batches, CONCURRENCY at a time, until `count` more are stored; throws on any item refused. */
async function load(apiUrl: string, formId: string, keys: string[], count: number): Promise<void> {
  const sizes = Array.from({ length: Math.ceil(count / BATCH) }, (_, i) => Math.min(BATCH, count - i * BATCH));
  const payloads = new Map([...new Set(sizes)].map((size) => [size, batchPayload(size)]));
  let refused = 0;
  await mapAtMost(sizes.map((size, i) => ({ size, i })), CONCURRENCY, async ({ size, i }) => {
    const res = await post(`${apiUrl}/v1/forms/${formId}/submissions/batch`, payloads.get(size)!, keys[i % keys.length]);
    if (res.status !== 200) throw new Error(`batch answered ${res.status}: ${res.text.slice(0, 300)}`);
    refused += (JSON.parse(res.text).results as Array<{ status: number }>).filter((r) => r.status !== 201).length;
  });
  if (refused) throw new Error(`${refused} items were refused`);
}

/**
 * Loads `count` rows in chunks, each by an API whose clock starts a day after the newest row and
 * runs a day per real second: a chunk spans as many days as it takes seconds, so a day holds what
 * the service stores in a second. The partitions a chunk can reach are made first, assuming at
 * least half MIN_RATE rows a second. Answers the clock after the last chunk.
 */
async function loadSpread(common: Common, databaseUrl: string, formId: string, keys: string[], count: number, clock: Date, logFile: string)
  : Promise<Date> {
  for (let done = 0; done < count;) {
    const chunk = Math.min(CHUNK, count - done);
    const reach = new Date(clock.getTime() + (Math.ceil((2 * chunk) / MIN_RATE) + 2) * DAYS_PER_SECOND * DAY_MS);
    await queryOnce(databaseUrl, 'select ensure_submission_partitions($1::timestamptz, $2::timestamptz)', [clock.toISOString(), reach.toISOString()]);
    const api = await startEntry('src/api.js', {
      ...common, LD_PRELOAD: LIBFAKETIME, FAKETIME: `${fakeStart(clock)} x${86400 * DAYS_PER_SECOND}`, FAKETIME_DONT_FAKE_MONOTONIC: '1',
    }, 'PORT', [], logFile);
    try {
      await load(api.url, formId, keys, chunk);
    } finally {
      await api.proc.stop();
    }
    done += chunk;
    const [{ last }] = await queryOnce(databaseUrl, 'select max(created_at) as last from submissions');
    clock = new Date(Math.floor(new Date(last).getTime() / DAY_MS) * DAY_MS + DAY_MS);
  }
  return clock;
}

/** Loads `count` rows through one API on the real clock: they land in today. */
async function loadOneDay(common: Common, formId: string, keys: string[], count: number, logFile: string): Promise<void> {
  const api = await startEntry('src/api.js', common, 'PORT', [], logFile);
  try {
    await load(api.url, formId, keys, count);
  } finally {
    await api.proc.stop();
  }
}

/**
 * Runs the day marks' builder until it has caught up, as the usage worker's job would over several
 * runs, and prints what it took; then one more run, the cost of a run with nothing to do.
 */
async function buildMarks(databaseUrl: string): Promise<void> {
  const orm = await initOrm(databaseUrl, 1, { timeouts: ADMIN_DB_TIMEOUTS });
  try {
    const em = orm.em.fork();
    const rules = { every: MARK_EVERY, minRows: MARK_MIN, marginMs: 0 };
    let walked = 0;
    let runs = 0;
    const started = performance.now();
    for (let caughtUp = false; !caughtUp; runs++) {
      const run = await buildDayMarks(em, rules);
      walked += run.walked;
      caughtUp = run.caughtUp;
    }
    const ms = performance.now() - started;
    const idleStarted = performance.now();
    await buildDayMarks(em, rules);
    const idleMs = performance.now() - idleStarted;
    const [{ marks, days }] = await em.getConnection().execute(
      'select count(*)::int as marks, count(distinct day)::int as days from submission_day_marks');
    console.log(`day marks: ${marks} on ${days} day(s) (a mark every ${MARK_EVERY} rows of days of ${MARK_MIN} or more), `
      + `caught up in ${(ms / 1000).toFixed(1)} s over ${runs} run(s), ${walked} rows walked`
      + `${walked ? ` (${((ms * 100_000) / walked).toFixed(0)} ms per 100,000 rows)` : ''}; a run with nothing to do: ${idleMs.toFixed(1)} ms`);
  } finally {
    await orm.close();
  }
}

/** One run of the maintenance's fold (at most 10,000 form-days); answers the form-days folded. */
async function fold(databaseUrl: string): Promise<number> {
  const orm = await initOrm(databaseUrl, 1, { timeouts: ADMIN_DB_TIMEOUTS });
  try {
    return await foldDayCounts(orm.em.fork());
  } finally {
    await orm.close();
  }
}

/** p50/p99 of CALLS sequential calls (after three to warm up), each answering 200. */
async function timed(name: string, call: (i: number) => Promise<{ status: number; text: string }>): Promise<{ p50: number; p99: number }> {
  const times: number[] = [];
  for (let i = -3; i < CALLS; i++) {
    const started = performance.now();
    const res = await call(i);
    const ms = performance.now() - started;
    if (res.status !== 200) throw new Error(`${name} answered ${res.status}: ${res.text.slice(0, 300)}`);
    if (i >= 0) times.push(ms);
  }
  times.sort((a, b) => a - b);
  return { p50: Number(percentile(times, 50).toFixed(1)), p99: Number(percentile(times, 99).toFixed(1)) };
}

async function measure(apiUrl: string, formId: string, key: string, stored: number): Promise<Measured> {
  const get = (path: string) => request('GET', `${apiUrl}${path}`, key);
  const list = (qs: string) => get(`/v1/forms/${formId}/submissions?limit=${LIMIT}&${qs}`);
  const middle = JSON.parse((await list(`offset=${Math.floor(stored / 2)}`)).text);
  if (middle.pagination.total !== stored) throw new Error(`the list's total is ${middle.pagination.total}, not ${stored}`);
  const middleDay = String(middle.submissions[0].createdAt).slice(0, 10);
  const sample = [
    ...JSON.parse((await list('offset=0')).text).submissions,
    ...middle.submissions,
    ...JSON.parse((await list(`offset=${stored - LIMIT}`)).text).submissions,
  ].map((s: { id: string }) => s.id);

  const measured: Measured = {
    'list, first page': await timed('first page', () => list('offset=0')),
    'list, middle page': await timed('middle page', () => list(`offset=${Math.floor(stored / 2)}`)),
    'list, last page': await timed('last page', () => list(`offset=${Math.max(0, stored - LIMIT)}`)),
    'list, one-day filter': await timed('one-day filter', () => list(`startDate=${middleDay}&endDate=${middleDay}`)),
    analytics: await timed('analytics', () => get(`/v1/forms/${formId}/analytics`)),
    'one by id': await timed('one by id', (i) => get(`/v1/submissions/${sample[(i + sample.length) % sample.length]}`)),
    'change feed page': await timed('feed page', () => get(`/v1/submissions/changes?formId=${formId}&limit=100`)),
  };
  const started = performance.now();
  const lines = await countLines(`${apiUrl}/v1/forms/${formId}/submissions/export?format=ndjson`, key);
  if (lines !== stored) throw new Error(`the export gave ${lines} rows, not ${stored}`);
  measured.export = { rowsPerSecond: Math.round(lines / ((performance.now() - started) / 1000)) };
  return measured;
}

/** The lines of a streamed answer, counted as they arrive (5 million rows are more text than one string holds). */
function countLines(url: string, key: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http.get(url, { agent: loadAgent, headers: { authorization: `Bearer ${key}` } }, (res) => {
      if (res.statusCode !== 200) reject(new Error(`the export answered ${res.statusCode}`));
      let lines = 0;
      res.on('data', (chunk: Buffer) => {
        for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) lines++;
      });
      res.on('end', () => resolve(lines));
      res.on('error', reject);
    }).on('error', reject);
  });
}

/** Rows per day as loaded: how many days, and the fewest, median and most rows on one. */
async function daysLoaded(databaseUrl: string): Promise<string> {
  const rows = await queryOnce(databaseUrl,
    `select count(*)::int as n from submissions group by (created_at at time zone 'UTC')::date order by 1`);
  const counts = rows.map((r) => r.n as number);
  return `${counts.length} days, ${counts[0]} / ${percentile(counts, 50)} / ${counts[counts.length - 1]} rows a day (fewest / median / most)`;
}

async function main(): Promise<void> {
  if (!ONE_DAY && !existsSync(LIBFAKETIME)) throw new Error(`bench:reads needs libfaketime (apt-get install faketime): ${LIBFAKETIME} is missing`);
  const env = benchEnvironment('reads');
  const encryptionKey = randomBytes(32);
  const common: Common = {
    DATABASE_URL: env.databaseUrl, REDIS_URL: env.redisUrl, QUEUE_PREFIX: env.queuePrefix,
    ENCRYPTION_KEY: encryptionKey.toString('base64'), LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
    DAY_MARK_EVERY: String(MARK_EVERY), DAY_MARK_MIN_ROWS: String(MARK_MIN),
  };
  let api: StartedEntry | null = null;
  try {
    await prepareDatabase(loadConfig({ ...process.env, ...common }));
    const seeded = await seedFormBench(env.databaseUrl, encryptionKey, { keyCount: KEYS });
    const orm = await initOrm(env.databaseUrl, 1);
    const readKey = (await createApiKey(orm.em.fork(), { organizationId: seeded.organizationId, scopes: ['submissions:read', 'forms:read'] })).key;
    await orm.close();

    // The rows fall on days from far back; each day holds what the service stores in a second.
    let clock = new Date(Math.floor(Date.now() / DAY_MS) * DAY_MS - Math.ceil(ROWS / MIN_RATE + 10) * DAYS_PER_SECOND * DAY_MS);
    console.log(ONE_DAY
      ? `${ROWS} submissions into one form on the real clock, today (batches of ${BATCH}, ${CONCURRENCY} at a time); `
        + `${CALLS} calls per figure, pages of ${LIMIT}`
      : `${ROWS} submissions into one form (batches of ${BATCH}, ${CONCURRENCY} at a time), `
        + `${DAYS_PER_SECOND} day(s) a second from ${clock.toISOString().slice(0, 10)}; ${CALLS} calls per figure, pages of ${LIMIT}`);

    const results: Array<{ stored: number; measured: Measured }> = [];
    let stored = 0;
    for (const checkpoint of CHECKPOINTS) {
      const loadStarted = performance.now();
      if (ONE_DAY) await loadOneDay(common, seeded.formId, seeded.keys, checkpoint - stored, env.logFile('api-loading'));
      else clock = await loadSpread(common, env.databaseUrl, seeded.formId, seeded.keys, checkpoint - stored, clock, env.logFile('api-loading'));
      const seconds = (performance.now() - loadStarted) / 1000;
      console.log(`loaded ${checkpoint - stored} in ${seconds.toFixed(0)} s (${Math.round((checkpoint - stored) / seconds)}/s, API restarts included)`);
      stored = checkpoint;

      const foldStarted = performance.now();
      let folded = 0;
      for (let n = -1; n !== 0; folded += n) n = await fold(env.databaseUrl);
      console.log(`fold: ${folded} form-days in ${((performance.now() - foldStarted) / 1000).toFixed(1)} s`);
      const vacuumStarted = performance.now();
      await queryOnce(env.databaseUrl, 'vacuum analyze');
      console.log(`vacuum analyze: ${((performance.now() - vacuumStarted) / 1000).toFixed(0)} s`);
      if (ONE_DAY) await buildMarks(env.databaseUrl);
      api = await startEntry('src/api.js', common, 'PORT', [], env.logFile('api'));
      const measured = await measure(api.url, seeded.formId, readKey, stored);
      await api.proc.stop();
      api = null;
      if (ONE_DAY) {
        // The same middle page from an API that never looks for a mark (a day's walk from its nearer end), for comparison in this run.
        api = await startEntry('src/api.js', { ...common, DAY_MARK_MIN_ROWS: String(1_000_000_000) }, 'PORT', [], env.logFile('api-no-marks'));
        const url = `${api.url}/v1/forms/${seeded.formId}/submissions?limit=${LIMIT}&offset=${Math.floor(stored / 2)}`;
        measured['list, middle page, no marks'] = await timed('middle page, no marks', () => request('GET', url, readKey));
        await api.proc.stop();
        api = null;
      }
      results.push({ stored, measured });
      console.log(`at ${stored}:`);
      console.table(measured);
    }
    console.log(await daysLoaded(env.databaseUrl));

    const first = results[0];
    const summary: Record<string, Record<string, string>> = {};
    for (const name of Object.keys(first.measured)) {
      const row: Record<string, string> = {};
      for (const { stored: n, measured } of results) {
        const m = measured[name];
        row[n.toLocaleString('en')] = 'p50' in m ? `${m.p50} / ${m.p99} ms` : `${m.rowsPerSecond.toLocaleString('en')} rows/s`;
      }
      const base = first.measured[name];
      const last = results[results.length - 1].measured[name];
      if ('p50' in base && 'p50' in last) row[`p50 ×${first.stored.toLocaleString('en')}`] = (last.p50 / base.p50).toFixed(2);
      summary[name] = row;
    }
    console.log('p50 / p99 by submissions stored (goal for the list calls and analytics: p50 ≤ 25 ms and ≤ 1.5× the call at 10,000)');
    console.table(summary);
  } finally {
    await api?.proc.stop();
    await env.cleanup();
  }
}

main().then(() => process.exit(0), (err) => {
  console.error(err);
  process.exit(1);
});
