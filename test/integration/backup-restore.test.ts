import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { loadConfig } from '../../config';
import { prepareDatabase } from '../../src/app';
import { eventIdForSubmission } from '../../src/domain/webhooks/events';
import { QUEUE_NAMES } from '../../src/queues/catalogue';
import { deleteQueueKeys, dropDatabase, sideDatabaseUrl } from '../support/databases';
import { startReceiver, type Receiver } from '../support/fakes/receiver';
import { call, createPublishedForm, createTenant, fieldInput, startTestApp, type TestApp } from '../support/harness';
import { freshQueuePrefix, startInProcessWorkers, waitUntil, type InProcessWorkers } from '../support/worker-stack';

const run = promisify(execFile);

async function query<T extends object>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

/**
 * The backup and restore of deploy/README.md ("Backups and restore"), drilled: `pg_dump -Fc` while
 * submissions flow, `pg_restore` into a new database, the service started on it with an empty queue
 * prefix (Redis knows nothing of the restored work): it starts, its day counts agree with its rows,
 * and every delivery owed at the dump is delivered with its original event id, each event once.
 */
describe('backup and restore', function () {
  this.timeout(90_000);
  const sourceUrl = sideDatabaseUrl('backup');
  const restoredUrl = sideDatabaseUrl('restored');
  const dir = mkdtempSync(path.join(tmpdir(), 'form-service-dump-'));
  const dumpFile = path.join(dir, 'formservice.dump');
  const prefixes: string[] = [];
  let receiver: Receiver;
  let receiverUp = false;
  const running: Array<TestApp | InProcessWorkers> = [];

  async function startService(databaseUrl: string) {
    const prefix = freshQueuePrefix();
    prefixes.push(prefix);
    const env = { DATABASE_URL: databaseUrl, QUEUE_PREFIX: prefix, WEBHOOK_RETRY_DELAYS_MS: '1000,1000,1000,1000,1000,1000,1000,1000', OWED_SWEEP_INTERVAL_MS: '300' };
    const api = await startTestApp(env);
    const workers = await startInProcessWorkers(QUEUE_NAMES, env);
    running.push(api, workers);
    return { api, workers, async stop() { await workers.close(); await api.close(); } };
  }

  before(async () => {
    // Down until the restore: every delivery the source owes stays owed.
    receiver = await startReceiver({ respond: () => ({ status: receiverUp ? 200 : 503 }) });
  });
  after(async () => {
    for (const r of running.reverse()) await r.close().catch(() => undefined);
    await receiver?.close();
    for (const prefix of prefixes) await deleteQueueKeys(prefix);
    await dropDatabase(sourceUrl);
    await dropDatabase(restoredUrl);
    rmSync(dir, { recursive: true, force: true });
  });

  it('restores a dump taken under traffic into a service that starts, counts right and delivers what was owed, each event once', async () => {
    await prepareDatabase(loadConfig({ ...process.env, DATABASE_URL: sourceUrl }));
    const source = await startService(sourceUrl);
    const tenant = await createTenant(source.api.app);
    const form = await createPublishedForm(source.api.url, tenant.key, [fieldInput('fld_email', 'email', 'Email', { required: true })]);
    const hook = await call(source.api.url, 'POST', '/v1/webhooks', { key: tenant.key, body: { name: 'drill', url: receiver.url, events: ['submission.created'] } });
    expect(hook.status).to.equal(201);

    // Submissions flow before, during and after the dump.
    let flowing = true;
    const created: string[] = [];
    const flow = (async () => {
      for (let i = 0; flowing; i++) {
        const res = await call(source.api.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data: { fld_email: `u${i}@example.com` } } });
        expect(res.status).to.equal(201);
        created.push(res.body.submission.id);
      }
    })();
    await waitUntil('submissions before the dump', async () => created.length >= 20, 20_000);
    const atDumpStart = created.length;
    await run('pg_dump', ['-Fc', '-f', dumpFile, sourceUrl]);
    const atDumpEnd = created.length;
    await waitUntil('submissions after the dump', async () => created.length >= atDumpEnd + 10, 20_000);
    flowing = false;
    await flow;
    // The source is lost (its machine with it): what it did after the dump is gone.
    await source.stop();
    expect(statSync(dumpFile).size).to.be.greaterThan(0);

    // deploy/README.md's restore: a new database, pg_restore, migrate, the service.
    await query(new URL('/postgres', sourceUrl).toString(), `create database "${new URL(restoredUrl).pathname.slice(1)}"`);
    await run('pg_restore', ['--no-owner', '--exit-on-error', '-d', restoredUrl, dumpFile]);
    await prepareDatabase(loadConfig({ ...process.env, DATABASE_URL: restoredUrl }));
    const restoredIds = (await query<{ id: string }>(restoredUrl, 'select id from submissions where form_id = $1', [form.id])).map((r) => r.id);
    // The dump holds every submission answered before it began, and none answered after it ended.
    expect(restoredIds).to.include.members(created.slice(0, atDumpStart));
    expect(created.slice(0, atDumpEnd + 1)).to.include.members(restoredIds);
    const owed = (await query<{ event_id: string }>(restoredUrl, "select event_id from webhook_deliveries where status = 'pending'")).map((r) => r.event_id);
    const [{ outbox }] = await query<{ outbox: number }>(restoredUrl, 'select count(*)::int as outbox from outbox where processed_at is null');

    receiverUp = true;
    const before = receiver.deliveries.length; // the source's refused attempts
    const restored = await startService(restoredUrl);
    const res = await call(restored.api.url, 'GET', `/v1/forms/${form.id}/submissions?limit=1`, { key: tenant.key });
    expect(res.status).to.equal(200);

    // Every submission of the dump is owed its event (pending rows, or outbox rows not yet fanned out).
    const expected = new Set(restoredIds.map(eventIdForSubmission));
    expect(owed.every((id) => expected.has(id))).to.equal(true);
    const receivedAfter = () => receiver.deliveries.slice(before);
    const deliveredIds = () => new Set(receivedAfter().map((d) => JSON.parse(d.rawBody).id as string));
    await waitUntil('every owed event delivered', async () => [...expected].every((id) => deliveredIds().has(id)), 45_000, 200);
    const ids = receivedAfter().map((d) => JSON.parse(d.rawBody).id as string);
    expect(ids.length, 'an event received twice').to.equal(new Set(ids).size);
    expect([...deliveredIds()].every((id) => expected.has(id))).to.equal(true);

    // The day counts agree with the rows (what `counts check` reads).
    const [counts] = await query<{ rows: number; counted: number }>(restoredUrl,
      'select (select count(*) from submissions where form_id = $1)::int as rows, (select coalesce(sum(count), 0) from submission_day_counts where form_id = $1)::int as counted', [form.id]);
    expect(counts.counted).to.equal(counts.rows);
    console.log(`      drill: ${created.length} 201s, ${restoredIds.length} in the dump (${atDumpStart}..${atDumpEnd} answered while it ran), `
      + `${owed.length} deliveries pending and ${outbox} outbox rows unrelayed at the dump, all ${expected.size} events delivered once after the restore`);
    await restored.stop();
  });
});
