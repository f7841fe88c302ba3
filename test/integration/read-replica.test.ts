import { expect } from 'chai';
import { Client } from 'pg';
import { loadConfig } from '../../config';
import { prepareDatabase } from '../../src/app';
import { createLogger } from '../../src/lib/logger';
import { registry } from '../../src/lib/metrics';
import { call, createPublishedForm, createTenant, fieldInput as field, startTestApp, type TestApp, type TestTenant } from '../support/harness';
import { feedSettled } from '../support/change-feed';
import { startPgProxy, type PgProxy } from '../support/pg-proxy';
import { startPrimaryWithReplica, type PrimaryWithReplica } from '../support/pg-replica';
import { queryOnce } from '../support/postgres-server';
import { freePort } from '../support/processes';
import { freshQueuePrefix, waitUntil } from '../support/worker-stack';

/** This process's count of reads the replica failed, by reason (0 before the first). */
async function replicaFailures(reason: string): Promise<number> {
  const metric = registry.getSingleMetric('formservice_replica_read_failures_total');
  const values = metric ? (await metric.get()).values : [];
  return Number(values.find((v) => v.labels.reason === reason)?.value ?? 0);
}

/** The reads that may lag, which the replica serves when there is one. */
const laggingReads = (formId: string) => [
  `/v1/forms/${formId}/submissions?limit=100`, `/v1/forms/${formId}/analytics`, '/v1/submissions/changes?limit=1000',
  `/v1/forms/${formId}/submissions/export?format=ndjson`,
];

/** DATABASE_READ_URL against a real streaming replica (pg_basebackup -R) of a primary of the test's own. */
describe('with a read replica (DATABASE_READ_URL)', function () {
  this.timeout(120_000);
  let pg: PrimaryWithReplica;
  let t: TestApp;
  let tenant: TestTenant;
  let form: any;

  before(async () => {
    pg = await startPrimaryWithReplica('formservice_replica');
    await prepareDatabase(loadConfig({ ...process.env, DATABASE_URL: pg.primaryUrl }));
    await pg.caughtUp(); // the tables exist on the replica too
    t = await startTestApp({ DATABASE_URL: pg.primaryUrl, DATABASE_READ_URL: pg.replicaUrl, QUEUE_PREFIX: freshQueuePrefix() });
    tenant = await createTenant(t.app);
    form = await createPublishedForm(t.url, tenant.key, [field('fld_name', 'text', 'Name')]);
  });
  after(async () => {
    await t?.close();
    await pg?.stop();
  });

  const submit = (name: string) =>
    call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data: { fld_name: name } } });
  const listedIds = async () => {
    const list = await call(t.url, 'GET', `/v1/forms/${form.id}/submissions?limit=100`, { key: tenant.key });
    expect(list.status, list.text).to.equal(200);
    return list.body.submissions.map((s: any) => s.id as string);
  };

  it('serves lists from the replica once it has replayed the commit', async () => {
    const created = await submit('first');
    expect(created.status).to.equal(201);
    await waitUntil('the list shows the submission', async () => (await listedIds()).includes(created.body.submission.id), 10_000);
  });

  it('while the replica lags: a read right after a 201 finds the submission, the list does not yet', async () => {
    await pg.pauseReplay();
    try {
      const created = await submit('while lagging');
      expect(created.status).to.equal(201);
      const read = await call(t.url, 'GET', `/v1/submissions/${created.body.submission.id}`, { key: tenant.key });
      expect(read.status).to.equal(200);
      expect(read.body.submission.rawData).to.deep.equal({ fld_name: 'while lagging' });
      expect(await listedIds()).to.not.include(created.body.submission.id);
      const analytics = await call(t.url, 'GET', `/v1/forms/${form.id}/analytics`, { key: tenant.key });
      expect(analytics.status).to.equal(200);
      await pg.resumeReplay();
      await waitUntil('the replica catches up', async () => (await listedIds()).includes(created.body.submission.id), 10_000);
    } finally {
      await pg.resumeReplay();
    }
  });

  it('serves the change feed and the export from the replica: a change shows once the replica has it', async () => {
    const feedIds = async () => {
      const res = await call(t.url, 'GET', '/v1/submissions/changes?limit=1000', { key: tenant.key });
      expect(res.status, res.text).to.equal(200);
      return res.body.changes.map((c: any) => c.submissionId as string);
    };
    const exported = async () => (await call(t.url, 'GET', `/v1/forms/${form.id}/submissions/export?format=ndjson`, { key: tenant.key })).text;
    await pg.pauseReplay();
    try {
      const created = await submit('feed while lagging');
      expect(created.status).to.equal(201);
      const id = created.body.submission.id;
      expect(await feedIds()).to.not.include(id);
      expect(await exported()).to.not.include(id);
      await pg.resumeReplay();
      await waitUntil('the feed shows the submission', async () => (await feedIds()).includes(id), 10_000);
      expect(await exported()).to.include(id);
    } finally {
      await pg.resumeReplay();
    }
  });

  /** The replica's maintenance database, which no lock of the tests reaches, and the name of the test's database. */
  const replicaAdminUrl = () => Object.assign(new URL(pg.replicaUrl), { pathname: '/postgres' }).toString();
  const database = () => new URL(pg.replicaUrl).pathname.slice(1);

  /**
   * ACCESS EXCLUSIVE locks on `tables` that only the replica still holds: taken in a transaction on
   * the primary, replayed by the replica, whose replay is then paused before the transaction's end.
   * A replica query of those tables waits (until its lock timeout, a cancel, or `pg.resumeReplay()`);
   * the primary is free once `endOnPrimary` has ended the transaction (a second call does nothing).
   */
  async function locksOnlyTheReplicaHolds(tables: string[]): Promise<{ endOnPrimary(): Promise<void> }> {
    const holder = new Client({ connectionString: pg.primaryUrl });
    await holder.connect();
    await holder.query('begin');
    await holder.query(`lock table ${tables.join(', ')} in access exclusive mode`);
    await queryOnce(pg.primaryUrl, 'select pg_switch_wal()'); // sends the lock's WAL now, not when the WAL writer gets to it
    await pg.caughtUp();
    await pg.pauseReplay(); // applies no record written from now on
    let ended = false;
    return {
      async endOnPrimary() {
        if (ended) return;
        ended = true;
        await holder.query('rollback');
        await holder.end();
      },
    };
  }

  /** The replica's backends of the test's database that wait for a lock. */
  const waitingOnTheReplica = async () => (await queryOnce(replicaAdminUrl(),
    `select pid from pg_stat_activity where datname = $1 and wait_event_type = 'Lock'`, [database()])).map((r) => Number(r.pid));

  it('answers from the primary when the replica cancels a read or its lock wait times out, each within 5 s', async () => {
    const tables = (await queryOnce(pg.primaryUrl, `select oid::regclass::text as name from pg_class
      where relnamespace = 'public'::regnamespace and relkind in ('r', 'p') and not relispartition`)).map((r) => r.name as string);
    const before = await replicaFailures('cancelled');
    const held = await locksOnlyTheReplicaHolds(tables);
    try {
      await held.endOnPrimary();
      const created = await submit('only the primary has it');
      expect(created.status).to.equal(201);
      const id = created.body.submission.id;

      // The list's statement is cancelled on the replica while it waits (a cancel request, as an operator's).
      const listing = call(t.url, 'GET', `/v1/forms/${form.id}/submissions?limit=100`, { key: tenant.key });
      const waiting = await waitUntil('the list waits on the replica', async () => (await waitingOnTheReplica())[0]);
      await queryOnce(replicaAdminUrl(), 'select pg_cancel_backend($1)', [waiting]);
      const list = await listing;
      expect(list.status, list.text).to.equal(200);
      expect(list.body.submissions.map((s: any) => s.id)).to.include(id);

      // The others wait for their lock until the lock timeout (2 s) ends the wait.
      for (const path of laggingReads(form.id).slice(1)) {
        const started = Date.now();
        const res = await call(t.url, 'GET', path, { key: tenant.key });
        expect(res.status, `${path}: ${res.text}`).to.equal(200);
        expect(Date.now() - started, path).to.be.lessThan(5_000);
        if (!path.includes('/analytics')) expect(res.text, path).to.include(id);
      }
      expect(await replicaFailures('cancelled')).to.equal(before + 4);
    } finally {
      await held.endOnPrimary();
      await pg.resumeReplay();
    }
  });

  it('answers from the primary when the replica cancels a read for a conflict with recovery', async () => {
    // A month of submissions held on the replica: the list's page read holds the parent table and waits for the month.
    const months = (await queryOnce(pg.primaryUrl, `select inhrelid::regclass::text as name from pg_inherits
      where inhparent = 'submissions'::regclass`)).map((r) => r.name as string);
    await caughtUpWith(await submit('on the replica too'));
    const before = await replicaFailures('conflict');
    await queryOnce(replicaAdminUrl(), 'alter system set max_standby_streaming_delay = 0');
    await queryOnce(replicaAdminUrl(), 'select pg_reload_conf()');
    const held = await locksOnlyTheReplicaHolds(months);
    try {
      const listing = call(t.url, 'GET', `/v1/forms/${form.id}/submissions?limit=100`, { key: tenant.key });
      const waiting = await waitUntil('the list waits on the replica', async () => (await waitingOnTheReplica())[0]);
      const listHolds = (await queryOnce(pg.replicaUrl, `select c.oid::regclass::text as name from pg_locks l join pg_class c on c.oid = l.relation
        where l.pid = $1 and l.granted and c.relkind in ('r', 'p')`, [waiting])).map((r) => r.name as string);
      expect(listHolds).to.include('submissions');
      // The primary locks what the waiting list holds, after the month's lock and before its release:
      // replaying that lock, the replica cancels the list ("canceling statement due to conflict with recovery").
      const conflicting = new Client({ connectionString: pg.primaryUrl });
      await conflicting.connect();
      try {
        await conflicting.query('begin');
        await conflicting.query(`lock table only ${listHolds.join(', ')} in access exclusive mode`);
        await conflicting.query('commit');
      } finally {
        await conflicting.end();
      }
      await held.endOnPrimary();
      await pg.resumeReplay();
      const list = await listing;
      expect(list.status, list.text).to.equal(200);
      expect(await replicaFailures('conflict')).to.equal(before + 1); // 40001 or 40P01: on a replica, only a conflict with recovery
    } finally {
      await held.endOnPrimary();
      await pg.resumeReplay();
      await queryOnce(replicaAdminUrl(), 'alter system reset max_standby_streaming_delay');
      await queryOnce(replicaAdminUrl(), 'select pg_reload_conf()');
    }
  });

  it('answers from the primary while the replica has not yet replayed a migration (a table the release reads missing there)', async () => {
    // The replica without submission_month_counts (which the list's total reads), the primary with it:
    // what a lagging replica is while an expand step's new table reaches it and the new release serves.
    await queryOnce(pg.primaryUrl, 'alter table submission_month_counts rename to submission_month_counts_away');
    await queryOnce(pg.primaryUrl, 'select pg_switch_wal()');
    await pg.caughtUp();
    await pg.pauseReplay();
    try {
      await queryOnce(pg.primaryUrl, 'alter table submission_month_counts_away rename to submission_month_counts');
      const before = await replicaFailures('behind');
      for (const path of laggingReads(form.id)) {
        const res = await call(t.url, 'GET', path, { key: tenant.key });
        expect(res.status, `${path}: ${res.text}`).to.equal(200);
      }
      expect(await replicaFailures('behind')).to.be.greaterThan(before);
    } finally {
      await pg.resumeReplay();
      await queryOnce(pg.primaryUrl, `do $$ begin
        if to_regclass('submission_month_counts_away') is not null then alter table submission_month_counts_away rename to submission_month_counts; end if;
        end $$`);
    }
  });

  /** Waits until the replica lists the submission just created. */
  async function caughtUpWith(created: Awaited<ReturnType<typeof submit>>): Promise<void> {
    expect(created.status).to.equal(201);
    await waitUntil('the replica has the submission', async () => (await listedIds()).includes(created.body.submission.id), 10_000);
  }
});

describe('with a read replica that is down (nothing listens on its port)', function () {
  this.timeout(60_000);
  let proxy: PgProxy;
  let t: TestApp;
  let tenant: TestTenant;
  let form: any;
  const logLines: string[] = [];

  before(async () => {
    proxy = await startPgProxy();
    const primary = new URL(process.env.DATABASE_URL!);
    primary.host = `127.0.0.1:${proxy.port}`;
    const replica = new URL(process.env.DATABASE_URL!);
    replica.host = `127.0.0.1:${await freePort()}`;
    // Statements may run 10 s: the 5 s of a request that tried the replica first must hold all the same.
    t = await startTestApp({ DATABASE_URL: primary.toString(), DATABASE_READ_URL: replica.toString(), DB_STATEMENT_TIMEOUT_MS: '10000' },
      { logger: createLogger('info', { write: (line: string) => { logLines.push(line); } }) });
    tenant = await createTenant(t.app);
    form = await createPublishedForm(t.url, tenant.key, [field('fld_name', 'text', 'Name')]);
  });
  after(async () => {
    await t?.close().catch(() => undefined);
    await proxy?.close();
  });

  it('starts and answers the reads that may lag from the primary, counting each failure and logging once, without data', async () => {
    const secret = 'replica-down-value-5521';
    const created = await call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data: { fld_name: secret } } });
    expect(created.status).to.equal(201);
    await feedSettled(); // the feed lists it once every older transaction has ended
    const before = await replicaFailures('unavailable');
    for (const path of laggingReads(form.id)) {
      const res = await call(t.url, 'GET', path, { key: tenant.key });
      expect(res.status, `${path}: ${res.text}`).to.equal(200);
      if (!path.includes('/analytics')) expect(res.text, path).to.include(created.body.submission.id);
    }
    expect(await replicaFailures('unavailable')).to.equal(before + 4);
    // A submission's own read never was the replica's.
    expect((await call(t.url, 'GET', `/v1/submissions/${created.body.submission.id}`, { key: tenant.key })).status).to.equal(200);
    expect(await replicaFailures('unavailable')).to.equal(before + 4);
    const warnings = logLines.map((line) => JSON.parse(line)).filter((line) => /replica/i.test(line.msg));
    expect(warnings, logLines.join('')).to.have.lengthOf(1);
    expect(warnings[0]).to.include({ level: 40, reason: 'unavailable' });
    expect(logLines.join('')).to.not.include(secret);
  });

  it('answers 503 within 5 s when the primary does not answer either', async () => {
    const changes = () => call(t.url, 'GET', '/v1/submissions/changes?limit=10', { key: tenant.key });
    expect((await changes()).status).to.equal(200); // a pooled connection to the primary, which the proxy then holds
    proxy.hold(true);
    try {
      const started = Date.now();
      const res = await changes();
      expect(Date.now() - started).to.be.lessThan(5_000);
      expect(res.status, res.text).to.equal(503);
      expect(res.body.error).to.equal('service_unavailable');
    } finally {
      proxy.hold(false);
    }
  });

  it('answers 503 service_unavailable with Retry-After within 5 s when the primary is down too', async () => {
    await proxy.close();
    for (const path of laggingReads(form.id)) {
      const started = Date.now();
      const res = await call(t.url, 'GET', path, { key: tenant.key });
      expect(Date.now() - started, path).to.be.lessThan(5_000);
      expect(res.status, `${path}: ${res.text}`).to.equal(503);
      expect(res.body.error).to.equal('service_unavailable');
      expect(Number(res.headers.get('retry-after'))).to.be.greaterThan(0);
    }
  });
});

describe('with a read replica that is down, while the primary waits on a lock the change feed needs', function () {
  this.timeout(60_000);
  let t: TestApp;
  let tenant: TestTenant;
  let submissionId: string;
  let holder: Client | undefined;

  before(async () => {
    const replica = new URL(process.env.DATABASE_URL!);
    replica.host = `127.0.0.1:${await freePort()}`;
    // Statements and lock waits may last 10 s: a fallback given up on at its request's 503 holds its connection on.
    t = await startTestApp({
      DATABASE_READ_URL: replica.toString(), DB_POOL_MAX: '4', DB_STATEMENT_TIMEOUT_MS: '10000', DB_LOCK_TIMEOUT_MS: '10000',
    });
    tenant = await createTenant(t.app);
    const form = await createPublishedForm(t.url, tenant.key, [field('fld_name', 'text', 'Name')]);
    const created = await call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data: { fld_name: 'x' } } });
    expect(created.status).to.equal(201);
    submissionId = created.body.submission.id;
  });
  beforeEach(async () => {
    holder = new Client({ connectionString: process.env.DATABASE_URL });
    await holder.connect();
    await holder.query('begin');
    await holder.query('lock table submission_changes in access exclusive mode');
  });
  afterEach(async () => {
    await holder?.query('rollback').catch(() => undefined);
    await holder?.end();
  });
  after(async () => {
    await t?.close().catch(() => undefined);
  });

  const changes = () => call(t.url, 'GET', '/v1/submissions/changes?limit=10', { key: tenant.key });
  /** Backends of the test's database waiting for a lock (the feed's statements on the primary). */
  const waitingOnLock = async () => (await queryOnce(process.env.DATABASE_URL!,
    `select pid from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)).length;

  it("takes at most half the primary's pool for the replica's reads: the primary's own reads still answer", async () => {
    // Without the bound, the four fallbacks take the whole pool and this read waits 4 s for a connection (503).
    const feeds = Array.from({ length: 4 }, () => changes());
    await waitUntil('a fallback waits on the primary', async () => (await waitingOnLock()) > 0);
    const started = Date.now();
    const own = await call(t.url, 'GET', `/v1/submissions/${submissionId}`, { key: tenant.key });
    expect(own.status, own.text).to.equal(200);
    expect(Date.now() - started).to.be.lessThan(1_000);
    const statuses = (await Promise.all(feeds)).map((r) => r.status);
    expect(statuses).to.deep.equal([503, 503, 503, 503]);
  });
});
